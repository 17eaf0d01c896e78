"""Code written the way people publish it, checked with scope and call glue only.

Each style is written here from its maths (not copied): correct, it conforms or conforms
under its named convention; with one seeded bug, it does not, with the bug's smallest example.
"""
import importlib.util
import sys
import warnings

import numpy as np
import pytest

from npformer.testing import conform

pytest.importorskip("hypothesis")
EXAMPLES = 30


def _softmax_rows(scores):
    shifted = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=-1, keepdims=True)


# -- attention, always causal, one sequence attending to itself ---------------------------------
def causal_attention(fill, unscaled=False, scale_bug=False):
    """q, k, v [B, H, T, D]; a lower-triangular mask, as a fill (-1e10) or an additive -inf.
    ``unscaled``: no 1/sqrt(D) anywhere (T5's convention); ``scale_bug``: none in the backward."""
    def forward(q, k, v):
        T, D = q.shape[-2], q.shape[-1]
        scores = q @ k.swapaxes(-1, -2) / (1.0 if unscaled else np.sqrt(D))
        below = np.tril(np.ones((T, T), bool))
        if fill == "additive":
            scores = scores + np.where(below, 0.0, -np.inf)
        else:
            scores = np.where(below, scores, fill)
        weights = _softmax_rows(scores)
        return weights @ v, (q, k, v, weights, D)

    def backward(d_out, cache):
        q, k, v, weights, D = cache
        d_v = weights.swapaxes(-1, -2) @ d_out
        d_weights = d_out @ v.swapaxes(-1, -2)
        d_scores = weights * (d_weights - (d_weights * weights).sum(axis=-1, keepdims=True))
        d_scores = d_scores / (1.0 if unscaled or scale_bug else np.sqrt(D))
        return d_scores @ k, d_scores.swapaxes(-1, -2) @ q, d_v
    return forward, backward


CAUSAL_SCOPE = "causal=True,no_cached_keys"


@pytest.mark.parametrize("fill", ["additive", -1e10])
def test_always_causal_attention_conforms_in_scope(fill):
    forward, backward = causal_attention(fill)
    report = conform("attention", forward, backward, examples=EXAMPLES, scope=CAUSAL_SCOPE)
    assert report.verdict == "conforms", str(report)
    assert "checked only with causal=True and as many keys as queries" in str(report)


@pytest.mark.full
def test_always_causal_attention_without_the_scale_anywhere_is_t5s_convention():
    forward, backward = causal_attention("additive", unscaled=True)
    report = conform("attention", forward, backward, examples=EXAMPLES, scope=CAUSAL_SCOPE)
    assert report.verdict == "conforms under convention" and report.convention.get("scale") == "none", str(report)


@pytest.mark.full
def test_always_causal_attention_without_the_scale_in_its_backward_fails_on_a_small_example():
    forward, backward = causal_attention("additive", scale_bug=True)
    report = conform("attention", forward, backward, examples=EXAMPLES, scope=CAUSAL_SCOPE)
    assert report.verdict == "does not conform"
    failed = next(c for c in report.checks if c.kind == "gradient" and c.failure is not None)
    assert failed.failure.example is not None and failed.failure.example.args[0].shape[-1] >= 1


# -- batch-first [B, N, H, D] attention, glued by transposes ----------------------------------------
def batch_first_attention(q, k, v, mask=None, bug=False):
    """q [B, N, H, D], k and v [B, M, H, D]; mask broadcasts to [B, H, N, M] (True: may read)."""
    scores = np.einsum("bnhd,bmhd->bhnm", q, k) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    peak = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(peak), peak, 0.0))
    total = e.sum(axis=-1, keepdims=True)
    weights = e / np.where(total > 0, total, 1.0)
    if bug:
        weights = e / (total + 1.0)              # the "+1 for safety" that shifts every weight
    return np.einsum("bhnm,bmhd->bnhd", weights, v)


def _glued(bug=False):
    def attention(q, k, v, mask=None):           # the glue: [B, H, N, D] <-> [B, N, H, D]
        return batch_first_attention(*(a.swapaxes(1, 2) for a in (q, k, v)), mask, bug).swapaxes(1, 2)
    return attention


def test_batch_first_attention_conforms_with_transposes_as_glue():
    report = conform("attention", _glued(), examples=EXAMPLES, scope="no_gqa")
    assert report.verdict == "conforms", str(report)


def test_batch_first_attention_with_a_shifted_denominator_fails():
    report = conform("attention", _glued(bug=True), examples=EXAMPLES, scope="no_gqa")
    assert report.verdict == "does not conform"
    assert any(c.failure is not None and c.failure.example is not None for c in report.checks)


# -- interleaved RoPE from complex numbers ----------------------------------------------------------
def complex_rope(bug=False):
    def angles(positions, D, base):
        inverse = base ** (-np.arange(0, D, 2) / D)               # [D/2]
        if bug:
            inverse = base ** (-np.arange(0, D, 2) / (D - 2 + 1e-300 if D > 2 else D))
        return np.asarray(positions)[..., None] * inverse         # [..., N, D/2]

    def turn(x, theta):
        pairs = x[..., 0::2] + 1j * x[..., 1::2]                  # (x0, x1), (x2, x3) ...
        turned = pairs * np.exp(1j * theta)
        out = np.empty_like(x)
        out[..., 0::2], out[..., 1::2] = turned.real, turned.imag
        return out

    def forward(x, positions, base=10000.0):
        theta = angles(positions, x.shape[-1], base)
        theta = theta[:, None] if theta.ndim == 3 else theta      # [B, 1, N, D/2] per sequence
        return turn(x, theta), theta

    def backward(d_out, theta):
        return turn(d_out, -theta), None
    return forward, backward


def test_complex_rope_conforms_under_the_interleaved_convention():
    report = conform("rope", *complex_rope(), examples=EXAMPLES)
    assert report.verdict == "conforms under convention", str(report)
    assert report.convention == {"layout": "interleaved"} and report.ok
    assert "conforms under convention: layout='interleaved'" in str(report)


def test_complex_rope_stated_up_front_and_with_a_wrong_frequency():
    report = conform("rope", *complex_rope(), examples=EXAMPLES, convention={"layout": "interleaved"})
    assert report.ok, str(report)
    wrong = conform("rope", *complex_rope(bug=True), examples=EXAMPLES)
    assert wrong.verdict == "does not conform"
    failed = next(c for c in wrong.checks if c.name == "output")
    assert failed.failure.example.args[0].shape[-1] >= 4      # the bug needs a second pair


# -- RMSNorm computing in float32 inside --------------------------------------------------------------
def float32_rmsnorm(bug=False):
    def forward(x, gamma, eps=1e-6):
        x32 = x.astype(np.float32)
        inv = 1.0 / np.sqrt((x32 * x32).mean(axis=-1, keepdims=True) + np.float32(eps))
        normed = x32 * inv
        y = normed * gamma.astype(np.float32)
        return y.astype(x.dtype), (normed, inv, gamma.astype(np.float32), x.dtype)

    def backward(d_out, cache):
        normed, inv, gamma, dtype = cache
        d_out = d_out.astype(np.float32)
        d_gamma = (d_out * normed).reshape(-1, normed.shape[-1]).sum(axis=0)
        d_normed = d_out * gamma
        mean = (d_normed * normed).mean(axis=-1, keepdims=True)
        d_x = inv * (d_normed - normed * (0.0 if bug else mean))
        return d_x.astype(dtype), d_gamma.astype(dtype)
    return forward, backward


def test_float32_rmsnorm_agrees_to_float32_precision():
    report = conform("rmsnorm", *float32_rmsnorm(), examples=EXAMPLES)
    assert report.verdict == "conforms", str(report)
    assert "agrees to float32 precision (your code computes in float32)" in str(report)
    given = conform("rmsnorm", *float32_rmsnorm(), examples=EXAMPLES, precision="float32")
    assert given.ok and given.tolerance == 1e-4, str(given)


def test_float32_rmsnorm_without_the_mean_term_fails():
    report = conform("rmsnorm", *float32_rmsnorm(bug=True), examples=EXAMPLES)
    assert report.verdict == "does not conform"
    checks = {c.name: c for c in report.checks}
    assert checks["gradient of x"].failure is not None
    # judged at float32, the output's rounding is no failure and the missing term is named
    assert report.dtype == "float32" and checks["output"].passed, str(report)
    assert checks["gradient of x"].failure.mistake is not None, str(report)


# -- LayerNorm with a fixed eps -----------------------------------------------------------------------
EPS = 1e-5


def fixed_eps_layernorm(bug=False):
    def forward(x, gamma, beta):
        mu = x.mean(axis=-1, keepdims=True)
        var = x.var(axis=-1, keepdims=True)
        xhat = (x - mu) / np.sqrt(var + EPS)
        return gamma * xhat + beta, (xhat, var)

    def backward(d_out, cache):
        xhat, var = cache
        rows = d_out.reshape(-1, d_out.shape[-1])
        d_gamma = (rows * xhat.reshape(rows.shape)).sum(axis=0)
        d_beta = rows.sum(axis=0) if not bug else d_out.reshape(-1, d_out.shape[-1])[0]
        return d_out, d_gamma, d_beta                  # placeholder for d_x, replaced below
    return forward, backward


def _layernorm(bug=False):
    forward, inner = fixed_eps_layernorm(bug)
    gamma_of = {}

    def forward_with_gamma(x, gamma, beta):
        out, cache = forward(x, gamma, beta)
        return out, (cache, gamma)

    def backward(d_out, cache):
        (xhat, var), gamma = cache
        _, d_gamma, d_beta = inner(d_out, (xhat, var))
        d_xhat = d_out * gamma
        d_x = (d_xhat - d_xhat.mean(axis=-1, keepdims=True)
               - xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True)) / np.sqrt(var + EPS)
        return d_x, d_gamma, d_beta
    del gamma_of
    forward_with_gamma.__name__ = "layernorm"
    return forward_with_gamma, backward


def test_fixed_eps_layernorm_conforms_and_says_what_was_not_run():
    report = conform("layernorm", *_layernorm(), examples=EXAMPLES, scope="eps=1e-5")
    assert report.verdict == "conforms", str(report)
    not_run = [c for c in report.checks if c.skipped.startswith("not run")]
    assert not_run and all("eps" in c.skipped for c in not_run), str(report)


def test_fixed_eps_layernorm_with_the_first_row_bias_gradient_fails():
    report = conform("layernorm", *_layernorm(bug=True), examples=EXAMPLES, scope="eps=1e-5")
    assert next(c for c in report.checks if c.name == "gradient of beta").failure is not None


# -- a summed cross-entropy without ignore_index -------------------------------------------------------
def summed_cross_entropy(bug=False):
    def forward(logits, targets):
        shifted = logits - logits.max(axis=-1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
        if bug:                                       # the loss from probabilities: overflows to inf
            probs = np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True)
            log_probs = np.log(probs)
        picked = np.take_along_axis(log_probs, targets[..., None], axis=-1)
        return -picked.sum(), (np.exp(log_probs), targets)

    def backward(d_loss, cache):
        probs, targets = cache
        d_logits = probs.copy()
        np.put_along_axis(d_logits, targets[..., None], np.take_along_axis(probs, targets[..., None], -1) - 1, -1)
        return d_loss * d_logits, None
    return forward, backward


def test_summed_cross_entropy_conforms_under_the_sum_convention():
    report = conform("cross_entropy", *summed_cross_entropy(), examples=EXAMPLES, scope="no_ignore_index")
    assert report.verdict == "conforms under convention", str(report)
    assert report.convention == {"reduction": "sum"}


def test_cross_entropy_from_probabilities_fails_on_large_logits():
    report = conform("cross_entropy", *summed_cross_entropy(bug=True), examples=EXAMPLES,
                     scope="no_ignore_index", convention={"reduction": "sum"})
    assert report.verdict == "does not conform"
    output = next(c for c in report.checks if c.name == "output")
    assert output.failure is not None and np.abs(output.failure.example.args[0]).max() > 100


# -- tanh GELU handed in as "gelu" --------------------------------------------------------------------
def tanh_gelu(bug=False):
    c = np.sqrt(2 / np.pi)

    def forward(x):
        inner = c * (x + 0.044715 * x ** 3)
        t = np.tanh(inner)
        return 0.5 * x * (1 + t), (x, t)

    def backward(d_out, cache):
        x, t = cache
        slope = 0.5 * (1 + t) + 0.5 * x * (1 - t ** 2) * c * (1 + (0.044715 if bug else 3 * 0.044715) * x ** 2)
        return d_out * slope
    return forward, backward


def test_tanh_gelu_as_gelu_conforms_under_the_tanh_convention():
    report = conform("gelu", *tanh_gelu(), examples=EXAMPLES)
    assert report.verdict == "conforms under convention", str(report)
    assert report.convention == {"approximate": "tanh"}


def test_tanh_gelu_with_a_wrong_derivative_fails():
    report = conform("gelu", *tanh_gelu(bug=True), examples=EXAMPLES)
    assert report.verdict == "does not conform"
    assert next(c for c in report.checks if c.name == "gradient of x").failure is not None


# -- a harmless edit of a concept file never breaks conform ------------------------------------------
def test_a_renamed_local_variable_skips_the_stale_mistakes(tmp_path, monkeypatch):
    import npformer.t02_linear as linear
    source = open(linear.__file__).read()
    edited = source.replace("x_rows", "x_flat")
    assert edited != source
    path = tmp_path / "t02_linear.py"
    path.write_text(edited)
    spec = importlib.util.spec_from_file_location("npformer.t02_linear_edited", path,
                                                  submodule_search_locations=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "npformer"
    monkeypatch.setitem(sys.modules, spec.name, module)          # dataclasses look it up there
    spec.loader.exec_module(module)
    monkeypatch.setattr(linear, "linear_backward", module.linear_backward)
    forward, backward = module.linear_forward, module.linear_backward

    def transposed(d_out, cache):                     # a wrong backward, so the catalogue is searched
        d_x, d_w, d_b = backward(d_out, cache)
        return d_x, d_w * 2, d_b
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = conform("linear", forward, transposed, examples=10)
    assert report.verdict == "does not conform"
    said = [str(w.message) for w in caught]
    assert any("catalogued mistakes no longer apply to t02_linear.py" in s for s in said), said
    assert any("no longer apply to t02_linear.py" in w for w in report.warnings)


# -- LayerNorm with eps outside the square root: (x - mean) / (std + eps) ------------------------
def eps_outside_layernorm(bug=False, eps=1e-6):
    def forward(x, gamma, beta):
        mu = x.mean(axis=-1, keepdims=True)
        std = x.std(axis=-1, keepdims=True)                      # biased, as np.std is
        xhat = (x - mu) / (std + eps)
        return gamma * xhat + beta, (xhat, std, gamma)

    def backward(d_out, cache):
        xhat, std, gamma = cache
        d_xhat = d_out * gamma
        # the path through std: d std / d x = (x - mu) / (d std), with x - mu = xhat (std + eps)
        through_std = xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True) / np.where(std > 0, std, np.inf)
        d_x = (d_xhat - d_xhat.mean(axis=-1, keepdims=True)) / (std + eps) - (0.0 if bug else through_std)
        rows = d_out.reshape(-1, d_out.shape[-1])
        return d_x, (rows * xhat.reshape(rows.shape)).sum(axis=0), rows.sum(axis=0)
    forward.__name__ = "layernorm"
    return forward, backward


def test_eps_outside_the_root_differs_from_inside_by_a_checkable_amount():
    # x = [-1/4, 1/4], eps 1e-6: outside, 0.25 / (0.25 + 1e-6) = 0.999996000016; inside,
    # 0.25 / sqrt(1/16 + 1e-6) = 0.999992000096: they differ by 4e-6
    forward, _ = eps_outside_layernorm()
    y, _ = forward(np.array([[-0.25, 0.25]]), np.ones(2), np.zeros(2))
    assert y[0, 1] == pytest.approx(0.999996000016, rel=1e-11)
    assert abs(y[0, 1] - 0.999992000096) == pytest.approx(4e-6, rel=1e-3)


def test_eps_outside_layernorm_conforms_under_its_convention():
    report = conform("layernorm", *eps_outside_layernorm(), examples=EXAMPLES, scope="eps=1e-6")
    assert report.verdict == "conforms under convention", str(report)
    assert report.convention == {"eps": "outside sqrt"}
    assert "conforms under convention: eps='outside sqrt'" in str(report)


def test_eps_outside_layernorm_without_the_std_path_fails_on_a_small_example():
    forward, backward = eps_outside_layernorm(bug=True)
    report = conform("layernorm", forward, backward, examples=EXAMPLES, scope="eps=1e-6",
                     convention={"eps": "outside sqrt"})
    assert report.verdict == "does not conform"
    checks = {c.name: c for c in report.checks}
    assert checks["output"].passed and checks["gradient of gamma"].passed, str(report)
    failure = checks["gradient of x"].failure
    assert failure is not None and failure.example is not None
    assert failure.example.args[0].shape[-1] >= 2          # one feature has no std to move


# -- an additive finite mask: scores + mask, the mask 0 or -1e9 ----------------------------------
def additive_mask_attention(fill, bug=False):
    """q [B, H, N, D], k, v [B, H, M, D]; ``attn_mask`` adds to the scores (0 or ``fill``)."""
    def forward(q, k, v, attn_mask=None):
        D = q.shape[-1]
        scores = q @ k.swapaxes(-1, -2) / (D if bug else np.sqrt(D))
        if attn_mask is not None:
            scores = scores + attn_mask
        weights = _softmax_rows(scores)
        return weights @ v, (q, k, v, weights, D)

    def backward(d_out, cache):
        q, k, v, weights, D = cache
        d_v = weights.swapaxes(-1, -2) @ d_out
        d_weights = d_out @ v.swapaxes(-1, -2)
        d_scores = weights * (d_weights - (d_weights * weights).sum(axis=-1, keepdims=True))
        d_scores = d_scores / (D if bug else np.sqrt(D))
        return d_scores @ k, d_scores.swapaxes(-1, -2) @ q, d_v

    def attention(q, k, v, mask=None):          # the glue: "may read" -> 0 or fill, added
        return forward(q, k, v, None if mask is None else np.where(mask, 0.0, fill))
    attention.__name__ = "additive_mask_attention"
    return attention, backward


def test_an_additive_mask_reads_every_key_in_a_fully_masked_row():
    # softmax(s + c) = softmax(s): a row masked everywhere is attention with no mask at all
    rng = np.random.default_rng(1)
    q, k, v = rng.standard_normal((1, 1, 2, 3)), rng.standard_normal((1, 1, 4, 3)), rng.standard_normal((1, 1, 4, 3))
    attention, _ = additive_mask_attention(-1e4)
    masked, _ = attention(q, k, v, np.zeros((1, 1, 2, 4), bool))
    plain = _softmax_rows(q @ k.swapaxes(-1, -2) / np.sqrt(3)) @ v
    assert np.allclose(masked, plain, rtol=1e-10) and np.abs(plain).max() > 0.1


def test_additive_mask_attention_conforms_under_its_convention():
    report = conform("attention", *additive_mask_attention(-1e9), examples=EXAMPLES, scope="no_gqa")
    assert report.verdict == "conforms under convention", str(report)
    assert report.convention == {"mask": "additive -1e9"}
    assert "conforms under convention: mask='additive -1e9'" in str(report)


def test_additive_mask_of_minus_1e4_conforms_under_its_own_fill_only():
    attention, backward = additive_mask_attention(-1e4)
    report = conform("attention", attention, backward, examples=EXAMPLES, scope="no_gqa",
                     convention={"mask": "additive -1e4"})
    assert report.ok and report.dtype == "float64", str(report)
    # in float64 s - 1e9 keeps s only to ~1e-7: the -1e9 convention is not the -1e4 one at
    # float64, and agrees with it at float32 alone (1e-7 is float32 rounding), as the report says
    other = conform("attention", attention, backward, examples=EXAMPLES, scope="no_gqa",
                    convention={"mask": "additive -1e9"}, precision="float64")
    assert not other.ok
    found = conform("attention", attention, backward, examples=EXAMPLES, scope="no_gqa",
                    convention={"mask": "additive -1e9"})
    assert not found.ok or (found.dtype == "float32" and "agrees to float32 precision" in str(found))


def test_additive_mask_attention_scaled_by_d_fails_on_a_small_example():
    report = conform("attention", *additive_mask_attention(-1e9, bug=True), examples=EXAMPLES,
                     scope="no_gqa", convention={"mask": "additive -1e9"})
    assert report.verdict == "does not conform"
    output = next(c for c in report.checks if c.name == "output").failure
    # 1/D and 1/sqrt(D) agree at D = 1: the smallest failing example has two features or more
    assert output is not None and output.example.args[0].shape[-1] >= 2, str(report)
