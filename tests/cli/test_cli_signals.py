"""Stopping a run from outside: SIGTERM and SIGHUP save and resume bit for bit; kill -9 at
any moment leaves a whole checkpoint; a closed pipe and Ctrl-C end every command quietly."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from npformer.core import fileio
from npformer.checkpoints.checkpoint import checkpoint_exists, read_checkpoint
from npformer.cli import main
from npformer.training.data import ExampleSource, encode_examples, reverse_task
from npformer.t10_model import DecoderConfig, DecoderLM
from npformer.tokenizer import CharTokenizer
from npformer.training.loop import TrainConfig, train

CLI = [sys.executable, "-c", "import sys; from npformer.cli import main; sys.exit(main())"]
TINY = ["--no-progress", "--d-model", "16", "--layers", "1", "--heads", "2", "--batch-size", "8"]


def _wait_for(path, proc, seconds=60):
    deadline = time.time() + seconds
    while not path.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert path.exists(), proc.communicate()


def _arrays(directory):
    checkpoint = read_checkpoint(directory)
    return checkpoint.weights, checkpoint.state["history"]["loss"]


# The run in the subprocess is the CLI's, each step slowed by 10 ms (the numbers are untouched),
# so that the signal arrives mid-run however fast this machine computes and saves.
SLOWED_CLI = [sys.executable, "-c", "import sys, time; import npformer.training.loop as t; step = t.optimizer_step; "
              "t.optimizer_step = lambda *a: (time.sleep(0.01), step(*a))[1]; "
              "from npformer.cli import main; sys.exit(main())"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_save_and_resume_bit_for_bit(tmp_path, signum):
    run = ["train", "--data", "reverse", "--steps", "80", "--checkpoint-every", "20"] + TINY
    assert main(run + ["--out", str(tmp_path / "whole")]) == 0
    out_dir = tmp_path / "cut"
    proc = subprocess.Popen(SLOWED_CLI + run + ["--out", str(out_dir)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    _wait_for(out_dir / "checkpoint.json", proc)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    name = signal.Signals(signum).name
    assert "Traceback" not in err and f"stopped by {name} at step" in out
    stopped_at = read_checkpoint(out_dir).step
    assert 0 < stopped_at < 80
    assert main(["train", "--out", str(out_dir), "--resume", "--no-progress"]) == 0
    weights, loss = _arrays(out_dir)
    whole_weights, whole_loss = _arrays(tmp_path / "whole")
    assert loss == whole_loss
    for name in whole_weights:
        np.testing.assert_array_equal(weights[name], whole_weights[name])


# -- kill -9 while saving ---------------------------------------------------------------------
STEPS = 12


def _setup():
    tok = CharTokenizer.from_corpus("0123456789>")
    split = reverse_task(n_train=200, n_heldout=10, length=3, seed=0)
    source = ExampleSource(encode_examples(tok, split.train), tok.pad_id)
    config = DecoderConfig.gpt2(vocab_size=tok.vocab_size, d_model=8, n_heads=2, n_layers=1,
                                max_len=source.max_len)
    return DecoderLM(config, np.random.default_rng(0)), source, tok


def _train(out_dir, checkpoint_every, resume=False, on_step=None):
    model, source, tok = _setup()
    settings = TrainConfig(steps=STEPS, batch_size=8, lr=1e-2, seed=1, checkpoint_every=checkpoint_every)
    result = train(model, source, settings, tok, out_dir=out_dir, resume=resume, progress=False,
                   on_step=on_step)
    return model, result


def _fork_training(out_dir):
    """A child process that trains, saving every step; each file it writes takes 3 ms more,
    so that most of its time is spent inside saves on any file system. Returns its pid."""
    with threadpool_limits(limits=1):
        pid = os.fork()
    if pid:
        return pid
    try:
        write = fileio.write_bytes
        fileio.write_bytes = lambda path, data: (write(path, data), time.sleep(0.003))[0]
        _train(out_dir, checkpoint_every=1)
    finally:
        os._exit(0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_kill_9_at_random_moments_always_leaves_a_whole_checkpoint(tmp_path):
    reference, model_ref = {}, []                    # step -> weights of the uninterrupted run

    def remember(step, loss):
        reference[step] = {n: p.data.copy() for n, p in model_ref[0].named_parameters()}
    model, source, tok = _setup()
    model_ref.append(model)
    whole = train(model, source, TrainConfig(steps=STEPS, batch_size=8, lr=1e-2, seed=1), tok,
                  progress=False, on_step=remember)
    began = time.perf_counter()
    os.waitpid(_fork_training(tmp_path / "timed"), 0)
    duration = time.perf_counter() - began           # how long the child takes, unharmed
    moments = np.random.default_rng(2024).uniform(0.05, 0.8, size=20) * duration
    seen_steps, mid_save = set(), 0
    for i, moment in enumerate(moments):
        out_dir = tmp_path / f"run{i}"
        pid = _fork_training(out_dir)
        time.sleep(moment)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        if not checkpoint_exists(out_dir):               # killed before the first save finished
            continue
        mid_save += len(os.listdir(out_dir)) > 2         # a half-written save was left behind
        checkpoint = read_checkpoint(out_dir)            # every file whole, all of them agreeing
        step = checkpoint.step
        seen_steps.add(step)
        for name, saved in checkpoint.weights.items():
            np.testing.assert_array_equal(saved, reference[step][name])
        resumed, result = _train(out_dir, checkpoint_every=0, resume=True)
        assert result.history.loss == whole.history.loss
        for (name, p), (_, q) in zip(resumed.named_parameters(), model.named_parameters()):
            np.testing.assert_array_equal(p.data, q.data)
        assert len(os.listdir(out_dir)) == 2             # leftovers of the killed save cleaned up
    assert len(seen_steps) >= 5                          # the kills landed at many different steps
    assert mid_save >= 5                                 # ... and often in the middle of a save


# -- a closed pipe and Ctrl-C, for the commands that are not training --------------------------
# The environment a user's shell gives: output to a pipe is buffered (a PYTHONUNBUFFERED set where
# the tests run would hide what a buffer does to a closed pipe and to the first line's arrival).
USERS_ENVIRONMENT = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}


@pytest.mark.parametrize("command", [["tour"], ["examples", "--list"], ["gradcheck", "--tol", "1e-6"]])
def test_a_closed_pipe_ends_quietly(command):
    proc = subprocess.Popen(CLI + command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=USERS_ENVIRONMENT)
    proc.stdout.close()                                  # the reader has gone, like `| head -0`
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert proc.returncode == 141 and err == "", err


@pytest.mark.parametrize("command", [["gradcheck"], ["examples"]])
def test_ctrl_c_ends_quietly(command):
    # a shell's background job starts with SIGINT ignored, and Python then keeps it ignored
    proc = subprocess.Popen(CLI + command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=USERS_ENVIRONMENT, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    proc.stdout.readline()                               # it has started working
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip() == f"npformer {command[0]}: interrupted"


# The console script's entry, run as the script runs it (the checkout first on sys.path). It says
# "started" when npformer begins to be imported, inside program(): a Ctrl-C before that lands in
# Python's own start-up or in the script's two lines, which are not npformer's to guard.
ENTRY = [sys.executable, "-c", """import sys
class Announce:
    def find_spec(self, name, path=None, target=None):
        if name == "npformer":
            print("started", file=sys.stderr, flush=True)
sys.meta_path.insert(0, Announce())
from npformer_command import program
sys.exit(program())"""]
REPO = Path(__file__).resolve().parents[2]


def test_ctrl_c_while_the_command_is_still_being_imported_ends_quietly():
    """Importing npformer takes a second or more; a Ctrl-C then used to end in a traceback.
    Signals are sent at growing moments until one lands before the command printed anything."""
    landed_early = False
    for after in (0.0, 0.1, 0.3):
        proc = subprocess.Popen(ENTRY + ["gradcheck"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=USERS_ENVIRONMENT,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        assert proc.stderr.readline() == "started\n"
        time.sleep(after)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130 and err == "npformer gradcheck: interrupted\n", err
        landed_early |= out == ""
    assert landed_early


def test_sigterm_ends_any_command_quietly():
    proc = subprocess.Popen(CLI + ["gradcheck"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=USERS_ENVIRONMENT)
    proc.stdout.readline()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and err.strip() == "npformer gradcheck: stopped by SIGTERM"



# The CLI's process with one garbage-collector callback that, the first time it runs after the
# command printed something, says so and works on in Python for up to 20 s: a Ctrl-C sent then is
# raised inside the callback, where Python drops it (it printed a traceback and went on to the end).
DROPPING_CLI = [sys.executable, "-c", """import gc, sys, time
class Watched:
    def __init__(self, stream):
        self.stream, self.written = stream, False
    def write(self, text):
        self.written = True
        return self.stream.write(text)
    def __getattr__(self, name):
        return getattr(self.stream, name)
def hold(phase, info):
    if phase == "start" and getattr(sys.stdout, "written", False) and not held:
        held.append(1)
        print("in the callback", file=sys.stderr, flush=True)
        until = time.monotonic() + 20
        while time.monotonic() < until:
            pass
held = []
sys.stdout = Watched(sys.stdout)
gc.callbacks.append(hold)
from npformer.cli import main
sys.exit(main())"""]


def test_ctrl_c_dropped_by_python_inside_a_gc_callback_still_ends_the_command():
    """Python hands an exception raised in a garbage-collector callback to sys.unraisablehook
    and carries on; the command sees it go by and stops all the same, at once."""
    proc = subprocess.Popen(DROPPING_CLI + ["gradcheck"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=USERS_ENVIRONMENT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stderr.readline() == "in the callback\n"
    proc.send_signal(signal.SIGINT)
    sent = time.monotonic()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err == "npformer gradcheck: interrupted\n", err
    assert time.monotonic() - sent < 5
