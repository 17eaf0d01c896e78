"""Transformer blocks: attention (between positions) + FFN (within each position),
each wrapped in a residual connection and a normalisation.

Pre-Norm (GPT-2, Llama):   h = x + Attn(Norm1(x));   y = h + FFN(Norm2(h))
Post-Norm (original, BERT): h = Norm1(x + Attn(x));  y = Norm2(h + FFN(h))
A residual y = x + f(x) passes d_y to x unchanged and adds f's gradient.
"""
from __future__ import annotations

from dataclasses import dataclass

from .module import Cache, Module


@dataclass(frozen=True)
class BlockCache(Cache):
    norm1: Cache
    attn: Cache
    norm2: Cache
    ffn: Cache


class PreNormBlock(Module):
    """x [B, N, d] -> [B, N, d]. ``attn`` takes (x, mask, positions, kv); ``ffn`` any d -> d module."""

    def __init__(self, attn, ffn, norm1, norm2):
        self.norm1, self.attn, self.norm2, self.ffn = norm1, attn, norm2, ffn

    def forward(self, x, mask=None, positions=None, kv=None):
        a, norm1 = self.norm1.forward(x)
        attended, attn = self.attn.forward(a, mask, positions, kv)
        h = x + attended                                    # residual 1
        f, norm2 = self.norm2.forward(h)
        fed, ffn = self.ffn.forward(f)
        h += fed                                            # residual 2 (h is ours: in place)
        return h, BlockCache(norm1, attn, norm2, ffn)

    def backward(self, d_y, cache):
        # Each residual adds the incoming gradient to the branch's input gradient
        # (a norm's backward returns a fresh array, so adding in place is safe).
        d_h = self.norm2.backward(self.ffn.backward(d_y, cache.ffn), cache.norm2)
        d_h += d_y
        d_x = self.norm1.backward(self.attn.backward(d_h, cache.attn), cache.norm1)
        d_x += d_h
        return d_x


class PostNormBlock(PreNormBlock):
    """x [B, N, d] -> [B, N, d], normalising after each residual sum (the 2017 layout)."""

    def forward(self, x, mask=None, positions=None, kv=None):
        attended, attn = self.attn.forward(x, mask, positions, kv)
        h, norm1 = self.norm1.forward(x + attended)
        fed, ffn = self.ffn.forward(h)
        y, norm2 = self.norm2.forward(h + fed)
        return y, BlockCache(norm1, attn, norm2, ffn)

    def backward(self, d_y, cache):
        d_sum2 = self.norm2.backward(d_y, cache.norm2)           # gradient of h + FFN(h)
        d_h = d_sum2 + self.ffn.backward(d_sum2, cache.ffn)
        d_sum1 = self.norm1.backward(d_h, cache.norm1)           # gradient of x + Attn(x)
        return d_sum1 + self.attn.backward(d_sum1, cache.attn)
