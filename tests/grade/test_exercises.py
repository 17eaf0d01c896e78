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
from npformer.exercises.catalog import exercise_named, holding, select
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
    assert len(workspace.files) == 18 and "t13_kv_cache.py" not in workspace.files   # its cache: forward only
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
    attention = exercise_named("attention")
    assert stub.startswith(f"exercise {attention.number:02d} ({attention.title}; tutorial part 1, ")
    assert "§6" in stub and stub.endswith("write attention_backward")
    with open(workspace.path("README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert f"| {attention.number:02d} | attention" in readme


def _read(workspace, name):
    with open(workspace.path(name), encoding="utf-8") as f:
        return f.read()


def test_hint_tiers(tmp_path):
    tiers = {tier: write_workspace(tmp_path / tier, only=["linear", "norm"], hints=tier)
             for tier in ("none", "shapes", "formulas")}
    linear = {tier: _read(w, "t02_linear.py") for tier, w in tiers.items()}
    norm = {tier: _read(w, "t08_norm.py") for tier, w in tiers.items()}
    # the backward formulas: only with "formulas"
    assert "d_x = d_y W^T" in linear["formulas"] and "d_x = d_y W^T" not in linear["shapes"]
    assert "xhat * mean(d_xhat * xhat)" in norm["formulas"]
    assert "xhat * mean(d_xhat * xhat)" not in norm["shapes"] + norm["none"]
    # the forward line each backward step undoes: with "shapes" and "formulas", not with "none"
    assert "# forward: y = x @ W + b" in linear["shapes"] and "# forward: y = x @ W + b" not in linear["none"]
    # the stubbed function's docstring: whole with "shapes", its first line only with "none"
    assert '"""-> (d_x, d_weight, d_bias); d_bias is None without a bias."""' in linear["shapes"]
    assert '"""d_x from d_out; adds dW and db into the parameters\' gradients."""' in linear["none"]
    for tier in tiers:                                      # the forward stays
        assert "xhat = (x - mean) * rstd" in norm[tier]


def test_every_forward_hint_is_a_whole_statement(tmp_path):
    """A hint names the forward line a backward step undoes; cut at an ellipsis it read
    "# forward: x = " (the embeddings' backward)."""
    import re
    handed = write_workspace(tmp_path / "ws")
    hints = [line.strip() for name in handed.files for line in _read(handed, name).splitlines()
             if line.strip().startswith("# forward:")]
    assert len(hints) > 20
    for hint in hints:
        statement = hint[len("# forward:"):].strip()
        assert statement and not re.search(r"[=+*/(,-]$", statement), hint
    assert "# forward: x = ... + P[positions]" in hints and "# forward: x = scale * E[ids] + ..." in hints


def test_no_hint_tier_gives_the_answer_away(tmp_path):
    """No line of a body the learner writes appears in the shapes tier (the default)."""
    key = write_workspace(tmp_path / "key", solutions=True)
    handed = write_workspace(tmp_path / "ws")
    for name in handed.files:
        answer, handed_source = _functions(key.path(name)), _read(handed, name)
        stubs = _functions(handed.path(name))
        for spec in (s for e in handed.exercises for s in e.functions() if s.startswith(name + ":")):
            qualname = spec.split(":")[1]
            node = answer[qualname]
            stubbed = ast.get_source_segment(handed_source, stubs[qualname])
            body = node.body[1:] if isinstance(node.body[0], ast.Expr) else node.body
            for statement in body:
                text = ast.unparse(statement).split("\n")[0]
                if len(text) > 12:
                    assert text not in stubbed, f"{spec}: {text}"


def test_the_workspace_readme_names_no_path_to_the_solutions(tmp_path):
    workspace = write_workspace(tmp_path / "ws", only=["attention"])
    readme = _read(workspace, "README.md")
    assert library_dir() not in readme and "site-packages" not in readme
    assert "graded alone" in readme and "hints: each function to write keeps its docstring" in readme


def test_forward_exercises_and_selection(tmp_path):
    workspace = write_workspace(tmp_path / "ws", only=["kv-cache", "linear"], forward=True)
    stubs = {q for q, node in _functions(workspace.path("t02_linear.py")).items() if _stub_text(node)}
    assert stubs == {"linear_forward", "linear_backward", "Linear.backward"}
    assert [e.name for e in select(start="flash")] == ["flash", "optim", "train", "alibi"]
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
    outcomes = grade(tmp_path / "ws", out=lines.append, say=_quiet)
    assert len(outcomes) == len(EXERCISES)
    statuses = {o.exercise.name: o.status for o in outcomes}
    assert statuses.pop("train") == "blocked" and set(statuses.values()) == {"not started"}
    assert f"progress: 0 of {len(EXERCISES)} done" in lines[-2]
    first = EXERCISES[0]           # the tutorial's first: token embeddings
    assert lines[-1] == (f"next: {first.backward[0].split(':')[1]} in {first.files()[0]} "
                         f"(exercise {first.label})")


def test_grader_refuses_a_directory_that_is_not_a_workspace(tmp_path, capsys):
    with pytest.raises(WorkspaceError, match="not an npformer exercise workspace"):
        grade(tmp_path, out=_quiet, say=_quiet)
    (tmp_path / MARKER).write_text(json.dumps({"kind": "something else"}))
    with pytest.raises(WorkspaceError, match="is not the marker"):
        grade(tmp_path, out=_quiet, say=_quiet)
    assert main(["grade", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "npformer grade: error: DIR:" in err


def test_a_syntax_error_is_reported_against_its_exercise_only(tmp_path):
    workspace = write_workspace(tmp_path / "ws", only=["softmax", "linear"], solutions=True)
    path = workspace.path("t02_linear.py")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace("d_x = d_out @ weight.T", "d_x = d_out @ weight.T)"))
    line = text[:text.index("d_x = d_out @ weight.T")].count("\n") + 1
    outcomes = {o.exercise.name: o for o in grade(workspace.directory, out=_quiet, say=_quiet)}
    assert outcomes["linear"].status == "failing"
    assert outcomes["linear"].lines[0].startswith(f"t02_linear.py:{line}: SyntaxError")
    assert outcomes["softmax"].status == "done"         # judged alone: linear.py is not its file


def test_an_exercise_is_judged_alone_whatever_the_others_hold(tmp_path):
    workspace = write_workspace(tmp_path / "ws", only=["softmax", "attention"], solutions=True)
    only_softmax = write_workspace(tmp_path / "stub", only=["softmax"])
    with open(workspace.path("t03_softmax.py"), "w", encoding="utf-8") as f:
        f.write(_read(only_softmax, "t03_softmax.py"))         # softmax back to its stub
    outcomes = {o.exercise.name: o for o in grade(workspace.directory, out=_quiet, say=_quiet)}
    assert outcomes["softmax"].status == "not started"
    assert outcomes["attention"].status == "done"      # npformer's softmax runs in its place


def test_training_waits_for_the_exercises_it_runs(tmp_path):
    workspace = write_workspace(tmp_path / "ws", only=["softmax", "train"], solutions=True)
    only_softmax = write_workspace(tmp_path / "stub", only=["softmax"])
    with open(workspace.path("t03_softmax.py"), "w", encoding="utf-8") as f:
        f.write(_read(only_softmax, "t03_softmax.py"))
    lines = []
    outcome = grade(workspace.directory, ["train"], out=lines.append, say=_quiet)[0]
    softmax, train = exercise_named("softmax"), exercise_named("train")
    assert outcome.status == "blocked" and outcome.lines == [f"blocked by {softmax.label} (not started)"]
    assert lines[-1] == f"next: {train.label} is blocked by {softmax.label} (not started)"


def test_cli_hands_out_and_grades(tmp_path, capsys):
    assert main(["exercises", str(tmp_path / "ws"), "--only", "softmax,rope"]) == 0
    assert "wrote 2 files for 2 exercises" in capsys.readouterr().out
    rope = exercise_named("rope")
    assert main(["grade", str(tmp_path / "ws"), str(rope.number)]) == 1
    assert rope.label in capsys.readouterr().out
    assert main(["exercises", str(tmp_path / "ws")]) == 2
    assert main(["grade", str(tmp_path / "ws"), "linear"]) == 2
    assert "not part of this workspace" in capsys.readouterr().err


def test_one_order_the_exercise_for_a_concept_file_has_its_number():
    """The exercise for tNN_x.py is numbered NN (for an exercise over two files, like the KV
    cache with the grouped attention it decodes with, the later file's number), and they are
    listed in that order; the one outside the tNN files (training) holds 20, a number no
    concept file has."""
    import re
    numbers = [e.number for e in EXERCISES]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    concept = [e for e in EXERCISES if any(re.match(r"t\d\d_", f) for f in e.files(True))]
    for exercise in concept:
        assert exercise.number == max(int(f[1:3]) for f in exercise.files(True) if re.match(r"t\d\d_", f))
    assert [(e.number, e.name) for e in EXERCISES if e not in concept] == [(20, "train")]
    assert [e.name for e in EXERCISES[:3]] == ["embedding", "linear", "softmax"]
    # the attention exercise holds multi-head attention too; a former name still finds it
    assert holding("t04_attention.py:MultiHeadAttention.backward") is exercise_named("attention") is exercise_named("multi-head")
    assert holding("t16_cross_attention.py:CrossAttention.backward") is exercise_named("cross-attention")


@pytest.mark.parametrize("file, kernel", [("t18_flash_attention.py", "flash"), ("t21_alibi.py", "alibi")])
def test_loading_a_learners_file_leaves_the_packages_attention_kernels(file, kernel, tmp_path):
    # a learner's copy of a file that registers a kernel runs its module code when it is
    # loaded to be graded; the table a config reads must keep npformer's own kernel, or every
    # later model with attention="flash" would run the learner's (mistaken) code
    import npformer
    from npformer.exercises.learner import learner_module
    from npformer.t04_attention import ATTENTION_KERNELS
    own = ATTENTION_KERNELS[kernel]
    source = open(os.path.join(os.path.dirname(npformer.__file__), file), encoding="utf-8").read()
    shadow = learner_module(source, f"npformer.{file[:-3]}", str(tmp_path / file))
    assert getattr(shadow, own.__name__) is not own                    # the learner's own class
    assert ATTENTION_KERNELS[kernel] is own
