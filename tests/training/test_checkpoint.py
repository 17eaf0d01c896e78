"""Checkpoints: exact round trip, one unit on disk, clear errors, files checked against each other."""
import errno
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from npformer.checkpoints import checkpoint as ck
from npformer.core import fileio
from npformer.checkpoints.checkpoint import (CheckpointError, CheckpointSaveError, load_checkpoint,
                                       load_model, load_optimizer, read_checkpoint,
                                       save_checkpoint)
from npformer.t10_model import DecoderConfig, DecoderLM
from npformer.t19_optim import AdamW
from npformer.tokenizer import CharTokenizer

FIRST_LAYOUT = Path(__file__).resolve().parents[1] / "data" / "checkpoint_v1_reverse"


def _setup(seed=0, **overrides):
    tok = CharTokenizer.from_corpus("退货运费谁出")
    config = DecoderConfig.gpt2(vocab_size=tok.vocab_size, d_model=8, n_heads=2, n_layers=1,
                                max_len=12, **overrides)
    model = DecoderLM(config, np.random.default_rng(seed))
    opt = AdamW(model.named_parameters(), lr=0.01)
    for p in model.parameters():
        p.grad[...] = np.random.default_rng(1).standard_normal(p.shape)
    opt.step()
    return model, tok, opt


def _folder(directory):
    """The current folder, read from the manifest with plain json (not the code under test)."""
    return Path(directory) / json.loads((Path(directory) / "checkpoint.json").read_text())["folder"]


def _edit_json(path, change):
    data = json.loads(Path(path).read_text())
    change(data)
    Path(path).write_text(json.dumps(data))


def test_round_trip_is_exact_and_one_folder_is_current(tmp_path):
    model, tok, opt = _setup()
    save_checkpoint(tmp_path, model, tok, opt, {"step": 7})
    again, tok2, state = load_checkpoint(tmp_path)
    assert again.config == model.config and state["step"] == 7
    for (name, p), (name2, q) in zip(model.named_parameters(), again.named_parameters()):
        assert name == name2 and q.dtype == np.float32
        np.testing.assert_array_equal(p.data, q.data)
    assert tok2.encode("运费") == tok.encode("运费")
    opt2 = load_optimizer(tmp_path, AdamW(again.named_parameters(), lr=0.5))
    assert opt2.steps == 1 and opt2.lr == 0.01
    for name in opt.exp_avg:
        np.testing.assert_array_equal(opt.exp_avg[name], opt2.exp_avg[name])
        np.testing.assert_array_equal(opt.exp_avg_sq[name], opt2.exp_avg_sq[name])
    folder = _folder(tmp_path)
    assert sorted(os.listdir(tmp_path)) == sorted(["checkpoint.json", folder.name])   # nothing else
    assert folder.name.startswith("step-00000007.")
    assert sorted(os.listdir(folder)) == sorted(ck.FILES)


def test_files_are_plain_npz_and_json_with_their_sha256(tmp_path):
    import hashlib
    model, tok, opt = _setup()
    save_checkpoint(tmp_path, model, tok, opt)
    folder = _folder(tmp_path)
    with np.load(folder / "model.npz", allow_pickle=False) as data:
        assert set(data.files) == {name for name, _ in model.named_parameters()}
    config = json.loads((folder / "config.json").read_text())
    assert DecoderConfig.from_dict(config["model"]) == model.config
    manifest = json.loads((tmp_path / "checkpoint.json").read_text())
    for name, info in manifest["files"].items():
        data = (folder / name).read_bytes()
        assert info == {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def test_float64_round_trips_and_float16_is_refused(tmp_path):
    model, tok, _ = _setup()
    wide = model.astype(np.float64)
    save_checkpoint(tmp_path / "f64", wide, tok)
    again = load_model(tmp_path / "f64")
    assert again.dtype == np.float64
    np.testing.assert_array_equal(again.tokens.weight.data, wide.tokens.weight.data)
    for p in model.parameters():
        p.data = p.data.astype(np.float16)
    with pytest.raises(TypeError, match="float32 or float64.*float16"):
        save_checkpoint(tmp_path / "f16", model, tok)
    assert not (tmp_path / "f16").exists()                  # refused before writing anything


def test_a_float16_config_is_refused_at_load(tmp_path):
    shutil.copytree(FIRST_LAYOUT, tmp_path / "old")
    _edit_json(tmp_path / "old" / "config.json", lambda c: c.update(dtype="float16"))
    with pytest.raises(CheckpointError, match="config.json: dtype float16, expected float32 or float64"):
        load_checkpoint(tmp_path / "old")


def test_a_failed_write_leaves_the_old_checkpoint_intact(tmp_path, monkeypatch):
    model, tok, opt = _setup(seed=0)
    save_checkpoint(tmp_path, model, tok, opt, {"step": 1})
    other, _, _ = _setup(seed=1)

    def crash(file, **arrays):
        file.write(b"PK\x03\x04 half written")
        raise OSError("disk full")
    monkeypatch.setattr(ck.np, "savez", crash)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path, other, tok, opt, {"step": 2})
    monkeypatch.undo()
    loaded = load_model(tmp_path)
    np.testing.assert_array_equal(loaded.tokens.weight.data, model.tokens.weight.data)


def _count_fsyncs(tmp_path, monkeypatch):
    model, tok, opt = _setup()
    calls = []
    real = fileio.os.fsync
    monkeypatch.setattr(fileio.os, "fsync", lambda fd: calls.append(fd) or real(fd))
    save_checkpoint(tmp_path / "count", model, tok, opt, {"step": 1})
    monkeypatch.undo()
    return len(calls)


def test_a_full_disk_at_any_point_of_a_save_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    n_syncs = _count_fsyncs(tmp_path, monkeypatch)
    assert n_syncs == 8                     # five files, their folder, the manifest, the directory
    old, tok, opt = _setup(seed=0)
    new, _, _ = _setup(seed=1)
    for failing in range(1, n_syncs + 1):
        directory = tmp_path / f"run{failing}"
        save_checkpoint(directory, old, tok, opt, {"step": 3})
        calls = []
        real = fileio.os.fsync

        def full_disk(fd):
            calls.append(fd)
            if len(calls) == failing:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real(fd)
        monkeypatch.setattr(fileio.os, "fsync", full_disk)
        if failing < n_syncs:
            with pytest.raises(CheckpointSaveError) as caught:
                save_checkpoint(directory, new, tok, opt, {"step": 4})
            message = str(caught.value)
            assert caught.value.errno == errno.ENOSPC and "\n" not in message
            assert "No space left on device" in message
            assert "previous checkpoint (step 3) is still current" in message
        else:                               # the manifest is in place: the new one is current
            save_checkpoint(directory, new, tok, opt, {"step": 4})
        monkeypatch.undo()
        model, _, state = load_checkpoint(directory)
        expected = old if failing < n_syncs else new
        assert state["step"] == (3 if failing < n_syncs else 4)
        np.testing.assert_array_equal(model.tokens.weight.data, expected.tokens.weight.data)
        assert sorted(os.listdir(directory)) == sorted(["checkpoint.json", _folder(directory).name])


def test_leftovers_are_ignored_then_cleaned_and_other_files_kept(tmp_path):
    model, tok, opt = _setup()
    save_checkpoint(tmp_path, model, tok, opt, {"step": 1})
    (tmp_path / ".partial-abc123").mkdir()
    (tmp_path / ".partial-abc123" / "model.npz").write_bytes(b"PK half")
    (tmp_path / "step-00000009.zzzzzz").mkdir()                  # renamed, never made current
    (tmp_path / ".checkpoint.json.xyz.tmp").write_text("{")
    (tmp_path / ".model.npz.4411.tmp").write_bytes(b"\0" * 100)  # left by the first layout's writer
    (tmp_path / "notes.txt").write_text("mine")
    assert load_checkpoint(tmp_path)[2]["step"] == 1
    save_checkpoint(tmp_path, model, tok, opt, {"step": 2})
    assert sorted(os.listdir(tmp_path)) == sorted(["checkpoint.json", _folder(tmp_path).name, "notes.txt"])


def test_missing_directory(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "nope")


@pytest.mark.parametrize("name", ["model.npz", "config.json", "tokenizer.json", "optimizer.npz",
                                  "state.json"])
def test_any_edited_or_damaged_file_is_named(tmp_path, name):
    model, tok, opt = _setup()
    save_checkpoint(tmp_path, model, tok, opt)
    path = _folder(tmp_path) / name
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=rf"{name}: its contents differ from the SHA-256"):
        read_checkpoint(tmp_path)


def test_a_reordered_tokenizer_is_caught(tmp_path):
    model, tok, opt = _setup()
    save_checkpoint(tmp_path, model, tok, opt)
    _edit_json(_folder(tmp_path) / "tokenizer.json", lambda t: t.update(chars=t["chars"][::-1]))
    with pytest.raises(CheckpointError, match="tokenizer.json: its contents differ"):
        load_checkpoint(tmp_path)


# -- the first layout: five files in the directory, no manifest --------------------------------
@pytest.fixture
def first_layout(tmp_path):
    directory = tmp_path / "old"
    shutil.copytree(FIRST_LAYOUT, directory)
    return directory


def test_a_first_layout_checkpoint_still_loads(first_layout):
    model, tok, state = load_checkpoint(first_layout)
    with np.load(first_layout / "model.npz", allow_pickle=False) as raw:
        for name, p in model.named_parameters():
            np.testing.assert_array_equal(p.data, raw[name])
    assert tok.decode(tok.encode("31415>")) == "31415>" and state["step"] == 3
    opt = load_optimizer(first_layout, AdamW(model.named_parameters(), lr=1.0))
    assert opt.steps == 3


def test_first_layout_truncated_foreign_and_pickled_weights(first_layout):
    data = (first_layout / "model.npz").read_bytes()
    (first_layout / "model.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated"):
        load_checkpoint(first_layout)
    np.savez(first_layout / "model.npz", something_else=np.zeros(3))
    with pytest.raises(CheckpointError, match="foreign"):
        load_checkpoint(first_layout)
    np.savez(first_layout / "model.npz", evil=np.array([{"a": 1}], dtype=object))
    with pytest.raises(CheckpointError, match="model.npz"):
        load_checkpoint(first_layout)
    (first_layout / "model.npz").write_text("not a zip at all")
    with pytest.raises(CheckpointError, match="not a readable .npz"):
        load_checkpoint(first_layout)


def test_first_layout_files_checked_against_each_other(first_layout):
    config = first_layout / "config.json"
    original = config.read_text()
    _edit_json(config, lambda c: c["model"].update(ffn_hidden=12))
    with pytest.raises(CheckpointError, match=r"model.npz: 'blocks.0.ffn.up.weight' is float32\[8, 32\], "
                                              r"expected float32\[8, 12\] \(from .*config.json\)"):
        load_checkpoint(first_layout)
    config.write_text(original)
    state = first_layout / "state.json"
    original = state.read_text()
    _edit_json(state, lambda s: s.update(step=5000))
    with pytest.raises(CheckpointError, match="state.json: step 5000 of a 3-step run"):
        load_checkpoint(first_layout)
    _edit_json(state, lambda s: s.update(step=2, history={**s["history"], "loss": s["history"]["loss"][:2]}))
    with pytest.raises(CheckpointError, match="optimizer.npz: the optimizer has taken 3 steps but "
                                              "state.json says the run is at step 2"):
        read_checkpoint(first_layout)
    state.write_text(original)
    _edit_json(first_layout / "tokenizer.json", lambda t: t.update(chars=t["chars"] + "abc"))
    with pytest.raises(CheckpointError, match="tokenizer.json: 18 ids, more than the vocab_size 15"):
        load_checkpoint(first_layout)


def test_first_layout_bad_config(first_layout):
    config = first_layout / "config.json"
    good = json.loads(config.read_text())
    config.write_text('{"format": "npformer-checkpoint"')
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_checkpoint(first_layout)
    config.write_text(json.dumps({"format": "other"}))
    with pytest.raises(CheckpointError, match="not an npformer checkpoint"):
        load_checkpoint(first_layout)
    config.write_text(json.dumps({**good, "model": {**good["model"], "d_model": 9}}))
    with pytest.raises(CheckpointError, match="invalid model config"):
        load_checkpoint(first_layout)


def test_saving_over_a_first_layout_checkpoint_replaces_it(first_layout):
    model, tok, state = load_checkpoint(first_layout)
    save_checkpoint(first_layout, model, tok, None, {"step": 3})
    assert sorted(os.listdir(first_layout)) == sorted(["checkpoint.json", _folder(first_layout).name])
    assert load_checkpoint(first_layout)[2]["step"] == 3


def test_mismatched_shapes_and_dtypes(tmp_path):
    model, tok, opt = _setup()
    save_checkpoint(tmp_path, model, tok, opt)
    wider, _, _ = _setup(ffn_hidden=12)
    with pytest.raises(CheckpointError, match="blocks.0.ffn.up.weight"):
        ck.load_weights(tmp_path, wider)
    with pytest.raises(CheckpointError, match="float64"):
        ck.load_weights(tmp_path, model.astype(np.float64))


def test_a_tokenizer_larger_than_the_vocabulary_is_refused(tmp_path):
    model, _, opt = _setup()
    save_checkpoint(tmp_path, model, CharTokenizer.from_corpus("abcdefghijklmnop"), opt)
    with pytest.raises(CheckpointError, match="tokenizer.json: 20 ids, more than the vocab_size 10"):
        load_checkpoint(tmp_path)
