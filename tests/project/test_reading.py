"""What a reader of the concept files relies on: each header says which of its functions have
fast twins and how to watch the plain ones run, docstrings come first in every function, and
the article's symbols keep one meaning (the RoPE base is not its angle θ)."""
import ast
import inspect
import re
from pathlib import Path

import pytest

import npformer
from npformer.core.track import twins

PACKAGE = Path(npformer.__file__).resolve().parent
CONCEPT_FILES = sorted(PACKAGE.glob("t[0-9][0-9]_*.py"))
READ_FILES = CONCEPT_FILES + [PACKAGE / "gpt.py"]


def marked_twins(path):
    """The names of the functions of ``path`` decorated with @fast_twin."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
            and any(getattr(d, "id", None) == "fast_twin" for d in node.decorator_list)}


def test_the_concept_files_are_numbered_in_order():
    # the tutorial's eighteen, then the optimiser (19) and ALiBi (21); 20 is the training task
    numbers = [int(p.name[1:3]) for p in CONCEPT_FILES]
    assert numbers == list(range(1, 20)) + [21]


@pytest.mark.parametrize("path", CONCEPT_FILES, ids=lambda p: p.stem)
def test_each_header_names_its_fast_twins_and_how_the_plain_ones_run(path):
    header = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    marked = marked_twins(path)
    if not marked:
        assert "No fast twins" in header
        return
    named = set(re.findall(r"``(\w+)``", header.split("Fast twin")[1]))
    assert marked <= named, f"not named in the header: {sorted(marked - named)}"
    assert 'npformer.track("fast")' in header and "print" in header
    fast_file = re.search(r"``npformer/fast/(\w+)\.py``", header).group(1)
    registered = {key.rsplit(".", 1)[1] for key, (_, fast) in twins().items()
                  if key.startswith(f"npformer.{path.stem}.")
                  and fast.__module__ == f"npformer.fast.{fast_file}"}
    assert registered == marked                      # the file it names holds every twin


@pytest.mark.parametrize("path", READ_FILES, ids=lambda p: p.stem)
def test_no_comment_sits_between_a_def_and_its_docstring(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and ast.get_docstring(node):
            between = lines[node.lineno:node.body[0].lineno - 1]
            assert not [line for line in between if line.strip().startswith("#")], \
                f"{path.name}:{node.lineno} {node.name}"


def test_rope_names_its_base_apart_from_the_angle():
    from npformer import Rotary
    assert list(inspect.signature(Rotary).parameters)[:2] == ["head_dim", "base"]
    rope = Rotary(4, base=100.0)
    # θ = p w_c with w_c = base^(-2c / D_rot): at position 3 the pairs turn by 3 and 3 / 10
    assert rope.angles([3])[0].tolist() == pytest.approx([3.0, 0.3])


def test_the_dense_ffn_and_swiglu_take_x_alone():
    from npformer import FFN, SwiGLU
    for ffn in (FFN, SwiGLU):
        assert list(inspect.signature(ffn.forward).parameters) == ["self", "x"]
