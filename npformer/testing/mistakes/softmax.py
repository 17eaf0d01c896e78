"""Mistakes in softmax (t03_softmax.py)."""
from .registry import mistake

BACKWARD = "t03_softmax.softmax_backward"
RECHECK = "d_s = y * (d_y - sum_j d_y_j y_j), the sum over the softmax's own axis"

mistake("softmax-diagonal-only", BACKWARD,
        "return y * (d_out - np.sum(d_out * y, axis=cache.axis, keepdims=True))",
        "return y * (1 - y) * d_out",
        "only the diagonal of the softmax Jacobian: each weight also depends on every other "
        "score of its row, which the sum term carries", RECHECK)
