"""npformer.interop without torch: the .safetensors format, checkpoint directories, atomic
export, and the names that must keep importing from where they always did.

The file-format tests build and parse .safetensors bytes by hand from the format's
definition (8-byte little-endian header length, JSON header with dtype, shape and
byte offsets, then the raw little-endian data), independently of the reader under test.
"""
import json
import os

import numpy as np
import pytest

pytest.importorskip("safetensors", reason="reading .safetensors files needs safetensors: pip install '.[hf]'")

import npformer.checkpoints.checkpoint  # noqa: E402
import npformer.interop as interop  # noqa: E402
from npformer import DecoderConfig, DecoderLM  # noqa: E402
from npformer.interop import (from_hf, read_hf_checkpoint, read_safetensors, save_hf,
                              write_safetensors)


def _tiny_gpt2(seed=0):
    config = DecoderConfig.gpt2(vocab_size=11, d_model=8, n_heads=2, n_layers=1, max_len=8)
    return DecoderLM(config, np.random.default_rng(seed))


def _files_under(directory):
    """Every file below ``directory``, hidden temporaries included, as relative paths."""
    return sorted(os.path.relpath(os.path.join(root, name), directory)
                  for root, _, names in os.walk(directory) for name in names)


def _safetensors_file(entries):
    """The bytes of a .safetensors file from [(name, dtype code, shape, raw bytes)]."""
    header, data, offset = {}, b"", 0
    for name, dtype, shape, raw in entries:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        data += raw
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + data


# -- the names that import from npformer.interop ------------------------------------------------
def test_every_name_of_the_single_module_still_imports():
    from npformer.interop import FAMILIES
    assert FAMILIES == ("gpt2", "llama", "mixtral", "bert", "bart")
    assert interop.from_hf is interop.convert.from_hf
    assert interop.decoder_config_from_hf is interop.configs.decoder_config_from_hf
    assert interop.read_safetensors is interop.files.read_safetensors
    assert interop.ParamMap is interop.tables.ParamMap
    for name in interop.__all__:
        assert getattr(interop, name).__doc__ or name == "FAMILIES", name


def test_the_two_checkpoint_readers_have_distinct_names():
    assert interop.read_hf_checkpoint is not npformer.checkpoints.checkpoint.load_checkpoint
    assert npformer.load_checkpoint is npformer.checkpoints.checkpoint.load_checkpoint


# -- the .safetensors format ----------------------------------------------------------------
def test_read_safetensors_of_a_hand_built_file(tmp_path):
    matrix = np.arange(6, dtype="<f4").reshape(2, 3) / 4
    wide = np.array([1e-300, -2.5], dtype="<f8")
    bf16 = np.array([0x3F80, 0xC040, 0x3E80], dtype="<u2")      # 1.0, -3.0, 0.25
    path = tmp_path / "hand.safetensors"
    path.write_bytes(_safetensors_file([("m", "F32", (2, 3), matrix.tobytes()),
                                        ("w", "F64", (2,), wide.tobytes()),
                                        ("h", "BF16", (3,), bf16.tobytes())]))
    tensors = read_safetensors(path)
    np.testing.assert_array_equal(tensors["m"], matrix)
    np.testing.assert_array_equal(tensors["w"], wide)
    assert tensors["h"].dtype == np.float32
    np.testing.assert_array_equal(tensors["h"], [1.0, -3.0, 0.25])


def test_write_safetensors_bytes_follow_the_format(tmp_path):
    arrays = {"b": np.array([[1.5, -2.0]], np.float32), "a": np.arange(3, dtype=np.float64)}
    path = write_safetensors(tmp_path / "out.safetensors", arrays, metadata={"format": "pt"})
    raw = open(path, "rb").read()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + size])
    assert header.pop("__metadata__") == {"format": "pt"}
    assert {k: (v["dtype"], v["shape"]) for k, v in header.items()} == {"a": ("F64", [3]),
                                                                       "b": ("F32", [1, 2])}
    for name, array in arrays.items():
        start, end = header[name]["data_offsets"]
        assert raw[8 + size + start:8 + size + end] == array.astype(array.dtype.newbyteorder("<")).tobytes()


# -- checkpoint directories -------------------------------------------------------------------
def test_sharded_checkpoint_reads_like_a_single_file(tmp_path):
    model = _tiny_gpt2()
    save_hf(model, tmp_path / "single")
    tensors = read_safetensors(tmp_path / "single" / "model.safetensors")
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[::2],
              "model-00002-of-00002.safetensors": names[1::2]}
    sharded = tmp_path / "sharded"
    sharded.mkdir()
    for shard, part in shards.items():
        write_safetensors(sharded / shard, {name: tensors[name] for name in part})
    weight_map = {name: shard for shard, part in shards.items() for name in part}
    (sharded / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    (sharded / "config.json").write_bytes((tmp_path / "single" / "config.json").read_bytes())
    loaded = dict(from_hf(sharded).named_parameters())
    for name, p in model.named_parameters():
        np.testing.assert_array_equal(loaded[name].data, p.data, err_msg=name)


def test_config_json_that_is_not_json(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "gpt2",')
    with pytest.raises(ValueError, match="config.json: not valid JSON"):
        read_hf_checkpoint(tmp_path)


# -- an interrupted save_hf -------------------------------------------------------------------
class _DiskFull:
    """A file that writes half of what it is given, then fails as a full disk does."""

    def __init__(self, file):
        self.file = file

    def write(self, data):
        self.file.write(data[:len(data) // 2])
        raise OSError(28, "No space left on device")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.file.close()

    def __getattr__(self, name):
        return getattr(self.file, name)


def _fail(where, monkeypatch):
    """Make the next save fail at ``where``."""
    if where == "serialising":
        import safetensors.numpy

        def refuse(*args, **kwargs):
            raise ValueError("safetensors refuses the tensors")
        monkeypatch.setattr(safetensors.numpy, "save", refuse)
    elif where == "writing":
        real = os.fdopen
        monkeypatch.setattr(os, "fdopen", lambda *args, **kwargs: _DiskFull(real(*args, **kwargs)))
    else:
        def broken(*args, **kwargs):
            raise OSError(5, f"{where} failed")
        monkeypatch.setattr(os, {"flushing": "fsync", "renaming": "replace"}[where], broken)


WHERE = ["serialising", "writing", "flushing", "renaming"]


@pytest.mark.parametrize("where", WHERE)
def test_interrupted_save_leaves_no_file_and_no_temporary(where, tmp_path, monkeypatch):
    _fail(where, monkeypatch)
    with pytest.raises((OSError, ValueError)):
        save_hf(_tiny_gpt2(), tmp_path / "export")
    assert _files_under(tmp_path) == []


@pytest.mark.parametrize("where", WHERE)
def test_interrupted_save_leaves_an_earlier_export_intact(where, tmp_path, monkeypatch):
    save_hf(_tiny_gpt2(seed=0), tmp_path)
    before = {name: (tmp_path / name).read_bytes() for name in _files_under(tmp_path)}
    assert sorted(before) == ["config.json", "model.safetensors"]
    _fail(where, monkeypatch)
    with pytest.raises((OSError, ValueError)):
        save_hf(_tiny_gpt2(seed=1), tmp_path)
    monkeypatch.undo()
    assert {name: (tmp_path / name).read_bytes() for name in _files_under(tmp_path)} == before


def test_config_json_is_written_last(tmp_path, monkeypatch):
    """If only config.json fails, the directory is not mistaken for a checkpoint."""
    real, calls = os.replace, []

    def second_rename_fails(src, dst):
        calls.append(os.path.basename(dst))
        if len(calls) == 2:
            raise OSError(5, "rename failed")
        return real(src, dst)
    monkeypatch.setattr(os, "replace", second_rename_fails)
    with pytest.raises(OSError, match="rename failed"):
        save_hf(_tiny_gpt2(), tmp_path)
    monkeypatch.undo()
    assert calls == ["model.safetensors", "config.json"]
    assert _files_under(tmp_path) == ["model.safetensors"]
    with pytest.raises(ValueError, match="expected a Hugging Face checkpoint with config.json"):
        from_hf(tmp_path)
