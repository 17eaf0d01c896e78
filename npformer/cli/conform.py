"""``npformer conform``: check a function of your own against npformer's component.

    npformer conform my_attention.py:attention --component attention --backward attention_backward

Prints the report of ``npformer.testing.conform``. Exits 0 when everything holds, 1 when a
check fails, 2 on bad input (a missing file or function, an unknown component).
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import io
import os
import sys
import tokenize

from .common import UsageError, check_input_file, positive_int, seed


def add_arguments(parser):
    """Options of ``npformer conform``."""
    parser.add_argument("target", metavar="FILE.py:FUNCTION", help="your forward function")
    parser.add_argument("--component", required=True, metavar="NAME",
                        help="what it computes, e.g. softmax, attention, layernorm, cross_entropy "
                             "(an unknown name lists them all)")
    parser.add_argument("--backward", metavar="FUNCTION",
                        help="your backward(d_out, cache), in the same file (forward then returns (out, cache))")
    parser.add_argument("--vjp", metavar="FUNCTION",
                        help="or your vjp(inputs, d_out), in the same file (inputs: {name: value})")
    parser.add_argument("--examples", type=positive_int, default=100,
                        help="inputs drawn per search (default 100)")
    parser.add_argument("--seed", type=seed, default=0, help="the hypothesis seed (default 0)")
    parser.add_argument("--scope", metavar="TEXT",
                        help="what your code supports, e.g. causal=True,layout=interleaved,no_gqa")
    parser.add_argument("--precision", choices=("float64", "float32", "float16", "bfloat16"),
                        help="the precision your code computes in (default: found)")


# A learner's source file is small; a larger one is a mistake (a data file, a device).
SOURCE_LIMIT = 4 * 2 ** 20


def load_functions(target, names):
    """(forward, *others) from FILE.py:FUNCTION and the other names in that file.

    FILE must be a regular file of Python source (its name may end otherwise: it is loaded
    as source whatever its suffix) in UTF-8 or the encoding its first lines declare; a device
    or a FIFO is refused before it is opened, bytes of another encoding before it runs."""
    path, _, forward = target.rpartition(":")
    if not path or not forward:
        raise UsageError(f"FILE.py:FUNCTION: expected a file and a function name, got {target!r}")
    check_input_file("FILE.py:FUNCTION", path, SOURCE_LIMIT, what="a Python source file")
    stem = os.path.splitext(os.path.basename(path))[0]
    loader = importlib.machinery.SourceFileLoader(f"conform_{stem}", path)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    source = _source(path)
    module.__file__ = path
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        exec(compile(source, path, "exec", dont_inherit=True), module.__dict__)
    except Exception as error:                # noqa: BLE001 - the user's file: one line
        raise UsageError(f"{path}: cannot be loaded: {type(error).__name__}: {error}") from None
    finally:
        sys.path.pop(0)
    found = []
    for name in (forward,) + tuple(names):
        if name is not None and not callable(getattr(module, name, None)):
            raise UsageError(f"{path}: no function {name}")
        found.append(getattr(module, name) if name else None)
    return found


def _source(path):
    """The text of ``path``, decoded strictly (UTF-8, or the coding its first lines declare)."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError) as error:
        raise UsageError(f"{path}: not text in UTF-8 (or in the encoding its first lines declare): "
                         f"{error}; save it as UTF-8") from None


def run(args):
    """Run ``npformer conform``; 0 when it conforms, 1 otherwise."""
    from ..testing import conform
    from ..testing.components import component_named
    try:
        component_named(args.component)
    except ValueError as error:
        raise UsageError(f"--component: {str(error).split(': ', 1)[1]}") from None
    if args.backward and args.vjp:
        raise UsageError("--backward, --vjp: give one of them, not both")
    forward, backward, vjp = load_functions(args.target, (args.backward, args.vjp))
    try:
        report = conform(args.component, forward, backward, vjp=vjp, examples=args.examples, seed=args.seed,
                         scope=getattr(args, "scope", None), precision=getattr(args, "precision", None))
    except (ValueError, TypeError) as error:
        if str(error).startswith(("scope:", "precision:")):
            raise UsageError(str(error)) from None
        raise
    print(report)
    return 0 if report.ok else 1
