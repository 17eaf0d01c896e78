"""docs/checking-your-code.md's tables of module parameters are the modules' own, and its block
that takes a mask and RoPE tables runs as printed (the page's sections below its additions line
are not run by tests/project/test_library_use.py)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from npformer.testing.module_run import reference
from npformer.testing.module_tables import markdown, rows
from npformer.testing.modules import _DEFAULTS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "checking-your-code.md"


def test_the_page_prints_the_generated_tables():
    text = PAGE.read_text(encoding="utf-8")
    shown = text.split("<!-- module-parameters:start -->\n")[1].split("<!-- module-parameters:end -->")[0]
    assert shown == markdown()


def test_every_parameter_of_every_kind_is_listed_once():
    for kind in ("gpt2_mlp", "gpt2_block", "llama_block", "decoder"):
        names = [name for name, *_ in rows(kind)]
        module = reference(kind, _DEFAULTS[kind], np.random.default_rng(0))
        expected = list(dict.fromkeys(n if not n.startswith("blocks.") else "blocks.{i}." + n.split(".", 2)[2]
                                      for n, _ in module.named_parameters()))
        assert names == expected, kind


def test_the_block_with_a_mask_and_tables_runs_as_printed(tmp_path):
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("### A block that takes a mask and RoPE tables")[1]
    code, printed = re.search(r"```python\n(.*?)```\n\n```\n(.*?)```", section, re.S).groups()
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(PAGE.parent.parent)}, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    seconds = re.compile(r"\(\d+\.\d+ s\)")
    assert seconds.sub("(s)", done.stdout) == seconds.sub("(s)", printed)
    assert "conforms" in printed.split("\n")[0] and "the mistake: rope-rotate-turns-backwards" in printed
