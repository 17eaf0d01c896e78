# exercise: rope
# function: t05_rope.py:rotate
# correct: each pair as a complex number a + ib multiplied by e^{iθ}
def rotate(x, cos, sin, layout="half", rotated=None):
    rotated = x.shape[-1] if rotated is None else rotated
    a, b = pairs(x, layout, rotated)
    turned = (a + 1j * b) * (cos + 1j * sin)
    out = np.array(x, copy=True)
    new_a, new_b = pairs(out, layout, rotated)
    new_a[...] = turned.real
    new_b[...] = turned.imag
    return out
