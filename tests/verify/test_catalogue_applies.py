"""Which catalogued mistakes an edit of a concept file has broken, file by file, in a second.

Each catalogued mistake is an edit of a named function's source (``old`` replaced by ``new``).
An edit of the concept file (a renamed local variable, a reworded line) can leave a mistake's
``old`` text absent, or present twice: ``conform`` and the grader then skip that mistake with a
warning. This test names those mistakes, so the one who edited the file can rewrite their texts
in ``npformer/testing/mistakes/<file>.json``.
"""
import json

import pytest

from npformer.testing.mistakes import registry
from npformer.testing.patching import ROOT, StaleMistake, function_source, reference

FILES = registry.files()


def _broken(mistake):
    """Why ``mistake`` no longer applies, or None when each of its texts occurs once."""
    try:
        source = function_source(reference(f"{ROOT}.{mistake.function}"))
    except (ValueError, ImportError, AttributeError, OSError, TypeError) as error:
        return f"its function {mistake.function} cannot be read ({error})"
    olds, news = registry._edits(mistake)
    for old, new in zip(olds, news):
        count = source.count(old)
        if count != 1:
            return f"{old!r} occurs {count} times in {mistake.function}"
        source = source.replace(old, new)
    return None


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_catalogued_text_occurs_once_in_its_function(path):
    broken = {m.name: why for m in registry.read(path) if (why := _broken(m)) is not None}
    assert not broken, f"{len(broken)} catalogued mistakes no longer apply ({path.name}): {broken}"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_catalogued_edit_compiles(path):
    failed = {}
    for mistake in registry.read(path):
        try:
            mistake.patches()
        except (StaleMistake, SyntaxError) as error:
            failed[mistake.name] = str(error)
    assert not failed, failed


def test_the_data_files_are_the_catalogue_and_name_one_module_each():
    names = [m.name for m in registry.CATALOGUE]
    assert len(names) == len(set(names)) == sum(len(json.loads(p.read_text("utf-8"))) for p in FILES)
    for path in FILES:
        module = path.name[:-len(".json")]
        assert all(m.function.startswith(module + ".") for m in registry.read(path))


def test_a_stale_text_is_counted_against_its_file_and_not_tried(tmp_path):
    path = tmp_path / "t02_linear.json"
    path.write_text(json.dumps([
        {"name": "fine", "function": "linear_backward", "old": "d_x = d_out @ weight.T",
         "new": "d_x = d_out @ weight", "says": "s", "recheck": "r"},
        {"name": "renamed-away", "function": "linear_backward", "old": "no such line in linear_backward",
         "new": "x", "says": "s", "recheck": "r"},
        {"name": "two-edits-one-stale", "function": "linear_backward",
         "old": ["d_x = d_out @ weight.T", "no such line either"], "new": ["d_x = d_out", "x"],
         "says": "s", "recheck": "r"}]))
    mistakes = registry.read(path)
    assert mistakes[2].old == ("d_x = d_out @ weight.T", "no such line either")
    usable, stale = registry.applicable(mistakes)
    assert [m.name for m, _ in usable] == ["fine"]
    assert stale == {"t02_linear.py": 2}
    assert registry.stale_warning(stale) == [
        "2 catalogued mistakes no longer apply to t02_linear.py (its text changed): they are not tried"]
    assert [_broken(m) is None for m in mistakes] == [True, False, False]


@pytest.mark.parametrize("entry, said", [
    ({"name": "a", "function": "linear_backward", "old": "x", "new": "y", "says": "s"}, "keys"),
    ({"name": "a", "function": "linear_backward", "old": ["x", "z"], "new": ["y"], "says": "s",
      "recheck": "r"}, "as many texts"),
    ({"name": "a", "function": "linear_backward", "old": 3, "new": "y", "says": "s", "recheck": "r"},
     "a text or a list of texts"),
])
def test_a_malformed_entry_is_refused_naming_where_it_is(tmp_path, entry, said):
    path = tmp_path / "t02_linear.json"
    path.write_text(json.dumps([entry]))
    with pytest.raises(ValueError, match=said) as raised:
        registry.read(path)
    assert "t02_linear.json[0]" in str(raised.value)
