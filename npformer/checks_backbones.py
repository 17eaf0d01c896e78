"""Gradient-check cases of the encoder-only and encoder-decoder backbones; see checks.py."""
from .checks import case  # noqa: F401

