"""Where the model looks: attention maps for the terminal and for ``--plot``."""
from __future__ import annotations

import numpy as np

from ..pictures.plot import plot_all, text_heatmap
from .common import say


def prompt_attention(model, tokenizer, prompt, bos=True):
    """(characters, weights [layers, P], maps [layers, P, P]) of one prompt: how the last
    position (the one predicting the first answer character) reads the prompt, and the
    full maps; both averaged over heads. ``^`` stands for <bos>."""
    ids = np.array([tokenizer.encode(prompt, bos=bos)])
    _, cache = model.forward(ids)
    maps = np.stack([cache.attention(i)[0].mean(axis=0) for i in range(model.config.n_layers)])
    chars = (["^"] if bos else []) + list(prompt)
    return chars, maps[:, -1, :], maps


def show_in_terminal(model, tokenizer, prompt):
    """Print, per layer, the prompt with a mark under each character as dark as the last
    position's attention to it; returns the full maps for the plots."""
    chars, weights, maps = prompt_attention(model, tokenizer, prompt)
    for layer in range(model.config.n_layers):
        say(text_heatmap(chars, weights[layer], label=f"  layer {layer}: "))
    return chars, maps


def write_plots(directory, history, pictures):
    """Write loss.png and one attention_{i}.png per (chars, maps, question); name every file
    written and what it shows, one line each."""
    paths = plot_all(directory, history, pictures)
    say(f"wrote {len(paths)} pictures:")
    say(f"  {paths[0]}: the training loss, step by step")
    for path, (_, _, question) in zip(paths[1:], pictures):
        say(f"  {path}: attention while reading {question!r}")
