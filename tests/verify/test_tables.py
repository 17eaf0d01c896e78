"""The CLI's tables: columns that hold whatever the names, rows in the tutorial's order."""
import numpy as np

from npformer.specs import CASES
from npformer.cli import gradcheck as gradcheck_command
from npformer.cli import main


def test_examples_list_keeps_its_columns_with_a_long_name(capsys, tmp_path):
    long_name = "a_name_much_longer_than_any_column_was_planned_for"
    (tmp_path / "01_short.py").write_text('"""First summary."""\n', encoding="utf-8")
    (tmp_path / f"02_{long_name}.py").write_text('"""Second summary."""\n', encoding="utf-8")
    assert main(["examples", "--list", "--dir", str(tmp_path)]) == 0
    first, second = capsys.readouterr().out.splitlines()
    assert long_name in second
    assert first.index("First summary.") == second.index("Second summary.")


def test_gradcheck_prints_the_components_in_the_tutorials_order(monkeypatch):
    registered = ["relu", "softmax", "Linear", "Embedding", "cross_entropy"]   # not in that order
    monkeypatch.setattr(gradcheck_command, "CASES", {name: CASES[name] for name in registered})
    monkeypatch.setattr(gradcheck_command, "missing_cases", lambda: [])      # a registry of these five
    lines = []
    gradcheck_command.run_all(sizes=(0,), say=lines.append)
    rows = [line.split()[0] for line in lines[1:]]
    assert rows == ["Embedding", "Linear", "softmax", "relu", "cross_entropy"]
    widths = {line.index(line.split()[1]) + len(line.split()[1]) for line in lines[1:]}
    assert len(widths) == 1                   # the tensor counts end in one column


def test_the_rows_follow_the_concept_files_and_an_unknown_name_comes_last():
    order = gradcheck_command.in_tutorial_order(list(CASES) + ["SomethingNew"])
    assert order[0] == "Embedding" and order[-1] == "SomethingNew"
    for earlier, later in [("Linear", "softmax"), ("softmax", "MultiHeadAttention"),
                           ("MultiHeadAttention", "Rotary"), ("Rotary", "gelu"), ("gelu", "FFN"),
                           ("FFN", "LayerNorm"), ("LayerNorm", "PreNormBlock"),
                           ("PreNormBlock", "DecoderLM"), ("DecoderLM", "cross_entropy"),
                           ("cross_entropy", "MoE"), ("MoE", "Encoder"), ("Encoder", "CrossAttention"),
                           ("CrossAttention", "EncoderDecoder"), ("EncoderDecoder", "flash_attention"),
                           ("flash_attention", "alibi")]:
        assert order.index(earlier) < order.index(later), (earlier, later)
    assert np.all(np.isin(list(CASES), order))
