"""Texts a learner's code controls, made safe to show in a terminal, a CSV cell or an XML file.

What a learner's process prints, the messages of the errors it raises and the names of its
folders reach the teacher's terminal, the gradebook's CSV, JUnit's XML and Gradescope's JSON.
``shown`` writes every control character (an ANSI escape sequence that would rewrite the
terminal, a carriage return that would overwrite a line, a character XML cannot hold) and
every character that reorders text on screen as a visible escape such as ``\\x1b``; new lines
and tabs stay. ``one_line`` writes new lines as ``\\n`` too, for a text that must not start a line
of the grader's own (a folder's name, a line of a report). ``csv_cell`` also keeps a spreadsheet
from reading a cell as a formula.
"""
from __future__ import annotations

import re

# C0 controls but tab and new line, DEL and C1 controls, line and paragraph separators, the
# bidirectional overrides and isolates, lone surrogates (not encodable), the BOM, and the two
# non-characters XML 1.0 cannot hold (U+FFFE, U+FFFF)
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff\ufffe\uffff"
                    "\ud800-\udfff]")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _escaped(match):
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text):
    """``text`` with every unsafe character written as its escape (``\\x1b``, ``\\u202e``)."""
    return UNSAFE.sub(_escaped, str(text))


def one_line(text):
    """``shown(text)`` with its new lines written as ``\\n``: it cannot begin a line."""
    return shown(text).replace("\n", "\\n")


def csv_cell(value):
    """A CSV cell's text: safe to show, and never read as a formula by a spreadsheet."""
    if not isinstance(value, str):
        return value
    text = shown(value)
    return "'" + text if text.startswith(FORMULA_START) else text
