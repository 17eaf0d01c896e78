"""The component protocol: Parameter, Module and Cache.

Every layer in npformer follows one contract (docs/reading-the-source.md, "The protocol"):

    out, cache = module.forward(inputs...)        # cache holds what backward needs
    d_inputs  = module.backward(d_out, cache)     # and ADDS into each Parameter.grad

Nothing about a particular call is stored on ``self``, so a module can run
several forwards (a reused layer, a tied head, an encoder output read by every
decoder layer) before their backwards, in any order.

Layers draw their initial weights from the ``rng`` they are given, a numpy Generator
(``check_rng``: None means ``np.random.default_rng(0)``), never from numpy's global state,
so the same seed builds the same model wherever it runs.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
from dataclasses import dataclass, fields

import numpy as np

from .validate import check_float_dtype, check_non_negative, check_upstream


class Parameter:
    """A trainable array ``data`` and its gradient ``grad`` (same shape and dtype).

    Backward passes add into ``grad``; call ``zero_grad()`` between steps.
    """

    __slots__ = ("data", "grad")

    def __init__(self, data):
        self.data = np.ascontiguousarray(data)
        check_float_dtype("Parameter data", self.data.dtype)
        self.grad = np.zeros_like(self.data)

    @property
    def shape(self):
        """The shape of ``data``."""
        return self.data.shape

    @property
    def dtype(self):
        """The dtype of ``data``."""
        return self.data.dtype

    def zero_grad(self):
        """Set grad to zeros, keeping the array."""
        self.grad.fill(0)

    def __repr__(self):
        return f"Parameter(shape={self.data.shape}, dtype={self.data.dtype})"


def array_nbytes(obj, seen=None) -> int:
    """Bytes of every distinct ndarray reachable from ``obj`` (caches, tuples, lists)."""
    seen = set() if seen is None else seen
    if isinstance(obj, np.ndarray):
        if id(obj) in seen:
            return 0
        seen.add(id(obj))
        return obj.nbytes
    if isinstance(obj, Cache):
        return sum(array_nbytes(getattr(obj, f.name), seen) for f in fields(obj)
                   if f.name not in obj.borrowed)
    if isinstance(obj, (list, tuple)):
        return sum(array_nbytes(item, seen) for item in obj)
    return 0


@dataclass(frozen=True)
class Cache:
    """Base of every forward cache: a small frozen record of what backward needs.

    ``nbytes`` is the memory this forward keeps alive for its backward. Fields named in
    ``borrowed`` (parameters the record only points at) are not counted: they live anyway.
    """

    borrowed = ()

    @property
    def nbytes(self) -> int:
        """Bytes of every array this record keeps alive (borrowed fields excluded)."""
        return array_nbytes(self)


class ConfigDict:
    """For config dataclasses: ``to_dict()`` and ``from_dict()`` as plain JSON-ready dicts."""

    def to_dict(self):
        """The config as a plain dict (JSON-ready)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data):
        """Build from a dict, refusing names the config does not know (a foreign file)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"config: unknown fields {unknown}")
        return cls(**data)


class Module:
    """Base class: parameters and sub-modules are found by walking attributes.

    Attribute order gives the order and the names of ``named_parameters()``:
    ``blocks.0.attn.qkv.weight`` is the attribute path to that Parameter.

    Every subclass's ``backward`` first checks its ``d_out``: an array (not a tuple such as
    ``cross_entropy_backward`` returns), of the parameters' dtype (nothing silently upcasts),
    and of the output's shape where the module can tell it (``output_shape``).
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "backward" in vars(cls):
            cls.backward = _checking_d_out(vars(cls)["backward"])

    def output_shape(self, cache):
        """The shape of forward's output, read from its cache; None where it cannot tell."""
        return None

    def forward(self, *inputs, **options):  # pragma: no cover - interface
        """inputs -> (output, cache); nothing about the call is stored on the module."""
        raise NotImplementedError

    def backward(self, d_out, cache):  # pragma: no cover - interface
        """Gradients of the inputs from d_out; adds into every parameter's grad."""
        raise NotImplementedError

    def __call__(self, *inputs, **options):
        """Inference convenience: the output of ``forward`` without its cache."""
        return self.forward(*inputs, **options)[0]

    # -- walking the tree -------------------------------------------------
    def _children(self):
        for name, value in vars(self).items():
            if isinstance(value, (Parameter, Module)):
                yield name, value
            elif isinstance(value, (list, tuple)) and value and all(
                    isinstance(v, Module) for v in value):
                for i, v in enumerate(value):
                    yield f"{name}.{i}", v

    def named_parameters(self, prefix=""):
        """Yield ``(name, Parameter)`` once per Parameter (a tied weight keeps its first name)."""
        seen, out = set(), []

        def walk(path, module):
            for name, value in module._children():
                full = f"{path}{name}"
                if isinstance(value, Parameter):
                    if id(value) not in seen:
                        seen.add(id(value))
                        out.append((full, value))
                else:
                    walk(full + ".", value)
        walk(prefix, self)
        return iter(out)

    def parameters(self):
        """The Parameters, in named_parameters() order."""
        return [p for _, p in self.named_parameters()]

    def modules(self):
        """This module and every sub-module, depth first."""
        yield self
        for _, value in self._children():
            if isinstance(value, Module):
                yield from value.modules()

    def zero_grad(self):
        """Zero every parameter's gradient."""
        for p in self.parameters():
            p.zero_grad()

    def num_parameters(self) -> int:
        """How many numbers the parameters hold (a tied weight counted once)."""
        return int(sum(p.data.size for p in self.parameters()))

    def _first_dtype(self):
        """The dtype of the first Parameter found (None without any): cheap, for checks."""
        for _, value in self._children():
            found = value.dtype if isinstance(value, Parameter) else value._first_dtype()
            if found is not None:
                return found
        return None

    @property
    def dtype(self):
        """The dtype of the parameters (float32 when there are none)."""
        params = self.parameters()
        return params[0].dtype if params else np.dtype(np.float32)

    def astype(self, dtype):
        """A deep copy with every parameter (and its grad) in ``dtype``; ties are kept."""
        dtype = check_float_dtype("astype", dtype)
        clone = copy.deepcopy(self)
        for p in clone.parameters():
            p.data = p.data.astype(dtype)
            p.grad = np.zeros_like(p.data)
        for m in clone.modules():
            m._on_dtype_change(dtype)
        return clone

    def _on_dtype_change(self, dtype):
        """Hook for modules holding non-parameter float tables (e.g. sinusoid tables)."""

    # -- saving and loading ----------------------------------------------
    def state_dict(self) -> dict:
        """A plain ``{name: array copy}`` dict, names as in ``named_parameters()``."""
        return {name: p.data.copy() for name, p in self.named_parameters()}

    def load_state_dict(self, state: dict, strict: bool = True, cast: bool = False,
                        allow_nonfinite: bool = False):
        """Copy arrays into the parameters, checking names, shapes, dtypes and values.

        With ``strict`` a missing or unexpected name is a ``ValueError`` naming it. An
        array of another dtype than its parameter is refused (a float64 array would be
        rounded into a float32 model without a word) unless ``cast=True`` converts it;
        NaN or infinite values are refused unless ``allow_nonfinite=True``. Nothing is
        changed unless every check passes.
        """
        params = dict(self.named_parameters())
        missing = sorted(set(params) - set(state))
        unexpected = sorted(set(state) - set(params))
        if strict and (missing or unexpected):
            raise ValueError(f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}")
        arrays = {}
        for name, p in params.items():
            if name not in state:
                continue
            array = np.asarray(state[name])
            if array.shape != p.shape:
                raise ValueError(f"load_state_dict: {name!r} expected shape {p.shape}, "
                                 f"got {array.shape}")
            if array.dtype != p.dtype and not cast:
                raise TypeError(f"load_state_dict: {name!r} expected dtype {p.dtype}, got "
                                f"{array.dtype} (pass cast=True to convert, or call "
                                f"model.astype(np.{array.dtype}) first)")
            if not allow_nonfinite and not np.isfinite(array).all():
                bad = int(np.size(array) - np.isfinite(array).sum())
                raise ValueError(f"load_state_dict: {name!r} holds {bad} NaN or infinite "
                                 f"values (pass allow_nonfinite=True to load them anyway)")
            arrays[name] = array
        for name, array in arrays.items():
            params[name].data[...] = array.astype(params[name].dtype, copy=False)
        return self


def _checking_d_out(backward):
    """``backward`` with its upstream gradient checked first (see ``Module``)."""
    @functools.wraps(backward)
    def checked(self, d_out, cache, *args, **kwargs):
        check_upstream(f"{type(self).__name__}.backward: d_out", d_out, self._first_dtype(),
                       self.output_shape(cache))
        return backward(self, d_out, cache, *args, **kwargs)
    return checked


def init_normal(rng, shape, std, dtype=np.float32):
    """Normal(0, std) weights drawn from an explicit Generator."""
    if rng is None:
        raise TypeError("rng: expected a numpy.random.Generator (e.g. np.random.default_rng(0)), got None")
    check_non_negative("std", std)
    return (rng.standard_normal(shape) * std).astype(dtype)
