"""Check a PyTorch or JAX function with ``conform``: float64 tensors in, autograd for the backward.

    from npformer.testing import conform, from_torch
    import torch.nn.functional as F

    def attention(q, k, v, mask=None, scale=None, causal=False, window=None):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)

    print(conform("attention", from_torch(attention)))

The function is called with keyword arguments named as in the component's signature: arrays
become float64 tensors (integer arrays stay integers, boolean masks booleans), other values
pass unchanged. Its gradients come from the library's automatic differentiation. Neither
library is a dependency of npformer: without it, the adapter says so in one line.
"""
from __future__ import annotations

import numpy as np


class AdapterUnavailable(ImportError):
    """The library an adapter needs is not installed (message: one line, with the install)."""


class Adapted:
    """A foreign function as ``conform`` calls it: ``forward(*args, **options) -> out`` and
    ``vjp(inputs, d_out) -> gradients``, both on numpy arrays."""

    def __init__(self, name, forward, vjp, fn):
        self.name, self.forward, self.vjp, self.fn = name, forward, vjp, fn


def _require(module, install):
    try:
        return __import__(module)
    except ImportError:
        raise AdapterUnavailable(f"{module} is not installed; {install}") from None


def from_torch(fn, name=None):
    """Wrap a PyTorch function (tensors in, a tensor or a tuple of tensors out) for ``conform``."""
    torch = _require("torch", "pip install torch==2.13.0 (the CPU wheel)")

    def tensor(x, grad=False):
        if isinstance(x, np.ndarray):
            t = torch.from_numpy(np.ascontiguousarray(x))
            if np.issubdtype(x.dtype, np.floating):
                t = t.to(torch.float64).requires_grad_(grad)
            return t
        return x

    def call(inputs, grad):
        tensors = {k: tensor(v, grad) for k, v in inputs.items()}
        return fn(**tensors), tensors

    def numpy(out):
        if isinstance(out, (tuple, list)):
            return tuple(numpy(o) for o in out)
        return out.detach().numpy() if hasattr(out, "detach") else np.asarray(out)

    def forward(*args, **options):
        names = _names_of(fn, len(args))
        return numpy(call({**dict(zip(names, args)), **options}, False)[0])

    def vjp(inputs, d_out):
        out, tensors = call(inputs, True)
        wrt = [t for t in tensors.values() if torch.is_tensor(t) and t.requires_grad]
        upstream = torch.from_numpy(np.asarray(d_out, np.float64))
        grads = torch.autograd.grad(out, wrt, upstream, allow_unused=True)
        # an input the function never read has a zero gradient (autograd says None)
        return tuple(np.zeros(t.shape) if g is None else g.detach().numpy() for t, g in zip(wrt, grads))

    return Adapted(name or getattr(fn, "__name__", "torch function"), forward, vjp, fn)


def from_jax(fn, name=None):
    """Wrap a JAX function (arrays in, an array out) for ``conform``; gradients by ``jax.vjp``."""
    jax = _require("jax", "pip install jax jaxlib")
    jax.config.update("jax_enable_x64", True)

    def split(inputs):
        floats = {k: v for k, v in inputs.items()
                  if isinstance(v, np.ndarray) and np.issubdtype(v.dtype, np.floating)}
        others = {k: v for k, v in inputs.items() if k not in floats}
        return floats, others

    def forward(*args, **options):
        names = _names_of(fn, len(args))
        return np.asarray(fn(**dict(zip(names, args)), **options))

    def vjp(inputs, d_out):
        floats, others = split(inputs)
        _, pullback = jax.vjp(lambda *xs: fn(**dict(zip(floats, xs)), **others), *floats.values())
        return tuple(np.asarray(g) for g in pullback(np.asarray(d_out, np.float64)))

    return Adapted(name or getattr(fn, "__name__", "jax function"), forward, vjp, fn)


def _names_of(fn, count):
    """The names of ``fn``'s first ``count`` positional parameters."""
    import inspect
    params = [p.name for p in inspect.signature(fn).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(params) < count:
        raise TypeError(f"{getattr(fn, '__name__', fn)}: expected at least {count} positional "
                        f"parameters named as the component's signature, got {params}")
    return params[:count]
