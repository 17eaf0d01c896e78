"""Gradient-check cases of the modern variants (MoE, encoder, encoder-decoder, ...); see checks.py."""
from .checks import case  # noqa: F401

