"""The cross-check tier: npformer against PyTorch autograd and Hugging Face transformers.

Run with  python -m pytest -q -m crosscheck  (the default run leaves this folder and the
marker out). Without the tier's packages the run stops at once with the command that
installs them (tests/conftest.py): a tier whose every test skipped would read as a pass.
Nothing is downloaded: Hugging Face models are built from tiny configs with random weights.
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pytest_terminal_summary(terminalreporter):
    """Print the worst relative error of every compared component and model."""
    try:
        from crosscheck_util import WORST
    except ImportError:  # pragma: no cover
        return
    if not WORST:
        return
    terminalreporter.section("cross-check: worst errors (relative unless named otherwise)")
    width = max(len(k) for k in WORST)
    for key in sorted(WORST):
        terminalreporter.write_line(f"{key:<{width}}  {WORST[key]:.2e}")
