"""npformer used as a library, the way a newcomer (often a PyTorch user) calls it: the Python
blocks of README and docs/ run as printed, and the usual slips are one-line errors that say what to do."""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import npformer as nf
from npformer.cli import main

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = REPO / "docs"


def documentation():
    """README.md, then each docs/ page's body (above its additions line, where sections that
    others append, with tests of their own, begin)."""
    texts = [README.read_text(encoding="utf-8")]
    for page in sorted(DOCS.glob("*.md")):
        texts.append(page.read_text(encoding="utf-8").split("<!-- additions")[0])
    return "\n".join(texts)


def python_blocks():
    """Every ```python block of README.md and the docs/ pages, as printed."""
    return re.findall(r"```python\n(.*?)```", documentation(), flags=re.S)


def test_the_docs_have_the_library_example():
    blocks = python_blocks()
    assert any("model.backward(d_logits, cache)" in b and "optimizer.step()" in b for b in blocks)


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_every_python_block_of_the_readme_runs_as_printed(index, tmp_path):
    block = python_blocks()[index]
    if "import torch" in block:
        pytest.importorskip("torch", reason="a README block for PyTorch users (pip install torch==2.13.0)")
    done = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "NPFORMER_TRACK"},
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    if "conform(\"softmax\"" in block:
        # the README shows the report of a backward without the sum term: the mistake is named
        assert "the mistake: softmax-no-sum-term: the sum term is missing" in done.stdout, done.stdout
    if "model.backward(d_logits, cache)" in block:
        # what README says it prints: a small loss, and the text continued as it was taught
        loss_line, continuation = done.stdout.strip().splitlines()[-2:]
        assert float(loss_line.split(":")[1]) < 0.2
        assert continuation.startswith("at on the log")


def test_the_docs_count_the_catalogued_mistakes():
    from npformer.testing.mistakes.registry import CATALOGUE
    assert f"one of the {len(CATALOGUE)} catalogued learners' mistakes" in documentation()


def test_the_docs_list_every_component_conform_checks():
    from npformer.testing import COMPONENTS
    text = (DOCS / "checking-your-code.md").read_text(encoding="utf-8")
    for component in COMPONENTS.values():
        assert f"| `{component.name}` | `{component.signature.replace('|', '/')}` |" in text


# -- the upstream gradient of a backward --------------------------------------------------------
def _model(dtype=np.float32):
    config = nf.DecoderConfig(vocab_size=11, d_model=8, n_heads=2, max_len=6)
    return nf.DecoderLM(config, np.random.default_rng(0), dtype)


@pytest.mark.parametrize("track", ["plain", "fast"])
def test_the_pair_a_loss_backward_returns_is_refused_in_one_line(track):
    model = _model()
    ids = np.array([[1, 2, 3, 4]])
    with nf.track(track):
        logits, cache = model.forward(ids)
        _, loss_cache = nf.cross_entropy_forward(logits, np.array([[2, 3, 4, 5]]))
        pair = nf.cross_entropy_backward(1.0, loss_cache)
        with pytest.raises(TypeError, match=r"DecoderLM.backward: d_out: expected the gradient of "
                                            r"forward's output as one array, got a tuple of 2"):
            model.backward(pair, cache)
        model.backward(pair[0], cache)                       # its first is the right one


@pytest.mark.parametrize("track", ["plain", "fast"])
def test_a_float64_gradient_into_a_float32_model_is_refused(track):
    model = _model()
    with nf.track(track):
        logits, cache = model.forward(np.array([[1, 2, 3]]))
        with pytest.raises(TypeError, match=r"d_out: expected dtype float32 \(the parameters' dtype\), "
                                            r"got float64"):
            model.backward(np.ones(logits.shape), cache)
        layer = nf.LayerNorm(8)
        _, norm_cache = layer.forward(np.ones((2, 8), np.float32))
        with pytest.raises(TypeError, match=r"LayerNorm.backward: d_out: expected dtype float32"):
            layer.backward(np.ones((2, 8)), norm_cache)


@pytest.mark.parametrize("track", ["plain", "fast"])
def test_a_gradient_of_another_shape_is_refused_not_broadcast(track):
    # logits[0] ([N, V]) would broadcast over the batch of one and give a silently wrong gradient
    model = _model()
    with nf.track(track):
        logits, cache = model.forward(np.array([[1, 2, 3, 4]]))
        for wrong in (logits[0], logits[:, :-1]):
            with pytest.raises(ValueError, match=r"DecoderLM.backward: d_out: expected shape \(1, 4, 11\) "
                                                 r"\(forward's output\), got "):
                model.backward(wrong, cache)
        encoder = nf.Encoder(nf.EncoderConfig(vocab_size=11, d_model=8, n_heads=2, n_layers=1, max_len=6,
                                              pooler=True))
        states, cache = encoder.forward(np.array([[1, 2, 3]]))
        with pytest.raises(ValueError, match=r"Encoder.backward: d_out: expected shape \(1, 3, 8\)"):
            encoder.backward(states[0], cache)
        pooled, pool_cache = encoder.pooler.forward(states)
        with pytest.raises(ValueError, match=r"Pooler.backward: d_out: expected shape \(1, 8\)"):
            encoder.pooler.backward(pooled[0], pool_cache)


def test_a_list_or_a_number_is_not_a_gradient():
    layer = nf.Linear(4, 3, rng=np.random.default_rng(0))
    _, cache = layer.forward(np.ones((2, 4), np.float32))
    with pytest.raises(TypeError, match=r"Linear.backward: d_out: expected a numpy array, got list"):
        layer.backward([[1.0] * 3] * 2, cache)


# -- the optimizer, as a PyTorch user would call it ---------------------------------------------
def test_adamw_refuses_bare_parameters_while_a_decay_applies():
    model = _model()
    with pytest.raises(TypeError, match=r"pass model.named_parameters\(\) instead of model.parameters\(\)"):
        nf.AdamW(model.parameters())
    nf.AdamW(model.parameters(), weight_decay=0.0)            # no decay: names are not needed
    nf.SGD(model.parameters(), lr=0.1)                        # SGD has no decay rule


def test_adamw_with_names_leaves_the_embedding_table_undecayed():
    model = _model()
    optimizer = nf.AdamW(model.named_parameters(), lr=0.1, weight_decay=0.5)
    table = model.tokens.weight
    before = table.data.copy()
    model.zero_grad()
    optimizer.step()                                          # zero gradients: only a decay could move it
    np.testing.assert_array_equal(table.data, before)
    assert not optimizer.decayed["tokens.weight"] and optimizer.decayed["blocks.0.attn.qkv.weight"]


# -- the command -----------------------------------------------------------------------------
def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"npformer {nf.__version__}"


def test_a_mistyped_track_variable_is_one_line_and_exit_2():
    env = {**os.environ, "NPFORMER_TRACK": "fsat"}
    done = subprocess.run([sys.executable, "-m", "npformer", "tour"], env=env, capture_output=True,
                          text=True)
    assert done.returncode == 2
    # named by the command that refused to start, as every usage error is
    assert done.stderr.strip() == "npformer tour: error: NPFORMER_TRACK: expected one of plain, fast, got 'fsat'"


def test_help_lists_the_api_and_nothing_is_left_out_of_all():
    import inspect
    import pydoc
    public = {name for name in dir(nf) if not name.startswith("_")
              and not inspect.ismodule(getattr(nf, name))}
    assert set(nf.__all__) == public and len(nf.__all__) == len(set(nf.__all__))
    shown = pydoc.render_doc(nf, renderer=pydoc.plaintext)
    for name in ("DecoderLM", "cross_entropy_forward", "gradcheck", "train", "CharTokenizer"):
        assert f"\n    {name}" in shown or f"class {name}" in shown, name
