# exercise: linear
# function: t02_linear.py:linear_forward
# slip: the bias is never added in the forward
def linear_forward(x, weight, bias=None):
    """x [..., d_in] @ W [d_in, d_out] (+ b [d_out]) -> y [..., d_out]."""
    y = x @ weight
    return y, LinearCache(x, weight, bias is not None)
