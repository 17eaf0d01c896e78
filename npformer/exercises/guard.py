"""What the learner's code may not do inside the grading process, refused as it happens.

``install(workspace_dir, scratch_dir, graded)`` is called by the learner's process (``worker``)
before the learner's files run. From then on, while a frame of the learner's files is on the stack:

- npformer's own versions of the graded functions raise ``Refused("your code called
  npformer's own softmax_backward")``, however they were reached (an import made before the
  grader patched, ``npformer.testing.patching.reference``, a saved copy, ``gc``): the code
  object of each original is swapped for one that looks at the stack first, and a module-level
  import of one from the learner's file receives a stand-in that refuses;
- an audit hook refuses opening npformer's installed files (loading its source under another
  name), opening files outside the workspace, the scratch directory and Python's own
  libraries, writing or deleting outside the scratch directory, starting processes or
  threads, signalling other processes, loading native libraries with ctypes and the
  ``gc`` and frame walks that reach the grader's objects.

Each refusal is remembered in ``REFUSED`` for the report and ends the judging. This raises the bar for a learner
who tries; it is not a boundary against someone who studies it (the code still runs in one
process with the grader's engine): the verdict's separation and a container are the limits
that hold, see docs/teaching.md.
"""
from __future__ import annotations

import os
import sys
import threading
import types

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFUSED = []                     # one line per refusal, in order
_STATE = threading.local()


class Refused(BaseException):
    """An action the grader does not allow the learner's code (the message says which). Not an
    ``Exception``: it goes past the engine's handlers and ends the judging at once."""


def _under(path, root):
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class _Rules:
    def __init__(self, workspace, scratch):
        self.workspace = os.path.realpath(workspace)
        self.scratch = os.path.realpath(scratch)
        self.package = os.path.realpath(PACKAGE)
        roots = {sys.prefix, sys.base_prefix, sys.exec_prefix}
        roots |= {p for p in sys.path if p and os.path.isdir(p) and not _under(self.package, os.path.realpath(p))}
        self.readable = sorted({os.path.realpath(r) for r in roots} | {self.workspace, self.scratch})

    def learner_line(self):
        """True when the code that raised the event is the learner's own."""
        return _under(os.path.realpath(sys._getframe(2).f_code.co_filename), self.workspace)

    def learner_on_stack(self):
        frame = sys._getframe(2)
        while frame is not None:
            if _under(os.path.realpath(frame.f_code.co_filename), self.workspace):
                return True
            frame = frame.f_back
        return False


_RULES = None
PROCESS_EVENTS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                  "os.forkpty", "pty.spawn", "_thread.start_new_thread", "os.kill", "os.killpg",
                  "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata", "gc.get_objects", "gc.get_referrers",
                  "gc.get_referents", "sys._current_frames", "socket.connect", "socket.bind",
                  "ctypes.call_function", "ctypes.string_at", "ctypes.addressof", "sys.setprofile",
                  "sys.settrace", "sys.addaudithook")
IMMEDIATE = ("sys._getframe", "object.__getattr__")       # refused when the learner's own line asks
FRAME_NAMES = ("tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back", "f_locals", "f_globals")
PATH_EVENTS = ("os.remove", "os.rmdir", "os.rename", "shutil.rmtree", "os.truncate", "os.chmod",
               "os.chown", "os.symlink", "os.link", "os.mkdir", "os.utime", "shutil.move", "shutil.copyfile")
WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _refuse(text):
    REFUSED.append(text)
    raise Refused(f"npformer's grader refused: {text}")


def _path(value):
    if isinstance(value, int):
        return None
    try:
        return os.path.realpath(os.fsdecode(value))
    except (TypeError, ValueError):
        return None


def _hook(event, args):
    rules = _RULES
    if rules is None or getattr(_STATE, "busy", False):
        return
    if event != "open" and event not in PROCESS_EVENTS and event not in PATH_EVENTS and event not in IMMEDIATE:
        return
    if event == "object.__getattr__" and (len(args) < 2 or args[1] not in FRAME_NAMES):
        return
    _STATE.busy = True
    try:
        if event in IMMEDIATE:
            if rules.learner_line():
                _refuse(f"{event} ({args[1] if event == 'object.__getattr__' else 'a frame'}) from your code: "
                        f"the grader's frames are not yours to read")
            return
        if not rules.learner_on_stack():
            return
        if event in PROCESS_EVENTS:
            _refuse(f"{event} from your code")
        if event == "open":
            path = _path(args[0])
            if path is None:
                return
            mode, flags = args[1] or "r", args[2] if len(args) > 2 and isinstance(args[2], int) else 0
            writes = any(c in str(mode) for c in "wax+") or bool(flags & WRITING)
            if _under(path, rules.package):
                _refuse(f"your code opened npformer's own file {os.path.relpath(path, rules.package)}")
            if writes and not _under(path, rules.scratch):
                _refuse(f"your code wrote to {path}, outside its scratch directory")
            if not writes and not any(_under(path, root) for root in rules.readable):
                _refuse(f"your code read {path}, outside the workspace")
            return
        for value in args:
            path = _path(value) if isinstance(value, (str, bytes, os.PathLike)) else None
            if path is not None and not _under(path, rules.scratch):
                _refuse(f"{event} of {path} from your code, outside its scratch directory")
    finally:
        _STATE.busy = False


def _guarded_code(original, qualname):
    """A code object for ``original`` that refuses when the learner's code is on the stack and
    otherwise runs a copy of the original; None when the function has a closure."""
    if original.__code__.co_freevars:
        return None
    import types
    true = types.FunctionType(original.__code__, original.__globals__, original.__name__,
                              original.__defaults__, None)
    true.__kwdefaults__ = original.__kwdefaults__

    def gate(*args, **kwargs):
        if _RULES is not None and _RULES.learner_on_stack():
            _refuse(f"your code called npformer's own {qualname}")
        return true(*args, **kwargs)
    # the gate is reached through one global name of the original's module, per function
    name = "__npformer_gate_" + qualname.replace(".", "_") + "__"
    original.__globals__[name] = gate
    template = f"def {original.__name__}(*args, **kwargs):\n    return {name}(*args, **kwargs)\n"
    scope = {}
    exec(compile(template, original.__code__.co_filename, "exec"), scope)
    # the original's first line: inspect.getsource (the catalogue's edits) still finds its text
    return scope[original.__name__].__code__.replace(co_firstlineno=original.__code__.co_firstlineno)


def _originals(path):
    """The function objects that are npformer's own version of ``path``: the plain function,
    and what a dispatch or a checking wrapper holds."""
    import inspect

    from ..testing.engine import resolve
    _, owner, name = resolve(path)
    found = inspect.getattr_static(owner, name)
    seen, todo = [], [found, getattr(found, "plain", None)]
    while todo:
        item = todo.pop()
        if item is None or any(item is s for s in seen):
            continue
        if isinstance(item, (staticmethod, classmethod)):
            item = item.__func__
        if callable(item) and hasattr(item, "__code__"):
            seen.append(item)
            todo += [getattr(item, "__wrapped__", None), getattr(item, "plain", None)]
    return seen


def preload():
    """Import every module of npformer now: a lazy import made later from the learner's call
    would read npformer's files, which the hook refuses."""
    import importlib
    import pkgutil

    import npformer
    for info in pkgutil.walk_packages(npformer.__path__, "npformer."):
        if info.name.startswith(("npformer.cli", "npformer.interop")) or info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except Exception:                      # noqa: BLE001 - an optional extra that is not installed
            pass


# (id of a module, name) -> (npformer's function there, the stand-in the learner's code receives)
_STAND_INS = {}


class _GuardedModule(types.ModuleType):
    """An npformer module holding a graded function. Read from the learner's own line
    (``from npformer.t03_softmax import softmax_backward`` at the top of their file), that
    name gives a stand-in that refuses when called, not npformer's function: the patching
    replaces every binding of npformer's function by the learner's, the learner's binding
    too, which would make their code call itself until Python's recursion limit says only
    "RecursionError"."""

    def __getattribute__(self, name):
        value = super().__getattribute__(name)
        found = _STAND_INS.get((id(self), name))
        if found is not None and value is found[0] and _RULES is not None:
            caller = sys._getframe(1).f_code.co_filename
            if _under(os.path.realpath(caller), _RULES.workspace):
                return found[1]
        return value


def _stand_in(qualname):
    def refusing(*args, **kwargs):
        _refuse(f"your code called npformer's own {qualname}")
    refusing.__name__ = refusing.__qualname__ = qualname.rpartition(".")[2]
    return refusing


def _guard_module_name(path, qualname):
    """The stand-in for a module-level function (a method is read from its class, which the
    patching changes in place: a binding taken early is npformer's guarded function itself)."""
    import inspect

    from ..testing.patching import resolve
    module, owner, name = resolve(path)
    if owner is not module or not isinstance(module, types.ModuleType):
        return
    if type(module) is types.ModuleType:
        module.__class__ = _GuardedModule
    _STAND_INS[(id(module), name)] = (inspect.getattr_static(module, name), _stand_in(qualname))


def install(workspace_dir, scratch_dir, graded):
    """Guard the graded functions (``"t03_softmax.softmax_backward"`` paths) and start the hook;
    returns the paths that could not be guarded (a closure)."""
    global _RULES
    # hypothesis caches the constants it reads from local source files in its storage
    # directory, by default .hypothesis in the working directory: here the scratch directory,
    # new for every exercise (so each process parsed npformer's files again, about 1.8 CPU
    # seconds) and writable by the learner's code (which could plant constants that steer the
    # draws). The folder above holds the scratch directories of one grading run, and the hook
    # refuses the learner's writes there.
    os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY",
                          os.path.join(os.path.dirname(os.path.realpath(scratch_dir)), "hypothesis"))
    preload()
    unguarded = []
    for path in graded:
        qualname = path.split(".", 1)[1] if "." in path else path
        for original in _originals("npformer." + path):
            code = _guarded_code(original, qualname)
            if code is None:
                unguarded.append(path)
            else:
                original.__code__ = code
        _guard_module_name("npformer." + path, qualname)
    _RULES = _Rules(workspace_dir, scratch_dir)
    sys.addaudithook(_hook)
    return unguarded
