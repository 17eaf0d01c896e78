"""Mistakes in rotary positions (t05_rope.py): the angles, the rotation and its backward."""
from .registry import mistake

ROT = "t05_rope.Rotary.backward"
ROT_RECHECK = "d_x = R_p^T d_out: turned back by -θ (cos θ stays, sin θ changes sign)"
ROT_CALL = "return rotate(d_out, cache.cos, -cache.sin, self.layout, self.rotated)"
ANG = "t05_rope.Rotary.angles"

# -- Rotary.backward --------------------------------------------------------------------------------
mistake("rope-turned-forward-again", ROT, ROT_CALL, "return rotate(d_out, cache.cos, cache.sin, self.layout, self.rotated)",
        "the gradient is turned by +θ again; the backward turns it back by -θ", ROT_RECHECK)
mistake("rope-half-layout-only", ROT, ROT_CALL, "return rotate(d_out, cache.cos, -cache.sin, 'half', self.rotated)",
        "the pair layout is hard-coded as 'half': use the layer's own (interleaved pairs 2i, 2i+1)",
        ROT_RECHECK)
mistake("rope-interleaved-layout-only", ROT, ROT_CALL,
        "return rotate(d_out, cache.cos, -cache.sin, 'interleaved', self.rotated)",
        "the pair layout is hard-coded as 'interleaved': use the layer's own (half: i pairs with i + D/2)",
        ROT_RECHECK)
mistake("rope-backward-skipped", ROT, ROT_CALL, "return d_out",
        "the gradient is passed through unrotated", ROT_RECHECK)
mistake("rope-backward-drops-passthrough", ROT, ROT_CALL,
        "return np.where(np.arange(d_out.shape[-1]) < self.rotated, "
        "rotate(d_out, cache.cos, -cache.sin, self.layout, self.rotated), 0)",
        "features past the rotated width pass through the forward unchanged, so their gradient passes "
        "through too", ROT_RECHECK)
mistake("rope-backward-in-place", ROT, ROT_CALL,
        "d_x = d_out.copy()\n    d_a, d_b = pairs(d_x, self.layout, self.rotated)\n"
        "    d_a[...] = d_a * cache.cos + d_b * cache.sin\n    d_b[...] = -d_a * cache.sin + d_b * cache.cos\n"
        "    return d_x",
        "d_a is overwritten before d_b is computed from it: both new halves come from the old ones",
        ROT_RECHECK)
mistake("rope-backward-whole-width", ROT, ROT_CALL, "return rotate(d_out, cache.cos, -cache.sin, self.layout)",
        "only the rotated width was turned: the gradient turns back over the same D_rot features", ROT_RECHECK)
mistake("rope-backward-default-layout-and-width", ROT, ROT_CALL, "return rotate(d_out, cache.cos, -cache.sin)",
        "rotate must be told the layout and the rotated width the forward used", ROT_RECHECK)
mistake("rope-backward-second-row-sign", ROT, ROT_CALL,
        "d_x = d_out.copy()\n    d_a, d_b = pairs(d_out, self.layout, self.rotated)\n"
        "    out_a, out_b = pairs(d_x, self.layout, self.rotated)\n"
        "    out_a[...] = d_a * cache.cos + d_b * cache.sin\n"
        "    out_b[...] = d_a * cache.sin + d_b * cache.cos\n    return d_x",
        "the transpose of [[cos, -sin], [sin, cos]] is [[cos, sin], [-sin, cos]]: the second row's sin "
        "changes sign too", ROT_RECHECK)

# -- Rotary.angles ----------------------------------------------------------------------------------
mistake("rope-angles-positive-exponent", "t05_rope.Rotary.angles",
        "self.base ** (-np.arange(0, self.rotated, 2) / self.rotated)",
        "self.base ** (np.arange(0, self.rotated, 2) / self.rotated)",
        "the frequencies fall with the pair index: w_c = base^(-2c / D_rot)", "θ = p base^(-2c / D_rot)")
mistake("rope-frequencies-pairs-not-doubled", ANG, "-np.arange(0, self.rotated, 2) / self.rotated",
        "-np.arange(self.rotated // 2) / self.rotated",
        "w_c = base^(-2c / D_rot): the exponent counts 2c, so the frequencies fall twice as fast",
        "θ = p base^(-2c / D_rot)")
mistake("rope-frequencies-over-head-width", ANG, "-np.arange(0, self.rotated, 2) / self.rotated",
        "-np.arange(0, self.rotated, 2) / self.head_dim",
        "with partial rotary the frequencies spread over the rotated width D_rot, not the whole head D",
        "θ = p base^(-2c / D_rot)")
mistake("rope-angles-outer", ANG, "np.asarray(positions, dtype=np.float64)[..., None] * w", "np.outer(positions, w)",
        "np.outer flattens positions given per sequence [B, N]: each position times each frequency keeps "
        "its batch axis ([..., None] * w)", "theta[..., p, c] = p w_c")

# -- rotate -----------------------------------------------------------------------------------------
mistake("rope-rotate-sign", "t05_rope.rotate", "out_b[...] = a * sin + b * cos", "out_b[...] = -a * sin + b * cos",
        "the second coordinate is a sin θ + b cos θ", "(a, b) -> (a cos θ - b sin θ, a sin θ + b cos θ)")
mistake("rotate-without-copy", "t05_rope.rotate", "out = x.copy()", "out = x",
        "without a copy, out and x share memory: the new a is written, then read back to compute the new b",
        "(a, b) -> (a cos θ - b sin θ, a sin θ + b cos θ), both from the old a and b")
mistake("rope-rotate-turns-backwards", "t05_rope.rotate",
        ("out_a[...] = a * cos - b * sin", "out_b[...] = a * sin + b * cos"),
        ("out_a[...] = a * cos + b * sin", "out_b[...] = -a * sin + b * cos"),
        "each pair is turned by -θ: the rotation is (a cos θ - b sin θ, a sin θ + b cos θ)",
        "(a, b) -> (a cos θ - b sin θ, a sin θ + b cos θ)")
mistake("rope-rotate-zeros-passthrough", "t05_rope.rotate", "out = x.copy()", "out = np.zeros_like(x)",
        "features past D_rot are not rotated but pass through unchanged: start from a copy of x",
        "(a, b) -> (a cos θ - b sin θ, a sin θ + b cos θ); the rest as it is")
mistake("rope-rotate-halves-only", "t05_rope.rotate", "a, b = pairs(x, layout, rotated)",
        "a, b = x[..., : rotated // 2], x[..., rotated // 2: rotated]",
        "the pairs follow the layout: (2c, 2c + 1) when interleaved, (c, c + D_rot/2) for halves",
        "out = (a cos - b sin, a sin + b cos) over the layout's pairs")
