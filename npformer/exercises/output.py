"""What a learner's code prints while it is graded: kept, but capped and counted.

``capture_output(path)`` sends ``print`` (sys.stdout and sys.stderr) to ``path`` for the
length of a ``with`` block: the first ``LINES`` lines are kept, the rest only counted, so a
printing loop cannot fill the disk. The last line of the file then says how many were left
out ("... 1,204 more lines").
"""
from __future__ import annotations

import contextlib
import sys

LINES = 200


class CappedWriter:
    """A text stream keeping the first ``limit`` lines in a file and counting the others."""

    def __init__(self, file, limit=LINES):
        self.file, self.limit, self.lines, self.dropped = file, limit, 0, 0
        self.partial = False

    def write(self, text):
        """Keep ``text`` while under the limit; count the lines past it."""
        for piece in text.splitlines(keepends=True):
            if self.lines < self.limit:
                self.file.write(piece)
            elif piece.endswith("\n") or not self.partial:
                self.dropped += 1
            self.partial = not piece.endswith("\n")
            self.lines += piece.endswith("\n")
        return len(text)

    def flush(self):
        """Flush the file."""
        self.file.flush()

    def isatty(self):
        """Never a terminal: progress bars stay quiet."""
        return False


@contextlib.contextmanager
def capture_output(path, limit=LINES):
    """sys.stdout and sys.stderr into ``path``, capped at ``limit`` lines, inside the block."""
    with open(path, "w", encoding="utf-8", errors="replace") as file:
        writer = CappedWriter(file, limit)
        previous = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = writer
        try:
            yield writer
        finally:
            sys.stdout, sys.stderr = previous
            if writer.dropped:
                file.write(f"\n... {writer.dropped:,} more lines\n")
