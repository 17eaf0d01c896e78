"""RoPE past the trained length: it still computes, but its slow pairs turn to angles training never showed.

The first article warns that RoPE "does not guarantee that any enlarged window
works": the length seen in training and the frequencies still matter. What
can be shown without a trained large model:
1. a learned (or sinusoidal) position table stops at its length; RoPE rotates at
   any position, norms intact: nothing in RoPE itself stops a longer context;
2. pair i turns by w_i = base^(-2i/D) per position. With a Llama-2-sized head
   (D = 128, base = 10,000) trained on 4,096 positions, the slowest pairs never
   complete one turn within the trained offsets, so longer offsets give them
   angles no training example produced; a larger base makes more such pairs;
3. squeezing the positions (interpolation: p * 4096 / 8192) keeps every angle at
   8,192 positions inside the trained range: the frequency configuration decides.
Whether a trained model then degrades needs a trained model; not shown here.
"""
import math

import numpy as np

from npformer import LearnedPositions, Rotary, SinusoidalPositions
from npformer.worked import vec

HEAD_DIM, TRAINED = 128, 4096


def tables_stop_rope_does_not(out):
    """Fact 1: the tables' ValueError past their length; RoPE far out, norms kept."""
    out("1. Position tables have a length; RoPE has none")
    refused = {}
    for name, table in (("learned", LearnedPositions(16, 8, np.random.default_rng(0))),
                        ("sinusoidal", SinusoidalPositions(16, 8))):
        try:
            table(np.arange(17))
            refused[name] = None
        except ValueError as error:
            refused[name] = str(error)
        out(f"   {name:10} table of 16 positions asked for 17: {refused[name]}")
    rotary = Rotary(8)
    x = np.random.default_rng(1).standard_normal((1, 1, 3, 8))
    far = rotary(x, positions=np.array([0, 100_000, 1_000_000]))
    norm_gap = float(np.abs(np.linalg.norm(far, axis=-1) - np.linalg.norm(x, axis=-1)).max())
    out(f"   RoPE at positions 0, 100,000, 1,000,000: computed, lengths kept (largest change {norm_gap:.1e})")
    return refused, norm_gap


def turns_within(rotary, length):
    """Angle each pair has turned by offset ``length - 1``, measured from Rotary's output:
    the pair (1, 0) rotated at positions 0 .. length-1, its angle unwrapped along the positions."""
    D = rotary.head_dim
    unit = np.zeros((1, 1, length, D))
    unit[..., : D // 2] = 1.0                                # "half" layout: every pair is (1, 0)
    turned = rotary(unit, positions=np.arange(length))[0, 0]   # [length, D]
    angles = np.unwrap(np.arctan2(turned[:, D // 2:], turned[:, : D // 2]), axis=0)
    return angles[-1]                                         # [D / 2]


def slow_pairs(out):
    """Fact 2: per base, how many pairs never complete a turn within the trained offsets."""
    out(f"2. Head width {HEAD_DIM}, trained on {TRAINED:,} positions: how far each of the "
        f"{HEAD_DIM // 2} pairs turns within the trained offsets")
    counts, slowest = {}, {}
    for base in (10_000.0, 500_000.0):
        rotary = Rotary(HEAD_DIM, base=base)
        turned = turns_within(rotary, TRAINED)
        counts[base] = int((turned < 2 * math.pi).sum())
        slowest[base] = float(turned[-1])
        out(f"   base {base:9,.0f}: fastest pair {turned[0] / (2 * math.pi):7.1f} turns, slowest "
            f"{slowest[base]:.3f} rad; {counts[base]} pairs never complete one turn")
    doubled = float(Rotary(HEAD_DIM).angles(np.array([2 * TRAINED - 1]))[0, -1])
    out(f"   at offset {2 * TRAINED - 1:,} the slowest pair (base 10,000) stands at {doubled:.3f} rad, "
        "beyond every angle it met in training")
    return counts, slowest


def interpolation(out):
    """Fact 3: each pair's largest squeezed angle beyond its trained largest, in position steps."""
    rotary = Rotary(HEAD_DIM)
    longer = 2 * TRAINED
    trained_max = rotary.angles(np.array([TRAINED - 1]))[0]                     # [D / 2]
    squeezed = rotary.angles(np.array([(longer - 1) * TRAINED / longer]))[0]   # positions * 1/2
    step = rotary.angles(np.array([1]))[0]
    overshoot = squeezed - trained_max
    out(f"3. Interpolation: {longer:,} positions squeezed into {TRAINED:,} (p -> p / 2)")
    out(f"   every pair's largest angle exceeds its trained largest by at most "
        f"{float((overshoot / step).max()):.2f} of one position's step (slowest pair: "
        f"{vec(squeezed[-1:])} rad vs {vec(trained_max[-1:])})")
    return overshoot / step


def run(out=print):
    refused, norm_gap = tables_stop_rope_does_not(out)
    counts, slowest = slow_pairs(out)
    overshoot = interpolation(out)
    return {"refused": refused, "rope_norm_gap": norm_gap, "pairs_never_turning": counts,
            "slowest_angle": slowest, "interpolated_overshoot_in_steps": overshoot}


if __name__ == "__main__":
    run()
