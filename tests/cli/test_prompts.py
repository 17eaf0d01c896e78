"""What a newcomer meets after training: the prompt each built-in set expects, a note for a
prompt that cannot belong to it, answers that end by themselves, and the notes of sampling."""
import re
import shlex

import pytest

from npformer import load_checkpoint
from npformer.cli import main
from npformer.cli.datasets import BUILTIN, PROMPT_FORMATS, builtin, prompt_note


def _run(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("name", BUILTIN)
def test_every_prompt_of_a_builtin_set_fits_its_format(name):
    train, heldout, _ = builtin(name)
    form = PROMPT_FORMATS[name]
    assert all(form.pattern.fullmatch(e.prompt) for e in train + heldout)
    assert form.pattern.fullmatch(form.example)
    if name.startswith("aftersales"):          # the example to try is one of the set's questions
        assert form.example in {e.prompt for e in train + heldout}


@pytest.mark.parametrize("name, fits, does_not_fit", [
    ("reverse", "00912>", ["12345", "1234>", "123456>", "1234a>"]),
    ("add", "07+35=", ["7+35=", "07+35", "107+35=", "07-35="]),
    ("aftersales-en", "mug broke by a drop. warranty?", ["hello", "mug broke by a drop."]),
    ("aftersales", "水杯坏了，原因是进水，保修吗？", ["你好", "水杯坏了"]),
])
def test_a_prompt_outside_the_form_gets_a_note(name, fits, does_not_fit):
    assert prompt_note({"data": name}, fits) is None
    for prompt in does_not_fit:
        note = prompt_note({"data": name}, prompt)
        assert repr(prompt) in note and repr(PROMPT_FORMATS[name].example) in note
    assert prompt_note({"data": "text", "path": "notes.txt"}, "anything") is None


def test_generate_help_shows_every_builtin_prompt(capsys):
    assert main(["generate", "--help"]) == 0
    out = capsys.readouterr().out
    for name, form in PROMPT_FORMATS.items():
        assert re.search(rf"^  {re.escape(name)} +'{re.escape(form.example)}'", out, re.M), name


@pytest.fixture(scope="module")
def reverse_run(tmp_path_factory):
    """A reverse model trained well enough to answer: the default model, 300 steps."""
    out_dir = str(tmp_path_factory.mktemp("reverse") / "run")
    assert main(["train", "--data", "reverse", "--steps", "300", "--no-progress",
                 "--out", out_dir]) == 0
    return out_dir


@pytest.mark.slow
def test_train_ends_with_a_prompt_to_try_and_the_answer_ends_by_itself(capsys, reverse_run):
    code, out, err = _run(capsys, "train", "--out", reverse_run, "--resume", "--steps", "301",
                          "--no-progress")
    assert code == 0, err
    last = out.strip().splitlines()[-1]
    assert last == f"try: npformer generate {shlex.quote(reverse_run)} --prompt '12345>'"
    code, out, err = _run(capsys, "generate", reverse_run, "--prompt", "12345>", "--prompt", "90210>")
    assert code == 0 and out.splitlines() == ["12345> -> 54321", "90210> -> 01209"]
    assert err == ""                           # the answers ended with <eos>: nothing was cut


@pytest.mark.slow
def test_a_prompt_the_task_never_saw_is_answered_with_a_note(capsys, reverse_run):
    code, out, err = _run(capsys, "generate", reverse_run, "--prompt", "12345")
    assert code == 0 and out.startswith("12345 -> ")
    lines = err.strip().splitlines()
    assert lines[0].startswith("npformer generate: note: --prompt '12345' is not a prompt of reverse")
    assert "'12345>'" in lines[0]


@pytest.mark.slow
def test_top_k_without_a_temperature_says_once_it_samples_at_temperature_one(capsys, reverse_run):
    code, out, err = _run(capsys, "generate", reverse_run, "--prompt", "12345>", "--prompt", "11111>",
                          "--top-k", "3", "--top-p", "0.9")
    assert code == 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "temperature 1" in lines[0] and "--top-k/--top-p" in lines[0]
    code, out, err = _run(capsys, "generate", reverse_run, "--prompt", "12345>", "--top-k", "3",
                          "--temperature", "0.5")
    assert code == 0 and err == ""


def test_a_byte_order_mark_is_no_character(capsys, tmp_path):
    text = "退货运费由谁承担？质量问题由商家承担。" * 20
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    out_dir = str(tmp_path / "run")
    code, out, err = _run(capsys, "train", "--text", str(path), "--steps", "2", "--seq-len", "16",
                          "--out", out_dir, "--no-progress", "--d-model", "16", "--layers", "1")
    assert code == 0, err
    _, tokenizer, _ = load_checkpoint(out_dir)
    assert "\ufeff" not in tokenizer.chars
    assert sorted(tokenizer.chars) == sorted(set(text))
    assert out.strip().splitlines()[-1] == (f"try: npformer generate {shlex.quote(out_dir)} "
                                            f"--prompt '{text[:12]}'")    # the text's opening


def test_the_training_page_shows_every_builtin_prompt():
    from pathlib import Path
    readme = (Path(__file__).resolve().parents[2] / "docs" / "training-and-files.md").read_text(encoding="utf-8")
    for name, form in PROMPT_FORMATS.items():
        assert re.search(rf"^\| `{re.escape(name)}` \|.*`{re.escape(form.example)}`", readme, re.M), name
