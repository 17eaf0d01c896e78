# exercise: optim
# function: t19_optim.py:adamw_update
# slip: the weight decay is not multiplied by the learning rate
def adamw_update(data, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
    """One AdamW update of one parameter at step ``step`` (1, 2, ...): returns (data, m, v).

    The plain version returns new arrays; its fast twin may overwrite ``data``, ``m`` and
    ``v`` in place and return them.
    """
    b1, b2 = betas
    m = b1 * m + (1 - b1) * grad                     # first moment: a running mean of g
    v = b2 * v + (1 - b2) * grad * grad              # second moment: a running mean of g^2
    m_hat = m / (1 - b1 ** step)                     # both start at 0: undo that bias
    v_hat = v / (1 - b2 ** step)
    data = data - weight_decay * data           # decoupled weight decay
    data = data - lr * m_hat / (np.sqrt(v_hat) + eps)
    return data, m, v
