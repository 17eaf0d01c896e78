"""The protocol rule and the corners learners trip on, judged as the grader judges: a backward
that returns the right numbers but writes into what its caller may reuse, a blockwise backward
that forgets the queries come after a cache. Each seeded mistake is not done and says why."""
import os
import re
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from npformer.exercises import catalog
from npformer.testing import conform, protocol

from test_grader import failing, judge_source, key, with_body, fewer_draws  # noqa: F401


def messages(result):
    """Every failure message, note and diagnosis of a judged exercise, as one text."""
    found = []
    for check in failing(result):
        found += [str(check.get("message") or ""), str(check.get("detail") or "")]
        found += [str(n) for n in check.get("notes", [])]
        for tensor in check.get("tensors", []):
            found += [str(tensor.get("message") or "")] + [str(d) for d in tensor.get("diagnoses", [])]
        found += [str(d) for d in check.get("diagnoses", [])]
    return "\n".join(found)


def judged(key, exercise, file, qualname, body, tmp_path):
    source = with_body(Path(key.path(file)).read_text(), qualname, body)
    return judge_source(key, catalog.exercise_named(exercise), file, source, tmp_path)


# -- the rule itself, on numbers one can check by hand ------------------------------------------------
def test_a_backward_that_writes_into_d_out_is_caught_and_one_that_copies_is_not():
    d_out, cache, x = np.ones((2, 3)), {"xhat": np.arange(6.0).reshape(2, 3)}, np.zeros((2, 3))

    def in_place(d, c):
        d *= 2.0
        return d

    def copying(d, c):
        return d * 2.0
    returned, wrong = protocol.run_backward(in_place, d_out.copy(), cache, (x,), ("x",))
    assert wrong == protocol.WROTE_D_OUT and (returned == 2.0).all()
    assert protocol.run_backward(copying, d_out.copy(), cache, (x,), ("x",))[1] is None

    def into_cache(d, c):
        c["xhat"][0, 0] = 7.0
        return d
    assert "cache (['xhat'])" in protocol.run_backward(into_cache, d_out, cache, (x,))[1]


# -- (a) LayerNorm backward scaling d_out in place ----------------------------------------------------
LAYERNORM_IN_PLACE = '''
def layernorm_backward(d_out, cache):
    """-> (d_x, d_gamma, d_beta)."""
    xhat, rstd = cache.xhat, cache.rstd
    d_gamma = sum_over_positions(d_out * xhat)
    d_beta = sum_over_positions(d_out)
    d_out *= cache.gamma
    d_xhat = d_out
    d_x = rstd * (d_xhat - d_xhat.mean(axis=-1, keepdims=True)
                  - xhat * (d_xhat * xhat).mean(axis=-1, keepdims=True))
    return d_x, d_gamma, d_beta
'''


def test_layernorm_backward_writing_into_d_out_is_not_done(key, tmp_path, fewer_draws):
    result = judged(key, "norm", "t08_norm.py", "layernorm_backward", LAYERNORM_IN_PLACE, tmp_path)
    assert failing(result)
    assert protocol.WROTE_D_OUT in messages(result)
    # every number it returns is right: no catalogued mistake may be named for it
    assert not any(c.get("mistake") for c in failing(result)), failing(result)


def test_conform_reports_the_protocol_rule():
    from npformer import t08_norm
    ns = dict(vars(t08_norm))
    exec(textwrap.dedent(LAYERNORM_IN_PLACE), ns)
    report = conform("layernorm", t08_norm.layernorm_forward, ns["layernorm_backward"], examples=10)
    assert not report.ok
    rule = next(c for c in report.checks if c.name == protocol.RULE)
    assert rule.failure is not None and rule.failure.message == protocol.WROTE_D_OUT
    right = conform("layernorm", t08_norm.layernorm_forward, t08_norm.layernorm_backward, examples=10)
    assert right.ok


# -- the course finishes: the training task runs on the learner's own components -----------------------
def _fresh_env(**extra):
    root = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]), **extra}


@pytest.mark.slow
def test_train_alone_holds_on_an_answer_key_on_the_learners_own_softmax(tmp_path, monkeypatch):
    """The last stage, judged as graded (the fast track chosen by the grader's environment, which
    the learner's process does not inherit): the claim holds, and the learner's own
    softmax_backward ran (it says so once)."""
    from npformer.exercises.workspace import write_workspace
    from support.grading import judged
    monkeypatch.setenv("NPFORMER_TRACK", "fast")
    key = write_workspace(tmp_path / "key", solutions=True)
    file = Path(key.path("t03_softmax.py"))
    source = file.read_text()
    signature = "def softmax_backward(d_out, cache):\n"
    assert source.count(signature) == 1
    file.write_text(source.replace(signature, signature + "    global _said\n    if not _said:\n"
                                   "        print('the learner softmax ran', flush=True)\n        _said = True\n")
                    + "\n_said = False\n")
    reply = judged(key.directory, "train")
    result = reply["result"]
    assert [c["ok"] for c in result["claims"]] == [True], result["claims"]
    assert float(result["claims"][0]["detail"].split("accuracy ")[1].split("%")[0]) >= 99.0
    assert "the learner softmax ran" in reply["output"]


@pytest.mark.full
def test_a_full_answer_key_grades_all_done_through_the_cli(tmp_path):
    """`npformer exercises KEY --solutions` then `npformer grade KEY` in fresh processes: every
    exercise done, exit 0 (about two minutes on two shared cores)."""
    import subprocess
    env = _fresh_env()
    subprocess.run([sys.executable, "-m", "npformer", "exercises", str(tmp_path / "key"), "--solutions"],
                   check=True, env=env, cwd=tmp_path, capture_output=True, timeout=60)
    graded = subprocess.run([sys.executable, "-m", "npformer", "grade", str(tmp_path / "key")], env=env,
                            cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert graded.returncode == 0, graded.stdout[-2000:]
    total = len(catalog.EXERCISES)
    assert f"progress: {total} of {total} done" in graded.stdout
    assert "failing" not in graded.stdout.split("progress:")[1]


# -- (b) blockwise attention judged with fewer queries than keys -------------------------------------
FLASH_QUERIES_FROM_ZERO = '''
def flash_attention_backward(d_out, cache):
    """-> (d_q, d_k, d_v), recomputing each block's weights from the stored log-sum-exp."""
    q, k, v = cache.q, cache.k, cache.v
    N, group, M = q.shape[2], q.shape[1] // k.shape[1], k.shape[2]
    k_heads, v_heads = repeat_kv(k, group), repeat_kv(v, group)
    lse = cache.lse[..., None]
    lse = np.where(np.isfinite(lse), lse, np.inf)
    delta = np.sum(d_out * cache.out, axis=-1, keepdims=True)
    d_q = np.zeros_like(q)
    d_k_heads, d_v_heads = np.zeros_like(k_heads), np.zeros_like(v_heads)
    for start in range(0, M, cache.block_size):
        keys = slice(start, min(M, start + cache.block_size))
        scores = q @ k_heads[:, :, keys].swapaxes(-1, -2) * cache.scale
        allowed = np.ones(scores.shape, bool)
        if cache.causal or cache.window is not None:
            allowed = allowed & may_read(np.arange(N)[:, None], np.arange(keys.start, keys.stop)[None, :],
                                         cache.window)
        if cache.mask is not None:
            allowed = allowed & np.broadcast_to(cache.mask, scores.shape[:3] + (M,))[..., keys]
        p = np.exp(np.where(allowed, scores, -np.inf) - lse)
        d_v_heads[:, :, keys] += p.swapaxes(-1, -2) @ d_out
        d_p = d_out @ v_heads[:, :, keys].swapaxes(-1, -2)
        d_scores = p * (d_p - delta) * cache.scale
        d_q += d_scores @ k_heads[:, :, keys]
        d_k_heads[:, :, keys] += d_scores.swapaxes(-1, -2) @ q
    return d_q, sum_groups(d_k_heads, group), sum_groups(d_v_heads, group)
'''


def test_a_flash_backward_with_query_positions_from_zero_is_not_done(key, tmp_path, fewer_draws):
    result = judged(key, "flash", "t18_flash_attention.py", "flash_attention_backward",
                    FLASH_QUERIES_FROM_ZERO, tmp_path)
    wrong = failing(result)
    assert wrong and all(c.get("component") == "flash_attention" for c in wrong), wrong
    # the smallest failing example has fewer queries than keys, under a causal rule or a window
    example = next(c["example"] for c in wrong if c.get("example"))
    assert "causal = True" in example or "window = None" not in example, example
    q_shape, k_shape = (re.search(rf"{name} = float64 array of shape \(([0-9, ]+)\)", example).group(1)
                        for name in ("q", "k"))
    assert int(q_shape.split(",")[2]) < int(k_shape.split(",")[2]), example


def test_the_answer_keys_flash_and_norm_stay_done(key, tmp_path, fewer_draws):
    for exercise, file in (("flash", "t18_flash_attention.py"), ("norm", "t08_norm.py")):
        result = judge_source(key, catalog.exercise_named(exercise), file, Path(key.path(file)).read_text(), tmp_path)
        assert not failing(result), failing(result)[:2]
        assert any(c.get("component") and c["check"] == protocol.RULE for c in result["checks"])


# -- (d) two wrong lines in one function: each one's hint ---------------------------------------------
def test_two_adamw_mistakes_in_one_function_get_each_ones_hint(key, tmp_path, fewer_draws):
    from npformer.testing.mistakes import CATALOGUE
    file = "t19_optim.py"
    source = Path(key.path(file)).read_text()
    for old, new in (("m_hat = m / (1 - b1 ** step)", "m_hat = m"),
                     ("data = data - lr * weight_decay * data", "data = data - weight_decay * data")):
        assert source.count(old) == 1
        source = source.replace(old, new)
    result = judge_source(key, catalog.exercise_named("optim"), file, source, tmp_path)
    wrong = [c for c in failing(result) if c.get("kind") == "output"]
    assert wrong
    says = {m.name: m.says for m in CATALOGUE}
    for check in wrong:
        assert check["mistake"] is not None, check
        told = check["mistake"]["says"]
        assert says["adamw-no-bias-correction"] in told and says["adamw-decay-without-lr"] in told
    assert "1/sqrt(D)" not in messages(result)


# -- (c) MoE: its mistakes named, on more than one set of numbers -------------------------------------
def _moe(key, tmp_path, old, new):
    file = "t14_moe.py"
    source = Path(key.path(file)).read_text()
    assert source.count(old) == 1
    return judge_source(key, catalog.exercise_named("moe"), file, source.replace(old, new), tmp_path)


def test_a_moe_backward_without_the_routers_gradient_from_the_outputs_is_diagnosed(key, tmp_path):
    result = _moe(key, tmp_path, "        np.put_along_axis(d_probs, cache.chosen, d_kept, axis=-1)"
                                 "     # the k chosen are distinct\n", "")
    assert failing(result)
    assert "no gradient reaches the router from the outputs" in messages(result)


def test_a_moe_backward_whose_aux_gradient_reaches_padding_is_named(key, tmp_path):
    # only the padding leaks (dividing by cache.real.sum() would also divide by zero on a batch
    # of padding alone, a second cause the drawn inputs find first)
    result = _moe(key, tmp_path, "(cache.real[:, None] * d_mean_probs / n_real)",
                  "(d_mean_probs / n_real)")
    assert failing(result)
    told = messages(result) + " ".join(c["mistake"]["says"] for c in failing(result) if c.get("mistake"))
    assert "padded positions get no load-balancing gradient" in told or "padding leaks" in told


def test_the_answer_keys_moe_stays_done_on_every_seed(key, tmp_path):
    from npformer.exercises.verdict import EXTRA_SEEDS
    result = judge_source(key, catalog.exercise_named("moe"), "t14_moe.py", Path(key.path("t14_moe.py")).read_text(),
                          tmp_path)
    assert not failing(result)
    fixed = sum(len(sizes) for _, sizes in catalog.exercise_named("moe").checks)
    # more seeds per case only for an exercise without drawn inputs; MoE has them now
    extra = 0 if catalog.exercise_named("moe").components else len(EXTRA_SEEDS)
    assert catalog.exercise_named("moe").components
    assert len([c for c in result["checks"] if "case" in c]) == fixed * (1 + extra)
