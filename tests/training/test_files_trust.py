"""Files and runs you can trust: one writer per checkpoint directory, loaders that check before
they allocate, state that is refused when it would be silently wrong, no run lost to a full
disk. Each case asserts the one line it must give."""
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import namedtuple
from pathlib import Path

import numpy as np
import pytest

from npformer.checkpoints import budget
from npformer.checkpoints.checkpoint import (CheckpointError, CheckpointSaveError, load_checkpoint,
                                       read_checkpoint, save_checkpoint)
from npformer.checkpoints.lock import LOCK_FILE, CheckpointBusy, writer_lock
from npformer.interop.convert import from_hf
from npformer.interop.files import read_hf_tensors, read_safetensors
from npformer.t10_model import DecoderConfig, DecoderLM
from npformer.t12_generate import generate_text
from npformer.t15_encoder import EncoderConfig
from npformer.t17_seq2seq import Seq2SeqConfig
from npformer.training.loop import TrainConfig, default_checkpoint_every, train
from npformer.t19_optim import AdamW
from npformer.tokenizer import CharTokenizer

ROOT = Path(__file__).resolve().parents[2]
FIRST_LAYOUT = Path(__file__).resolve().parents[1] / "data" / "checkpoint_v1_reverse"


def _setup(seed=0):
    tok = CharTokenizer.from_corpus("0123456789+=")
    config = DecoderConfig.gpt2(vocab_size=tok.vocab_size, d_model=8, n_heads=2, n_layers=1, max_len=12)
    model = DecoderLM(config, np.random.default_rng(seed))
    return model, tok, AdamW(model.named_parameters(), lr=0.01)


def _cli(*args, timeout=120):
    """``python -m npformer ARGS`` from the worktree: (exit code, stdout, stderr lines)."""
    done = subprocess.run([sys.executable, "-m", "npformer", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    return done.returncode, done.stdout, done.stderr.strip().splitlines()


def _first_layout(tmp_path, change=None):
    """A copy of the stored first-layout checkpoint (no hashes), its config.json edited."""
    copy = tmp_path / "ckpt"
    shutil.copytree(FIRST_LAYOUT, copy)
    if change is not None:
        path = copy / "config.json"
        data = json.loads(path.read_text())
        change(data["model"])
        path.write_text(json.dumps(data))
    return copy


# -- 1. one writer per checkpoint directory ----------------------------------------------------
HOLDER = textwrap.dedent("""
    import sys, time
    from npformer.checkpoints.lock import writer_lock
    with writer_lock(sys.argv[1]):
        print("held", flush=True)
        sys.stdin.readline()
""")


@pytest.fixture
def held(tmp_path):
    """A directory whose writer lock another process holds (until its stdin closes)."""
    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], cwd=ROOT, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert holder.stdout.readline().strip() == "held"
    yield out, holder
    if holder.poll() is None:
        holder.stdin.close()
        holder.wait(timeout=30)


def test_a_second_writer_is_refused_naming_the_holder(held):
    out, holder = held
    with pytest.raises(CheckpointBusy, match=rf"^{out} is being written by another training run "
                                             rf"\(pid {holder.pid}, lock file {out / LOCK_FILE}\); "
                                             rf"wait for it to finish or choose another directory$"):
        with writer_lock(out):
            pass
    model, tok, _ = _setup()
    with pytest.raises(CheckpointBusy, match=f"pid {holder.pid}"):       # the library's loop too
        train(model, _Source(), TrainConfig(steps=2, batch_size=2), tok, out_dir=out, progress=False)


def test_cli_train_into_a_busy_directory_exits_2_in_one_line(held):
    out, holder = held
    code, stdout, stderr = _cli("train", "--out", out, "--steps", 2, "--data", "add", "--no-progress")
    assert code == 2 and stdout == ""
    assert stderr == [f"npformer train: error: --out: {out} is being written by another training "
                      f"run (pid {holder.pid}, lock file {out / LOCK_FILE}); wait for it to finish "
                      f"or choose another directory"]


def test_the_lock_goes_with_its_process_and_a_stale_one_is_named(held):
    out, holder = held
    holder.kill()                       # kill -9: no clean-up ran, the file stays behind
    holder.wait(timeout=30)
    assert (out / LOCK_FILE).read_text().split() == [str(holder.pid)]
    said = []
    with writer_lock(out, on_stale=said.append) as lock:
        assert lock.stale == holder.pid
        assert (out / LOCK_FILE).read_text().split() == [str(os.getpid())]
        with writer_lock(out):          # re-entrant within one process
            pass
        assert (out / LOCK_FILE).exists()
    assert said == [f"took over the lock {out / LOCK_FILE} left by pid {holder.pid}, which is no "
                    f"longer running (that run was killed; its last checkpoint is kept)"]
    assert not (out / LOCK_FILE).exists()           # a clean exit leaves nothing


def test_a_lock_released_by_an_exception_frees_the_directory(tmp_path):
    with pytest.raises(RuntimeError):
        with writer_lock(tmp_path):
            raise RuntimeError("boom")
    with writer_lock(tmp_path) as lock:
        assert lock.stale is None


WRITER = textwrap.dedent("""
    import sys
    import numpy as np
    from npformer.checkpoints.checkpoint import save_checkpoint
    from npformer.t10_model import DecoderConfig, DecoderLM
    from npformer.tokenizer import CharTokenizer
    tok = CharTokenizer.from_corpus("0123456789+=")
    model = DecoderLM(DecoderConfig.gpt2(vocab_size=tok.vocab_size, d_model=8, n_heads=2,
                                         n_layers=1, max_len=12))
    for step in range(1, int(sys.argv[2]) + 1):
        for p in model.parameters():
            p.data[...] = step
        save_checkpoint(sys.argv[1], model, tok, state={"step": step})
""")


def test_readers_see_whole_steps_while_a_writer_saves(tmp_path):
    model, tok, _ = _setup()
    save_checkpoint(tmp_path, model, tok, state={"step": 0})
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), "15"], cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    seen = set()
    while writer.poll() is None:
        checkpoint = read_checkpoint(tmp_path)
        step = checkpoint.step
        seen.add(step)
        if step:                        # every weight of that read is the step it says
            assert all((array == step).all() for array in checkpoint.weights.values())
    assert writer.returncode == 0 and read_checkpoint(tmp_path).step == 15
    assert len(seen) > 2                # the reads did overlap the saves


# -- 2. loaders check before they allocate ------------------------------------------------------
@pytest.mark.parametrize("kind", ["dev-zero", "fifo"])
def test_a_weight_file_that_is_no_regular_file_is_refused_unread(tmp_path, kind):
    copy = _first_layout(tmp_path)
    (copy / "model.npz").unlink()
    if kind == "dev-zero":
        os.symlink("/dev/zero", copy / "model.npz")
        what = "a character device"
    else:
        os.mkfifo(copy / "model.npz")
        what = r"a FIFO \(named pipe\)"
    began = time.perf_counter()
    with pytest.raises(CheckpointError, match=rf"^{copy / 'model.npz'}: {what}, expected a regular file$"):
        load_checkpoint(copy)
    assert time.perf_counter() - began < 5


@pytest.mark.parametrize("field, value", [("n_layers", 10 ** 7), ("vocab_size", 10 ** 9)])
def test_absurd_config_sizes_are_refused_before_any_layer_is_built(tmp_path, field, value):
    copy = _first_layout(tmp_path, lambda model: model.update({field: value}))
    began = time.perf_counter()
    with pytest.raises(CheckpointError, match=rf"^{copy / 'config.json'}: .*{field}={value}.* "
                                              rf"describe (a model of )?[\d,]+ parameters"):
        load_checkpoint(copy)
    assert time.perf_counter() - began < 5


def test_cli_generate_with_absurd_layers_exits_2_naming_file_and_field(tmp_path):
    copy = _first_layout(tmp_path, lambda model: model.update(n_layers=10 ** 7))
    code, stdout, stderr = _cli("generate", copy, "--prompt", "123>")
    assert code == 2 and len(stderr) == 1
    assert stderr[0].startswith(f"npformer generate: error: {copy / 'config.json'}: ")
    assert "n_layers=10000000" in stderr[0] and "parameters" in stderr[0]


def test_a_weight_file_larger_than_its_manifest_says_is_refused_unread(tmp_path):
    model, tok, _ = _setup()
    save_checkpoint(tmp_path, model, tok)
    folder = tmp_path / json.loads((tmp_path / "checkpoint.json").read_text())["folder"]
    recorded = json.loads((tmp_path / "checkpoint.json").read_text())["files"]["model.npz"]["bytes"]
    with open(folder / "model.npz", "ab") as f:
        f.write(b"\0" * 4096)
    with pytest.raises(CheckpointError, match=rf"model.npz: its contents differ from the "
                                              rf"{recorded:,} bytes recorded in checkpoint.json "
                                              rf"\(it holds {recorded + 4096:,}; edited or damaged"):
        load_checkpoint(tmp_path)


def _safetensors_file(path, header, data=b""):
    text = json.dumps(header).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text + data)
    return path


def test_a_safetensors_header_length_of_2_to_the_62_is_one_line(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes((2 ** 62).to_bytes(8, "little") + b"{}")
    with pytest.raises(ValueError, match=rf"^{path}: safetensors header length "
                                         rf"4,611,686,018,427,387,904 is beyond the file's 10 bytes"):
        read_safetensors(path)


def test_safetensors_offsets_beyond_the_file_are_refused(tmp_path):
    path = _safetensors_file(tmp_path / "model.safetensors",
                             {"w": {"dtype": "F32", "shape": [1000], "data_offsets": [0, 4000]}}, b"\0" * 8)
    with pytest.raises(ValueError, match=rf"^{path}: tensor 'w' data_offsets \[0, 4000\] do not fit "
                                         rf"its F32\[1000\] inside the file's 8 bytes of data$"):
        read_safetensors(path)


@pytest.mark.parametrize("shard", ["../outside.safetensors", "/etc/passwd"])
def test_a_shard_index_may_not_point_outside_its_folder(tmp_path, shard):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": shard}}))
    with pytest.raises(ValueError, match=rf"model.safetensors.index.json: weight_map\['w'\] = "
                                         rf"'{shard}' points outside {model_dir}"):
        read_hf_tensors(model_dir)


@pytest.mark.parametrize("field, key, value", [("n_layers", "n_layer", 10 ** 7),
                                               ("vocab_size", "vocab_size", 10 ** 9)])
def test_hf_config_sizes_are_checked_against_the_tensors_before_building(field, key, value):
    hf = {"model_type": "gpt2", "vocab_size": 10, "n_embd": 8, "n_head": 2, "n_layer": 1,
          "n_positions": 16, key: value}
    began = time.perf_counter()
    with pytest.raises(ValueError, match=rf"^config: .*{field}={value}.* describe (a model of )?at "
                                         rf"least [\d,]+ parameters"):
        from_hf({"wte.weight": np.zeros((10, 8), np.float32)}, config=hf)
    assert time.perf_counter() - began < 5


# -- 3. state you can trust -------------------------------------------------------------------
def test_load_state_dict_refuses_another_dtype_unless_cast():
    model, _, _ = _setup()
    state = {k: v.astype(np.float64) for k, v in model.state_dict().items()}
    name = next(iter(state))
    with pytest.raises(TypeError, match=rf"^load_state_dict: '{name}' expected dtype float32, got "
                                        rf"float64 \(pass cast=True to convert"):
        model.load_state_dict(state)
    state[name][...] = 0.25
    model.load_state_dict(state, cast=True)
    assert model.state_dict()[name].dtype == np.float32 and (model.state_dict()[name] == 0.25).all()


def test_load_state_dict_refuses_non_finite_values_unless_allowed():
    model, _, _ = _setup()
    state = model.state_dict()
    name = next(iter(state))
    before = state[name].copy()
    state[name].flat[:3] = [np.nan, np.inf, -np.inf]
    with pytest.raises(ValueError, match=rf"^load_state_dict: '{name}' holds 3 NaN or infinite "
                                         rf"values \(pass allow_nonfinite=True"):
        model.load_state_dict(state)
    np.testing.assert_array_equal(model.state_dict()[name], before)       # nothing was changed
    model.load_state_dict(state, allow_nonfinite=True)
    assert np.isnan(model.state_dict()[name].flat[0])


@pytest.mark.parametrize("make", [DecoderConfig, DecoderConfig.llama, EncoderConfig, Seq2SeqConfig])
@pytest.mark.parametrize("eps", [-1e-5, 0.0, float("nan")])
def test_configs_refuse_a_non_positive_eps(make, eps):
    with pytest.raises(ValueError, match=rf"^norm_eps: expected a finite number > 0, got {eps!r}$"):
        make(norm_eps=eps)


def test_a_checkpoint_with_a_negative_eps_is_refused_by_generate(tmp_path):
    copy = _first_layout(tmp_path, lambda model: model.update(norm_eps=-1e-5))
    code, stdout, stderr = _cli("generate", copy, "--prompt", "123>")
    assert code == 2 and stdout == ""
    assert stderr == [f"npformer generate: error: {copy / 'config.json'}: invalid model config "
                      f"(norm_eps: expected a finite number > 0, got -1e-05)"]


def test_an_empty_batch_and_an_empty_prompt_are_named():
    model, tok, _ = _setup()
    with pytest.raises(ValueError, match=r"^ids: expected at least one sequence of at least one "
                                         r"token \(B >= 1, N >= 1\), got an empty batch of shape \(1, 0\)$"):
        model.forward(np.zeros((1, 0), np.int64))
    with pytest.raises(ValueError, match=r"^prompts: expected non-empty strings, got '' at index 1$"):
        generate_text(model, tok, ["1+2=", ""])


# -- 4. no run lost to a full disk ------------------------------------------------------------
class _Source:
    """A tiny stream of batches: the copy task, enough for a few steps."""

    max_len = 8

    def sample(self, rng, batch_size):
        from npformer.training.data import Batch
        inputs = rng.integers(0, 10, (batch_size, 8))
        targets = np.roll(inputs, -1, axis=1)
        return Batch(inputs, targets, np.ones_like(inputs, bool))


def test_the_default_interval_saves_a_tenth_of_a_long_run():
    assert [default_checkpoint_every(n) for n in (1, 199, 200, 1000, 5000)] == [0, 0, 20, 100, 500]
    assert TrainConfig(steps=1000).save_every == 100 and TrainConfig(steps=50).save_every == 0
    assert TrainConfig(steps=1000, checkpoint_every=0).save_every == 0


def test_a_long_run_saves_on_its_way_by_default(tmp_path):
    model, tok, _ = _setup()
    steps_seen = []

    def look(step, loss):
        if step == 21:
            steps_seen.append(read_checkpoint(tmp_path, weights=False).step)

    train(model, _Source(), TrainConfig(steps=200, batch_size=2), tok, out_dir=tmp_path,
          progress=False, on_step=look)
    assert steps_seen == [20]


def test_training_refuses_to_start_without_room_for_checkpoints(tmp_path, monkeypatch):
    model, tok, _ = _setup()
    need = budget.checkpoint_bytes(model.num_parameters(), 4, 5)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(budget.shutil, "disk_usage", lambda path: usage(10 ** 9, 10 ** 9, 1000))
    with pytest.raises(CheckpointSaveError, match=rf"^not enough free disk space for checkpoints in "
                                                  rf"{tmp_path}: a checkpoint of this run takes about "
                                                  rf"{budget.human(need)} and a save needs room for two "
                                                  rf"\({budget.human(2 * need)}\), but 1000 bytes are free$"):
        train(model, _Source(), TrainConfig(steps=5, batch_size=2), tok, out_dir=tmp_path, progress=False)
    assert not any(tmp_path.iterdir())          # refused before anything was written


def test_cli_train_refuses_a_full_disk_before_the_first_step(tmp_path, monkeypatch, capsys):
    from npformer.cli import main
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(budget.shutil, "disk_usage", lambda path: usage(10 ** 9, 10 ** 9, 1000))
    out = tmp_path / "run"
    code = main(["train", "--out", str(out), "--steps", "2", "--data", "add", "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0].startswith(f"npformer train: error: --out: not enough free disk space for "
                             f"checkpoints in {out}: a checkpoint of this run takes about ")
    assert err[0].endswith("but 1000 bytes are free") and not out.exists()
