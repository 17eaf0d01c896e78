# exercise: rope
# function: t05_rope.py:rotate
# slip: each pair is turned by -θ: the signs of the sin terms are swapped
def rotate(x, cos, sin, layout="half", rotated=None):
    """Each pair (a, b) of x [..., D] turned by its angle θ: (a cos θ - b sin θ, a sin θ + b cos θ).

    ``cos``, ``sin`` [..., D_rot/2] broadcast against the pairs; features past ``rotated``
    (D_rot, default: all of D) pass through unchanged.
    """
    rotated = x.shape[-1] if rotated is None else rotated
    a, b = pairs(x, layout, rotated)
    out = x.copy()                          # features past D_rot pass through unrotated
    out_a, out_b = pairs(out, layout, rotated)
    out_a[...] = a * cos + b * sin
    out_b[...] = b * cos - a * sin
    return out
