"""One tensor against the reference's: equal to a tolerance, or where it differs and why.

A differing tensor is examined for the mistakes any derivative can suffer, whatever the
component (the catalogue in ``mistakes`` names the ones particular to each):

- shape: the transpose of the right shape, or a sum over the wrong axes;
- values: exactly -1 times the right one (a sign flip), a constant factor (a missing
  1/sqrt(D) or 1/n of a mean), wrong only where the value must be exactly 0 (a mask left
  out), the transpose of the right one.
"""
from __future__ import annotations

import numpy as np

from ..specs.facts import differing

# The one place that says how close two results must be, by the precision the code computes in:
# relative to the larger tensor's largest entry. Drawn examples and fixed cases both ask here
# (the fixed cases, and every run of the reference or a catalogued mistake, are float64).
TOLERANCES = {"float64": 1e-9, "float32": 1e-4, "float16": 1e-2, "bfloat16": 2e-2}
# below these two results agree whatever their size: what cancelling terms of size ~1 leave
ABS_TOLERANCES = {"float64": 1e-12, "float32": 1e-6, "float16": 1e-3, "bfloat16": 1e-2}
# A tensor far below the example's data (a gradient that is 0 in exact arithmetic, left with
# the rounding of terms that cancel) is judged against this share of the data's largest entry,
# as torch.testing.assert_close's atol judges entries near 0 (it takes the data to be of size
# ~1): its own largest entry would turn noise of 1e-16 against 1e-17 into a "relative error" of 10.
SCALE_FLOOR = 1e-2


def tolerance(precision="float64"):
    """The relative tolerance of results computed in ``precision``."""
    return TOLERANCES.get(precision, TOLERANCES["float64"])


def abs_tolerance(precision="float64"):
    """The absolute tolerance near zero of results computed in ``precision``."""
    return ABS_TOLERANCES.get(precision, ABS_TOLERANCES["float64"])


def relative_error(mine, expected):
    """max |mine - expected| / max(|mine|, |expected|) over the tensor, and the worst index."""
    diff = np.abs(mine - expected)
    scale = max(np.abs(mine).max(initial=0), np.abs(expected).max(initial=0), 1e-12)
    worst = np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.size else ()
    return float(diff.max(initial=0) / scale), tuple(int(i) for i in worst)


def equal(x, y, tol=None, atol=None):
    """True when two results are the same: both None, or arrays of one shape equal to ``tol``
    (relative to the larger one's largest entry; default float64's) or to ``atol`` near zero,
    NaN and inf where the other has them too."""
    tol = tolerance() if tol is None else tol
    atol = abs_tolerance() if atol is None else atol
    if x is None or y is None:
        return x is None and y is None
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if x.shape != y.shape:
        return False
    finite = np.isfinite(x)
    if not np.array_equal(finite, np.isfinite(y)) or not np.array_equal(x[~finite], y[~finite], equal_nan=True):
        return False
    x, y = x[finite], y[finite]
    scale = max(np.abs(x).max(initial=0), np.abs(y).max(initial=0), 1e-12)
    return bool(np.abs(x - y).max(initial=0) <= max(tol * scale, atol))


def data_scale(values):
    """The largest finite magnitude among the float arrays of ``values`` (an example's inputs,
    a module's parameters; 0.0 for none): the scale its results are judged at near 0."""
    found = [np.abs(np.asarray(a, np.float64)) for a in values
             if isinstance(a, np.ndarray) and np.issubdtype(a.dtype, np.floating) and a.size]
    return max((float(a[np.isfinite(a)].max(initial=0.0)) for a in found), default=0.0)


def compare_tensor(name, mine, expected, factors=None, tol=None, atol=None, scale=0.0, others=None):
    """None when ``mine`` matches ``expected`` to ``tol`` relative (or ``atol`` near zero; both
    default to float64's); else {"name", "message", "diagnoses", and where known "rel_error",
    "scaled_error", "worst_index", "yours", "expected"}. ``scale``: the example's data scale
    (``data_scale``): a tensor far below it is judged against ``SCALE_FLOOR`` of it, so rounding
    noise in a tensor that is 0 in exact arithmetic is no failure; "scaled_error" is the
    difference measured that way. ``others``: {name: shape} of the other results expected, to
    say when a wrong shape is another's."""
    factors = factors or {}
    tol = tolerance() if tol is None else tol
    atol = max(abs_tolerance() if atol is None else atol, tol * SCALE_FLOOR * scale)
    if mine is None:
        return {"name": name, "message": f"no {name} returned (one gradient per float input, in order)",
                "diagnoses": [f"your backward returned no {name}: return one gradient per float "
                              f"input of forward, in order"]}
    mine = np.asarray(mine, dtype=np.float64) if np.size(mine) else np.asarray(mine)
    if mine.shape != expected.shape:
        return {"name": name, "shape": list(mine.shape), "expected_shape": list(expected.shape),
                "message": f"{name} has shape {mine.shape}, expected {expected.shape}",
                "diagnoses": [shape_diagnosis(mine.shape, expected.shape, mine, expected, others)]}
    finite = np.isfinite(expected)
    if not np.isfinite(mine).all() and finite.all():
        bad = tuple(int(i) for i in np.argwhere(~np.isfinite(mine))[0])
        return {"name": name, "worst_index": list(bad), "message": f"NaN or inf in {name} at {bad}",
                "diagnoses": [f"NaN or inf at {bad}: a division by zero (a fully masked row, an empty "
                              f"count?) or an exp that overflowed"]}
    if not finite.all():              # a convention's NaN rows: the same NaN and inf, then the rest
        odd = (np.isfinite(mine) != finite) | (~finite & ~np.isnan(expected) & (mine != expected)) | \
            (np.isnan(expected) & ~np.isnan(mine))
        if odd.any():
            bad = tuple(int(i) for i in np.argwhere(odd)[0])
            return {"name": name, "worst_index": list(bad), "message": f"{name} at {bad}: yours "
                    f"{mine[bad]:.6g}, expected {expected[bad]:.6g} (NaN and inf must be where they are "
                    f"expected)", "diagnoses": []}
        mine, expected = np.where(finite, mine, 0.0), np.where(finite, expected, 0.0)
    error, worst = relative_error(mine, expected)
    largest = float(np.abs(mine - expected).max(initial=0))
    if error <= tol or largest <= atol:
        return None
    floor = max(np.abs(mine).max(initial=0), np.abs(expected).max(initial=0), SCALE_FLOOR * scale, 1e-300)
    return {"name": name, "rel_error": error, "scaled_error": largest / floor, "worst_index": list(worst),
            "ratio": constant_multiple(mine, expected),
            "yours": float(mine[worst]), "expected": float(expected[worst]),
            "message": (f"{name}: relative error {error:.2e}, worst at {tuple(worst)}: yours "
                        "{}, expected {}".format(*differing(float(mine[worst]), float(expected[worst])))),
            "diagnoses": value_diagnoses(mine, expected, factors, "output" if name.startswith("output")
                                         else "gradient", tol)}


def shape_diagnosis(mine, expected, values=None, right=None, others=None):
    """What a wrong gradient shape says about the mistake (given the ``values`` and the
    ``right`` ones, a transpose is named only when transposing gives the right values; given
    ``others``, {name: shape} of the other results, a shape that is another's with as many axes
    is said so: a sibling's, where a sum over the wrong axes would have fewer)."""
    another = next((n for n, shape in (others or {}).items()
                    if tuple(shape) == tuple(mine) and len(shape) == len(expected)), None)
    if another is not None:
        return (f"shape {tuple(mine)}, expected {tuple(expected)}: that is the shape of {another}: "
                f"gradients returned in each other's place, or computed from the other input?")
    if len(mine) >= 2 and tuple(mine[:-2]) + (mine[-1], mine[-2]) == tuple(expected):
        if values is None or right is None or equal(np.swapaxes(values, -1, -2), right):
            return (f"shape {tuple(mine)} is the transpose of {tuple(expected)}: a missing transpose "
                    f"(.T, or .swapaxes(-1, -2) for stacked matrices)")
        return (f"shape {tuple(mine)}, expected {tuple(expected)}, and its transpose does not hold the "
                f"right values either: a reshape where a transpose belongs, or operands of a product "
                f"in the wrong order?")
    return (f"shape {tuple(mine)}, expected {tuple(expected)}: a sum over the wrong axes? A parameter's "
            f"gradient sums over every position (all axes but the last); an input's keeps its shape")


def constant_ratio(mine, expected):
    """c when mine = c * expected to 1e-6 and expected has two entries that are not 0 (one number
    is a multiple of any other: no factor to find), else None."""
    norm = float(np.vdot(expected, expected))
    if np.count_nonzero(expected) < 2:
        return None
    c = float(np.vdot(mine, expected)) / norm
    residual = np.linalg.norm(mine - c * expected)
    return c if residual <= 1e-6 * max(np.linalg.norm(mine), 1e-300) else None


def constant_multiple(mine, expected):
    """c when ``mine`` is c times ``expected`` (``constant_ratio``), or -1 for one number that
    is exactly minus the right one (the one multiple of one number worth naming), else None."""
    ratio = constant_ratio(mine, expected)
    if ratio is None and np.count_nonzero(expected) == 1 and expected.any() and \
            np.abs(mine + expected).max() <= 1e-6 * np.abs(expected).max():
        return -1.0
    return ratio


def free(expected, at_least=3):
    """True when ``expected`` holds ``at_least`` different magnitudes: then a tensor that is a
    multiple of it is so because of a factor, not because the example leaves it one direction
    to point in (a tiny example's [a, -a, a] is a multiple of anything shaped like it)."""
    magnitudes = np.abs(expected[expected != 0])
    if magnitudes.size < at_least:
        return False
    rounded = np.unique(np.round(magnitudes / magnitudes.max(), 9))
    return rounded.size >= at_least


def _near(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))


NEAR_ONE = 1e-3                  # a ratio this close to 1 is no factor a formula loses


def _times(c, of=1.0):
    """c as text with enough digits to differ from ``of`` (1.000021, never "1")."""
    return differing(c, of)[0]


def ratio_diagnosis(c, factors, what="gradient"):
    """What a ``what`` (gradient or output) that is exactly c times the right one says."""
    if abs(c - 1) <= NEAR_ONE:
        return (f"yours is {_times(c)} times the right {what} everywhere: off by {abs(c - 1):.2g} in "
                f"proportion, too little for a missing factor; a slightly different constant (an eps?) "
                f"or a lower precision?")
    if _near(c, -1):
        return f"a sign flip: yours is exactly minus the right {what}"
    if _near(c, 0):
        return (f"all zeros: the {what} is computed but never returned"
                + (" or added into .grad?" if what == "gradient" else "?"))
    for name, value in factors.items():
        for sign, flipped in ((1, ""), (-1, " and the sign flipped")):
            if _near(c, sign / value):
                return (f"yours is {c:.4g} times the right {what} everywhere: the factor "
                        f"{name} = {value:.4g} is missing{flipped}")
            if _near(c, sign * value):
                return (f"yours is {c:.4g} times the right {what} everywhere: the factor "
                        f"{name} = {value:.4g} is applied twice{flipped}")
    return (f"yours is {c:.4g} times the right {what} everywhere: a constant factor is missing or "
            f"extra (the 1/sqrt(D) scale, the 1/n of a mean, a count?)")


def value_diagnoses(mine, expected, factors, what="gradient", tol=None):
    """Diagnoses of a ``what`` (gradient or output) of the right shape with the wrong values
    (an entry is wrong when it differs by more than ``tol`` of the largest one)."""
    tol = tolerance() if tol is None else tol
    if not mine.any() and np.count_nonzero(expected) > 1:      # one number is no pattern to read
        return [ratio_diagnosis(0.0, factors, what)]
    if not expected.any():
        return [f"the right {what} is exactly 0 everywhere on this example and yours is not"]
    ratio = constant_multiple(mine, expected)
    if ratio is not None and not _near(ratio, 1) and free(expected):    # c = 1: rounding, not a factor
        return [ratio_diagnosis(ratio, factors, what)]
    scale = max(np.abs(expected).max(initial=0), 1e-12)
    wrong = np.abs(mine - expected) > tol * scale
    zero = expected == 0
    if zero.any() and wrong.any() and not (wrong & ~zero).any():
        first = tuple(int(i) for i in np.argwhere(wrong)[0])
        return [f"wrong only where the {what} must be exactly 0 ({int(wrong.sum())} masked or "
                f"ignored entries, e.g. {first}): " + ZERO_CAUSE[what]]
    if mine.ndim >= 2 and mine.shape[-1] == mine.shape[-2] > 1 and \
            np.allclose(mine, expected.swapaxes(-1, -2), rtol=1e-9, atol=1e-12 * scale) and \
            not np.allclose(expected, expected.swapaxes(-1, -2), rtol=1e-9, atol=1e-12 * scale):
        return [f"yours is the transpose of the right {what}: a missing transpose"]
    return []


ZERO_CAUSE = {
    "gradient": "the mask is not applied in the backward",
    "output": ("the mask is not applied, or a query with no key to read gets weights that are not "
               "zero (a finite fill such as -1e9 gives it the average of the values)"),
}
