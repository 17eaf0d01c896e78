"""Without norms the residual stream's scale grows with depth; a norm keeps what each layer reads at one scale.

The overview: the numbers' scale can become unstable as layers pile up, and
normalisation adjusts each vector's range. Random blocks (width 32, 4 heads,
8 positions), 64 deep, three ways, on the same input of RMS about 1:
- no norms: h = x + Attn(x), y = h + FFN(h): each sub-layer reads the whole
  stream, so what it adds grows with it and the RMS is multiplied layer after layer;
- Pre-Norm (npformer's PreNormBlock): each sub-layer reads Norm(x), of RMS 1 at
  any depth, so the stream only adds pieces of one size and grows slowly;
- Post-Norm (PostNormBlock): the stream itself is normalised, RMS 1 after every block.
Each block is built with init_std = 1/sqrt(32), so that every projection keeps
roughly the scale of its input. npformer's default, init_std = 0.02, draws the
projections that write into the stream far smaller, which keeps a stack without
norms near its input's scale for longer: the last line shows it.
"""
import numpy as np

from npformer import BlockConfig, build_block, causal_mask

N, WIDTH, DEPTHS = 8, 32, (1, 4, 16, 64)


def rms(x):
    return float(np.sqrt((x ** 2).mean()))


def without_norms(block, x, mask):
    """The block's own attention and FFN, with both norms left out (residuals kept)."""
    h = x + block.attn(x, mask)
    return h + block.ffn(h)


def stream(prenorm, norms, x, mask, std):
    """RMS of the residual stream after each depth in DEPTHS, and (Pre-Norm) of what the layers read."""
    config = BlockConfig(d_model=WIDTH, n_heads=4, init_std=std, prenorm=prenorm)
    scale, read = {}, []
    for depth in range(1, DEPTHS[-1] + 1):
        block = build_block(config, np.random.default_rng(depth), np.float64)
        if norms and prenorm:
            read.append(rms(block.norm1(x)))               # what its attention reads
        x = block(x, mask) if norms else without_norms(block, x, mask)
        if depth in DEPTHS:
            scale[depth] = rms(x)
    return scale, read


def run(out=print):
    x = np.random.default_rng(0).standard_normal((1, N, WIDTH))
    mask = causal_mask(N)
    std = 1 / np.sqrt(WIDTH)
    out(f"RMS of the stream (the input's is {rms(x):.2f}) after 1, 4, 16 and 64 blocks:")
    results = {}
    for name, prenorm, norms in (("no norms", True, False), ("Pre-Norm", True, True),
                                 ("Post-Norm", False, True)):
        scale, read = stream(prenorm, norms, x, mask, std)
        results[name] = {"rms": scale, "read": read}
        out(f"   {name:9}  " + "  ".join(f"{scale[d]:9.3g}" for d in DEPTHS))
    read = results["Pre-Norm"]["read"]
    out(f"   Pre-Norm's attention reads RMS {min(read):.5f} to {max(read):.5f} at every depth")
    small, _ = stream(True, False, x, mask, 0.02)
    results["no norms, std 0.02"] = small
    out(f"   no norms with npformer's std 0.02: {small[DEPTHS[-1]]:.3g} after 64 blocks")
    return results


if __name__ == "__main__":
    run()
