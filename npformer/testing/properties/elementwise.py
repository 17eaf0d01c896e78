"""Properties of softmax, log-softmax, the activations, the linear layer, the embedding table,
the loss and the AdamW update."""
from __future__ import annotations

import math

import numpy as np

from .registry import PropertyFailed, _readable, _upstream, close, prop, zero


# -- softmax ------------------------------------------------------------------------------------
@prop("softmax", "weights are non-negative and each row with a readable entry sums to 1")
def softmax_rows_sum_to_one(subject, example):
    x, axis, mask = example.args[0], example.options.get("axis", -1), example.options.get("mask")
    y = subject.output(example.args, example.options)
    if (np.asarray(y) < 0).any():
        raise PropertyFailed(f"a negative weight {np.min(y):.3g} at {tuple(np.argwhere(y < 0)[0])}")
    _, any_readable = _readable(mask, x.shape, axis)
    close("row sums", np.sum(y, axis=axis, keepdims=True), np.where(any_readable, 1.0, 0.0))


@prop("softmax", "a masked entry gets weight exactly 0; a row with nothing readable gives zeros, not NaN",
      needs_any=("mask",))
def softmax_masked_weights_are_zero(subject, example):
    x, mask = example.args[0], example.options.get("mask")
    if mask is None:
        return
    y = subject.output(example.args, example.options)
    allowed, _ = _readable(mask, x.shape, example.options.get("axis", -1))
    zero("weights where masked", np.where(allowed, 0, np.nan_to_num(y, nan=1.0)))


@prop("softmax", "adding the same number to every score of a row changes nothing")
def softmax_ignores_a_shift(subject, example):
    y = subject.output(example.args, example.options)
    shifted = subject.output((example.args[0] + 3.5,), example.options)
    close("weights after adding 3.5 to every score", shifted, y)


@prop("softmax", "huge scores do not overflow: [1e300, 5e299, -1e300, 0] gives [1, 0, 0, 0]", drawn=False)
def softmax_does_not_overflow(subject, example):
    close("weights", subject.output((np.array([1e300, 5e299, -1e300, 0.0]),), {}), [1, 0, 0, 0])


@prop("softmax", "the tutorial's scores [0.707, 0] give the weights [0.670, 0.330]", drawn=False)
def softmax_of_the_tutorials_scores(subject, example):
    close("weights", subject.output((np.array([1 / math.sqrt(2), 0.0]),), {}), [0.670, 0.330], 5e-4)


@prop("softmax", "each row of the gradient sums to 0 (a shift of the scores changes nothing)",
      needs_backward=True)
def softmax_gradient_rows_sum_to_zero(subject, example):
    axis = example.options.get("axis", -1)
    (d_x,) = subject.gradients(example.args, example.options, _upstream(example.args[0].shape))
    close("row sums of the gradient", np.sum(d_x, axis=axis), 0.0)


@prop("softmax", "a masked score gets exactly zero gradient", needs_backward=True, needs_any=("mask",))
def softmax_masked_scores_get_no_gradient(subject, example):
    x, mask = example.args[0], example.options.get("mask")
    if mask is None:
        return
    (d_x,) = subject.gradients(example.args, example.options, _upstream(x.shape))
    allowed, _ = _readable(mask, x.shape, example.options.get("axis", -1))
    zero("the gradient where masked", np.where(allowed, 0, np.nan_to_num(d_x, nan=1.0)))


# -- log-softmax --------------------------------------------------------------------------------
@prop("log_softmax", "the probabilities e^y of a row sum to 1")
def log_softmax_probabilities_sum_to_one(subject, example):
    y = subject.output(example.args, example.options)
    close("sum of e^y", np.exp(y).sum(axis=example.options.get("axis", -1)), 1.0)


@prop("log_softmax", "the input gradient sums to 0 over each row", needs_backward=True)
def log_softmax_gradient_rows_sum_to_zero(subject, example):
    (d_x,) = subject.gradients(example.args, example.options, _upstream(example.args[0].shape))
    close("row sums of the gradient", d_x.sum(axis=example.options.get("axis", -1)), 0.0)


# -- activations --------------------------------------------------------------------------------
@prop("relu", "ReLU passes the gradient where x > 0 and stops it where x < 0", needs_backward=True)
def relu_gates_the_gradient(subject, example):
    x = example.args[0]
    G = _upstream(x.shape)
    (d_x,) = subject.gradients(example.args, {}, G)
    close("the gradient", d_x, np.where(x > 0, G, 0.0))


def _slope(subject, x):
    (d_x,) = subject.gradients((np.asarray(x, np.float64),), {}, np.ones(np.shape(x)))
    return d_x


for _name in ("gelu", "gelu_tanh", "silu"):
    @prop(_name, "the slope at x = 0 is exactly 1/2; about 1 at x = 10 and about 0 at x = -10",
          drawn=False, needs_backward=True)
    def activation_slopes(subject, example):
        close("slope at 0", _slope(subject, [0.0]), [0.5], 1e-12)
        close("slopes at 10 and -10", _slope(subject, [10.0, -10.0]), [1.0, 0.0], 1e-3)


@prop("gelu", "GELU(1) = Phi(1) = 0.841345", drawn=False)
def gelu_at_one(subject, example):
    close("GELU(1)", subject.output((np.array([1.0]),), {}), [0.8413447460685429], 1e-12)


@prop("silu", "SiLU(1) = sigmoid(1) = 0.731059", drawn=False)
def silu_at_one(subject, example):
    close("SiLU(1)", subject.output((np.array([1.0]),), {}), [1 / (1 + math.exp(-1))], 1e-12)


# -- the linear layer ---------------------------------------------------------------------------
@prop("linear", "d_bias is d_out summed over every position", needs_backward=True)
def linear_bias_gradient_is_a_sum(subject, example):
    if len(example.args) < 3:
        return
    out = subject.output(example.args, {})
    G = _upstream(np.shape(out))
    grads = subject.gradients(example.args, {}, G)
    close("d_bias", grads[2], G.reshape(-1, G.shape[-1]).sum(axis=0))


@prop("linear", "a batch's weight gradient is the sum of its sequences' (each position adds x^T d_y)",
      needs_backward=True)
def linear_weight_gradient_adds_over_the_batch(subject, example):
    x = example.args[0]
    G = _upstream(x.shape[:-1] + (example.args[1].shape[1],))
    whole = subject.gradients(example.args, {}, G)[1]
    parts = [subject.gradients((x[b:b + 1],) + example.args[1:], {}, G[b:b + 1])[1] for b in range(len(x))]
    close("d_weight of the batch against the sum of each sequence's", whole, sum(parts))


# -- the embedding table ------------------------------------------------------------------------
@prop("embedding", "an id read twice receives both gradients; ids never read receive none",
      needs_backward=True)
def embedding_rows_collect_their_reads(subject, example):
    ids, table = example.args
    G = _upstream(ids.shape + (table.shape[1],))
    d_table = subject.gradients(example.args, {}, G)[-1]
    expected = np.zeros(table.shape)
    for position, row in np.ndenumerate(ids):
        expected[row] += G[position]
    close("d_table", d_table, expected)


# -- the loss ---------------------------------------------------------------------------------
@prop("cross_entropy", "uniform logits over V = 50 give the loss ln 50 = 3.912 (where an untrained "
                       "50-word model starts)", drawn=False)
def cross_entropy_of_uniform_logits(subject, example):
    loss = subject.output((np.zeros((1, 3, 50)), np.array([[4, 0, 49]])), {})
    close("loss", loss, math.log(50), 1e-12)


@prop("cross_entropy", "ignored targets get exactly zero gradient; each counted row of d_logits sums to 0",
      needs_backward=True)
def cross_entropy_ignored_targets_get_no_gradient(subject, example):
    logits, targets = example.args
    d_logits = subject.gradients(example.args, {}, np.array(1.0))[0]
    ignored = targets == -100
    zero("d_logits of ignored targets", d_logits[ignored])
    close("row sums of d_logits", d_logits.sum(axis=-1), 0.0)


@prop("cross_entropy", "the loss is a mean: with every position twice, each row's gradient halves",
      needs_backward=True)
def cross_entropy_is_a_mean(subject, example):
    logits, targets = example.args
    once = subject.gradients(example.args, {}, np.array(1.0))[0]
    twice = subject.gradients((np.concatenate([logits, logits]), np.concatenate([targets, targets])),
                              {}, np.array(1.0))[0]
    close("d_logits with every position twice", twice[:len(logits)], once / 2)


# -- the AdamW update ---------------------------------------------------------------------------
def _adamw(subject, data, grad, step=1, lr=0.1, weight_decay=0.0, m=None, v=None):
    m = np.zeros_like(data) if m is None else m
    v = np.zeros_like(data) if v is None else v
    return subject.output((data, grad, m, v, step),
                          {"lr": lr, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": weight_decay})


@prop("adamw", "the first step moves each weight by lr g / (|g| + eps): about lr, against g", drawn=False)
def adamw_first_step_is_about_lr(subject, example):
    g = np.array([0.5, -2.0, 1e-3])
    data, m, v = _adamw(subject, np.ones(3), g)
    close("weights after one step", data, 1 - 0.1 * g / (np.abs(g) + 1e-8), 1e-12)
    close("m after one step", m, 0.1 * g, 1e-12)
    close("v after one step", v, 0.001 * g * g, 1e-12)


@prop("adamw", "decoupled weight decay: with a zero gradient a step multiplies the weights by "
               "1 - lr * wd", drawn=False)
def adamw_decay_is_decoupled(subject, example):
    data, _, _ = _adamw(subject, np.array([2.0, -4.0]), np.zeros(2), weight_decay=0.5)
    close("weights", data, np.array([2.0, -4.0]) * (1 - 0.1 * 0.5), 1e-12)


@prop("adamw", "bias correction: at step 2 with m = 0.1 g and v = 0.001 g^2 the step is "
               "lr g / (|g| + eps) again", drawn=False)
def adamw_corrects_the_bias_at_step_two(subject, example):
    g = np.array([0.5, -2.0])
    # the moments one step of g left behind, then g again: m_hat = g, v_hat = g^2
    data, _, _ = _adamw(subject, np.ones(2), g, step=2, m=0.1 * g, v=0.001 * g * g)
    close("weights after the second step", data, 1 - 0.1 * g / (np.abs(g) + 1e-8), 1e-9)
