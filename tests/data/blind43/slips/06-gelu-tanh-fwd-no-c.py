# exercise: activations
# function: t06_activations.py:gelu_tanh_forward
# slip: the factor sqrt(2/pi) inside the tanh is forgotten
def gelu_tanh_forward(x):
    """GELU ~ 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), GPT-2's form."""
    u = x + GELU_A * x ** 3
    t = np.tanh(u)
    return 0.5 * x * (1 + t), GeluTanhCache(x, t)
