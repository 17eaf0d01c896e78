"""The hand-out build a learner's process runs against holds no exercise's reference.

Read as text, no file of the build holds the body of a function any exercise asks for, nor a
right line that a catalogued mistake edits. Loaded, every such function is a stub until the
compiled bodies of the other exercises are put in place, and then those run npformer's own
code, while the graded exercise's function stays a stub."""
import ast
import json
import os
import subprocess
import sys

from npformer.exercises import catalog
from npformer.exercises.grading_build import LEFT_OUT, dependencies, graded_functions, library_dir, shared_build
from npformer.exercises.stubs import body_span, functions_by_qualname

SIGNIFICANT = 30          # characters a line of code needs to say something of its own


def _body_lines(spec):
    """The significant lines of npformer's own body of ``spec`` ("file.py:qualname")."""
    file, qualname = spec.split(":")
    with open(os.path.join(library_dir(), file), encoding="utf-8") as f:
        lines = f.read().split("\n")
    first, last = body_span(lines, functions_by_qualname(ast.parse("\n".join(lines)))[qualname])
    return {line.strip() for line in lines[first:last + 1]
            if len(line.strip()) >= SIGNIFICANT and not line.strip().startswith(("#", '"""'))}


def _build_text():
    texts = {}
    for top, _, names in os.walk(os.path.join(shared_build(), "npformer")):
        for name in names:
            if name.endswith((".py", ".json")):
                with open(os.path.join(top, name), encoding="utf-8") as f:
                    texts[os.path.relpath(os.path.join(top, name), shared_build())] = f.read()
    return texts


def test_no_file_of_the_build_holds_a_graded_body():
    texts = _build_text()
    own = {spec: _body_lines(spec) for spec in graded_functions()}
    # a line a function shares with code no exercise asks for (plumbing, not an answer) may stay
    shared = set()
    for path, text in texts.items():
        for spec, lines in own.items():
            shared |= {line for line in lines if line in text}
    left = {line for line in shared if not any(line in t for t in _plain_rest())}
    assert not left, sorted(left)[:10]


def _plain_rest():
    """The text of npformer's own files with every graded function's body removed."""
    from npformer.exercises.stubs import cut
    from npformer.exercises.grading_build import by_file
    texts = []
    wanted = by_file(graded_functions())
    for top, folders, names in os.walk(library_dir()):
        folders[:] = [f for f in folders if f != "__pycache__"]
        inside = os.path.relpath(top, library_dir())
        if inside.split(os.sep)[0] in LEFT_OUT or inside.startswith(os.path.join("testing", "mistakes")):
            continue
        for name in names:
            path = os.path.relpath(os.path.join(top, name), library_dir())
            if name.endswith(".py") and path not in LEFT_OUT:
                with open(os.path.join(top, name), encoding="utf-8") as f:
                    text = f.read()
                if path in wanted:
                    text = cut(text, {q: "x" for q in wanted[path]}, hints="none")
                texts.append(text)
    return texts


def test_no_right_line_a_mistake_edits_is_in_the_build():
    texts = "\n".join(_build_text().values())
    folder = os.path.join(library_dir(), "specs")
    olds = [old for name in os.listdir(folder) if name.endswith(".json")
            for m in json.load(open(os.path.join(folder, name), encoding="utf-8"))
            for old in (m["old"] if isinstance(m["old"], list) else [m["old"]])]
    assert len(olds) > 100
    assert not [old for old in olds if len(old) >= SIGNIFICANT and old in texts and
                not any(old in t for t in _plain_rest())]


def test_the_parts_that_hold_functions_in_another_form_are_left_out():
    present = set(os.listdir(os.path.join(shared_build(), "npformer")))
    assert not present & {"gpt.py", "cli", "pictures", "worked.py"}
    fast = os.path.join(shared_build(), "npformer", "fast")          # an empty package: no twin
    assert [n for n in os.listdir(fast) if n.endswith(".py")] == ["__init__.py"] and "def " not in open(os.path.join(fast, "__init__.py")).read()
    folder = os.path.join(shared_build(), "npformer", "specs")
    catalogues = [n for n in os.listdir(folder) if n.endswith(".json")]
    assert len(catalogues) >= 18
    assert all(open(os.path.join(folder, n)).read().strip() == "[]" for n in catalogues)


PROGRAM = """
import sys, numpy as np
sys.path[:0] = [BUILD]
from npformer.exercises.grading_build import put_in_place
import npformer
from npformer.t03_softmax import SoftmaxCache
x = np.random.default_rng(0).standard_normal((2, 5))
y = np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True)
d_y = np.random.default_rng(1).standard_normal((2, 5))
def tried(f):
    try:
        return f()
    except NotImplementedError as error:
        return "stub: " + str(error)
print(tried(lambda: npformer.softmax_backward(d_y, SoftmaxCache(y, -1))))
put_in_place(open(BLOB, "rb").read())
print("rows sum to", abs(npformer.softmax_backward(d_y, SoftmaxCache(y, -1)).sum(axis=-1)).max())
q = x[None, None, :, :4]
print(tried(lambda: npformer.attention_forward(q, q, q)))
print(npformer.__file__)
"""


def test_the_compiled_bodies_of_the_other_exercises_run_and_the_graded_one_stays_a_stub(tmp_path):
    """Graded: attention. Before, softmax is a stub too; after, softmax runs npformer's own body
    (each gradient row sums to 0, as a softmax's must: a shift of the scores changes nothing) and
    attention is still a stub."""
    attention = catalog.exercise_named("attention").functions(forward=True)     # a --forward workspace
    blob = tmp_path / "deps"
    blob.write_bytes(dependencies(attention))
    program = PROGRAM.replace("BUILD", repr(shared_build())).replace("BLOB", repr(str(blob)))
    sites = [p for p in sys.path if p.endswith("-packages")]
    ran = subprocess.run([sys.executable, "-I", "-S", "-c", f"import sys; sys.path += {sites!r}\n" + program],
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[0].startswith("stub: exercise: npformer's own softmax_backward is not part of the grading build")
    assert lines[1].startswith("rows sum to") and float(lines[1].split()[-1]) < 1e-12, lines[1]
    assert lines[2].startswith("stub: exercise: npformer's own attention_forward"), lines[2]
    assert lines[3].startswith(shared_build())
