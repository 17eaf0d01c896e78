"""Checkpoints: exact round trip, atomic writes, clear errors on bad files."""
import json
import os

import numpy as np
import pytest

from npformer import checkpoint as ck
from npformer.checkpoint import (CheckpointError, load_checkpoint, load_model, load_optimizer,
                                 save_checkpoint)
from npformer.model import DecoderConfig, DecoderLM
from npformer.optim import AdamW
from npformer.tokenizer import CharTokenizer


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


def test_round_trip_is_exact(tmp_path):
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
    assert sorted(os.listdir(tmp_path)) == sorted(ck.FILES)          # no temporary files left


def test_files_are_plain_npz_and_json(tmp_path):
    model, tok, opt = _setup()
    save_checkpoint(tmp_path, model, tok, opt)
    with np.load(tmp_path / "model.npz", allow_pickle=False) as data:
        assert set(data.files) == {name for name, _ in model.named_parameters()}
    config = json.loads((tmp_path / "config.json").read_text())
    assert DecoderConfig.from_dict(config["model"]) == model.config


def test_a_failed_write_leaves_the_old_checkpoint_intact(tmp_path, monkeypatch):
    model, tok, opt = _setup(seed=0)
    save_checkpoint(tmp_path, model, tok, opt)
    before = (tmp_path / "model.npz").read_bytes()
    other, _, _ = _setup(seed=1)

    def crash(file, **arrays):
        file.write(b"PK\x03\x04 half written")
        raise OSError("disk full")
    monkeypatch.setattr(ck.np, "savez", crash)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path, other, tok, opt)
    assert (tmp_path / "model.npz").read_bytes() == before
    monkeypatch.undo()
    loaded = load_model(tmp_path)
    np.testing.assert_array_equal(loaded.tokens.weight.data, model.tokens.weight.data)


def test_missing_directory(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "nope")


def test_truncated_weights(tmp_path):
    model, tok, opt = _setup()
    save_checkpoint(tmp_path, model, tok, opt)
    data = (tmp_path / "model.npz").read_bytes()
    (tmp_path / "model.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated"):
        load_checkpoint(tmp_path)


def test_foreign_npz_and_pickled_arrays(tmp_path):
    model, tok, opt = _setup()
    save_checkpoint(tmp_path, model, tok, opt)
    np.savez(tmp_path / "model.npz", something_else=np.zeros(3))
    with pytest.raises(CheckpointError, match="foreign"):
        load_checkpoint(tmp_path)
    arrays = model.state_dict()
    del arrays["tokens.weight"]
    np.savez(tmp_path / "model.npz", **arrays)
    with pytest.raises(CheckpointError, match="1 missing .*tokens.weight"):
        load_checkpoint(tmp_path)
    np.savez(tmp_path / "model.npz", evil=np.array([{"a": 1}], dtype=object))
    with pytest.raises(CheckpointError, match="model.npz"):
        load_checkpoint(tmp_path)
    (tmp_path / "model.npz").write_text("not a zip at all")
    with pytest.raises(CheckpointError, match="not a readable .npz"):
        load_checkpoint(tmp_path)


def test_mismatched_shapes_and_dtypes(tmp_path):
    model, tok, opt = _setup()
    save_checkpoint(tmp_path, model, tok, opt)
    wider, _, _ = _setup(ffn_hidden=12)
    with pytest.raises(CheckpointError, match="blocks.0.ffn.up.weight"):
        ck.load_weights(tmp_path, wider)
    with pytest.raises(CheckpointError, match="float64"):
        ck.load_weights(tmp_path, model.astype(np.float64))


def test_bad_config(tmp_path):
    model, tok, opt = _setup()
    save_checkpoint(tmp_path, model, tok, opt)
    (tmp_path / "config.json").write_text('{"format": "npformer-checkpoint"')
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_checkpoint(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(CheckpointError, match="not an npformer checkpoint"):
        load_checkpoint(tmp_path)
    good = {"format": ck.FORMAT, "version": ck.VERSION, "dtype": "float32",
            "model": {**model.config.to_dict(), "d_model": 9}}
    (tmp_path / "config.json").write_text(json.dumps(good))
    with pytest.raises(CheckpointError, match="invalid model config"):
        load_checkpoint(tmp_path)


def test_tokenizer_and_model_disagree(tmp_path):
    model, _, opt = _setup()
    save_checkpoint(tmp_path, model, CharTokenizer.from_corpus("ab"), opt)
    with pytest.raises(CheckpointError, match="vocab_size"):
        load_checkpoint(tmp_path)
