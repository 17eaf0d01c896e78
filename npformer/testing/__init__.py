"""Check Transformer code, yours or npformer's, against a trusted reference.

- ``conform(component, forward, backward=None, *, vjp=None, examples=100, seed=0)``: draw
  inputs for a component (``COMPONENTS``: softmax, attention, grouped_attention, rope,
  layernorm, rmsnorm, cross_entropy, adamw, kv_decode ...), run your implementation and
  npformer's float64 reference, compare the output and every gradient, check the
  component's properties, and report the smallest failing example with the catalogued
  mistake it matches. ``from_torch`` and ``from_jax`` wrap functions of those libraries.
- ``strategies``: the hypothesis strategies behind it, for your own tests; ``properties``:
  the facts each component must satisfy, as functions; ``Subject``: an implementation
  called as its component's signature says.
- ``conform_module(kind, subject, weight_map, config=None)``: a whole GPT-2 MLP, GPT-2 or
  Llama block, or decoder (PyTorch nn.Module or NumPy code) against npformer, its weights
  mapped by a weight map of a few lines or a preset ("nanogpt", "hf_gpt2", "hf_llama").
- ``gradcheck``: finite differences on any npformer module or function pair; ``cases``:
  the gradient-check case of every public component.

Everything but ``gradcheck`` loads on first use: it needs hypothesis (npformer's ``verify``
extra), which importing npformer does not load, and says so in one line when it is missing.
"""
import importlib

from .gradcheck import GradcheckError, GradcheckReport, assert_gradcheck, gradcheck

_LAZY = {"AdapterUnavailable": "adapters", "from_jax": "adapters", "from_torch": "adapters",
         "COMPONENTS": "components", "Component": "components", "conform": "conformance",
         "CheckResult": "report", "ConformanceError": "report", "ConformanceReport": "report",
         "Failure": "report", "Subject": "subject", "conform_module": "modules",
         "ModuleReport": "modules", "MODULE_KINDS": "modules"}

__all__ = sorted(["GradcheckError", "GradcheckReport", "assert_gradcheck", "gradcheck", *_LAZY])


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
