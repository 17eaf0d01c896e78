"""Turning a runner's result into a verdict and the lines a learner reads."""
from __future__ import annotations

from . import catalog

MAX_FAILING_CHECKS = 4          # the first few failing checks in full; the rest counted
OUTPUT_LINES = 12               # of the learner's own printing, the last few lines
WIDTH = 72


def _error_lines(error):
    lines = [f"{error['where'] + ': ' if error.get('where') else ''}{error['message']}"]
    if error.get("line"):
        lines.append(f"  > {error['line']}")
    if error.get("hint"):
        lines.append(f"  hint: {error['hint']}")
    return lines


def _raised(error):
    return "your code raised an error" if error.get("where") else "an error was raised running your code"


def _tensor_lines(tensor):
    if "rel_error" in tensor:
        index = tuple(tensor["worst_index"])
        head = (f"gradient of {tensor['name']}: relative error {tensor['rel_error']:.2e}, worst at {index}: "
                f"yours {tensor['yours']:.6g}, expected {tensor['expected']:.6g}")
    elif "shape" in tensor:
        head = (f"gradient of {tensor['name']}: shape {tuple(tensor['shape'])}, "
                f"expected {tuple(tensor['expected_shape'])}")
    else:
        head = f"gradient of {tensor['name']}: wrong"
    return [head] + [f"  diagnosis: {d}" for d in tensor["diagnoses"] if d]


def _error_key(error):
    return error.get("where"), error["message"].split(":")[0]


def check_lines(check, seen):
    """The lines of one failing gradient check; an error already shown (``seen``) in one line."""
    title = f"{check['case']} (size {check['size']})"
    if check.get("error"):
        key = _error_key(check["error"])
        if key in seen:
            return [f"{title}: the same error ({key[0] or key[1]})"]
        seen.add(key)
        return [f"{title}: {_raised(check['error'])}"] + ["  " + l for l in _error_lines(check["error"])]
    if check.get("forward"):
        return [f"{title}: {check['forward']}"]
    lines = []
    for tensor in check.get("tensors", []):
        lines += _tensor_lines(tensor)
    lines += [f"diagnosis: {note}" for note in check.get("notes", [])]
    if not check.get("tensors") and ("notes",) + tuple(lines) in seen:
        return [f"{title}: the same diagnosis"]
    seen.add(("notes",) + tuple(lines))
    return [f"{title}: gradients differ from the reference"] + ["  " + l for l in lines]


def claim_lines(claims, everything, seen=None):
    """One line per claim (all of them, or only the failing ones and details of the rest)."""
    seen = set() if seen is None else seen
    lines = []
    for entry in claims:
        detail, error = entry.get("detail"), entry.get("error")
        if error and _error_key(error) in seen:
            lines.append(f"FAIL  {entry['claim']}: the same error ({error.get('where') or error['message']})")
        elif error:
            seen.add(_error_key(error))
            lines += [f"FAIL  {entry['claim']}: {_raised(error)}"]
            lines += ["      " + l for l in _error_lines(error)]
        elif not entry["ok"]:
            lines.append(f"FAIL  {entry['claim']}: {detail}")
        elif everything or detail:
            lines.append(f"ok    {entry['claim']}" + (f": {detail}" if detail else ""))
    return lines


def _stub_verdict(exercise, error):
    waiting = [e for e in catalog.EXERCISES if e.number == error["stub"]]
    if error["stub"] == exercise.number or not waiting:
        return "failing", [f"not finished: {error['where'] or ''} still raises its stub"]
    return "blocked", [f"waiting for {waiting[0].label}: its stub ran ({error['where'] or '?'})"]


def describe_run(exercise, result, code, output, timeout):
    """(status, lines) from a runner's result, exit code and output."""
    tail = [l for l in output.strip().splitlines()[-OUTPUT_LINES:]]
    printed = ["your code printed (last lines):"] + ["  " + l for l in tail] if tail else []
    if code == "timeout":
        return "failing", [f"stopped after {timeout:g} s: an endless loop, or very slow code?"] + printed
    if result is None:
        return "failing", [f"your code ended the grading process (exit code {code})"] + printed
    error = result.get("error")
    if error and error.get("stub") is not None:
        status, lines = _stub_verdict(exercise, error)
        return status, lines
    if result.get("import_failed"):
        own = any((error.get("where") or "").startswith(f"{name}:") for name in exercise.files(True))
        return ("failing" if own else "blocked"), \
            ["npformer cannot import your files:"] + _error_lines(error) + printed
    failing = [c for c in result["checks"] if not c["ok"]]
    claims_ok = all(entry["ok"] for entry in result["claims"])
    if not failing and claims_ok:
        return "done", _done_lines(result)
    lines, seen = [], set()
    for check in failing[:MAX_FAILING_CHECKS]:
        lines += check_lines(check, seen)
    if len(failing) > MAX_FAILING_CHECKS:
        lines.append(f"... and {len(failing) - MAX_FAILING_CHECKS} more failing gradient checks")
    passed = len(result["checks"]) - len(failing)
    if result["checks"]:
        lines.append(f"{passed} of {len(result['checks'])} gradient checks pass")
    if result["claims"]:
        held = sum(entry["ok"] for entry in result["claims"])
        lines.append(f"{held} of {len(result['claims'])} claims hold")
        lines += ["  " + l for l in claim_lines(result["claims"], False, seen)]
    return "failing", lines + printed


def _done_lines(result):
    checks = result["checks"]
    parts = []
    if checks:
        worst = max(c.get("finite_differences", 0.0) for c in checks)
        parts.append(f"{len(checks)} gradient checks (finite differences agree to {worst:.0e})")
    if result["claims"]:
        count = len(result["claims"])
        parts.append(f"{count} claim{'s hold' if count > 1 else ' holds'}")
    return [", ".join(parts)] + claim_lines(result["claims"], False)


def format_outcome(outcome):
    """The report of one exercise: a title line with its status, then indented lines."""
    title = f"{outcome.exercise.label} "
    head = f"{title}{'.' * max(3, WIDTH - len(title) - len(outcome.status) - 1)} {outcome.status}"
    return "\n".join([head] + ["   " + line for line in outcome.lines])


def progress_table(outcomes, forward=False):
    """The table closing a grading session: every graded exercise, its files and status."""
    done = sum(o.done for o in outcomes)
    rows = [f"\nprogress: {done} of {len(outcomes)} done"]
    for o in outcomes:
        files = ", ".join(o.exercise.files(forward)) or "-"
        rows.append(f"  {o.exercise.label:16} {files:26} {o.status}")
    return "\n".join(rows)
