"""Bad invocations: each ends with its exit code and one line on stderr, never a traceback.

The table holds every fault the CLI was found to mishandle (a traceback, a silent
acceptance, lost work) and the usual suspects around them. Placeholders:
{run} a finished built-in run, {trun} a finished --text run, {text} its text file,
{file} a regular file, {old} a copy of a first-layout checkpoint, and damaged copies.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from npformer.cli import COMMANDS, main

TINY = ["--no-progress", "--d-model", "16", "--layers", "1", "--heads", "2", "--batch-size", "8"]
FIRST_LAYOUT = Path(__file__).resolve().parents[1] / "data" / "checkpoint_v1_reverse"


def _current(directory, name):
    folder = json.loads((directory / "checkpoint.json").read_text())["folder"]
    return directory / folder / name


def _edit_json(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    text = root / "notes.txt"
    text.write_text("退货运费由谁承担？质量问题由商家承担。" * 20, encoding="utf-8")
    (root / "file.txt").write_text("just a file")
    (root / "latin1").write_bytes("def f(x):\n    return x          # caf\u00e9\n".encode("latin-1"))
    os.mkfifo(root / "fifo")
    with open(root / "big.txt", "wb") as f:         # sparse: 17 MiB of size, no disk used
        f.truncate(17 * 2 ** 20)
    assert main(["train", "--data", "reverse", "--steps", "5", "--out", str(root / "run"), *TINY]) == 0
    assert main(["train", "--text", str(text), "--seq-len", "16", "--steps", "30", "--out",
                 str(root / "trun"), *TINY]) == 0
    damaged = {
        "edited_config": lambda d: _edit_json(_current(d, "config.json"),
                                              lambda c: c["model"].update(n_heads=1)),
        "reordered_tokenizer": lambda d: _edit_json(_current(d, "tokenizer.json"),
                                                    lambda t: t.update(chars=t["chars"][::-1])),
        "bad_state": lambda d: _current(d, "state.json").write_text('{"step": '),
    }
    for name, damage in damaged.items():
        shutil.copytree(root / "run", root / name)
        damage(root / name)
    old = {"old": None,
           "old_step_5000": lambda d: _edit_json(d / "state.json", lambda s: s.update(step=5000)),
           "old_ffn": lambda d: _edit_json(d / "config.json", lambda c: c["model"].update(ffn_hidden=12)),
           "old_float16": lambda d: _edit_json(d / "config.json", lambda c: c.update(dtype="float16")),
           "old_bad_state": lambda d: (d / "state.json").write_text("[1, 2")}
    for name, damage in old.items():
        shutil.copytree(FIRST_LAYOUT, root / name)
        if damage:
            damage(root / name)
    changed = root / "changed.txt"
    changed.write_text(text.read_text(encoding="utf-8"), encoding="utf-8")
    assert main(["train", "--text", str(changed), "--seq-len", "16", "--steps", "3", "--out",
                 str(root / "changed_run"), *TINY]) == 0
    changed.write_text(text.read_text(encoding="utf-8")[::-1], encoding="utf-8")
    return root


# /proc refuses a new folder to root when asked; to another user, its mode says so before asking
REFUSED_BY_PROC = r"cannot (create /proc/npformer-nowhere \(|write in /proc \(permission denied\)$)"

# (command line, exit code, pattern the one stderr line must match)
BAD = [
    # a checkpoint is never overwritten silently; paths are checked before any work
    ("demo --out {run}", 2, r"--out: .*run already holds a checkpoint; .*--force"),
    ("train --out {run}", 2, r"--out: .*already holds a checkpoint; add --resume .*--force"),
    ("train --out {file}", 2, r"--out: .*file.txt exists and is not a directory"),
    ("train --out {file}/sub", 2, r"--out: cannot create .*file.txt is a file"),
    ("train --plot {file} --out {tmp}/a", 2, r"--plot: .*file.txt exists and is not a directory"),
    ("demo --plot {file}/sub", 2, r"--plot: cannot create"),
    ("demo --out {file}", 2, r"--out: .*exists and is not a directory"),
    # resume keeps its settings; --steps may grow
    ("train --resume --out {run} --lr 0.01", 2, r"--lr 0.01: the run in .* was made with --lr 0.003; "
                                                 r"a resumed run keeps its settings"),
    ("train --resume --out {run} --d-model 32", 2, r"--d-model 32: .*made with --d-model 16"),
    ("train --resume --out {run} --data add", 2, r"--data add: .*made with --data reverse"),
    ("train --resume --out {run} --steps 2", 2, r"--steps 2: the run in .* is already at step 5"),
    ("train --resume --out {tmp}/nowhere", 2, r"--resume: .*nowhere holds no checkpoint"),
    ("train --resume --force --out {run}", 2, r"--force: cannot be combined with --resume"),
    # numbers that cannot be used
    ("train --seed -1 --out {tmp}/a", 2, r"argument --seed: expected an integer >= 0 .*got -1"),
    ("demo --seed -1", 2, r"argument --seed: expected an integer >= 0"),
    ("tour --seed -1", 2, r"argument --seed: expected an integer >= 0"),
    ("generate {run} --prompt 12> --seed -1", 2, r"argument --seed: expected an integer >= 0"),
    ("train --lr nan --out {tmp}/a", 2, r"argument --lr: expected a finite number > 0, got nan"),
    ("train --lr inf --out {tmp}/a", 2, r"argument --lr: expected a finite number > 0, got inf"),
    ("train --lr 0 --out {tmp}/a", 2, r"argument --lr: expected a finite number > 0, got 0"),
    ("train --steps 0 --out {tmp}/a", 2, r"argument --steps: expected an integer >= 1, got 0"),
    ("train --steps ten --out {tmp}/a", 2, r"argument --steps: expected a whole number of steps, got 'ten'"),
    ("train --steps 1e23 --out {tmp}/a", 2, r"argument --steps: expected at most 10,000,000 steps \(days of "
                                           r"training on a CPU; .*\), got 1e23 \(see npformer train --help\)$"),
    ("train --steps 100000000000000000000000 --out {tmp}/a", 2, r"argument --steps: expected at most 10,000,000"),
    ("demo --steps 1e23", 2, r"argument --steps: expected at most 10,000,000 steps"),
    ("train --steps 2.5 --out {tmp}/a", 2, r"argument --steps: expected a whole number of steps, got '2.5'"),
    ("train --eval-every -1 --out {tmp}/a", 2, r"argument --eval-every: expected an integer >= 0"),
    ("train --threads -1 --out {tmp}/a", 2, r"argument --threads: expected an integer >= 0"),
    ("train --micro-batches 3 --batch-size 8 --out {tmp}/a", 2, r"--micro-batches: 3 does not divide"),
    ("train --d-model 10 --heads 3 --out {tmp}/a", 2, r"--heads: the width --d-model 10 must be divisible"),
    ("train --d-model 100000 --layers 64 --out {tmp}/a", 2, r"need about [\d,.]+ GiB of memory, but"),
    ("gradcheck --tol nan", 2, r"argument --tol: expected a finite number > 0, got nan"),
    ("gradcheck --tol -1", 2, r"argument --tol: expected a finite number > 0"),
    ("tour --heads 3", 2, r"--heads: width 8 must be divisible by the number of heads, got 3"),
    # the data
    ("train --text {text} --seq-len 1000 --out {tmp}/a", 2, r"--seq-len: 1000 is longer than the text "
                                                            r"allows: .* use --seq-len \d+ or less"),
    ("train --seq-len 16 --out {tmp}/a", 2, r"--seq-len: only used with --text"),
    ("train --text {tmp}/missing.txt --out {tmp}/a", 2, r"--text: file .*missing.txt does not exist"),
    ("train --text {tmp} --out {tmp}/a", 2, r"--text: .* is a directory"),
    ("train --text {text} --vocab-size 5 --out {tmp}/a", 2, r"--vocab-size: .* too small"),
    ("train --resume --out {changed_run}", 2, r"--text: .*changed.txt has changed since the checkpoint "
                                              r"in .* was saved"),
    # checkpoints whose files do not belong together, or are damaged
    ("generate {edited_config} --prompt 12>", 2, r"config.json: its contents differ from the SHA-256"),
    ("generate {reordered_tokenizer} --prompt 12>", 2, r"tokenizer.json: its contents differ"),
    ("train --resume --out {bad_state}", 2, r"state.json: its contents differ"),
    ("generate {old_step_5000} --prompt 12>", 2, r"state.json: step 5000 of a 3-step run"),
    ("generate {old_ffn} --prompt 12>", 2, r"model.npz: 'blocks.0.ffn.up.weight' is float32\[8, 32\], "
                                           r"expected float32\[8, 12\] \(from .*config.json\)"),
    ("generate {old_float16} --prompt 12>", 2, r"config.json: dtype float16, expected float32 or float64"),
    ("train --resume --out {old_bad_state}", 2, r"state.json: not valid JSON"),
    ("generate {tmp}/nope --prompt 12>", 2, r"checkpoint directory .*nope does not exist"),
    # generation
    ("generate {run} --prompt 12> --temperature nan", 2, r"argument --temperature: expected a finite "
                                                         r"number >= 0"),
    ("generate {run} --prompt 12> --temperature -1", 2, r"argument --temperature"),
    ("generate {run} --prompt 12> --temperature 0 --top-k 5", 2, r"--top-k/--top-p: .* --temperature 0 "
                                                                 r"is greedy"),
    ("generate {run} --prompt 12> --top-k 0", 2, r"argument --top-k: expected an integer >= 1"),
    ("generate {run} --prompt 12> --top-p 1.5", 2, r"argument --top-p: expected a number in \(0, 1\]"),
    ("generate {run} --prompt 12> --top-p nan", 2, r"argument --top-p"),
    ("generate {run} --prompt 12> --max-new-tokens 0", 2, r"argument --max-new-tokens"),
    ("generate {run} --prompt ''", 2, r"--prompt: expected a non-empty prompt"),
    ("generate {run} --prompt hello", 2, r"--prompt: .*not in the vocabulary"),
    ("generate {run} --prompt 1234567890123", 2, r"--prompt: 14 tokens leave no room in the model's 12"),
    # every file argument: a regular file, bounded; every directory: one that can be written.
    # /dev/null stands for any device (reading it ends at once, so a regression fails here
    # instead of hanging or filling the memory); written files are tried on a FIFO, which a
    # regression would replace in the test's own folder, never a device of the machine
    ("train --text /dev/null --out {tmp}/a", 2, r"--text: /dev/null is a character device, "
                                                r"expected a UTF-8 text file$"),
    ("train --text {big} --out {tmp}/a", 2, r"--text: .*big.txt holds 17.0 MiB, more than the "
                                            r"16.0 MiB npformer reads from one; .*a part of it$"),
    ("train --text '' --out {tmp}/a", 2, r"--text: expected a UTF-8 text file, got an empty path ''$"),
    ("train --out '' --data add", 2, r"--out: expected a directory, got an empty path ''$"),
    ("train --out /proc/npformer-nowhere --data add", 2, "--out: " + REFUSED_BY_PROC),
    ("train --plot '' --out {tmp}/a", 2, r"--plot: expected a directory, got an empty path ''$"),
    ("train --plot /proc/npformer-nowhere --out {tmp}/a", 2, "--plot: " + REFUSED_BY_PROC),
    ("demo --out ''", 2, r"--out: expected a directory, got an empty path ''$"),
    ("demo --plot ''", 2, r"--plot: expected a directory, got an empty path ''$"),
    ("tour --plot ''", 2, r"--plot: expected a directory, got an empty path ''$"),
    ("tour --plot /proc/npformer-nowhere", 2, "--plot: " + REFUSED_BY_PROC),
    ("examples 02 --plot ''", 2, r"--plot: expected a directory, got an empty path ''$"),
    ("examples --dir ''", 2, r"--dir: expected the worked_examples folder, got an empty path ''$"),
    ("generate '' --prompt 12>", 2, r"checkpoint: expected a checkpoint directory, got an empty path"),
    ("generate /dev/null --prompt 12>", 2, r"checkpoint directory /dev/null is not a directory"),
    ("conform --component softmax {file}:f", 2, r"file.txt: cannot be loaded: SyntaxError"),
    ("conform --component softmax {latin1}:f", 2, r"latin1: not text in UTF-8 .*save it as UTF-8$"),
    ("conform --component softmax /dev/null:f", 2, r"FILE.py:FUNCTION: /dev/null is a character "
                                                   r"device, expected a Python source file$"),
    ("conform --component softmax {tmp}/missing.py:f", 2, r"FILE.py:FUNCTION: file .*missing.py "
                                                          r"does not exist$"),
    ("exercises ''", 2, r"DIR: expected a directory, got an empty path ''$"),
    ("exercises /proc/npformer-nowhere", 2, "DIR: " + REFUSED_BY_PROC),
    ("exercises {tmp}/ws --course {fifo}", 2, r"--course: .*fifo is a FIFO \(named pipe\), expected "
                                              r"a regular file to write$"),
    ("exercises {tmp}/ws --course ''", 2, r"--course: expected a file to write, got an empty path"),
    ("grade ''", 2, r"DIR: expected a workspace directory, got an empty path ''$"),
    ("grade {tmp} --course /dev/null --out {tmp}/book", 2, r"--course: /dev/null is a character "
                                                           r"device, expected a course file"),
    ("grade {tmp} --course {file} --out ''", 2, r"--out: expected the folder to write the gradebook"),
    # arguments no sub-command takes are named by the sub-command that was given
    ("tour extra", 2, r"^npformer tour: error: unrecognized arguments: extra \(see npformer tour --help\)$"),
    ("gradcheck --tol 1e-6 extra", 2, r"^npformer gradcheck: error: unrecognized arguments: extra"),
    # a diverging run: numpy's warnings are part of its one line, not printed before it
    ("train --data reverse --lr 1e6 --steps 30 --out {tmp}/diverged " + " ".join(TINY), 1,
     r"training diverged and stopped before updating the weights \(numpy warned on the way: "
     r"overflow encountered in \w+.*\); no checkpoint was saved in .*; try a lower learning rate "
     r"\(lr=1e\+06\)$"),
    # other commands
    ("examples no-such-example", 2, r"no worked example matches 'no-such-example'"),
    ("examples --dir {tmp}", 2, r"--dir: expected a folder holding NN_name.py"),
    ("frobnicate", 2, r"invalid choice: 'frobnicate'"),
    # not errors, but said on stderr in one line instead of silently
    ("generate {trun} --prompt 退货运费由谁承担？ --max-new-tokens 30", 0,
     r"note: 1 of 1 continuations stopped at the model's limit of 16 positions"),
    ("train --data reverse --steps 2 --threads 64 --out {tmp}/threads " + " ".join(TINY), 0,
     r"warning: --threads 64 is more than the \d+ cores here; using \d+"),
]


@pytest.mark.parametrize("command, code, pattern", BAD, ids=[c for c, _, _ in BAD])
def test_bad_invocation(capsys, places, tmp_path, command, code, pattern):
    import re
    import shlex
    names = {p.name: str(p) for p in places.iterdir()}
    argv = shlex.split(command.format(tmp=tmp_path, file=names["file.txt"], text=names["notes.txt"],
                                      big=names["big.txt"], **names))
    result = main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert result == code, err
    assert "Traceback" not in err and len(lines) == 1, err
    # the command that failed, by name (argparse alone names only the program)
    assert lines[0].startswith(f"npformer {argv[0]}: " if argv[0] in COMMANDS else "npformer: "), lines[0]
    assert re.search(pattern, lines[0]), lines[0]


def test_a_file_npformer_writes_is_never_a_device_or_a_pipe(tmp_path):
    from npformer.core.fileio import write_bytes
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ValueError, match=r"fifo: a FIFO \(named pipe\), expected a regular file to write"):
        write_bytes(tmp_path / "fifo", b"data")
    assert (tmp_path / "fifo").is_fifo() and os.listdir(tmp_path) == ["fifo"]


def test_a_diverging_run_prints_its_warnings_only_inside_its_message(tmp_path):
    """In a fresh process, as a user runs it: stderr is the one line, no numpy warning above."""
    ran = subprocess.run([sys.executable, "-m", "npformer", "train", "--data", "reverse", "--lr", "1e6",
                          "--steps", "30", "--out", str(tmp_path / "run"), *TINY],
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 1
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1 and "RuntimeWarning" not in ran.stderr, ran.stderr
    assert "numpy warned on the way: overflow encountered" in lines[0]
