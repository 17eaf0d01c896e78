"""A check with two defects reports both, each with its own smallest example; code with one
defect, or none, reports no other cause."""
import math
import re

import numpy as np
import pytest

from npformer.testing import conform

pytest.importorskip("hypothesis")
EXAMPLES = 30
FLOOR = 1e-11                    # the clip of the probabilities: -ln(1e-11) = 25.328 at most per token


def probability_cross_entropy(counts_ignored=True, clipped=True):
    """A loss from the probabilities, as some published code writes it. ``counts_ignored``:
    the mean over every target, ignored ones (-100) included; ``clipped``: log(max(p, 1e-11)),
    which caps a token's loss at 25.3 once p underflows below 1e-11 (huge logits)."""
    def cross_entropy(logits, targets, ignore_index=-100):
        shifted = logits - logits.max(axis=-1, keepdims=True)
        counted = targets != ignore_index
        safe = np.where(counted, targets, 0)
        if clipped:
            probs = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
            picked = np.log(np.maximum(np.take_along_axis(probs, safe[..., None], axis=-1)[..., 0], FLOOR))
        else:
            log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
            picked = np.take_along_axis(log_probs, safe[..., None], axis=-1)[..., 0]
        total = -(picked * counted).sum()
        return total / (targets.size if counts_ignored else max(int(counted.sum()), 1))
    return cross_entropy


def _per_token(logits, targets):
    """-log softmax(logits)[target] of each counted token, in Python floats: log-sum-exp."""
    losses = []
    for row, target in zip(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)):
        if target == -100:
            continue
        peak = max(row)
        losses.append(peak + math.log(sum(math.exp(x - peak) for x in row)) - row[target])
    return losses


def _numbers(message):
    found = re.search(r"yours (\S+), expected (\S+)", message)
    return float(found.group(1)), float(found.group(2))


def test_two_defects_of_a_loss_are_both_reported():
    report = conform("cross_entropy", probability_cross_entropy(), examples=EXAMPLES)
    assert report.verdict == "does not conform"
    checks = {c.name: c for c in report.checks}
    first, other = checks["output"].failure, checks["output: another cause"].failure
    # the first shows on small logits: the mean over all 6 targets, one of them ignored
    assert np.abs(first.example.args[0]).max() < 2
    losses = _per_token(*first.example.args)
    yours, expected = _numbers(first.message)
    assert expected == pytest.approx(sum(losses) / len(losses), rel=1e-5)
    assert yours == pytest.approx(sum(losses) / first.example.args[1].size, rel=1e-5)
    # the second needs huge logits, where p underflows below the clip: each token's loss is
    # capped at -ln(1e-11) = 25.33 while the right one is hundreds
    logits, targets = other.example.args
    assert np.abs(logits).max() > 100
    losses = _per_token(logits, targets)
    yours, expected = _numbers(other.message)
    assert expected == pytest.approx(sum(losses) / len(losses), rel=1e-5) and expected > 600
    assert yours == pytest.approx(sum(min(x, -math.log(FLOOR)) for x in losses) / targets.size, rel=1e-5)
    assert "FAIL  output: another cause" in str(report)
    text = " ".join(str(report).split())                   # the report wraps its lines
    assert "the mistake named above, 'cross-entropy-forward-counts-ignored', does not explain this example" in text
    assert first.mistake is not None and first.mistake.name == "cross-entropy-forward-counts-ignored"
    assert text.index("the mistake: cross-entropy-forward-counts-ignored") < text.index("another cause")


def test_the_clip_alone_is_one_cause():
    report = conform("cross_entropy", probability_cross_entropy(counts_ignored=False), examples=EXAMPLES)
    assert [c.name for c in report.failures] == ["output"], str(report)
    assert np.abs(report.failures[0].failure.example.args[0]).max() > 100


def test_the_count_alone_is_one_cause():
    report = conform("cross_entropy", probability_cross_entropy(clipped=False), examples=EXAMPLES)
    assert [c.name for c in report.failures] == ["output"], str(report)


def test_correct_code_reports_no_other_cause():
    report = conform("cross_entropy", probability_cross_entropy(False, False), examples=EXAMPLES)
    assert report.verdict == "conforms", str(report)
    assert not any("another cause" in c.name for c in report.checks)
