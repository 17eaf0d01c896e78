# exercise: rope
# function: t05_rope.py:Rotary.angles
# slip: the exponent of the frequencies has the wrong sign: base^(+2c/D)
def angles(self, positions):
    """The article's θ = p w_c for each position p and pair c: [..., N, D_rot/2] in float64."""
    w = self.base ** (np.arange(0, self.rotated, 2) / self.rotated)      # w_c: [D_rot/2]
    return np.asarray(positions, dtype=np.float64)[..., None] * w
