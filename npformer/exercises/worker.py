"""The learner's process: their functions patched into npformer, computing arrays on request.

    worker.main([WORKSPACE, EXERCISE, "--requests", R, "--replies", W,
                 (--together), (--timeout S), (--stack FILE)])

Run in a process forked for it by the judge's ``nursery`` (the judge, ``runner``, never runs
the learner's code itself). Here the guard is installed (npformer's own graded functions refuse the learner's
code, see ``guard``), the learner's files are loaded, and then each request read from fd R is
answered on fd W (``wire``'s frames: arrays and JSON, never pickles):

- ``result``: the component's reference run with the learner's functions in place on one
  example: its output, one gradient per float input, the error raised, what the backward wrote
  into (``Subject.result``);
- ``output`` / ``gradients``: one call of the forward, or of the backward, on given arrays;
- ``case``: a gradient-check case built from its name, size and seed (``problem.evaluate``);
- ``claim``: one of the exercise's claims: its facts, for a claim made of two halves (training:
  the answers to the held-out prompts; a bias gradient that must be None: what was returned; a
  call that must raise: what it raised), else the arrays of its assertions (``asserted``, see
  ``remote``); ``finish``: what changed in this process's engine, and the end.

Every answer carries the refusals the guard made since the last one; a refusal ends the
answering. Nothing here decides a verdict: the judge compares what it receives with its own
reference.
"""
from __future__ import annotations

import faulthandler
import os
import re
import sys
import time
import traceback

from . import catalog, wire

SHAPE_WORDS = ("matmul", "not aligned", "could not be broadcast", "mismatch in its core dimension")


def describe(error, workspace_dir):
    """A JSON-ready account of an exception: where in the learner's files, what, and a hint."""
    where = line = None
    for frame in traceback.extract_tb(error.__traceback__):
        if os.path.dirname(os.path.abspath(frame.filename)) == os.path.abspath(workspace_dir):
            where, line = f"{os.path.basename(frame.filename)}:{frame.lineno} in {frame.name}", frame.line
    if isinstance(error, SyntaxError) and error.filename:
        where, line = f"{os.path.basename(error.filename)}:{error.lineno}", (error.text or "").strip()
    message = f"{type(error).__name__}: {error}"
    stub = re.match(r"exercise (\d+)", str(error)) if isinstance(error, NotImplementedError) else None
    hint = None
    if any(word in str(error) for word in SHAPE_WORDS):
        hint = ("a shape mismatch: check each transpose (.T, .swapaxes(-1, -2)) and keepdims=True "
                "on sums and means")
    return {"where": where, "line": (line or "")[:300] or None, "message": message[:500],
            "stub": int(stub.group(1)) if stub else None, "hint": hint}


def learner_patches(workspace, specs):
    """{"npformer.<module>.<qualname>": the learner's function} for "file.py:qualname" specs."""
    from .learner import learner_functions
    by_file = {}
    for spec in specs:
        file, qualname = spec.split(":")
        by_file.setdefault(file, []).append(qualname)
    patches = {}
    for file, qualnames in by_file.items():
        path = workspace.path(file)
        with open(path, encoding="utf-8") as f:
            source = f.read()
        module = "npformer." + file[:-3].replace("/", ".")
        patches.update(learner_functions(source, module, qualnames, path))
    return patches


def specs_to_judge(workspace, exercise, together):
    """The learner's functions this run patches in: the exercise's, or (``together``) those of
    every exercise of the workspace that the training task builds on."""
    if not together:
        return exercise.functions(workspace.forward)
    names = set(exercise.builds_on) | {exercise.name}
    return [spec for e in workspace.exercises if e.name in names for spec in e.functions(workspace.forward)]


ENGINE = ("npformer.testing", "npformer.exercises", "numpy", "builtins")


def _contents(value):
    """What a container of the engine holds, by identity (a table of tolerances edited in place
    is a changed engine too)."""
    if isinstance(value, dict):
        return tuple((k, id(v)) for k, v in list(value.items()))
    if isinstance(value, (list, set, frozenset)):
        return tuple(sorted(id(v) for v in value)) if isinstance(value, (set, frozenset)) else \
            tuple(id(v) for v in value)
    return None


def fingerprint():
    """{(module, name): (object, code)} of the engine this process computes with: every
    module-level name of npformer.testing, npformer.exercises and numpy's top level, and the
    methods of their classes; the learner's code must leave it as it found it (the arrays it
    sends are the engine's work, not a stand-in's)."""
    from . import guard
    seen = {}
    for module_name, module in list(sys.modules.items()):
        if module is None or not any(module_name == m or module_name.startswith(m + ".") for m in ENGINE[:2]) \
                and module_name not in ENGINE[2:]:
            continue
        for name, value in list(vars(module).items()):
            if module_name == "builtins" and name.startswith("_"):
                continue                       # _ is the last value at a prompt
            if module_name == guard.__name__ and name == "REFUSED":
                seen[(module_name, name)] = (value, None)       # it grows as refusals are made
                continue
            seen[(module_name, name)] = (value, getattr(value, "__code__", None) or _contents(value))
            if isinstance(value, type) and value.__module__ == module_name:
                for attr, member in list(vars(value).items()):
                    seen[(module_name, f"{name}.{attr}")] = (member, getattr(member, "__code__", None))
    return seen


def changed(before):
    """The names of the engine that differ from ``before`` (``fingerprint``'s)."""
    now = fingerprint()
    return sorted(f"{m}.{n}" for (m, n), (value, code) in before.items()
                  if (m, n) not in now or now[(m, n)][0] is not value or now[(m, n)][1] != code)


class _Server:
    """Answers one request at a time with the learner's functions patched in."""

    def __init__(self, exercise, workspace_dir):
        from ..testing.components import find
        from ..testing.example import Example
        from ..testing.problem import run
        from ..testing.subject import Subject, describe_error
        from . import claims
        from .asserted import recording
        from .judging import _run_claim
        self.recording = recording
        self.exercise, self.directory = exercise, workspace_dir
        self.Example, self.run, self.describe_error = Example, run, describe_error
        self.Subject, self.find, self.run_claim = Subject, find, _run_claim
        # the claims and their halves as they are before the learner's files run: code that
        # rebinds a claim's ``compute`` or edits the table later changes nothing here
        self.claims = [(check, getattr(check, "compute", None)) for _, check in claims.of(exercise.name)]

    def error(self, error):
        return wire.error_message(error, self.describe_error(error))

    def subject(self, request):
        name = request["component"]
        if name not in self.exercise.components:
            raise ValueError(f"component: {name!r} is not one of this exercise's")
        # the learner's functions are in place for the whole life of this process
        return self.Subject(name, *self.find(name).reference_pair(), name="yours")

    def result(self, request):
        subject = self.subject(request)
        example = self.Example(tuple(request["names"]), tuple(request["args"]), dict(request["options"]))
        values, error = subject.result(example)
        return {"values": values, "error": None if error is None else self.error(error),
                "protocol": None if subject.protocol is None else str(subject.protocol)}

    def output(self, request):
        try:
            out = self.subject(request).output(tuple(request["args"]), dict(request["options"]))
            return {"value": _arrays(out)}
        except Exception as error:             # noqa: BLE001 - the learner's code raised
            return {"error": self.error(error)}

    def gradients(self, request):
        try:
            found = self.subject(request).gradients(tuple(request["args"]), dict(request["options"]),
                                                    request["d_out"])
            return {"value": None if found is None else tuple(_arrays(g) for g in found)}
        except Exception as error:             # noqa: BLE001 - the learner's code raised
            return {"error": self.error(error)}

    def case(self, request):
        import numpy as np

        from ..testing.cases import CASES
        case, size, seed = request["case"], request["size"], request["seed"]
        if not any(case == name and size in sizes for name, sizes in self.exercise.checks):
            raise ValueError(f"case: {case!r} at size {size!r} is not one of this exercise's")

        def build():
            return CASES[case](np.random.default_rng(size if seed is None else seed + size), size)
        result = self.run(build, request["upstream"], request["repeat"])
        return {"outputs": {k: _arrays(v) for k, v in result.outputs.items()},
                "grads": {k: _arrays(v) for k, v in result.grads.items()},
                "error": None if result.error is None else self.error(result.error),
                "upstream": result.upstream, "params": list(result.params),
                "protocol": None if result.protocol is None else str(result.protocol)}

    def claim(self, request):
        check, compute = self.claims[request["index"]]
        if compute is not None:                # a claim in two halves: only the facts go back
            import numpy as np

            import npformer
            try:
                with np.errstate(all="ignore"):
                    return {"computed": compute(npformer)}
            except Exception as error:        # noqa: BLE001 - the learner's code raised
                return {"error": self.error(error)}
        records = []
        with self.recording(check, records):
            ok, detail, error = self.run_claim(check, {})
        return {"ok": bool(ok), "detail": None if detail is None else str(detail)[:2000],
                "error": None if error is None else self.error(error), "asserted": records}


def _replaced(patches):
    """[(npformer's object, the learner's function)] of the module-level functions patched."""
    from ..testing.patching import resolve
    swaps = []
    for path, function in patches.items():
        _, owner, name = resolve(path)
        if not isinstance(owner, type):       # a method is looked up on its class
            swaps.append((getattr(owner, name), function))
    return swaps


def _namespaces(patches):
    """The learner's modules (the globals of their functions, through the wrappers npformer
    puts on a Module's backward)."""
    import inspect
    found = {}
    for function in patches.values():
        space = getattr(inspect.unwrap(function), "__globals__", None)
        if space is not None:
            found[id(space)] = space
    return list(found.values())


def _rebind(spaces, swaps):
    """In the learner's modules, every name (or table entry) still bound to npformer's version of
    a patched function now names the learner's: their TiedHead.backward calls their own
    linear_backward, imported from t02_linear, when their files are judged together."""
    def swapped(value):
        for original, function in swaps:
            if value is original:
                return function
            if isinstance(value, tuple) and any(item is original for item in value):
                return tuple(function if item is original else item for item in value)
        return value
    for space in spaces:
        for key, value in list(space.items()):
            if isinstance(value, dict) and key != "__builtins__":
                for entry_key, entry in list(value.items()):
                    value[entry_key] = swapped(entry)
            else:
                space[key] = swapped(value)


class _Clock:
    """The learner's time: ``timeout`` seconds of computing (loading their files, answering),
    not counting the waits for the judge's next request. A second before it is used up, the
    stack goes to ``stack`` (where the grader reads where their code was) and the process ends."""

    def __init__(self, timeout, stack):
        self.left = None if not timeout else timeout - 1.0
        self.file = open(stack, "w", encoding="utf-8") if self.left is not None else None
        self.began = None

    def __enter__(self):
        if self.left is not None:
            self.began = time.monotonic()
            faulthandler.dump_traceback_later(max(self.left, 0.1), exit=True, file=self.file)

    def __exit__(self, *_):
        if self.left is not None:
            faulthandler.cancel_dump_traceback_later()
            self.left = self.left - (time.monotonic() - self.began)
        return False


def _arrays(value):
    """What a forward or backward returned, as arrays (a tuple of them stays a tuple)."""
    import numpy as np
    if value is None:
        return None
    if isinstance(value, tuple):
        return tuple(_arrays(v) for v in value)
    array = np.asarray(value)
    if array.dtype.kind not in wire.KINDS:
        raise TypeError(f"returned a {type(value).__name__}, not an array of numbers")
    return array


def _serve(requests, replies, answers, clock, news, wire_functions, refused_error):
    """Answer the judge's requests, each within the learner's time, until it says finish, the
    pipe closes, or the guard stops the learner's code (``refused_error``, taken before their
    files ran)."""
    send, receive, pack_error = wire_functions
    while True:
        request = receive(requests)
        if request is None or request.get("op") == "finish":
            break
        try:
            with clock:
                answer = answers[request["op"]](request)
        except refused_error:
            answer = {"stopped": True}
        except Exception as error:             # noqa: BLE001 - a request this process cannot answer
            answer = {"failed": pack_error(error, f"{type(error).__name__}: {error}")}
        answer["refused"] = news()
        try:
            send(replies, answer)
        except TypeError as error:             # what came back is not arrays
            send(replies, {"failed": pack_error(error, f"your code returned {error}"), "refused": news()})
        if answer.get("stopped"):
            break


def main(argv=None):
    """Serve the judge's requests until it says finish (or closes the pipe). Exit code 0."""
    argv = sys.argv[1:] if argv is None else argv
    directory, name = argv[:2]
    clock = _Clock(float(argv[argv.index("--timeout") + 1]) if "--timeout" in argv else None,
                   argv[argv.index("--stack") + 1] if "--stack" in argv else "stack.txt")
    requests = int(argv[argv.index("--requests") + 1])
    replies = int(argv[argv.index("--replies") + 1])
    together = "--together" in argv
    # held here, before the learner's code runs: it may rebind the module's names
    send, receive, pack_error = wire.send, wire.receive, wire.error_message
    from . import guard
    from .workspace import load_workspace
    workspace, exercise = load_workspace(directory), catalog.find(name)
    specs = specs_to_judge(workspace, exercise, together)
    # together too: each exercise's functions are the learner's, so npformer's own are refused
    graded = [catalog.module_path(s) for s in specs]
    unguarded = guard.install(workspace.directory, os.getcwd(), graded)
    refused = guard.REFUSED
    told = 0

    def news():
        nonlocal told
        lines = [str(line)[:500] for line in refused[told:]]
        told = len(refused)
        return lines
    # the engine this process answers with, taken before the learner's files run
    server = _Server(exercise, workspace.directory)
    answers = {"result": server.result, "output": server.output, "gradients": server.gradients,
               "case": server.case, "claim": server.claim}
    from ..testing.patching import patched
    before = fingerprint()
    hello = {"ok": True}
    patches = {}
    try:
        with clock:
            patches = learner_patches(workspace, specs)
    except guard.Refused:
        hello = {"ok": False, "stopped": True}
    except Exception as error:           # their file does not even run: say where
        hello = {"ok": False, "import_failed": describe(error, workspace.directory)}
    engine = changed(before)              # what the learner's files did as they loaded
    in_place = patched(patches)
    swaps = _replaced(patches)
    try:
        with clock:
            in_place.__enter__()
            _rebind(_namespaces(patches), swaps)
    except guard.Refused:
        hello = {"ok": False, "stopped": True}
    before = fingerprint()                # the patches put the learner's functions in its slots
    send(replies, {**hello, "refused": news(), "unguarded": unguarded})
    if hello["ok"]:
        _serve(requests, replies, answers, clock, news, (send, receive, pack_error), guard.Refused)
    engine = sorted(set(engine) | set(changed(before)))
    send(replies, {"engine_changed": engine, "refused": news(), "finished": True})
    return 0

