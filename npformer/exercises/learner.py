"""A learner's functions, taken from their files, to be patched into npformer for verdict.

``learner_functions(source, module_name, qualnames, filename)`` runs a learner's file as a
module beside npformer's own and gives {"npformer.<module>.<qualname>": their function}, the
patches the grader judges (``npformer.testing.engine.patched``).
"""
from __future__ import annotations

import importlib
import inspect
import sys
import types


def learner_module(source, module_name, filename):
    """A learner's file run as a module beside npformer's own ``module_name`` (relative
    imports resolve inside npformer); every name the reference module defines is then bound
    to the reference's object, so only what ``learner_functions`` takes is the learner's."""
    package = module_name.rpartition(".")[0]
    shadow = types.ModuleType(f"{module_name}__yours")
    shadow.__package__, shadow.__file__ = package, filename
    sys.modules[shadow.__name__] = shadow          # dataclasses look their module up here
    try:
        exec(compile(source, filename, "exec", dont_inherit=True), shadow.__dict__)
    finally:
        sys.modules.pop(shadow.__name__, None)
    return shadow


def learner_functions(source, module_name, qualnames, filename):
    """{"npformer.<module>.<qualname>": the learner's function} for ``qualnames`` of one file."""
    shadow = learner_module(source, module_name, filename)
    taken = {}
    for qualname in qualnames:
        owner = shadow
        for part in qualname.split("."):
            owner = inspect.getattr_static(owner, part) if isinstance(owner, type) else getattr(owner, part)
        taken[qualname] = owner
    own = {q for q in qualnames if "." not in q}
    reference_module = importlib.import_module(module_name)
    for name, value in vars(reference_module).items():
        if name not in own and not name.startswith("__"):
            shadow.__dict__[name] = value
    return {f"{module_name}.{qualname}": function for qualname, function in taken.items()}
