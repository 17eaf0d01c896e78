"""The progress bar a training run draws on stderr (tqdm), or nothing when disabled."""
from __future__ import annotations


class Progress:
    """A tqdm bar on stderr (or nothing when disabled): steps, loss, tokens per second."""

    def __init__(self, total, initial, enabled):
        self.total, self.initial, self.enabled = total, initial, enabled
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
