"""The learner's process: their functions in npformer's hand-out build, computing arrays on request.

Forked by the zygote inside the submission's sandbox. Its npformer is the hand-out build
(``grading_build``), in which every exercise's function is a stub. The judge's first message
says which exercise this is, which of the learner's functions to take (``addresses``) and carries
the compiled bodies of every other exercise's functions (``dependencies``), which take the
place of their stubs. Then the learner's files are loaded from the read-only submission,
their functions patched in, and each request read from the ``requests`` pipe is answered on
``replies`` (``channel``: arrays and JSON, never pickles):

- ``result``: the component's npformer code run with the learner's functions in place on one
  example: its output, one gradient per float input, the error raised, what the backward wrote
  into (``Subject.result``);
- ``output`` / ``gradients``: one call of the forward, or of the backward, on given arrays;
- ``case``: a gradient-check case built from its name, size and seed (``problem.run``);
- ``claim``: one of the exercise's claims: what its ``compute`` half returned, for a claim made
  of two halves, else every array its assertions were given (``computation.ClaimRun``);
  ``finish``: the end.

Nothing here decides a verdict: the judge compares what it receives with its own reference.
The first answer says only whether the learner's files load (and where they fail).
What the learner's code does besides computing (reading files, starting processes, opening
sockets) meets the sandbox's walls, not a check of ours.
"""
from __future__ import annotations

import faulthandler
import os
import re
import sys
import time
import traceback

from . import catalog, channel
from .walls.bubblewrap import SUBMISSION_AT

SHAPE_WORDS = ("matmul", "not aligned", "could not be broadcast", "mismatch in its core dimension")


def describe(error, directory):
    """A JSON-ready account of an exception: where in the learner's files, what, and a hint."""
    where = line = None
    for frame in traceback.extract_tb(error.__traceback__):
        if os.path.dirname(os.path.abspath(frame.filename)) == os.path.abspath(directory):
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


def learner_patches(directory, addresses):
    """{"npformer.<module>.<qualname>": the learner's function} for "file.py:qualname" addresses,
    read from the learner's files in ``directory`` (one flat folder)."""
    from .learner import learner_functions
    by_file = {}
    for address in addresses:
        file, qualname = address.split(":")
        by_file.setdefault(file, []).append(qualname)
    patches = {}
    for file, qualnames in by_file.items():
        path = os.path.join(directory, os.path.basename(file))
        with open(path, encoding="utf-8") as f:
            source = f.read()
        module = "npformer." + file[:-3].replace("/", ".")
        patches.update(learner_functions(source, module, qualnames, path))
    return patches


def addresses_to_judge(workspace, exercise, together):
    """The learner's functions a run patches in: the exercise's, or (``together``) those of
    every exercise of the workspace that the training task builds on."""
    if not together:
        return exercise.functions(workspace.forward)
    names = set(exercise.builds_on) | {exercise.name}
    return [address for e in workspace.exercises if e.name in names for address in e.functions(workspace.forward)]


class _Server:
    """Answers one request at a time with the learner's functions patched in."""

    def __init__(self, exercise):
        from ..testing.components import component_named
        from ..specs.example import Example
        from ..testing.computation import run_claim_program
        from ..testing.problem import run
        from ..testing.subject import Subject, describe_error
        from . import claim_verdicts
        self.exercise = exercise
        self.Example, self.run, self.describe_error = Example, run, describe_error
        self.Subject, self.component_named, self.run_claim_program = Subject, component_named, run_claim_program
        self.claims = [check for _, check in claim_verdicts.claims_of(exercise.name)]

    def error(self, error):
        return channel.error_message(error, self.describe_error(error))

    def subject(self, request):
        name = request["component"]
        if name not in self.exercise.components:
            raise ValueError(f"component: {name!r} is not one of this exercise's")
        return self.Subject(name, *self.component_named(name).reference_pair(), name="yours")

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
                "protocol": None if result.protocol is None else str(result.protocol)}

    def claim(self, request):
        import numpy as np

        import npformer
        with np.errstate(all="ignore"):
            ran = self.run_claim_program(self.claims[request["index"]], npformer)
        if ran.error is not None:
            return {"failed": self.error(ran.error)}
        return {"facts": ran.facts} if ran.facts is not None else {"arrays": ran.arrays}


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
    stack goes to the ``stack`` pipe (where the judge reads where their code was) and the
    process ends."""

    def __init__(self, timeout, stack):
        self.left = None if not timeout else timeout - 1.0
        self.file = os.fdopen(stack, "w", encoding="utf-8") if self.left is not None else None
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
    if array.dtype.kind not in channel.KINDS:
        raise TypeError(f"returned a {type(value).__name__}, not an array of numbers")
    return array


def _serve(requests, replies, answers, clock):
    """Answer the judge's requests, each within the learner's time, until it says finish or
    the pipe closes."""
    while True:
        request = channel.receive(requests)
        if request is None or request.get("op") == "finish":
            break
        try:
            with clock:
                answer = answers[request["op"]](request)
        except Exception as error:             # noqa: BLE001 - a request this process cannot answer
            answer = {"failed": channel.error_message(error, f"{type(error).__name__}: {error}")}
        try:
            channel.send(replies, answer)
        except TypeError as error:             # what came back is not arrays
            channel.send(replies, {"failed": channel.error_message(error, f"your code returned {error}")})


def main(requests, replies, stack):
    """Set up as the judge's first message says, then serve its requests. Exit code 0."""
    from . import grading_build
    from ..testing.patching import patched
    setup = channel.receive(requests)
    clock = _Clock(setup["timeout"], stack)
    grading_build.put_in_place(setup["dependencies"].tobytes())
    server = _Server(catalog.exercise_named(setup["exercise"]))
    answers = {"result": server.result, "output": server.output, "gradients": server.gradients,
               "case": server.case, "claim": server.claim}
    directory = setup.get("directory", SUBMISSION_AT)
    hello = {"import_failed": None}
    in_place = None                           # held: the patches stay for the life of this process
    try:
        with clock:
            patches = learner_patches(directory, setup["addresses"])
            swaps = _replaced(patches)        # npformer's objects, before the patches replace them
            in_place = patched(patches)
            in_place.__enter__()
            _rebind(_namespaces(patches), swaps)
    except Exception as error:                # noqa: BLE001 - their file does not even run: say where
        hello = {"import_failed": describe(error, directory)}
    channel.send(replies, hello)
    if hello["import_failed"] is None:
        _serve(requests, replies, answers, clock)
    sys.stdout.flush()
    del in_place
    return 0
