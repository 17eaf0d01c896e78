"""One spec per concept file: everything the engines know of a concept, declared once.

``specs/t05_rope.py`` is RoPE as the engines know it: how to draw its inputs and corners, the
facts it obeys, its float64 reference, the conventions of published code, its gradient-check
cases, its exercise and claims; its mistakes are ``specs/t05_rope.json``. Importing this
package imports every spec, in the tutorial's order, and so fills the registry
(``registry``): ``COMPONENTS``, ``LAYERS``, ``CORNERS``, ``PROPERTIES``, ``CASES``,
``CONVENTIONS`` (and their ``FAMILIES``, which combine, and the ``MODULE_CONVENTIONS`` of whole
blocks), ``FACTORS``, ``CASE_DIAGNOSES``, ``CAPABILITIES``, ``EXERCISES``, ``CLAIMS`` and
``SPECS``. The verifier, the grader, gradcheck, the command line and the docs' tables read them
there; no other file names a component.

A new concept is its concept file, its spec here (and its line below), its mistakes beside
it, and the line where a config chooses it. A spec too long for one file continues in a file
named after it (``t04_attention_conventions.py``: attention's conventions).
"""
from . import (t01_embedding, t02_linear, t03_softmax, t04_attention, t04_attention_conventions,  # noqa: F401
               t05_rope, t06_activations, t07_ffn, t08_norm, t09_block, t10_model, t11_loss, t12_generate,
               t13_kv_cache, t14_moe,
               t15_encoder, t16_cross_attention, t17_seq2seq, t18_flash_attention, t19_optim, training,
               t21_alibi)
from .registry import (CAPABILITIES, CASE_DIAGNOSES, CASES, CLAIMS, COMPONENTS, CONVENTIONS,  # noqa: F401
                       CORNERS, EXERCISES, FACTORS, FAMILIES, FITS, LAYERS, MODULE_CONVENTIONS, ORACLES,
                       PROPERTIES, SPECS, Component, Exercise, Property, Spec, lookup, module_path, pair)
