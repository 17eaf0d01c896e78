"""The npformer a learner's process runs against: the hand-out build and each exercise's dependencies.

A learner's process never holds npformer's own version of a function it is graded on, not in
memory and not in a file it can open. So it does not import the installed npformer. It imports
the *hand-out build* (``write_build``): a copy of the package in which the body of every
function any exercise asks for is a stub, as in a workspace, and without the parts that hold
those functions in another form: the fast track, ``gpt.py`` (the whole model on one screen),
the catalogue of mistakes (each entry quotes the right line it edits), and the command line,
pictures, interop and worked examples, which grading does not need.

An exercise judged alone runs the learner's functions for that exercise and npformer's own
everywhere else (softmax inside attention, attention inside a block). Those other functions
reach the learner's process as compiled code (``dependencies``, built in the judge from the
installed npformer) and take the place of their stubs (``put_in_place``). What is graded is
never among them, so no path from the learner's process leads to its reference.
"""
from __future__ import annotations

import compileall
import inspect
import marshal
import os
import shutil

from . import catalog
from .stubs import cut

LEFT_OUT = ("fast", "gpt.py", "cli", "pictures", "worked.py", "__main__.py")
NO_FAST_TRACK = ('"""Not in the hand-out build: no fast twin is registered, so every function runs its '
                 'plain body."""\n')
SPECS = "specs"                  # the mistakes beside them become empty catalogues, the facts stubs


def graded_functions():
    """Every "file.py:qualname" some exercise asks a learner to write, backward or forward."""
    return tuple(sorted({address for e in catalog.EXERCISES for address in e.backward + e.forward}))


def by_file(addresses):
    """{file: [qualname, ...]} of "file.py:qualname" addresses."""
    found = {}
    for address in addresses:
        file, qualname = address.split(":")
        found.setdefault(file, []).append(qualname)
    return found


def library_dir():
    """The directory of the installed npformer package (the judge's, never the learner's)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _stub_message(qualname):
    return (f"exercise: npformer's own {qualname} is not part of the grading build; "
            f"the exercise that asks for it runs yours")


def write_build(directory):
    """Write the hand-out build into ``directory``/npformer (``directory`` must not exist);
    returns ``directory``, the path to put first on the learner's process's ``sys.path``."""
    source = library_dir()
    target = os.path.join(directory, "npformer")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")

    def skip(folder, names):
        inside = os.path.relpath(folder, source)
        left = {n for n in names if inside == "." and n in LEFT_OUT}
        return left | set(ignore(folder, names))
    shutil.copytree(source, target, ignore=skip)
    os.mkdir(os.path.join(target, "fast"))                 # the package imports it: an empty one
    with open(os.path.join(target, "fast", "__init__.py"), "w", encoding="utf-8") as f:
        f.write(NO_FAST_TRACK)
    for file, qualnames in by_file(graded_functions()).items():
        with open(os.path.join(source, file), encoding="utf-8") as f:
            text = cut(f.read(), {q: _stub_message(q) for q in qualnames}, hints="none")
        with open(os.path.join(target, file), "w", encoding="utf-8") as f:
            f.write(text)
    for file, qualnames in judges_own().items():
        with open(os.path.join(source, file), encoding="utf-8") as f:
            text = cut(f.read(), {q: "the judge's own, not in a learner's process" for q in qualnames}, hints="none")
        with open(os.path.join(target, file), "w", encoding="utf-8") as f:
            f.write(text)
    for name in os.listdir(os.path.join(target, SPECS)):
        if name.endswith(".json"):
            with open(os.path.join(target, SPECS, name), "w", encoding="utf-8") as f:
                f.write("[]\n")
    # compiled once here: the learner's process reads the build from a read-only view
    compileall.compile_dir(target, quiet=1)
    for folder, _, files in os.walk(directory):        # the sandbox's user reads it, whoever wrote it
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
    return directory


_SHARED = {}


def shared_build():
    """The hand-out build of this process, written when first asked for into a private
    temporary folder and removed when the process that wrote it ends."""
    if "path" not in _SHARED:
        import atexit
        import tempfile
        root = tempfile.mkdtemp(prefix="npformer-build-")
        owner = os.getpid()
        atexit.register(lambda: os.getpid() == owner and shutil.rmtree(root, ignore_errors=True))
        _SHARED["path"] = write_build(os.path.join(root, "build"))
    return _SHARED["path"]


def judges_own():
    """{"specs/t04_attention.py": [qualname, ...]}: what of each spec computes what code under
    test must give (its facts' checks, its conventions' variants, its oracles). A learner's
    process runs none of them: the build holds them as stubs."""
    from .. import specs
    found = [p.check for checks in specs.PROPERTIES.values() for p in checks]
    found += [getattr(variant, "func", variant) for known in specs.CONVENTIONS.values()   # a partial's function
              for _, variant in known if variant is not None]
    found += list(specs.ORACLES)
    cut_out = {}
    for function in found:
        top = function.__qualname__.split(".")[0]
        if top == "<lambda>" or not function.__module__.startswith(specs.__name__ + "."):
            continue
        file = function.__module__[len(ROOT) + 1:].replace(".", "/") + ".py"
        cut_out.setdefault(file, set()).add(top)
    return {file: sorted(names) for file, names in cut_out.items()}


ROOT = __name__.split(".")[0]


# -- the dependencies of one exercise ------------------------------------------------------------
_CODE = {}


def _code_objects(code, prefix=""):
    """{qualname: code object} of the functions and methods defined in a module's code."""
    found = {}
    for const in code.co_consts:
        if inspect.iscode(const) and not const.co_name.startswith("<"):
            name = prefix + const.co_name
            found[name] = const
            found.update(_code_objects(const, name + "."))
    return found


def _compiled(file):
    """{qualname: code object} of npformer's own ``file``, compiled once per process."""
    if file not in _CODE:
        path = os.path.join(library_dir(), file)
        with open(path, encoding="utf-8") as f:
            module = compile(f.read(), f"npformer/{file}", "exec", dont_inherit=True)
        _CODE[file] = _code_objects(module)
    return _CODE[file]


def dependencies(graded):
    """The compiled bodies of every exercise function but those in ``graded`` ("file.py:qualname"
    addresses, the learner's own in this run), as bytes for ``put_in_place``."""
    wanted = [address for address in graded_functions() if address not in set(graded)]
    table = {}
    for file, qualnames in by_file(wanted).items():
        compiled = _compiled(file)
        for qualname in qualnames:
            table[f"{file}:{qualname}"] = compiled[qualname]
    return marshal.dumps(table)


def _function(address):
    """The function object of the build loaded in this process that ``address`` names."""
    import importlib
    file, qualname = address.split(":")
    owner = importlib.import_module("npformer." + file[:-3].replace("/", "."))
    for part in qualname.split("."):
        owner = inspect.getattr_static(owner, part) if isinstance(owner, type) else getattr(owner, part)
    owner = getattr(owner, "__func__", owner)           # a staticmethod or classmethod
    return inspect.unwrap(owner)


def put_in_place(blob):
    """In the learner's process: each stub of the build named in ``blob`` (``dependencies``'s)
    runs npformer's own body from now on. The function objects stay the same, so every module
    that imported one, and every table that holds one, runs the body too."""
    for address, code in marshal.loads(blob).items():
        function = _function(address)
        if code.co_freevars != function.__code__.co_freevars:
            raise TypeError(f"{address}: its body needs other free variables than its stub")
        function.__code__ = code
