"""The demo / train / generate commands: they work, and bad input is one line and exit code 2."""
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from npformer.cli import main

CLI = [sys.executable, "-c", "import sys; from npformer.cli import main; sys.exit(main())"]
FAST = ["--no-progress", "--d-model", "16", "--layers", "1", "--heads", "2", "--batch-size", "8"]


def _run(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _assert_usage_error(capsys, argv, pattern):
    code, out, err = _run(capsys, *argv)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert re.search(pattern, lines[0]), lines[0]


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("退货运费由谁承担？质量问题由商家承担。" * 20, encoding="utf-8")
    return path


def test_empty_text_file(capsys, tmp_path):
    (tmp_path / "empty.txt").write_text("")
    _assert_usage_error(capsys, ["train", "--text", str(tmp_path / "empty.txt"), "--out",
                                 str(tmp_path / "o")], r"--text: .*empty")


def test_non_utf8_text_file(capsys, tmp_path):
    (tmp_path / "gbk.txt").write_bytes("退货运费".encode("gbk"))
    _assert_usage_error(capsys, ["train", "--text", str(tmp_path / "gbk.txt"), "--out",
                                 str(tmp_path / "o")], r"not UTF-8 text \(byte 0x")


def test_missing_text_file(capsys, tmp_path):
    _assert_usage_error(capsys, ["train", "--text", str(tmp_path / "nope.txt")], r"does not exist")


@pytest.mark.parametrize("steps", ["0", "-5"])
def test_steps_must_be_positive(capsys, tmp_path, steps):
    _assert_usage_error(capsys, ["train", "--steps", steps, "--out", str(tmp_path)],
                        r"--steps: expected a positive number, got " + steps)


def test_model_too_small_for_the_vocabulary(capsys, tmp_path, text_file):
    _assert_usage_error(capsys, ["train", "--text", str(text_file), "--vocab-size", "5",
                                 "--out", str(tmp_path / "o")], r"--vocab-size: .* too small")


def test_heads_must_divide_width(capsys, tmp_path):
    _assert_usage_error(capsys, ["train", "--d-model", "10", "--heads", "4", "--out",
                                 str(tmp_path / "o")], r"n_heads")


def test_checkpoint_directory_that_does_not_exist(capsys, tmp_path):
    _assert_usage_error(capsys, ["generate", str(tmp_path / "nope"), "--prompt", "退货"],
                        r"checkpoint directory .*nope does not exist")


def test_plot_without_matplotlib_says_how_to_install(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)       # import matplotlib -> ImportError
    _assert_usage_error(capsys, ["demo", "--plot", str(tmp_path)], r"pip install .*npformer\[plot\]")


def test_train_generate_round_trip_and_prompt_errors(capsys, tmp_path, text_file):
    out_dir = str(tmp_path / "run")
    code, out, err = _run(capsys, "train", "--text", str(text_file), "--steps", "5", "--seq-len", "16",
                          "--out", out_dir, *FAST)
    assert code == 0 and "trained 5 steps" in out and os.path.exists(os.path.join(out_dir, "model.npz"))
    code, out, _ = _run(capsys, "generate", out_dir, "--prompt", "退货", "--max-new-tokens", "5")
    assert code == 0 and out.startswith("退货")
    _assert_usage_error(capsys, ["generate", out_dir, "--prompt", "hello"],
                        r"--prompt: .*not in the vocabulary: 'helo'")
    _assert_usage_error(capsys, ["generate", out_dir, "--prompt", "退货", "--top-p", "1.5"], r"--top-p")
    _assert_usage_error(capsys, ["train", "--text", str(text_file), "--out", out_dir],
                        r"already holds a checkpoint")


def test_subprocess_exit_code_and_no_traceback(tmp_path):
    done = subprocess.run(CLI + ["train", "--steps", "0", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == "npformer train: error: --steps: expected a positive number, got 0"


@pytest.mark.slow
def test_ctrl_c_saves_a_checkpoint_and_exits_cleanly(tmp_path):
    out_dir = tmp_path / "run"
    proc = subprocess.Popen(CLI + ["train", "--data", "reverse", "--steps", "100000", "--out",
                                   str(out_dir), "--checkpoint-every", "5"] + FAST,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not (out_dir / "state.json").exists() and time.time() < deadline:   # training runs
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted at step" in out
    from npformer.checkpoint import load_checkpoint
    _, _, state = load_checkpoint(out_dir)
    assert 0 < state["step"] < 100000


@pytest.mark.slow
def test_train_builtin_with_plots_and_resume(capsys, tmp_path):
    out_dir, plots = str(tmp_path / "run"), str(tmp_path / "plots")
    code, out, err = _run(capsys, "train", "--data", "reverse", "--steps", "30", "--out", out_dir,
                          "--plot", plots, "--eval-every", "10", *FAST)
    assert code == 0 and "heldout_accuracy" in out
    assert sorted(os.listdir(plots)) == ["attention_0.png", "loss.png"]
    for name in os.listdir(plots):
        assert open(os.path.join(plots, name), "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    code, out, _ = _run(capsys, "train", "--out", out_dir, "--resume", "--no-progress")
    assert code == 0 and "resuming" in out and "trained 30 steps" in out


@pytest.mark.slow
def test_demo_answers_heldout_questions(capsys, tmp_path):
    started = time.perf_counter()
    code, out, err = _run(capsys, "demo", "--no-progress", "--plot", str(tmp_path))
    seconds = time.perf_counter() - started
    assert code == 0, err
    correct, total = map(int, re.search(r"(\d+)/(\d+) exact answers", out).groups())
    assert correct / total >= 0.95
    # the same question gets different answers in different contexts
    assert "耳机有质量问题，退货运费谁出？ -> 商家承担运费" in out
    assert "耳机不想要了，退货运费谁出？ -> 买家承担运费" in out
    assert any(shade in out for shade in "▒▓█")                 # the terminal heat map
    assert {"loss.png", "attention_0.png"} <= set(os.listdir(tmp_path))
    assert seconds < 90
