"""Optimizers: how the gradients turn random matrices into useful parameters.

SGD with momentum (heavy ball, as PyTorch writes it):
    buf = momentum * buf + g;      p -= lr * buf
AdamW (Loshchilov & Hutter; bias correction, decoupled weight decay):
    m = b1 m + (1 - b1) g;          v = b2 v + (1 - b2) g^2
    m_hat = m / (1 - b1^t);         v_hat = v / (1 - b2^t)
    p -= lr * (m_hat / (sqrt(v_hat) + eps) + wd * p)     (wd only where decay applies)
Plus gradient clipping by the global norm and a warmup + cosine schedule.

``adamw_update`` is the update of one parameter, written as the formulas above. Either way
the parameter's own dtype is kept: float32 parameters stay float32.

Fast twins: ``adamw_update`` has a drop-in twin in ``npformer/fast/optim.py`` (the same
numbers, computed in place), which runs only under ``npformer.track("fast")``. By default the
function written here runs: a ``print`` in it shows.
"""
from __future__ import annotations

import math

import numpy as np

from .core.module import Parameter
from .core.track import fast_twin

NO_DECAY_SUFFIXES = ("gamma", "beta", "bias")
EMBEDDING_NAMES = ("tokens", "positions", "embed")


def default_no_decay(name, param):
    """True for parameters AdamW should not decay: norms, biases and embedding tables.

    Decided by name and shape: any parameter with fewer than 2 dimensions (norm
    gains and shifts, biases), a name ending in ``gamma``/``beta``/``bias``, or
    a name whose first part is an embedding table (``tokens.weight``,
    ``positions.weight``, anything under ``embed``). A tied LM head shares
    ``tokens.weight`` and is therefore not decayed either.
    """
    parts = name.split(".")
    return (param.data.ndim < 2 or parts[-1] in NO_DECAY_SUFFIXES
            or any(part.startswith(EMBEDDING_NAMES) for part in parts[:-1]))


def _named(named_params, who):
    """A list of (name, Parameter) from ``model.named_parameters()`` (or a list of Parameters)."""
    pairs = []
    for i, item in enumerate(named_params):
        if isinstance(item, Parameter):
            item = (str(i), item)
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], Parameter)):
            raise TypeError(f"{who}: named_params expected (name, Parameter) pairs as from "
                            f"model.named_parameters(), got {type(item).__name__}")
        pairs.append(item)
    if not pairs:
        raise ValueError(f"{who}: named_params is empty (no parameters to optimise)")
    return pairs


def _check_positive(name, value, allow_zero=False):
    ok = value >= 0 if allow_zero else value > 0
    if not isinstance(value, (int, float, np.floating, np.integer)) or not ok:
        raise ValueError(f"{name}: expected a {'non-negative' if allow_zero else 'positive'} "
                         f"number, got {value!r}")


class Optimizer:
    """Holds (name, Parameter) pairs and a settable learning rate ``lr``."""

    def __init__(self, named_params, lr):
        self.named = _named(named_params, type(self).__name__)
        _check_positive("lr", lr, allow_zero=True)
        self.lr = float(lr)
        self.steps = 0

    @property
    def params(self):
        """The Parameters this optimizer updates, in order."""
        return [p for _, p in self.named]

    def zero_grad(self):
        """Zero the gradients of the parameters this optimizer updates."""
        for p in self.params:
            p.zero_grad()

    def step(self):  # pragma: no cover - interface
        """Update every parameter in place from its grad."""
        raise NotImplementedError

    # -- resume -------------------------------------------------------------------
    def _buffers(self):
        """{buffer kind: {parameter name: array}} of the state that a resume needs."""
        return {}

    def state_dict(self):
        """``{"type", "steps", "lr", "arrays": {"kind/name": array copy}}`` (arrays for a .npz)."""
        arrays = {f"{kind}/{name}": buf.copy()
                  for kind, bufs in self._buffers().items() for name, buf in bufs.items()}
        return {"type": type(self).__name__, "steps": self.steps, "lr": self.lr, "arrays": arrays}

    def load_state_dict(self, state):
        """Restore ``state_dict()``; names, shapes and type must match (ValueError otherwise)."""
        if state.get("type") != type(self).__name__:
            raise ValueError(f"optimizer state: expected type {type(self).__name__}, "
                             f"got {state.get('type')!r}")
        arrays = state["arrays"]
        wanted = {f"{kind}/{name}": buf
                  for kind, bufs in self._buffers().items() for name, buf in bufs.items()}
        if set(arrays) != set(wanted):
            missing, extra = sorted(set(wanted) - set(arrays)), sorted(set(arrays) - set(wanted))
            raise ValueError(f"optimizer state: missing {missing[:3]}, unexpected {extra[:3]}")
        for key, buf in wanted.items():
            if np.shape(arrays[key]) != buf.shape:
                raise ValueError(f"optimizer state: {key!r} expected shape {buf.shape}, "
                                 f"got {np.shape(arrays[key])}")
        for key, buf in wanted.items():
            buf[...] = arrays[key]
        self.steps, self.lr = int(state["steps"]), float(state["lr"])
        return self


class SGD(Optimizer):
    """Stochastic gradient descent with (heavy-ball) momentum.

    buf = momentum * buf + g;  p -= lr * buf   (momentum 0: p -= lr * g)
    """

    def __init__(self, named_params, lr=0.1, momentum=0.0):
        super().__init__(named_params, lr)
        if not 0 <= momentum < 1:
            raise ValueError(f"momentum: expected a number in [0, 1), got {momentum!r}")
        self.momentum = float(momentum)
        self.velocity = {name: np.zeros_like(p.data) for name, p in self.named}

    def _buffers(self):
        return {"velocity": self.velocity}

    def step(self):
        """One SGD step: v = momentum v + g; p -= lr v."""
        self.steps += 1
        for name, p in self.named:
            velocity = self.momentum * self.velocity[name] + p.grad
            self.velocity[name] = velocity
            p.data -= self.lr * velocity


@fast_twin
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
    data = data - lr * weight_decay * data           # decoupled weight decay
    data = data - lr * m_hat / (np.sqrt(v_hat) + eps)
    return data, m, v


class AdamW(Optimizer):
    """Adam with bias correction and decoupled weight decay.

    ``named_params``: ``model.named_parameters()``: the names decide which parameters are
    not decayed. ``no_decay``: a function ``(name, Parameter) -> bool`` (default
    ``default_no_decay``: norms, biases, embedding tables), or a collection of parameter
    names that skip the decay. Bare Parameters (``model.parameters()``, PyTorch's habit) are
    refused while a decay applies, since without names the embedding tables would be decayed.
    """

    def __init__(self, named_params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                 no_decay=default_no_decay):
        named_params = list(named_params)
        if weight_decay and no_decay is default_no_decay and \
                any(isinstance(item, Parameter) for item in named_params):
            raise TypeError("AdamW: got Parameters without names, and the decay rule reads names "
                            "(norm gains, biases and embedding tables are not decayed); pass "
                            "model.named_parameters() instead of model.parameters(), or "
                            "weight_decay=0")
        super().__init__(named_params, lr)
        b1, b2 = betas
        for name, b in (("betas[0]", b1), ("betas[1]", b2)):
            if not 0 <= b < 1:
                raise ValueError(f"{name}: expected a number in [0, 1), got {b!r}")
        _check_positive("eps", eps)
        _check_positive("weight_decay", weight_decay, allow_zero=True)
        self.betas, self.eps, self.weight_decay = (float(b1), float(b2)), float(eps), float(weight_decay)
        if callable(no_decay):
            skip = {name for name, p in self.named if no_decay(name, p)}
        else:
            skip = set(no_decay)
            unknown = sorted(skip - {name for name, _ in self.named})
            if unknown:
                raise ValueError(f"no_decay: unknown parameter names {unknown[:3]}")
        self.decayed = {name: name not in skip for name, _ in self.named}
        self.exp_avg = {name: np.zeros_like(p.data) for name, p in self.named}     # m
        self.exp_avg_sq = {name: np.zeros_like(p.data) for name, p in self.named}  # v

    def _buffers(self):
        return {"exp_avg": self.exp_avg, "exp_avg_sq": self.exp_avg_sq}

    def step(self):
        """One AdamW step for every parameter (see ``adamw_update``)."""
        self.steps += 1
        for name, p in self.named:
            decay = self.weight_decay if self.decayed[name] else 0.0
            data, self.exp_avg[name], self.exp_avg_sq[name] = adamw_update(
                p.data, p.grad, self.exp_avg[name], self.exp_avg_sq[name], self.steps, self.lr,
                self.betas, self.eps, decay)
            if data is not p.data:            # the fast twin updates in place, the plain one not
                p.data[...] = data            # either way the Parameter keeps its own array


def clip_grad_norm(params, max_norm):
    """Scale all gradients by one factor so their global L2 norm is at most ``max_norm``.

    Returns the norm before clipping (a Python float; per-parameter sums added in float64).
    ``params``: Parameters, or (name, Parameter) pairs. A non-finite norm is
    returned unchanged and nothing is scaled (the caller's NaN guard decides).
    """
    _check_positive("max_norm", max_norm)
    params = [p[1] if isinstance(p, tuple) else p for p in params]
    total = math.sqrt(sum(float(np.dot(g, g)) for g in (p.grad.reshape(-1) for p in params)))
    if math.isfinite(total) and total > max_norm:
        factor = max_norm / (total + 1e-6)
        for p in params:
            p.grad = p.grad * factor
    return total


def warmup_cosine(step, total_steps, warmup_steps, peak_lr, min_lr=0.0):
    """Learning rate at ``step`` (0-based): linear warmup to ``peak_lr``, then cosine to ``min_lr``.

    step < warmup:  peak * (step + 1) / warmup
    after:          min + (peak - min) * (1 + cos(pi * progress)) / 2,
                    progress = (step - warmup) / (total - warmup), capped at 1.
    """
    if total_steps < 1 or warmup_steps < 0:
        raise ValueError(f"total_steps, warmup_steps: expected total >= 1 and warmup >= 0, "
                         f"got {total_steps}, {warmup_steps}")
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_lr + (peak_lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))
