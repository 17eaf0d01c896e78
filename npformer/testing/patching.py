"""Running npformer with some of its functions replaced: a learner's, or a catalogued mistake.

A *patch* maps the dotted path of a function or method of npformer
(``"npformer.t03_softmax.softmax_backward"``, ``"npformer.t04_attention.MultiHeadAttention.backward"``)
to the function that replaces it. ``patched(patches)`` puts them in place for the length of a
``with`` block, for the thread (the ``contextvars`` context) that entered it: every npformer
module that imported a module-level function, and a method's class, hold a dispatcher while
the block runs, which calls the patch in that context and npformer's own function in any
other. Everything not patched is npformer's own code, so an exercise is judged with the
learner's code for that exercise and the reference everywhere else.

``edited(path, old, new)`` builds a function from npformer's own source with one edit (a
catalogued mistake); the grader takes a learner's functions from their files itself
(``npformer.exercises.learner``).
"""
from __future__ import annotations

import __future__
import contextlib
import contextvars
import functools
import importlib
import inspect
import sys
import textwrap
import threading

ROOT = __name__.split(".")[0]            # "npformer"
FLAGS = __future__.annotations.compiler_flag


def resolve(path):
    """(module, owner, attribute name) of a dotted path: owner is the module or a class in it."""
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        name = ".".join(parts[:cut])
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        owner = module
        for part in parts[cut:-1]:
            owner = getattr(owner, part)
        return module, owner, parts[-1]
    raise ValueError(f"patch: no module in {path!r}")


def qualname(function):
    """The name inside its file of the function at ``function``, a path under npformer
    ("t04_attention.MultiHeadAttention.backward" -> "MultiHeadAttention.backward")."""
    module = resolve(f"{ROOT}.{function}")[0]
    return f"{ROOT}.{function}"[len(module.__name__) + 1:]


def reference(path):
    """The plain function at ``path`` (a ``@fast_twin`` dispatch gives its ``.plain``, a checked
    ``backward`` the method it checks)."""
    _, owner, name = resolve(path)
    found = inspect.getattr_static(owner, name)
    return inspect.unwrap(getattr(found, "plain", found))


def _slots(original, namespaces=()):
    """Every place in npformer's loaded modules that holds ``original``: a module attribute
    (``from .t03_softmax import softmax_backward`` binds one per importer), or an entry of a
    module-level dict, alone or in a tuple (``ACTIVATIONS["gelu"] = (forward, backward)``).
    ``namespaces``: further module dicts to look in (the learner's files, whose functions call
    each other). Yields (container, key, value now)."""
    spaces = [vars(module) for module_name, module in list(sys.modules.items())
              if module is not None and (module_name == ROOT or module_name.startswith(ROOT + "."))]
    known = {id(space) for space in spaces}
    spaces += [space for space in namespaces if id(space) not in known]
    for space in spaces:
        for name, value in list(space.items()):
            if value is original:
                yield space, name, value
            elif isinstance(value, dict):
                for key, entry in list(value.items()):
                    if entry is original or (isinstance(entry, tuple) and
                                             any(item is original for item in entry)):
                        yield value, key, entry


def _swap(entry, original, function):
    if isinstance(entry, tuple):
        return tuple(function if item is original else item for item in entry)
    return function


# What is patched in, for this thread (and this context) alone: {path: function}. The slots of
# a patched path hold a dispatcher while any thread patches it; the dispatcher runs the
# function this context patched in, or else npformer's own, so another thread computing the
# same function meanwhile gets npformer's numbers.
_ACTIVE = contextvars.ContextVar("npformer_patches", default=None)
_LOCK = threading.RLock()
_INSTALLED = {}                  # path: _Slot, while some thread patches it


class _Slot:
    """The dispatcher of one patched path, the places it was put, and how many patch it now."""

    def __init__(self, path, owner, name, original):
        self.path, self.owner, self.name, self.original = path, owner, name, original
        self.users, self.places = 0, []          # (container, key, what it held): where it was put

        @functools.wraps(original)              # .plain, .twin_key, __wrapped__: as the original's
        def dispatch(*args, **kwargs):
            active = _ACTIVE.get()
            chosen = active.get(path) if active else None
            return (original if chosen is None else chosen)(*args, **kwargs)
        self.dispatch = dispatch

    def spread(self, namespaces):
        """Put the dispatcher in every place that still holds the original (a module loaded, a
        learner's file run, since the last patch of this path)."""
        if isinstance(self.owner, type):
            if not self.places:
                self.places.append((self.owner, self.name, self.owner.__dict__.get(self.name, _MISSING)))
                setattr(self.owner, self.name, self.dispatch)
            return
        seen = set()
        for container, key, entry in list(_slots(self.original, namespaces)):
            if (id(container), key) in seen:    # one table reached through two modules' names
                continue
            seen.add((id(container), key))
            container[key] = _swap(entry, self.original, self.dispatch)
            self.places.append((container, key, (entry, container[key])))

    def restore(self):
        """Give every place back the original (whatever else was patched beside it since)."""
        for container, key, before in reversed(self.places):
            if isinstance(container, type):
                if before is _MISSING:
                    delattr(container, key)
                else:
                    setattr(container, key, before)
            elif key in container:          # the very object it held, unless patched beside since
                entry, put = before
                now = container[key]
                container[key] = entry if now is put else _swap(now, self.dispatch, self.original)


def _dispatchable(owner, name):
    """True when the slot can hold a dispatcher: a module's function, or a class's plain method
    (a staticmethod or classmethod is swapped for the whole process, as before)."""
    if not isinstance(owner, type):
        return callable(getattr(owner, name))
    return inspect.isfunction(inspect.getattr_static(owner, name))


@contextlib.contextmanager
def patched(patches):
    """Put ``patches`` ({dotted path: function}) in place inside the block, for this thread
    (this context) alone; another thread meanwhile runs npformer's own functions."""
    # a patch's own module (a learner's file) calls the other patched functions too
    namespaces = list({id(g): g for g in (getattr(f, "__globals__", None) for f in patches.values())
                       if g is not None}.values())
    used, undo, token = [], [], None
    try:
        with _LOCK:
            for path, function in patches.items():
                slot = _INSTALLED.get(path)
                if slot is None:
                    _, owner, name = resolve(path)
                    if not _dispatchable(owner, name):
                        undo.append((owner, name, owner.__dict__.get(name, _MISSING)))
                        setattr(owner, name, function)
                        continue
                    slot = _INSTALLED[path] = _Slot(path, owner, name, getattr(owner, name))
                slot.users += 1
                used.append(slot)
                slot.spread(namespaces)
        token = _ACTIVE.set({**(_ACTIVE.get() or {}), **patches})
        yield
    finally:
        if token is not None:
            _ACTIVE.reset(token)
        with _LOCK:
            for owner, name, value in reversed(undo):
                if value is _MISSING:
                    delattr(owner, name)
                else:
                    setattr(owner, name, value)
            for slot in reversed(used):
                slot.users = slot.users - 1
                if slot.users == 0:
                    slot.restore()
                    del _INSTALLED[slot.path]


_MISSING = object()


# -- a function from source ---------------------------------------------------------------
def function_source(function):
    """The source of ``function`` as a top-level def (dedented, decorators removed), preceded
    by blank lines so that its lines keep their numbers in the file (a warning or traceback
    of the compiled edit names the file's real line)."""
    found, start = inspect.getsourcelines(function)
    lines = textwrap.dedent("".join(found)).split("\n")
    while lines and lines[0].lstrip().startswith("@"):
        lines.pop(0)
        start += 1
    return "\n" * (start - 1) + "\n".join(lines)


def compile_function(source, name, namespace, filename):
    """Compile ``source`` (one def) in a copy of ``namespace``; the function called ``name``."""
    scope = dict(namespace)
    exec(compile(source, filename, "exec", flags=FLAGS, dont_inherit=True), scope)
    return scope[name]


class StaleMistake(ValueError):
    """A catalogued edit whose text no longer appears in its function's source."""


def edited(path, old, new):
    """npformer's function at ``path`` with the text ``old`` of its source replaced by ``new``
    (exactly one occurrence; tuples of texts for several edits, made in turn), compiled in the
    namespace of its own module. The source is the function's own, dedented: a method's body
    is indented by four spaces."""
    function = reference(path)
    source = function_source(function)
    for before, after in zip(*((old, new) if isinstance(old, tuple) else ((old,), (new,)))):
        count = source.count(before)
        if count != 1:
            raise StaleMistake(f"edit of {path}: expected the text once in its source, found it {count} "
                             f"times: {before!r}")
        source = source.replace(before, after)
    return compile_function(source, function.__name__, function.__globals__,
                            inspect.getsourcefile(function))
