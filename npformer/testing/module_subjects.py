"""How ``conform_module`` runs the code under test: a PyTorch nn.Module through
``torch.func.functional_call`` (float64, autograd), or NumPy code over a nested params dict."""
from __future__ import annotations

import numpy as np

from ..t11_loss import cross_entropy_backward, cross_entropy_forward
from .weightmap import flatten, nest

class WeightMapError(ValueError):
    """The weight map and the subject's parameters do not match: the caller's to fix."""


def is_torch_module(subject):
    try:
        import torch
    except ImportError:
        return False
    return isinstance(subject, torch.nn.Module)


def _split(result):
    """(logits, loss or None) of a decoder's return value."""
    if isinstance(result, (tuple, list)):
        return result[0], (result[1] if len(result) > 1 else None)
    return result, None


def run_torch(kind, module, theirs, inputs, targets_arg, adapter=None, tables=None):
    """(outputs, their gradients) of a PyTorch module with ``theirs`` weights, through
    ``functional_call`` (called ``module(x)``, or ``adapter(call, x, tables)`` where ``call``
    runs the module with those weights on whatever arguments the adapter gives it)."""
    import torch
    from torch.func import functional_call

    names = dict(module.named_parameters())
    _check_names(set(names), set(theirs), alias=set(module.state_dict()))
    params = {k: torch.tensor(theirs[k], dtype=torch.float64, requires_grad=True) for k in names}

    def call(*args, **kwargs):
        return functional_call(module, params, args, kwargs)

    def through(*args):
        return call(*args) if adapter is None else adapter(call, *args, tables)
    out = {}
    if kind == "decoder":
        ids, targets = (torch.tensor(a, dtype=torch.long) for a in inputs)
        args = (ids, targets) if targets_arg else (ids,)
        logits, loss = _split(through(*args))
        if loss is None:
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                     targets.reshape(-1))
        leaves = list(params.values())
        grads = torch.autograd.grad(loss, leaves, allow_unused=True)
        out.update(logits=logits.detach().numpy(), loss=loss.detach().numpy())
    else:
        x = torch.tensor(inputs[0], dtype=torch.float64, requires_grad=True)
        y = through(x)
        y = y[0] if isinstance(y, (tuple, list)) else y
        leaves = [x] + list(params.values())
        grads = torch.autograd.grad((y * torch.tensor(inputs[1])).sum(), leaves, allow_unused=True)
        out.update(output=y.detach().numpy(), d_input=_np(grads[0], x))
        grads, leaves = grads[1:], leaves[1:]
    theirs_grads = {k: _np(g, p) for (k, p), g in zip(params.items(), grads)}
    return out, theirs_grads


def _np(grad, like):
    """A gradient as float64 ndarray (zeros for a leaf the output does not depend on)."""
    return np.zeros(tuple(like.shape)) if grad is None else grad.detach().numpy()


def _check_names(theirs_module, theirs_map, alias=()):
    missing = sorted(theirs_module - theirs_map)
    unknown = sorted(theirs_map - theirs_module - set(alias))
    if missing or unknown:
        raise WeightMapError(f"weight_map: the module's parameters {missing} have no entry; "
                         f"entries {unknown} name no parameter of the module")


def run_numpy(kind, forward, backward, theirs, inputs, adapter=None, tables=None):
    """(outputs, their gradients or None) of NumPy code: ``forward(params, x)``, or
    ``adapter(call, x, tables)`` with ``call(*args)`` = ``forward(params, *args)``."""
    params = nest(theirs)
    if adapter is None:
        result = forward(params, inputs[0])
    else:
        result = adapter(lambda *args, **kwargs: forward(params, *args, **kwargs), inputs[0], tables)
    cache = None
    if backward is not None:
        result, cache = result
    if kind == "decoder":
        logits = np.asarray(result, np.float64)
        loss, loss_cache = cross_entropy_forward(logits, inputs[1])
        out = {"logits": logits, "loss": np.asarray(loss)}
        if backward is None:
            return out, None
        d_out = cross_entropy_backward(1.0, loss_cache)[0]
    else:
        out = {"output": np.asarray(result, np.float64)}
        if backward is None:
            return out, None
        d_out = inputs[1]
    d_x, grads = backward(d_out, cache)
    if kind != "decoder":
        out["d_input"] = np.asarray(d_x, np.float64)
    grads = flatten(grads)
    _check_names(set(theirs), set(grads))
    return out, grads
