"""Handing out exercises: the workspace, its stubs, and what the grader decides without running."""
import ast
import json
import os

import pytest

from npformer.testing.cases import CASES
from npformer.cli import main
from npformer.exercises import EXERCISES
from npformer.exercises.workspace import WorkspaceError, load_workspace, write_workspace
from npformer.exercises.grader import grade
from npformer.exercises.catalog import select
from npformer.exercises.workspace import MARKER, library_dir


def _functions(path):
    """{qualname: FunctionDef} of a Python file."""
    found = {}

    def walk(body, prefix):
        for node in body:
            if isinstance(node, ast.FunctionDef):
                found[prefix + node.name] = node
            elif isinstance(node, ast.ClassDef):
                walk(node.body, f"{prefix}{node.name}.")
    with open(path, encoding="utf-8") as f:
        walk(ast.parse(f.read()).body, "")
    return found


def _stub_text(node):
    """The message of a body that is one ``raise NotImplementedError("...")``, else None."""
    body = node.body[1:] if isinstance(node.body[0], ast.Expr) else node.body
    if len(body) == 1 and isinstance(body[0], ast.Raise) and isinstance(body[0].exc, ast.Call) \
            and getattr(body[0].exc.func, "id", None) == "NotImplementedError":
        return body[0].exc.args[0].value
    return None


def _quiet(*lines):
    return None


def test_every_exercise_names_real_functions_and_cases():
    for exercise in EXERCISES:
        for spec in exercise.functions(forward=True):
            name, qualname = spec.split(":")
            assert qualname in _functions(os.path.join(library_dir(), name)), spec
        for case, sizes in exercise.checks:
            assert case in CASES and set(sizes) <= {0, 1, 2}, (exercise.name, case)


def test_workspace_is_the_plain_files_minus_the_bodies_to_write(tmp_path):
    workspace = write_workspace(tmp_path / "ws")
    to_write = {spec for e in workspace.exercises for spec in e.functions()}
    assert len(workspace.files) == 17 and "t13_kv_cache.py" not in workspace.files   # kv-cache: forward only
    for name in workspace.files:
        mine, library = _functions(workspace.path(name)), _functions(os.path.join(library_dir(), name))
        assert set(mine) == set(library)
        for qualname, node in library.items():
            if f"{name}:{qualname}" in to_write:
                assert _stub_text(mine[qualname]).startswith("exercise "), qualname
                assert ast.get_docstring(mine[qualname]) == ast.get_docstring(node)
            else:                          # untouched, apart from the @fast_twin decorator
                node.decorator_list = [d for d in node.decorator_list if getattr(d, "id", "") != "fast_twin"]
                assert ast.dump(mine[qualname]) == ast.dump(node), qualname
        with open(workspace.path(name), encoding="utf-8") as f:
            assert "fast_twin" not in f.read()


def test_stub_names_the_exercise_and_the_tutorial_section(tmp_path):
    workspace = write_workspace(tmp_path / "ws", only=["attention"])
    stub = _stub_text(_functions(workspace.path("t04_attention.py"))["attention_backward"])
    assert stub.startswith("exercise 05 (scaled dot-product attention; tutorial part 1, ")
    assert "§6" in stub and stub.endswith("write attention_backward")
    with open(workspace.path("README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert "| 05 | attention" in readme and "01 softmax" in readme      # what it builds on


def test_no_hints_hides_the_backward_formulas(tmp_path):
    hinted = write_workspace(tmp_path / "a", only=["linear", "norm"])
    bare = write_workspace(tmp_path / "b", only=["linear", "norm"], hints=False)
    for workspace, shown in ((hinted, True), (bare, False)):
        with open(workspace.path("t02_linear.py"), encoding="utf-8") as f:
            linear = f.read()
        with open(workspace.path("t08_norm.py"), encoding="utf-8") as f:
            norm = f.read()
        assert ("d_x = d_y W^T" in linear) is shown
        assert ("# forward: y = x @ W + b" in linear) is shown           # the body's scaffold
        assert ("d_x = rstd * (d_xhat - mean(d_xhat) - xhat * mean(d_xhat * xhat))" in norm) is shown
        assert "y = gamma * xhat + beta" in norm                         # the forward stays


def test_forward_exercises_and_selection(tmp_path):
    workspace = write_workspace(tmp_path / "ws", only=["kv-cache", "linear"], forward=True)
    stubs = {q for q, node in _functions(workspace.path("t02_linear.py")).items() if _stub_text(node)}
    assert stubs == {"linear_forward", "linear_backward", "Linear.backward"}
    assert [e.name for e in select(start="flash")] == ["flash", "train"]
    with pytest.raises(ValueError, match="only forward bodies"):
        select(only=["kv-cache"])
    with pytest.raises(ValueError, match="expected a name or number"):
        select(only=["nonsense"])


def test_an_existing_directory_is_never_overwritten(tmp_path):
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "t02_linear.py").write_text("my own work\n")
    with pytest.raises(WorkspaceError, match="never overwritten"):
        write_workspace(tmp_path / "ws")
    assert (tmp_path / "ws" / "t02_linear.py").read_text() == "my own work\n"
    assert os.listdir(tmp_path / "ws") == ["t02_linear.py"]
    (tmp_path / "empty").mkdir()
    assert load_workspace(write_workspace(tmp_path / "empty").directory).exercises


def test_untouched_workspace_grades_not_started(tmp_path):
    write_workspace(tmp_path / "ws")
    lines = []
    outcomes = grade(tmp_path / "ws", out=lines.append)
    assert len(outcomes) == len(EXERCISES) - 1                       # all but the forward-only one
    assert {o.status for o in outcomes} == {"not started"}
    assert "progress: 0 of 18 done" in lines[-1]


def test_grader_refuses_a_directory_that_is_not_a_workspace(tmp_path, capsys):
    with pytest.raises(WorkspaceError, match="not an npformer exercise workspace"):
        grade(tmp_path, out=_quiet)
    (tmp_path / MARKER).write_text(json.dumps({"kind": "something else"}))
    with pytest.raises(WorkspaceError, match="is not the marker"):
        grade(tmp_path, out=_quiet)
    assert main(["grade", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "npformer grade: error: DIR:" in err


def test_a_syntax_error_is_reported_against_its_exercise(tmp_path):
    workspace = write_workspace(tmp_path / "ws", only=["softmax", "linear"], solutions=True)
    path = workspace.path("t02_linear.py")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace("d_x = d_out @ weight.T", "d_x = d_out @ weight.T)"))
    line = text[:text.index("d_x = d_out @ weight.T")].count("\n") + 1
    outcomes = {o.exercise.name: o for o in grade(workspace.directory, out=_quiet)}
    assert outcomes["linear"].status == "failing"
    assert outcomes["linear"].lines[0].startswith(f"t02_linear.py:{line}: SyntaxError")
    assert outcomes["softmax"].status == "blocked"          # nothing imports while linear.py is broken
    assert "cannot import your files: t02_linear.py" in outcomes["softmax"].lines[0]


def test_an_exercise_waits_for_the_stubs_it_builds_on(tmp_path):
    workspace = write_workspace(tmp_path / "ws", only=["softmax", "attention"], solutions=True)
    only_softmax = write_workspace(tmp_path / "stub", only=["softmax"])
    with open(only_softmax.path("t03_softmax.py"), encoding="utf-8") as f:
        text = f.read()
    with open(workspace.path("t03_softmax.py"), "w", encoding="utf-8") as f:
        f.write(text)                                  # softmax back to its stub
    outcome = grade(workspace.directory, ["attention"], out=_quiet)[0]
    assert outcome.status == "blocked"
    assert outcome.lines == ["waiting for 01 softmax (softmax_backward still a stub)"]


def test_cli_hands_out_and_grades(tmp_path, capsys):
    assert main(["exercises", str(tmp_path / "ws"), "--only", "softmax,rope"]) == 0
    assert "wrote 2 files for 2 exercises" in capsys.readouterr().out
    assert main(["grade", str(tmp_path / "ws"), "7"]) == 1
    assert "07 rope" in capsys.readouterr().out
    assert main(["exercises", str(tmp_path / "ws")]) == 2
    assert main(["grade", str(tmp_path / "ws"), "linear"]) == 2
    assert "not part of this workspace" in capsys.readouterr().err
