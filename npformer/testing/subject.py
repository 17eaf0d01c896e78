"""An implementation under test, called the way its component's signature says.

``Subject(component, forward, backward=None, vjp=None)`` wraps someone's functions (or
npformer's own: ``Subject.reference(component)``) so that every check calls them alike:
``output(args, options)`` and ``gradients(args, options, d_out)``; ``outcome(example)``
gives everything to compare at once: the output and one gradient per float input.
"""
from __future__ import annotations

import inspect
import os
import sysconfig
import traceback

import numpy as np

from . import components as catalogue
from .problem import is_float_array, upstream_like
from .scope import CAPABILITIES, OutOfScope
from .protocol import violation


class UsageError(TypeError):
    """The implementation was called as documented but answered in another shape (one line)."""


class Subject:
    """Someone's implementation of a component, run as the component's signature says.

    ``forward(*args, **options)`` returns ``(out, cache)`` when ``backward`` is given (then
    ``backward(d_out, cache)`` returns the gradients), else the output alone; ``vjp(inputs,
    d_out)`` gets the inputs as {name: value}. For "kv_decode" ``forward`` is the step
    function ``step(q_t, k_t, v_t, cache) -> (out_t, cache)``.
    """

    def __init__(self, component, forward, backward=None, vjp=None, name=None, signature_of=None,
                 scope=None):
        self.component = catalogue.component_named(component) if isinstance(component, str) else component
        if backward is not None and vjp is not None:
            raise ValueError("backward, vjp: give one of them, not both")
        self.forward, self.backward, self.vjp = forward, backward, vjp
        self.name = name or getattr(forward, "__name__", "forward")
        self.scope = scope
        self.untaken = untaken_options(signature_of or forward, self.component.option_defaults())
        for option, value in (scope.pinned.items() if scope else ()):
            if option in self.untaken:          # the value its code always uses, not npformer's default
                self.untaken[option] = value
        self.protocol = None         # what the last ``outcome``'s backward wrote into, if anything

    def can_run(self, example):
        """False when the example sets an option this implementation does not take to a value
        other than its default (a function without ``causal`` cannot be asked for causality)."""
        return all(_same_value(example.options.get(name, default), default)
                   for name, default in self.untaken.items()) and \
            (not self.scope or self.scope.admits(self.component.name, example.args, example.options))

    def _options(self, options):
        """The options passed to the code; OutOfScope when a call needs a value of an option the
        code does not take (a property asking a fixed-eps norm for eps -> 0)."""
        for name, value in options.items():
            if name in self.untaken and not _same_value(value, self.untaken[name]):
                raise OutOfScope(f"needs {name}={value!r}; {self.name} always uses "
                                 f"{name}={self.untaken[name]!r}")
        return {k: v for k, v in options.items() if k not in self.untaken}

    def _in_scope(self, args, options):
        lacking = self.scope.missing(self.component.name, args, options) if self.scope else None
        if lacking:
            raise OutOfScope(f"needs {CAPABILITIES[lacking]}, which {self.name} lacks ({lacking})")

    @classmethod
    def reference(cls, component):
        """npformer's own implementation (whatever is patched in when it runs)."""
        component = catalogue.component_named(component) if isinstance(component, str) else component
        forward, backward = component.reference_pair()
        return cls(component, forward, backward, name="npformer")

    @property
    def differentiates(self):
        """True when gradients can be asked for."""
        return not self.component.forward_only and (self.backward is not None or self.vjp is not None)

    # -- calls ----------------------------------------------------------------------------------
    def _call(self, args, options):
        """(output, cache or None)."""
        self._in_scope(args, options)
        result = self.forward(*args, **self._options(options))
        if self.backward is not None:
            if not (isinstance(result, tuple) and len(result) == 2):
                raise UsageError(f"forward: with backward= given, forward must return (out, cache); "
                                 f"got {type(result).__name__}")
            return result
        if not self.component.forward_only and isinstance(result, tuple):
            raise UsageError(f"forward: returned a tuple of {len(result)}; without backward= it must "
                             f"return the output alone (or give backward= to use its cache)")
        return result, None

    def output(self, args, options):
        """The forward's output."""
        return self._call(args, options)[0]

    def gradients(self, args, options, d_out):
        """One gradient per float input, in order (None without a backward or vjp)."""
        if not self.differentiates:
            return None
        if self.vjp is not None:
            names = self.component_names(args)
            self._in_scope(args, options)
            returned = self.vjp({**dict(zip(names, args)), **self._options(options)}, d_out)
        else:
            _, cache = self._call(args, options)
            returned = self.backward(np.array(d_out), cache)
        return per_float_input(returned, args)

    def component_names(self, args):
        """The names of the positional arguments (from the component's drawn examples)."""
        return getattr(self, "_names", tuple(f"input[{i}]" for i in range(len(args))))

    def outcome(self, example):
        """(values, error): {"output": ..., "gradient of q": ...} as float64 arrays, or the
        one-line error the implementation raised. NaN and overflow are results, not warnings."""
        values, error = self.result(example)
        return values, None if error is None else describe_error(error)

    def result(self, example):
        """(values, None), or (what was computed before the error: the output when only the
        backward raised, the exception the implementation raised)."""
        self._names = example.names
        values = {}
        try:
            with np.errstate(all="ignore"):
                self._outcome(example.fresh(), values)
            return values, None
        except Exception as error:             # noqa: BLE001 - the implementation's own error
            return values, error

    def _outcome(self, example, values):
        """Fill ``values``: the output first, then one gradient per float input."""
        self.protocol = None
        out, cache = self._call(example.args, example.options)
        values.update(_outputs(out))
        if self.differentiates:
            G = upstream_like(out)
            # the protocol: d_out, the cache and the inputs come back as they were given
            given = np.array(G)
            check = violation(given, cache, example.args, example.names)
            if self.vjp is not None:
                grads = per_float_input(self.vjp({**dict(zip(self.component_names(example.args), example.args)),
                                                  **self._options(example.options)}, given), example.args)
            else:
                grads = per_float_input(self.backward(given, cache), example.args)
            self.protocol = check()
            floats = [n for n, a in zip(example.names, example.args) if is_float_array(a)]
            values.update({f"gradient of {n}": _as_array(g) for n, g in zip(floats, grads)})


def untaken_options(function, defaults):
    """{name: default} of the component's options with a default that ``function`` takes no
    parameter for ({} when it takes ``**kwargs`` or its signature cannot be read)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return {}
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return {}
    named = {p.name for p in parameters if p.kind is not p.POSITIONAL_ONLY}
    return {name: default for name, default in defaults.items() if name not in named}


def _same_value(value, default):
    if isinstance(value, np.ndarray) or isinstance(default, np.ndarray):
        return False
    return value is default or value == default


def _as_array(x):
    return None if x is None else np.asarray(x, dtype=np.float64)


def _outputs(out):
    if isinstance(out, tuple):
        names = ("data", "m", "v")
        return {f"output {names[i] if i < 3 else i}": _as_array(o) for i, o in enumerate(out)}
    return {"output": _as_array(out)}


def per_float_input(returned, args):
    """The gradients a backward returned, one per float input: it may return one per input
    (None for integers), or one per float input, or a single array for a single input."""
    if not isinstance(returned, (tuple, list)):
        returned = (returned,)
    while len(returned) > len(args) and returned[-1] is None:      # an optional input not given
        returned = returned[:-1]
    floats = [i for i, a in enumerate(args) if is_float_array(a)]
    if len(returned) == len(args):
        return tuple(returned[i] for i in floats)
    if len(returned) == len(floats):
        return tuple(returned)
    raise UsageError(f"backward: returned {len(returned)} gradients; expected one per float input "
                     f"({len(floats)}) or one per input ({len(args)})")


PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Python's own library and installed packages: a location there tells a learner nothing
LIBRARIES = tuple(sorted({os.path.abspath(p) + os.sep for p in
                          (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"],
                           sysconfig.get_paths()["platlib"])}))


def describe_error(error):
    """ "ValueError: ... (in my_file.py:12, my_function)": the exception and the deepest frame
    outside npformer's own files (an error rebuilt from another process brings its own)."""
    if isinstance(getattr(error, "described", None), str):
        return error.described
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not os.path.abspath(f.filename).startswith((PACKAGE + os.sep,) + LIBRARIES)
              and not f.filename.startswith("<")]          # not dataclasses.py, contextlib.py, <frozen ...>
    where = f" (in {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}, {frames[-1].name})" \
        if frames else ""
    hint = ""
    if any(word in str(error) for word in SHAPE_WORDS):
        hint = "; a shape mismatch: check each transpose (.T, .swapaxes(-1, -2)) and keepdims=True"
    return f"{type(error).__name__}: {str(error)[:300]}{where}{hint}"


SHAPE_WORDS = ("matmul", "not aligned", "could not be broadcast", "mismatch in its core dimension")
