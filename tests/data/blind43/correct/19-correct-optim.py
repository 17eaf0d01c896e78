# exercise: optim
# function: t19_optim.py:adamw_update
# correct: PyTorch's arrangement: decay first, step size lr / (1 - b1^t), eps added to sqrt(v) / sqrt(1 - b2^t)
def adamw_update(data, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
    beta1, beta2 = betas
    data = data * (1 - lr * weight_decay)
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * np.square(grad)
    correction1 = 1 - beta1 ** step
    correction2 = 1 - beta2 ** step
    denom = np.sqrt(v) / np.sqrt(correction2) + eps
    data = data - (lr / correction1) * m / denom
    return data, m, v
