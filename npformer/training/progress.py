"""The progress bar a training run draws on stderr (tqdm), or nothing when disabled.

The bar is drawn only on a terminal: on a pipe or in a file (``npformer train 2>&1 | tee
log``) its redrawn lines would sit between the report's, so there the report is all."""
from __future__ import annotations

import sys


def on_a_terminal(stream):
    """True when ``stream`` is a terminal (not a pipe, a file or a test's capture)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):       # no isatty, or closed
        return False


class Progress:
    """A tqdm bar on stderr (or nothing when disabled, or when stderr is no terminal): steps,
    loss, tokens per second."""

    def __init__(self, total, initial, enabled):
        self.total, self.initial = total, initial
        self.enabled = enabled and on_a_terminal(sys.stderr)
        self.bar = None

    @property
    def active(self):
        """True while a bar is shown."""
        return self.bar is not None

    def __enter__(self):
        if self.enabled:
            from tqdm import tqdm
            self.bar = tqdm(total=self.total, initial=self.initial, desc="training", unit="step",
                            mininterval=0.25, dynamic_ncols=True, leave=True)
        return self

    def advance(self, loss, tokens_per_second):
        """One more step done."""
        if self.bar is not None:
            self.bar.set_postfix_str(f"loss {loss:.4g}, {tokens_per_second:,.0f} tok/s", refresh=False)
            self.bar.update(1)

    def write(self, text):
        """Print a line above the bar."""
        self.bar.write(text)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()
        return False
