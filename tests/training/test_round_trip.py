"""Every kind of model npformer trains can be opened again: trained, saved, loaded, asked to
generate and resumed, through the library and through the command line, and a run stopped
half way and resumed ends bit for bit where the same run uninterrupted ends.

The saved arrays and the loss history are read back with numpy and json, not with the
loader under test, and compared with the model still in memory."""
import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest

from npformer.cli import main
from npformer.checkpoints.checkpoint import load_checkpoint, load_model, load_optimizer, save_checkpoint
from npformer.t10_model import DecoderConfig, DecoderLM
from npformer.t12_generate import generate
from npformer.t15_encoder import Encoder, EncoderConfig
from npformer.t17_seq2seq import EncoderDecoder, Seq2SeqConfig
from npformer.training.data import ExampleSource, encode_examples, reverse_task
from npformer.training.loop import TrainConfig, train
from npformer.t19_optim import AdamW
from npformer.tokenizer import CharTokenizer

STEPS, STOP_AT = 6, 3
SIZES = dict(d_model=16, n_heads=2, n_layers=2)

# Every decoder the library builds, by the fields that change what is saved or computed.
DECODERS = {
    "article (LayerNorm, GELU, learned, own head)": (DecoderConfig, {}, np.float32),
    "gpt2 (tied head, biases)": (DecoderConfig.gpt2, {}, np.float32),
    "llama (RMSNorm, SwiGLU, RoPE)": (DecoderConfig.llama, {}, np.float32),
    "llama with MQA (one K/V head)": (DecoderConfig.llama, dict(n_kv_heads=1), np.float32),
    "mixtral (MoE, top 2 of 4)": (DecoderConfig.mixtral, dict(n_experts=4), np.float32),
    "sliding window": (DecoderConfig.llama, dict(window=3), np.float32),
    "blockwise attention": (DecoderConfig.gpt2, dict(attention="flash"), np.float32),
    "sinusoidal positions": (DecoderConfig.gpt2, dict(positions="sinusoidal"), np.float32),
    "no positions": (DecoderConfig, dict(positions="none"), np.float32),
    "post-norm, RMSNorm, ReLU": (DecoderConfig, dict(prenorm=False, norm="rmsnorm", ffn="relu"),
                                 np.float32),
    "llama in float64": (DecoderConfig.llama, {}, np.float64),
}


def _task():
    tokenizer = CharTokenizer.from_corpus("0123456789>")
    split = reverse_task(n_train=200, n_heldout=10, length=3, seed=0)
    return ExampleSource(encode_examples(tokenizer, split.train), tokenizer.pad_id), tokenizer


def _saved(directory):
    """The current folder's weights and state, read with numpy and json alone."""
    folder = Path(directory) / json.loads((Path(directory) / "checkpoint.json").read_text())["folder"]
    with np.load(folder / "model.npz", allow_pickle=False) as weights:
        arrays = {name: weights[name] for name in weights.files}
    return arrays, json.loads((folder / "state.json").read_text())


def _assert_same_weights(model, arrays):
    names = dict(model.named_parameters())
    assert sorted(names) == sorted(arrays)
    for name, p in names.items():
        assert arrays[name].dtype == p.dtype
        np.testing.assert_array_equal(arrays[name], p.data, err_msg=name)


def _stop_at(step_to_stop):
    def on_step(step, loss):
        if step == step_to_stop:
            os.kill(os.getpid(), signal.SIGTERM)      # handled: finish this step, save, return
    return on_step


@pytest.mark.parametrize("kind", list(DECODERS))
def test_a_decoder_of_every_kind_trains_loads_generates_and_resumes(tmp_path, kind):
    recipe, fields, dtype = DECODERS[kind]
    source, tokenizer = _task()
    config = recipe(vocab_size=tokenizer.vocab_size, max_len=source.max_len, **SIZES, **fields)
    settings = TrainConfig(steps=STEPS, batch_size=8, lr=1e-2, seed=5)

    def run(directory, resume=False, on_step=None):
        model = DecoderLM(config, np.random.default_rng(0), dtype)
        result = train(model, source, settings, tokenizer, out_dir=directory, resume=resume,
                       progress=False, on_step=on_step, log=None)
        return model, result

    whole, whole_result = run(tmp_path / "whole")
    cut, cut_result = run(tmp_path / "cut", on_step=_stop_at(STOP_AT))
    assert cut_result.interrupted and cut_result.step == STOP_AT

    # the stopped run opens again and generates what the model in memory generates
    loaded, loaded_tokenizer, state = load_checkpoint(tmp_path / "cut")
    assert type(loaded) is DecoderLM and loaded.config == config and state["step"] == STOP_AT
    _assert_same_weights(cut, _saved(tmp_path / "cut")[0])
    prompt = [tokenizer.encode("123>", bos=True)]
    expected = generate(cut, prompt, 4, eos_id=tokenizer.eos_id, pad_id=tokenizer.pad_id)
    assert generate(loaded, [loaded_tokenizer.encode("123>", bos=True)], 4,
                    eos_id=tokenizer.eos_id, pad_id=tokenizer.pad_id) == expected

    # resumed, it ends where the uninterrupted run ends, bit for bit
    resumed, resumed_result = run(tmp_path / "cut", resume=True)
    assert resumed_result.step == STEPS and not resumed_result.interrupted
    assert resumed_result.history.loss == whole_result.history.loss
    assert resumed_result.history.grad_norm == whole_result.history.grad_norm
    for directory, model in ((tmp_path / "whole", whole), (tmp_path / "cut", resumed)):
        arrays, state = _saved(directory)
        _assert_same_weights(model, arrays)
        assert state["step"] == STEPS and state["history"]["loss"] == whole_result.history.loss
    _assert_same_weights(whole, _saved(tmp_path / "cut")[0])


ENCODERS = {
    "encoder (BERT, pooler)": (Encoder, EncoderConfig.bert(pooler=True, **SIZES)),
    "encoder (Pre-Norm, RMSNorm, RoPE, GQA)": (Encoder, EncoderConfig(
        prenorm=True, norm="rmsnorm", positions="rope", ffn="swiglu", n_kv_heads=1,
        type_vocab_size=0, **SIZES)),
    "encoder-decoder (BART)": (EncoderDecoder, Seq2SeqConfig.bart(d_model=16, n_heads=2)),
    "encoder-decoder (two vocabularies, own head, RMSNorm)": (EncoderDecoder, Seq2SeqConfig(
        d_model=16, n_heads=2, src_vocab_size=30, share_embeddings=False, tie_head=False,
        norm="rmsnorm", positions="sinusoidal")),
}


@pytest.mark.parametrize("kind", list(ENCODERS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_an_encoder_or_encoder_decoder_saves_and_loads(tmp_path, kind, dtype):
    model_class, config = ENCODERS[kind]
    model = model_class(config, np.random.default_rng(3), dtype)
    optimizer = AdamW(model.named_parameters(), lr=1e-2)
    rng = np.random.default_rng(4)
    for p in model.parameters():
        p.grad[...] = rng.standard_normal(p.shape)
    optimizer.step()                                  # weights no longer the initial ones
    save_checkpoint(tmp_path, model, optimizer=optimizer, state={"step": 1})
    _assert_same_weights(model, _saved(tmp_path)[0])
    again = load_model(tmp_path)
    assert type(again) is model_class and again.config == config
    _assert_same_weights(again, {name: p.data for name, p in model.named_parameters()})
    ids = rng.integers(0, 30, (2, 5)) % config.vocab_size
    inputs = (ids,) if model_class is Encoder else (ids, ids)
    np.testing.assert_array_equal(again(*inputs), model(*inputs))
    restored = load_optimizer(tmp_path, AdamW(again.named_parameters(), lr=0.5))
    assert restored.steps == 1 and restored.lr == 1e-2
    for name in optimizer.exp_avg:
        np.testing.assert_array_equal(restored.exp_avg[name], optimizer.exp_avg[name])


def test_train_refuses_a_model_that_does_not_predict_tokens():
    source, _ = _task()
    with pytest.raises(TypeError, match=r"^model: train\(\) trains a DecoderLM .*got Encoder$"):
        train(Encoder(), source, TrainConfig(steps=1))


# -- through the command line ----------------------------------------------------------------
FAST = ["--no-progress", "--d-model", "16", "--layers", "2", "--heads", "2", "--batch-size", "8",
        "--seed", "5"]


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _stop_the_command_at(monkeypatch, module, step):
    """The command's training stopped by Ctrl-C after ``step`` steps, as a user would stop it."""
    real = module.train

    def stopped(*args, **kwargs):
        def on_step(done, loss):
            if done == step:
                os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **{**kwargs, "on_step": on_step})
    monkeypatch.setattr(module, "train", stopped)


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("退货运费由谁承担？质量问题由商家承担。" * 20, encoding="utf-8")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["gpt2", "llama"])
@pytest.mark.parametrize("data", ["reverse", "text"])
def test_every_arch_of_the_command_trains_loads_generates_and_resumes(capsys, monkeypatch, tmp_path,
                                                                       arch, data, text_file):
    import npformer.cli.train as command
    source = ["--text", text_file, "--seq-len", "12"] if data == "text" else ["--data", data]
    prompt = "退货" if data == "text" else "12345>"
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    new_run = ["train", "--arch", arch, *source, "--steps", STEPS, *FAST]
    code, out, err = _run(capsys, *new_run, "--out", whole)
    assert code == 0 and f"trained {STEPS} steps" in out, err

    _stop_the_command_at(monkeypatch, command, STOP_AT)
    code, out, err = _run(capsys, *new_run, "--out", cut)
    monkeypatch.undo()
    assert code == 130 and f"stopped by SIGINT at step {STOP_AT}" in out, err
    code, out, err = _run(capsys, "generate", cut, "--prompt", prompt, "--max-new-tokens", 4)
    assert code == 0 and out.startswith(prompt) and "Traceback" not in err, err
    code, out, err = _run(capsys, "train", "--out", cut, "--resume", "--no-progress")
    assert code == 0 and f"resuming {cut} at step {STOP_AT} of {STEPS}" in out, err

    whole_arrays, whole_state = _saved(whole)
    cut_arrays, cut_state = _saved(cut)
    assert whole_state["history"]["loss"] == cut_state["history"]["loss"]
    assert len(cut_state["history"]["loss"]) == STEPS
    assert sorted(whole_arrays) == sorted(cut_arrays)
    for name in whole_arrays:
        np.testing.assert_array_equal(cut_arrays[name], whole_arrays[name], err_msg=name)
    norms = [name for name in whole_arrays if name.endswith(".beta")]
    assert bool(norms) == (arch == "gpt2")          # LayerNorm in GPT-2, RMSNorm in Llama
    answers = [_run(capsys, "generate", d, "--prompt", prompt, "--max-new-tokens", 4)
               for d in (whole, cut)]
    assert answers[0] == answers[1] and answers[0][0] == 0


@pytest.mark.slow
def test_the_demos_model_generates_and_resumes(capsys, monkeypatch, tmp_path):
    import npformer.cli.demo as command
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    demo = ["demo", "--steps", 4, "--batch-size", 8, "--no-progress"]
    assert _run(capsys, *demo, "--out", whole)[0] == 0
    _stop_the_command_at(monkeypatch, command, 2)
    code, out, err = _run(capsys, *demo, "--out", cut)
    monkeypatch.undo()
    assert code == 130 and "stopped by SIGINT at step 2; checkpoint saved" in out, err
    code, out, err = _run(capsys, "train", "--out", cut, "--resume", "--no-progress")
    assert code == 0 and "trained 4 steps" in out, err
    whole_arrays, whole_state = _saved(whole)
    cut_arrays, cut_state = _saved(cut)
    assert whole_state["history"]["loss"] == cut_state["history"]["loss"]
    for name in whole_arrays:
        np.testing.assert_array_equal(cut_arrays[name], whole_arrays[name], err_msg=name)
    code, out, err = _run(capsys, "generate", cut, "--prompt", "耳机坏了，原因是进水，保修吗？")
    assert code == 0 and "Traceback" not in err
