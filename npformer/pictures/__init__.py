"""Pictures of the tutorial's sections: one PNG per thing a section has to show.

Every picture is computed here with npformer's own functions (the same ones the worked
examples print), then drawn with matplotlib, labelled in the article's Chinese terms with
the code's names beside them ("因果掩码 causal_mask"). matplotlib is optional: it is
imported only when a picture is drawn, and a missing one raises ``PlotUnavailable`` whose
message names the packages to install.

    npformer examples 3 --plot DIR      the pictures of worked example 03
    npformer tour --plot DIR            the tiny decoder's per-head maps and its next token
    from npformer import pictures
    pictures.draw(3, "out/")            the same from Python; returns the paths written

``PICTURES`` maps a worked example's number to its pictures (file name, drawing function).
A drawing function takes no argument and returns a matplotlib figure.
"""
from __future__ import annotations

import os

from .plot import INSTALL_HINT, PlotUnavailable, require_cjk_font, save_figure
from .attention import (attention_by_hand, backbones, heads, masks, score_table, score_variance,
                        tour_heads, tour_next_token)
from .layers import (activations, attention_cost, first_training_steps, kv_cache_work, kv_memory,
                     logits_to_probabilities, moe_routing, norms, residual_scale, rope, sinusoid,
                     swiglu_gate)
from .depth import deep_stack_without_residuals, depth_and_what_it_can_express
from .reading import (averaging_vs_attention, one_head_versus_two, separate_projections,
                      weights_are_not_causes)
from .style import _plt  # noqa: F401 (pictures._plt: pyplot styled with a CJK font)
from .tokens import rotary_past_trained_length, token_vectors, word_order

__all__ = ["PICTURES", "TOUR_PICTURES", "PlotUnavailable", "INSTALL_HINT", "draw", "draw_tour",
           "save"]


# -- which pictures each worked example draws -----------------------------------------------
PICTURES = {
    1: [("01_token_vectors.png", token_vectors)],
    2: [("02_attention_by_hand.png", attention_by_hand)],
    3: [("03_score_table.png", score_table), ("03_masks.png", masks)],
    4: [("04_heads.png", heads)],
    5: [("05_sinusoid.png", sinusoid), ("05_rope.png", rope)],
    6: [("06_word_order.png", word_order)],
    7: [("07_activations.png", activations)],
    8: [("08_swiglu_gate.png", swiglu_gate)],
    9: [("09_norms.png", norms)],
    10: [("10_logits_to_probabilities.png", logits_to_probabilities)],
    11: [("11_heads.png", tour_heads)],
    12: [("12_kv_cache_gqa_memory.png", kv_memory)],
    13: [("13_moe_routing.png", moe_routing)],
    14: [("14_kv_cache_work.png", kv_cache_work)],
    15: [("15_attention_cost.png", attention_cost)],
    16: [("16_backbones.png", backbones)],
    17: [("17_first_training_steps.png", first_training_steps)],
    18: [("18_averaging_vs_attention.png", averaging_vs_attention)],
    19: [("19_separate_projections.png", separate_projections)],
    20: [("20_score_variance.png", score_variance)],
    21: [("21_rope_past_trained_length.png", rotary_past_trained_length)],
    22: [("22_deep_stack_without_residuals.png", deep_stack_without_residuals)],
    23: [("23_one_head_versus_two.png", one_head_versus_two)],
    24: [("24_weights_are_not_causes.png", weights_are_not_causes)],
    25: [("25_depth_and_what_it_can_express.png", depth_and_what_it_can_express)],
    26: [("26_residual_scale.png", residual_scale)],
}
TOUR_PICTURES = [("tour_heads.png", tour_heads), ("tour_next_token.png", tour_next_token)]


def save(fig, path, dpi=110):
    """Write ``fig`` to the PNG ``path`` (through a temporary file) and close it; returns path."""
    return save_figure(fig, path, dpi=dpi)


def draw(number, directory):
    """Write the pictures of worked example ``number`` into ``directory``; returns the paths
    (empty if that example has none)."""
    require_cjk_font()
    os.makedirs(directory, exist_ok=True)
    return [save(make(), os.path.join(directory, name)) for name, make in PICTURES.get(number, [])]


def draw_tour(directory, n_heads=2, causal=True, seed=7):
    """Write the tour's pictures into ``directory``; returns the paths."""
    require_cjk_font()
    os.makedirs(directory, exist_ok=True)
    return [save(make(n_heads, causal, seed), os.path.join(directory, name))
            for name, make in TOUR_PICTURES]
