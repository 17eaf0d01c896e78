# exercise: rope
# function: t05_rope.py:Rotary.backward
# slip: the backward turns the gradient forward again (by +θ) instead of back (by -θ)
def backward(self, d_out, cache):
    """d_x: d_out rotated back by the same angles."""
    # forward: out = R_p x, the turn by θ; R_p^T turns by -θ (cos stays, sin flips sign)
    return rotate(d_out, cache.cos, cache.sin, self.layout, self.rotated)
