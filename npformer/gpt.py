"""The whole GPT in one file: parameters, forward, backward, the AdamW step and a task it learns.

``npformer.t10_model.DecoderLM`` on ``DecoderConfig.gpt2``, as functions on a dict of arrays:

    x = E[ids] + P[:N]                              token + learned position   [B, N, d]
    per block:  h = x + Attn(LN1(x))                Pre-Norm, residual 1
                y = h + FFN(LN2(h))                 FFN(f) = GELU(f W1 + b1) W2 + b2, width 4d
    logits = LN(x) E^T                              final LayerNorm, head tied to E   [B, N, V]
    loss = mean over counted targets of -log softmax(logits)[target]   (IGNORE_INDEX skipped)

Read it top to bottom: ``make_config``, ``init_params``; the layers, each forward with its
backward right after (as llm.c pairs them); the model's ``forward``, ``backward``; ``adamw_step``;
``generate``; the reverse task ``python -m npformer.gpt`` trains. ``params`` has the names of
``DecoderLM.state_dict()``; ``config`` (heads, eps, max_len ...) travels with it. Each backward
line names the forward line it undoes. Shapes: B batch, N positions, d width, H heads, D = d / H.

The backward formulas, in brief (d_y is the gradient arriving at y, dL/dy):
    y = x W + b            d_x = d_y W^T,  d_W = x^T d_y (summed over B, N),  d_b = sum d_y
    y = xhat gamma + beta  d_gamma = sum d_y xhat,  d_beta = sum d_y,  d_xhat = d_y gamma,
                           d_x = rstd (d_xhat - mean(d_xhat) - xhat mean(d_xhat xhat))  (over d)
    w = softmax(s)         d_s = w (d_w - sum_j d_w_j w_j)                (sum over a row)
    s = q k^T / sqrt(D)    d_q = d_s k / sqrt(D),  d_k = d_s^T q / sqrt(D)  (d_k: the gradient of k)
    o = w v                d_w = d_o v^T,  d_v = w^T d_o
    GELU (tanh form)       d_x = d_y (0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2)),
                           t = tanh(c (x + a x^3)), c = sqrt(2 / pi), a = 0.044715
    cross-entropy          d_logits = (softmax(logits) - onehot(target)) / count, 0 if ignored
    y = x + f(x)           d_x = d_y + (gradient through f): a residual passes d_y on unchanged
    x = E[ids]             d_E[id] += d_x at every position holding id (the tied head adds too)
"""
import math
import time

import numpy as np

IGNORE_INDEX = -100              # a target equal to this is not counted in the loss
GELU_C, GELU_A = math.sqrt(2 / math.pi), 0.044715


# -- the hyperparameters and the parameters ------------------------------------------------
def make_config(vocab_size, max_len, d, n_layers, n_heads, eps=1e-5, std=0.02):
    """The hyperparameters as a dict, checked: H heads of width D = d / H."""
    if d % n_heads:
        raise ValueError(f"n_heads: the width d={d} must be divisible by n_heads, got {n_heads}")
    return dict(locals())                            # every argument, by its name


def init_params(config, rng, dtype=np.float32):
    """GPT-2's initialisation: N(0, std) matrices, residual projections N(0, std / sqrt(2L)),
    zero biases, unit gains. Returns {name: array}, names as in ``DecoderLM.state_dict()``."""
    d, n_layers, std = config["d"], config["n_layers"], config["std"]
    normal = lambda shape, scale=std: (scale * rng.standard_normal(shape)).astype(dtype)
    params = {"tokens.weight": normal((config["vocab_size"], d)),
              "positions.weight": normal((config["max_len"], d))}
    small = std / math.sqrt(2 * n_layers)            # 2L residual branches add up: shrink each
    for i in range(n_layers):
        block = {"norm1.gamma": np.ones(d, dtype), "norm1.beta": np.zeros(d, dtype),
                 "attn.qkv.weight": normal((d, 3 * d)), "attn.qkv.bias": np.zeros(3 * d, dtype),
                 "attn.out.weight": normal((d, d), small), "attn.out.bias": np.zeros(d, dtype),
                 "norm2.gamma": np.ones(d, dtype), "norm2.beta": np.zeros(d, dtype),
                 "ffn.up.weight": normal((d, 4 * d)), "ffn.up.bias": np.zeros(4 * d, dtype),
                 "ffn.down.weight": normal((4 * d, d), small), "ffn.down.bias": np.zeros(d, dtype)}
        params.update({f"blocks.{i}.{name}": array for name, array in block.items()})
    return {**params, "norm.gamma": np.ones(d, dtype), "norm.beta": np.zeros(d, dtype)}


# -- the layers, each forward with its backward ------------------------------------------
def layernorm_forward(x, gamma, beta, eps):
    """x [B, N, d] -> (xhat gamma + beta, cache): each position to mean 0, variance 1 over d."""
    mean = x.mean(axis=-1, keepdims=True)            # [B, N, 1]
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    rstd = 1 / np.sqrt(var + eps)                    # [B, N, 1]
    xhat = (x - mean) * rstd                         # [B, N, d]
    return xhat * gamma + beta, (xhat, rstd, gamma)


def layernorm_backward(d_y, cache):
    """d_y [B, N, d] -> (d_x, d_gamma, d_beta)."""
    xhat, rstd, gamma = cache
    d_xhat = d_y * gamma                             # undoes y = xhat * gamma + beta
    d_gamma, d_beta = (d_y * xhat).sum(axis=(0, 1)), d_y.sum(axis=(0, 1))   # (gamma and beta)
    d_x = rstd * (d_xhat - d_xhat.mean(axis=-1, keepdims=True)    # undoes xhat = (x - mean) rstd,
                  - xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True))  # mean, rstd depend on x
    return d_x, d_gamma, d_beta


def linear_forward(x, w, b):
    """x [B, N, i], w [i, o], b [o] -> (x @ w + b [B, N, o], cache)."""
    return x @ w + b, (x, w)


def linear_backward(d_y, cache):
    """d_y [B, N, o] -> (d_x [B, N, i], d_w [i, o], d_b [o]) of y = x @ w + b."""
    x, w = cache
    d_w = x.reshape(-1, x.shape[-1]).T @ d_y.reshape(-1, d_y.shape[-1])   # x^T d_y over B*N rows
    return d_y @ w.T, d_w, d_y.sum(axis=(0, 1))      # undoes y = x @ w + b


def attention_forward(qkv, n_heads):
    """qkv [B, N, 3d], columns [Q | K | V] -> (causal multi-head attention [B, N, d], cache)."""
    B, N, d = qkv.shape[0], qkv.shape[1], qkv.shape[2] // 3
    H, D = n_heads, d // n_heads
    q, k, v = (qkv[:, :, j * d:(j + 1) * d].reshape(B, N, H, D).transpose(0, 2, 1, 3)
               for j in range(3))                    # each [B, H, N, D]
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(D)           # [B, H, N, N]
    causal = np.tril(np.ones((N, N), dtype=bool))   # query i may read keys j <= i
    scores = np.where(causal, scores, -np.inf)
    exps = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = exps / exps.sum(axis=-1, keepdims=True)             # softmax over keys
    mixed = weights @ v                                           # [B, H, N, D]
    merged = mixed.transpose(0, 2, 1, 3).reshape(B, N, d)         # heads side by side
    return merged, (q, k, v, weights)


def attention_backward(d_merged, cache):
    """d_merged [B, N, d] -> d_qkv [B, N, 3d]."""
    q, k, v, weights = cache
    B, H, N, D = q.shape
    d_mixed = d_merged.reshape(B, N, H, D).transpose(0, 2, 1, 3)  # undoes the merge of heads
    d_weights = d_mixed @ v.transpose(0, 1, 3, 2)                 # undoes mixed = weights @ v
    d_v = weights.transpose(0, 1, 3, 2) @ d_mixed                 # undoes mixed = weights @ v
    # undoes weights = softmax(scores); masked scores have weight 0, so get gradient 0
    d_scores = weights * (d_weights - (d_weights * weights).sum(axis=-1, keepdims=True))
    d_q = d_scores @ k / math.sqrt(D)                             # undoes scores = q k^T / sqrt(D)
    d_k = d_scores.transpose(0, 1, 3, 2) @ q / math.sqrt(D)      # undoes scores = q k^T / sqrt(D)
    # undoes the split of qkv into heads: back to [B, N, d] each, then [Q | K | V]
    return np.concatenate([g.transpose(0, 2, 1, 3).reshape(B, N, H * D)
                           for g in (d_q, d_k, d_v)], axis=-1)   # [B, N, 3d]


def gelu_forward(x):
    """x -> (0.5 x (1 + tanh(c (x + a x^3))), cache): GPT-2's tanh form of GELU."""
    t = np.tanh(GELU_C * (x + GELU_A * x * x * x))
    return 0.5 * x * (1 + t), (x, t)


def gelu_backward(d_y, cache):
    """d_y -> d_x = d_y GELU'(x), the derivative of the tanh form."""
    x, t = cache                                     # undoes y = 0.5 x (1 + t), t = tanh(...)
    return d_y * (0.5 * (1 + t) + 0.5 * x * (1 - t ** 2) * GELU_C * (1 + 3 * GELU_A * x ** 2))


def cross_entropy_forward(logits, targets):
    """logits [B, N, V], targets [B, N] -> (mean -log p(target) over counted targets, cache)."""
    counted = targets != IGNORE_INDEX                # [B, N]
    safe = np.where(counted, targets, 0)             # any valid id where ignored
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))   # [B, N, V]
    picked = np.take_along_axis(log_probs, safe[..., None], axis=-1)[..., 0]   # [B, N]
    count = max(int(counted.sum()), 1)
    return -(picked * counted).sum() / count, (log_probs, safe, counted, count)


def cross_entropy_backward(cache):
    """-> d_logits [B, N, V] of the mean loss."""
    log_probs, safe, counted, count = cache
    onehot = np.eye(log_probs.shape[-1], dtype=log_probs.dtype)[safe]   # [B, N, V]
    return (np.exp(log_probs) - onehot) * counted[..., None] / count  # undoes loss = -mean picked


# -- one block, then the model ---------------------------------------------------------
def block_forward(x, p, n_heads, eps):
    """x [B, N, d] -> (x + Attn(LN1(x)) + FFN(LN2(...)) [B, N, d], cache); p: this block's
    parameters, named without their ``blocks.{i}.`` prefix."""
    a, norm1 = layernorm_forward(x, p["norm1.gamma"], p["norm1.beta"], eps)
    qkv, qkv_lin = linear_forward(a, p["attn.qkv.weight"], p["attn.qkv.bias"])   # [B, N, 3d]
    merged, attn = attention_forward(qkv, n_heads)                               # [B, N, d]
    attended, out_lin = linear_forward(merged, p["attn.out.weight"], p["attn.out.bias"])
    h = x + attended                                                             # residual 1
    f, norm2 = layernorm_forward(h, p["norm2.gamma"], p["norm2.beta"], eps)
    up, up_lin = linear_forward(f, p["ffn.up.weight"], p["ffn.up.bias"])         # [B, N, 4d]
    act, gelu = gelu_forward(up)
    fed, down_lin = linear_forward(act, p["ffn.down.weight"], p["ffn.down.bias"])  # [B, N, d]
    return h + fed, (norm1, qkv_lin, attn, out_lin, norm2, up_lin, gelu, down_lin)  # residual 2


def block_backward(d_y, cache):
    """d_y [B, N, d] -> (d_x, {name: gradient}), names as in ``p`` of ``block_forward``."""
    norm1, qkv_lin, attn, out_lin, norm2, up_lin, gelu, down_lin = cache
    d_act, d_w2, d_b2 = linear_backward(d_y, down_lin)           # undoes fed = act W2 + b2
    d_up = gelu_backward(d_act, gelu)                             # undoes act = GELU(up)
    d_f, d_w1, d_b1 = linear_backward(d_up, up_lin)               # undoes up = f W1 + b1
    d_h, d_gamma2, d_beta2 = layernorm_backward(d_f, norm2)       # undoes f = LN2(h)
    d_h = d_h + d_y                                               # undoes y = h + fed
    d_merged, d_wo, d_bo = linear_backward(d_h, out_lin)          # undoes attended = merged Wo + bo
    d_qkv = attention_backward(d_merged, attn)                    # undoes merged = Attn(qkv)
    d_a, d_wqkv, d_bqkv = linear_backward(d_qkv, qkv_lin)         # undoes qkv = a Wqkv + bqkv
    d_x, d_gamma1, d_beta1 = layernorm_backward(d_a, norm1)       # undoes a = LN1(x)
    return d_x + d_h, {                                           # undoes h = x + attended
        "norm1.gamma": d_gamma1, "norm1.beta": d_beta1, "attn.qkv.weight": d_wqkv,
        "attn.qkv.bias": d_bqkv, "attn.out.weight": d_wo, "attn.out.bias": d_bo,
        "norm2.gamma": d_gamma2, "norm2.beta": d_beta2, "ffn.up.weight": d_w1,
        "ffn.up.bias": d_b1, "ffn.down.weight": d_w2, "ffn.down.bias": d_b2}


def forward(params, config, ids, targets=None):
    """ids [B, N] -> (logits [B, N, V], loss, cache for ``backward``); loss and cache are None
    without ``targets`` [B, N], the id each position should predict (or IGNORE_INDEX)."""
    B, N = ids.shape
    if N > config["max_len"]:
        raise ValueError(f"ids: {N} positions, but the position table holds {config['max_len']}")
    E = params["tokens.weight"]                                           # [V, d]
    x = E[ids] + params["positions.weight"][:N]                           # [B, N, d]
    blocks = []
    for i in range(config["n_layers"]):
        p = {n.split(".", 2)[2]: a for n, a in params.items() if n.startswith(f"blocks.{i}.")}
        x, block = block_forward(x, p, config["n_heads"], config["eps"])
        blocks.append(block)
    h, norm = layernorm_forward(x, params["norm.gamma"], params["norm.beta"], config["eps"])
    logits = h @ E.T                                                      # [B, N, V], tied head
    if targets is None:
        return logits, None, None
    loss, ce = cross_entropy_forward(logits, targets)
    return logits, loss, (ids, blocks, norm, h, ce)


def backward(params, cache):
    """The gradient of the loss for every parameter: {name: array}, the names of ``params``."""
    ids, blocks, norm, h, ce = cache
    E = params["tokens.weight"]                                           # [V, d]
    d_logits = cross_entropy_backward(ce)                                 # [B, N, V]
    d_h = d_logits @ E                                                    # undoes logits = h E^T
    grads = {"tokens.weight": d_logits.reshape(-1, E.shape[0]).T @ h.reshape(-1, E.shape[1])}
    d_x, grads["norm.gamma"], grads["norm.beta"] = layernorm_backward(d_h, norm)
    for i in reversed(range(len(blocks))):
        d_x, block_grads = block_backward(d_x, blocks[i])
        grads.update({f"blocks.{i}.{name}": g for name, g in block_grads.items()})
    # undoes x = E[ids] + P[:N]: positions sum over the batch, tokens scatter-add by id
    unused_rows = len(params["positions.weight"]) - ids.shape[1]          # positions N.. get 0
    grads["positions.weight"] = np.pad(d_x.sum(axis=0), ((0, unused_rows), (0, 0)))
    np.add.at(grads["tokens.weight"], ids, d_x)      # the tied head's gradient is already there
    return grads


# -- the optimizer ---------------------------------------------------------------------
def decays(name, w):
    """Weight decay applies to matrices only: not to 1-D gains and biases, nor embedding tables."""
    return w.ndim >= 2 and name not in ("tokens.weight", "positions.weight")


def adamw_step(params, grads, state, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    """One AdamW step: replaces each array of ``params``; ``state`` ({} at first) keeps t, m, v."""
    b1, b2 = betas
    t = state["t"] = state.get("t", 0) + 1
    m, v = state.setdefault("m", {}), state.setdefault("v", {})
    for name, w in params.items():
        m[name] = b1 * m.get(name, 0) + (1 - b1) * grads[name]            # mean of gradients
        v[name] = b2 * v.get(name, 0) + (1 - b2) * grads[name] ** 2       # mean of squares
        m_hat, v_hat = m[name] / (1 - b1 ** t), v[name] / (1 - b2 ** t)  # bias correction
        if decays(name, w):
            w = w - lr * weight_decay * w            # decoupled: shrink w, whatever g says
        params[name] = w - lr * m_hat / (np.sqrt(v_hat) + eps)


# -- generation ------------------------------------------------------------------------
def generate(params, config, prompts, n_new):
    """Greedy decoding: prompts [B, N0] (equal lengths) -> the n_new next ids [B, n_new]."""
    if prompts.shape[1] + n_new - 1 > config["max_len"]:     # the last new id is never fed back
        raise ValueError(f"n_new: {prompts.shape[1]} prompt ids and {n_new} new ones need more "
                         f"positions than the position table holds ({config['max_len']})")
    ids = prompts
    for _ in range(n_new):
        logits, _, _ = forward(params, config, ids)
        ids = np.concatenate([ids, logits[:, -1].argmax(axis=-1)[:, None]], axis=1)
    return ids[:, prompts.shape[1]:]


# -- a task it learns: reverse a digit string ("31415>" -> "51413") -----------------------
SYMBOLS, SEP, BOS, EOS = "0123456789>", 10, 11, 12     # ids 0..9 are the digits themselves


def reverse_task(n_train, n_heldout, length, rng):
    """(train, heldout): rows <bos> digits > reversed digits <eos> [n, 2 length + 3], every
    digit string drawn once, so no held-out string is seen in training."""
    numbers = rng.choice(10 ** length, n_train + n_heldout, replace=False)
    digits = numbers[:, None] // 10 ** np.arange(length - 1, -1, -1) % 10       # [n, length]
    column = lambda token: np.full((len(numbers), 1), token)
    rows = np.concatenate([column(BOS), digits, column(SEP), digits[:, ::-1], column(EOS)], axis=1)
    return rows[:n_train], rows[n_train:]


def learning_rate(step, steps, warmup, peak):
    """Linear warmup to ``peak``, then a cosine down to peak / 10."""
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * (0.1 + 0.45 * (1 + math.cos(math.pi * (step - warmup) / (steps - warmup))))


def train_reverse(steps=300, batch=32, length=5, seed=0):
    """Train a 2-block GPT on the reverse task -> (config, params, heldout, generated, accuracy):
    the share of held-out prompts answered with their own digits reversed, then <eos>."""
    rng = np.random.default_rng(seed)
    train, heldout = reverse_task(3000, 500, length, rng)
    answer = length + 2                                   # <bos> digits >: the answer starts here
    inputs, targets = train[:, :-1], train[:, 1:].copy()  # position j predicts token j + 1
    targets[:, :answer - 1] = IGNORE_INDEX                # only the answer and <eos> are scored
    config = make_config(len(SYMBOLS) + 2, inputs.shape[1], d=64, n_layers=2, n_heads=4)
    params, state = init_params(config, rng), {}
    for step in range(steps):
        rows = rng.integers(0, len(inputs), batch)
        _, _, cache = forward(params, config, inputs[rows], targets[rows])
        adamw_step(params, backward(params, cache), state, lr=learning_rate(step, steps, 20, 3e-3),
                   betas=(0.9, 0.98))
    new = generate(params, config, heldout[:, :answer], length + 1)
    expected = np.concatenate([heldout[:, answer - 2:0:-1], np.full((len(new), 1), EOS)], axis=1)
    return config, params, heldout, new, float(np.mean((new == expected).all(axis=1)))


def main():
    """``python -m npformer.gpt``: train on the reverse task, print the held-out accuracy."""
    start = time.perf_counter()
    config, params, heldout, generated, accuracy = train_reverse()
    text = lambda ids: "".join(SYMBOLS[i] for i in ids if i < len(SYMBOLS))   # <bos>, <eos> unshown
    for row, new in zip(heldout[:3], generated):
        print(f"{text(row).split('>')[0]}> {text(new)}")
    print(f"held-out accuracy: {accuracy:.1%} of {len(heldout)} digit strings never seen in "
          f"training ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
