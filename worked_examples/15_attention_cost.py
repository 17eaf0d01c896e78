"""Long context: the attention weight table grows with the square of the length.

Every query compares itself with every key, so one head of one layer holds an
N x N table: doubling N makes it four times larger. The sizes are measured on
npformer's attention weights for short sequences and computed from N x N for
long ones. A sliding window (each position reads only the last w keys) makes
the number of readable entries grow linearly instead, and blockwise ("flash")
attention computes exactly the same output while keeping only one block of
scores at a time, so the memory a forward keeps for its backward grows
linearly too.
"""
import numpy as np

from npformer import MultiHeadAttention, causal_mask, flash_attention_forward, sliding_window_mask

MEASURED = (128, 256, 512, 1024)
COMPUTED = (4096, 32768, 131072)


def mib(n_bytes):
    """Bytes in mebibytes (2^20 bytes)."""
    return n_bytes / 2 ** 20


def run(out=print):
    rng = np.random.default_rng(0)
    H, d = 2, 8
    attn = MultiHeadAttention(d, n_heads=H, rng=rng)                  # float32
    out(f"1. Measured: attention weights of {H} heads (float32) for growing N")
    measured, heads = {}, {}
    for N in MEASURED:
        x = rng.standard_normal((1, N, d)).astype(np.float32)
        _, cache = attn.forward(x, mask=causal_mask(N))
        heads[N] = cache.attn                                          # q, k, v and weights
        weights = cache.weights                                        # [B, H, N, N]
        measured[N] = (weights.shape, weights.nbytes // H)             # bytes of one head
        out(f"   N = {N:5,}: weights {str(list(weights.shape)):20} "
            f"one head {weights.nbytes // H:>10,} bytes "
            f"({mib(weights.nbytes // H):8.3f} MiB)")
    ratios = [measured[b][1] / measured[a][1] for a, b in zip(MEASURED, MEASURED[1:])]
    out(f"   each doubling of N: {', '.join(f'{r:.0f}x' for r in ratios)} the memory (= 2^2)")

    out("2. Computed: N x N x 4 bytes for one head of one layer")
    computed = {N: N * N * 4 for N in COMPUTED}
    for N, size in computed.items():
        out(f"   N = {N:7,}: N x N = {N * N:>14,} entries = {size:>14,} bytes ({mib(size):7,.0f} MiB)")
    out("   times heads, times layers, if the whole table is ever stored at once")

    out("3. A causal sliding window of w = 64 keys: readable entries per head")
    window_entries = {}
    for N in MEASURED:
        full = int(causal_mask(N).sum())
        windowed = int(sliding_window_mask(N, 64).sum())
        window_entries[N] = (full, windowed)
        out(f"   N = {N:5,}: causal {full:>9,} entries, window {windowed:>7,}")
    out("   the causal table still grows as N^2 / 2; the window grows as about 64 N")

    out("4. Blockwise (flash) attention, 128 keys at a time: same output, memory kept for backward")
    kept, flash_gap = {}, 0.0
    for N in MEASURED:
        plain = heads[N]                                               # AttentionCache: q, k, v, weights
        mixed, flash = flash_attention_forward(plain.q, plain.k, plain.v, causal=True, block_size=128)
        plain_out = plain.weights @ plain.v                            # [B, H, N, D]
        flash_gap = max(flash_gap, float(np.abs(mixed - plain_out).max()))
        kept[N] = (plain.nbytes, flash.nbytes)
        out(f"   N = {N:5,}: plain attention keeps {plain.nbytes:>10,} bytes, "
            f"blockwise {flash.nbytes:>8,} bytes")
    out(f"   largest output difference {flash_gap:.1e}; blockwise memory doubles with N, "
        f"it never holds the N x N table")
    return {"measured": measured, "ratios": ratios, "computed": computed,
            "window_entries": window_entries, "kept_bytes": kept, "flash_gap": flash_gap,
            "head_dim": d // H, "heads": H}


if __name__ == "__main__":
    run()
