"""``npformer examples``: run the worked examples (all, or the ones named by number or name); see
npformer/examples.py for where they are looked for."""
from __future__ import annotations

from ..worked import (FOLDER, ExampleNotFound, find_examples_dir, list_examples,
                              run_example, select)
from .common import UsageError, check_plot_dir


def add_arguments(parser):
    """Options of ``npformer examples``."""
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help="examples, by number (2) or name fragment (rope), run in the order "
                             "given; default: run them all")
    parser.add_argument("--list", action="store_true",
                        help="list the examples (or the one named) instead of running them")
    parser.add_argument("--plot", metavar="DIR", default=None,
                        help="also write each example's pictures (PNG) into DIR (needs "
                             "matplotlib and a CJK font: npformer's [plot] extra)")
    parser.add_argument("--dir", default=None, help=f"the {FOLDER}/ folder (default: the "
                        "package's copy, else the current directory or a parent)")


def run(args):
    """Run (or list) the worked examples; a bad name or a missing folder is a UsageError."""
    if args.dir is not None and not args.dir:
        raise UsageError("--dir: expected the worked_examples folder, got an empty path ''")
    try:
        examples = list_examples(find_examples_dir(args.dir))
        chosen = [select(examples, name) for name in args.names] or examples
    except ExampleNotFound as error:
        raise UsageError(str(error)) from None
    if args.list:
        width = max(len(example.name) for example in chosen)
        for example in chosen:
            print(f"{example.number:02d}  {example.name:{width}}  {example.summary()}")
        return 0
    if args.plot is not None:
        check_plot_dir(args.plot)              # a missing matplotlib: one line, before any work
        from .. import pictures                # only here: matplotlib stays optional
    for example in chosen:
        run_example(example)
        if args.plot is not None:
            for path in pictures.draw(example.number, args.plot):
                print(f"picture: {path}")
    return 0
