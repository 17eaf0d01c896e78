"""Turning a judge's result into a verdict and the lines a learner reads.

An exercise is done only when every check it lists ran and passed (``missing`` lists those
a result lacks): a process that answers nothing is failing, never done.

A mistake is said once, with the number of checks that show it; the smallest example that
shows it follows when it was drawn. Output the learner's code printed is shown (capped)
when the exercise fails, or always with ``show_output``. Lines fit 100 columns.
"""
from __future__ import annotations

import os
import re
import textwrap

from . import claim_verdicts
from .safe_text import one_line

WIDTH = 100
OUTPUT_LINES = 12                # of the learner's own printing, the first few lines
STUB = re.compile(r"NotImplementedError: exercise (\d+) \(.*?\): write ([\w.]+)")


def _check_name(entry):
    if "component" in entry:
        return f"{entry['component']}: {entry['check']}"
    if "claim" in entry:
        return f"claim: {entry['claim']}"
    return f"{entry['case']} (case {entry['size']})"


RAISED = ("your implementation raised ", "your code raised ")


def _error_of(entry):
    """The error an entry's code raised (a case's, a drawn check's or a claim's), or None."""
    if entry.get("error"):
        return entry["error"]
    message = entry.get("message") or entry.get("detail") or ""
    return next((message[len(p):] for p in RAISED if message.startswith(p)), None)


def _finding(entry):
    """(key, first lines) of what one failing check shows; equal keys are one finding. An
    error is one finding whatever the sizes it names (the same line raises at every size)."""
    found = entry.get("mistake")
    if found:
        return ("mistake", found["name"]), [f"the mistake, in {found['function']}: {found['says']}",
                                             f"re-check: {found['recheck']}"]
    error = _error_of(entry)
    if "claim" in entry and not error:
        return ("claim", entry["claim"]), [f"claim: {entry['claim']}: {entry['detail']}"]
    stub = STUB.search(error or entry.get("message") or "")
    if stub:
        return ("stub", stub.group(2)), [f"not finished: {stub.group(2)} still raises its stub"]
    if error:
        return ("error", re.sub(r"\d+", "#", error)), [f"your code raised {error}"]
    if "tensors" in entry:
        said = [t["message"] for t in entry["tensors"]]
        diagnoses = list(dict.fromkeys([d for t in entry["tensors"] for d in t.get("diagnoses") or []]
                                       + list(entry.get("notes", []))))
        # a diagnosis is said once, however many cases show it (the numbers in it aside)
        key = ("case", tuple(re.sub(r"\d+", "#", d) for d in diagnoses)) if diagnoses else \
            ("case", entry["case"], entry["size"])
        return key, said + [f"diagnosis: {d}" for d in diagnoses]
    diagnoses = [f"diagnosis: {d}" for d in entry.get("diagnoses") or []]
    return ("values", entry["component"], entry.get("example")), [entry["message"]] + diagnoses


def _listed(names, at_most=6):
    """ "a, b, c" or "a, b, c and 14 more" (each name once)."""
    names = list(dict.fromkeys(names))
    more = f" and {len(names) - at_most} more" if len(names) > at_most else ""
    return ", ".join(names[:at_most]) + more


def _where(entries):
    """Where a finding shows: each component's checks together, then the cases and claims."""
    groups = {}
    for e in entries:
        place = e.get("component") or ("claims" if "claim" in e else "cases")
        groups.setdefault(place, []).append(e.get("check") or e.get("claim") or f"{e['case']} ({e['size']})")
    return "; ".join(f"{place}: {_listed(names, 4)}" for place, names in groups.items())


def failure_lines(entries):
    """Each finding once, the most telling first (a named mistake, an error, wrong values, a
    claim): its lines, the checks it shows in, and its smallest example (an example already
    shown is not shown again). A property that fails in a component whose mistake is named is
    listed after the mistake."""
    named = {e["component"] for e in entries if e.get("mistake") and "component" in e}
    consequences = [e for e in entries if e.get("kind") == "property" and e["component"] in named]
    entries = [e for e in entries if e not in consequences]
    order, seen = [], {}
    for entry in entries:
        key, lines = _finding(entry)
        if key not in seen:
            seen[key] = {"lines": lines, "entries": [], "key": key}
            order.append(key)
        elif key[0] == "values":             # one more tensor wrong on the same example
            seen[key]["lines"][1:1] = [line for line in lines[:1] if line not in seen[key]["lines"]]
            seen[key]["lines"] += [line for line in lines[1:] if line not in seen[key]["lines"]]
        seen[key]["entries"].append(entry)
    rank = {"mistake": 0, "stub": 1, "error": 2, "case": 3, "values": 3, "claim": 4}
    out, shown = [], set()
    for key in sorted(order, key=lambda k: rank[k[0]]):
        found = seen[key]
        out += _block(found, shown)
        if key[0] == "mistake" and consequences:
            out.append("  which also breaks: " + "; ".join(e["check"] for e in consequences))
    return out


def _one_factor(lines):
    """``lines`` without their constant factors when they claim different ones (yours 1.009
    times the right gradient in one tensor and 3.711 times in another is no factor at all)."""
    factors = [line for line in lines if " times the right " in line]
    return [line for line in lines if line not in factors] if len(set(factors)) > 1 else lines


def _block(found, shown):
    """The lines of one finding: what it is, where it shows, its smallest example."""
    kind, lines, entries = found["key"][0], _one_factor(found["lines"]), found["entries"]
    where = _where(entries)
    if kind == "values":
        values = [line for line in lines if not line.startswith("diagnosis:")]
        head = [f"{entries[0]['component']}, on one example: "
                + (f"{len(values)} results differ" if len(values) > 1 else "1 result differs")]
        body = values[:3] + ([f"and {len(values) - 3} more: {_listed(v.split(':')[0] for v in values[3:])}"]
                             if len(values) > 3 else []) + [line for line in lines if line.startswith("diagnosis:")]
        out = head + ["  " + line for line in body]
    elif kind == "case":
        head = f"{_check_name(entries[0])}:" if len(entries) == 1 else \
            f"{len(entries)} fixed cases show the same ({_listed([_check_name(e) for e in entries], 4)}); the first:"
        out = [head] + ["  " + line for line in lines[:4]] + \
            ([f"  and {len(lines) - 4} more lines"] if len(lines) > 4 else [])
    else:
        out = [lines[0]] + ["  " + line for line in lines[1:]]
        if kind != "claim":
            out.append(f"  seen in: {where}" if len(entries) > 1 or kind == "mistake" else f"  in: {where}")
    example = next((e.get("example") for e in entries if e.get("example")), None)
    if example and example in shown:
        out.append("  smallest example: the one above")
    elif example:
        shown.add(example)
        out.append("  smallest example:")
        out += ["    " + line for line in example.split("\n")]
    return out


def claim_lines(claims, everything=False):
    """One line per claim (the failing ones, and details of the rest when asked)."""
    lines = []
    for entry in claims:
        if not entry["ok"]:
            lines.append(f"FAIL  {entry['claim']}: {entry.get('detail')}")
        elif everything or entry.get("detail"):
            lines.append(f"ok    {entry['claim']}" + (f": {entry['detail']}" if entry.get("detail") else ""))
    return lines


def _printed(printed, show):
    if not (show and printed):
        return []
    shown = printed[:OUTPUT_LINES]
    rest = len(printed) - len(shown)
    counted = re.match(r"\.\.\. ([\d,]+) more lines", printed[-1]) if printed else None
    if counted:                                   # the judge already counted what it dropped
        rest = rest - 1 + int(counted.group(1).replace(",", ""))
        shown = [line for line in shown if line is not printed[-1]]
    more = [f"  ... {rest:,} more line{'s' * (rest != 1)}"] if rest > 0 else []
    return ["your code printed:"] + ["  " + line for line in shown] + more


SIGNALS = {2: "interrupted (Ctrl-C)", 9: "killed: it went past the memory limit, or was killed",
           15: "stopped (terminated)", 24: "stopped: it used up its CPU-time limit",
           25: "stopped: it wrote a file past the size limit", 11: "crashed (segmentation fault)",
           6: "crashed (aborted)"}


def ended(code):
    """What an exit code says to a learner: "interrupted (Ctrl-C)", not "exit code -2"."""
    if isinstance(code, int) and (code < 0 or code in (130, 137)):
        number = -code if code < 0 else code - 128
        return SIGNALS.get(number, f"ended by signal {number}")
    return f"your code ended the grading process (exit code {code})"


def missing(exercise, result):
    """The listed checks of ``exercise`` that ``result`` holds no verdict on: each component's
    output on drawn inputs, each fixed case at each of its sizes, each claim. [] when all ran."""
    checks, claimed = result.get("checks") or [], result.get("claims") or []
    ran = {(c.get("component"), c.get("kind")) for c in checks if c.get("examples")}
    ran |= {(c.get("case"), c.get("size")) for c in checks if "case" in c}
    ran |= {c.get("claim") for c in claimed}
    wanted = [(name, "output") for name in exercise.components]
    wanted += [(case, size) for case, sizes in exercise.checks for size in sizes]
    wanted += [text for text, _ in claim_verdicts.claims_of(exercise.name)]
    return [w for w in wanted if w not in ran]


def describe_run(exercise, result, code, printed, stopped, timeout, show_output=False):
    """(status, lines) from a judge's result, exit code, printed lines and stop point."""
    if code == "timeout":
        where = f" in {stopped}" if stopped else ""
        return "failing", [f"stopped after {timeout:g} s{where}: an endless loop, or very slow code?"] + \
            _printed(printed, True)
    if result is None:
        if printed and any("MemoryError" in line for line in printed[-5:]):
            return "failing", ["your code went past the memory limit (MemoryError)"] + _printed(printed, True)
        return "failing", [ended(code)] + _printed(printed, True)
    cheats = [f"{line} (refused)" for line in result.get("refused") or []]
    cheats += [f"your code changed npformer's grader: {name}" for name in result.get("engine_changed") or []]
    if cheats:
        return "failing", cheats[:12] + ["an exercise whose code reaches for the grader or npformer's own "
                                         "functions is not graded"] + _printed(printed, True)
    if result.get("import_failed"):
        error = result["error"]
        where = f" ({error['where']})" if error.get("where") else ""
        return "failing", [f"your file does not run: {error['message']}{where}"] + _printed(printed, True)
    checks, claims = result["checks"], result["claims"]
    failing = [c for c in checks if not c["ok"]]
    unrun = missing(exercise, result)
    if not failing and all(c["ok"] for c in claims) and not unrun:
        return "done", _done_lines(checks, claims) + _printed(printed, show_output)
    if not failing and all(c["ok"] for c in claims):
        return "failing", [f"not every check ran: {_listed(' '.join(map(str, w)) if isinstance(w, tuple) else w for w in unrun)} "
                           f"(your code's process stopped answering?)"] + _printed(printed, True)
    lines = failure_lines(failing + [c for c in claims if not c["ok"]])
    lines.append(f"{len(checks) - len(failing)} of {len(checks)} checks pass" +
                 (f"; {sum(c['ok'] for c in claims)} of {len(claims)} claims hold" if claims else ""))
    return "failing", lines + _printed(printed, True)


def _done_lines(checks, claims):
    drawn = [c for c in checks if "component" in c and c["kind"] != "property"]
    properties = [c for c in checks if "component" in c and c["kind"] == "property"]
    fixed = [c for c in checks if "case" in c]
    verified = [c for c in claims if c.get("verified", True)]    # what the code only said does not count
    parts = []
    if drawn:
        equal = "1 result equals" if len(drawn) == 1 else f"{len(drawn)} results equal"
        parts.append(f"{equal} npformer's on {max(c['examples'] for c in drawn)} drawn inputs each")
    if fixed:
        parts.append(_counted(len(fixed), "fixed problem"))
    if properties or verified:
        held = len(properties) + len(verified)
        parts.append("1 property holds" if held == 1 else f"{held} properties hold")
    return [", ".join(parts)] + claim_lines(claims)


def _counted(n, noun):
    """'1 fixed problem', '3 fixed problems'."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def format_outcome(outcome):
    """The report of one exercise: a title line with its status, then indented lines, at most
    ``REPORT_LINES`` of them and ``REPORT_BYTES`` in all (the findings are cut, the closing
    count and what the code printed kept; ``outcome.lines`` holds everything)."""
    title = f"{outcome.exercise.label} "
    head = f"{title}{'.' * max(3, 72 - len(title) - len(outcome.status) - 1)} {outcome.status}"
    body = [[wrapped for wrapped in _fit("   " + one_line(line))] for line in outcome.lines]
    last = max((i for i, line in enumerate(outcome.lines) if COUNTED.match(line)), default=len(body))
    findings, tail = [w for lines in body[:last] for w in lines], [w for lines in body[last:] for w in lines]
    kept = findings
    while kept and (len(kept) + len(tail) + 1 > REPORT_LINES or
                    len("\n".join([head] + kept + tail).encode()) > REPORT_BYTES - 60):
        kept = kept[:min(len(kept) - 1, REPORT_LINES - len(tail) - 2)]
    if len(kept) < len(findings):
        kept = kept + [f"   ... {len(findings) - len(kept)} more lines of findings not shown"]
    return "\n".join([head] + kept + tail)


REPORT_LINES = 60                # one exercise's report: a screenful
REPORT_BYTES = 6000
COUNTED = re.compile(r"\d+ of \d+ checks pass")


def _fit(line):
    """``line`` wrapped to 100 columns, the continuation indented under its text."""
    if len(line) <= WIDTH:
        return [line]
    indent = " " * (len(line) - len(line.lstrip()) + 2)
    return textwrap.wrap(line, WIDTH, subsequent_indent=indent, break_on_hyphens=False)


def progress_table(outcomes, forward=False):
    """The table closing a grading session: every graded exercise, its files and status; it
    fits 100 columns whatever the names."""
    done = sum(o.done for o in outcomes)
    rows = [f"\nprogress: {done} of {len(outcomes)} done"]
    label = max([len(o.exercise.label) for o in outcomes] + [10])
    status = max([len(o.status) for o in outcomes] + [4])
    names = [", ".join(os.path.basename(f) for f in o.exercise.files(forward)) or "-" for o in outcomes]
    room = min(max(len(n) for n in names), max(10, WIDTH - 2 - label - 2 - 2 - status))
    for o, files in zip(outcomes, names):
        files = files if len(files) <= room else files[:room - 3] + "..."
        rows.append(f"  {o.exercise.label:{label}}  {files:{room}}  {o.status}")
    return "\n".join(rows)


def next_step(outcomes):
    """The last line: what to do next."""
    for o in outcomes:
        if o.done:
            continue
        if o.status == "blocked":
            return f"next: {o.exercise.label} is {o.lines[0]}"
        if o.status == "not graded":
            return f"next: grade {o.exercise.label} again (the grader failed there, not your code)"
        target = o.first or o.exercise.title
        return f"next: {target} (exercise {o.exercise.label})"
    return f"next: nothing: all {len(outcomes)} graded exercises are done"
