"""Positions: added position vectors, and RoPE's rotation (scores 1 and 0.5 at 60 degrees, offsets only).

Added positions: x_i = token_i + position_i, so one token at two places gives
two different vectors. RoPE instead rotates each pair of Q/K features by an
angle that grows with the position. In two dimensions [a, b] turned by theta
is [a cos - b sin, a sin + b cos]. With q = k = [1, 0]: the same angle gives
score 1, sixty degrees apart gives 0.5, and in general the score of
(R_i q).(R_j k) equals q.(R_{j-i} k): only the offset j - i matters.
"""
import numpy as np

from npformer import Embedding, LearnedPositions, Rotary, SinusoidalPositions
from npformer.worked import vec


def turn(rotary, vector, angle):
    """Rotate one pair by ``angle`` radians with npformer's Rotary.

    A Rotary of head width 2 has one pair turning at 1 radian per position,
    so "position" ``angle`` is a turn of exactly ``angle``.
    """
    x = np.asarray(vector, dtype=np.float64)[None, None, None]     # [B, H, N, D] = [1, 1, 1, 2]
    return rotary(x, positions=np.array([angle]))[0, 0, 0]


def run(out=print):
    rng = np.random.default_rng(11)
    out("1. Added positions: x_i = token_embedding_i + position_embedding_i")
    tokens = Embedding(50, 8, rng)
    ids = np.array([9, 4, 9])                                        # token 9 at positions 0 and 2
    token_rows = tokens(ids)                                         # [N, d]
    tables = {"learned": LearnedPositions(16, 8, rng), "sinusoidal": SinusoidalPositions(16, 8)}
    for name, table in tables.items():
        x = token_rows + table(np.arange(len(ids)))                  # [N, d]
        out(f"   {name:10}: token 9 at position 0 -> {vec(x[0][:3])} ...; "
            f"at position 2 -> {vec(x[2][:3])} ...")
    same_token_rows = bool(np.array_equal(token_rows[0], token_rows[2]))
    out(f"   the token rows alone are identical ({same_token_rows}); with positions added they differ")

    out("2. RoPE in two dimensions: [a, b] turned by theta = [a cos - b sin, a sin + b cos]")
    rotary = Rotary(head_dim=2, layout="interleaved")
    turned = {}
    for vector, degrees in (([1.0, 0.0], 90), ([1.0, 2.0], 60)):
        turned[(tuple(vector), degrees)] = turn(rotary, vector, np.radians(degrees))
        out(f"   {vec(vector, 0)} turned by {degrees} degrees -> "
            f"{vec(turned[(tuple(vector), degrees)])}")

    out("3. q = k = [1, 0]: the score after rotating each by its position's angle")
    unit = [1.0, 0.0]
    pairs = {"same angle (0 and 0)": (0, 0), "same angle (40 and 40)": (40, 40),
             "60 degrees apart (0 and 60)": (0, 60), "60 degrees apart (100 and 160)": (100, 160)}
    rope_scores = {}
    for label, (angle_q, angle_k) in pairs.items():
        q = turn(rotary, unit, np.radians(angle_q))
        k = turn(rotary, unit, np.radians(angle_k))
        rope_scores[label] = float(q @ k)
        out(f"   {label:30} q = {vec(q)}, k = {vec(k)}, q.k = {rope_scores[label]:.3f}")

    out("4. The relative-offset identity with real RoPE (head width 8, four frequencies):")
    rope8 = Rotary(head_dim=8)
    q = rng.standard_normal(8)[None, None, None]                       # [1, 1, 1, 8]
    k = rng.standard_normal(8)[None, None, None]
    offset_scores = {}
    for i, j in ((0, 3), (5, 8), (20, 23), (0, 4)):
        score = float((rope8(q, np.array([i])) * rope8(k, np.array([j]))).sum())
        offset_scores[(i, j)] = score
        out(f"   q at position {i:2d}, k at position {j:2d} (offset {j - i}): score {score:.6f}")
    relative = float((q * rope8(k, np.array([3]))).sum())           # q unturned, k turned by offset 3
    out(f"   q . R_3 k (q not rotated, k rotated by the offset 3 alone): {relative:.6f}")
    out("   offset 3 always gives the same score; offset 4 gives another")
    return {"same_token_rows": same_token_rows, "turned": turned, "rope_scores": rope_scores,
            "offset_scores": offset_scores, "relative_score": relative}


if __name__ == "__main__":
    run()
