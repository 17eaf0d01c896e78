"""The docs say what the code does: every command-line option they name is an option of the
command they name it with, every repository path they name exists, every link resolves, and the
README's concept map points at names defined in the very file it names.

The docs are read as a reader reads them: an option belongs to the command written before it in
the same code line, backticked span or table row (``npformer exercises DIR`` ... ``--hints``);
an option named alone (``--plot DIR``) must be an option of some npformer command. A path is a
word that begins with one of the repository's folders (``tests/...``), with one of npformer's
sub-packages (``training/loop.py``, which the docs write for ``npformer/training/loop.py``), or
is a concept file's name (``t04_attention.py``)."""
import argparse
import ast
import re
from pathlib import Path

import pytest

from npformer.cli import COMMANDS

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "npformer"
DOCS = [REPO / "README.md", REPO / "README.zh-CN.md", *sorted((REPO / "docs").glob("*.md")),
        REPO / "tests" / "README.md", REPO / "benchmarks" / "README.md",
        *sorted((REPO / "worked_examples").glob("*.md"))]
IDS = [str(doc.relative_to(REPO)) for doc in DOCS]

# Options of the other programs the docs show: the benchmarks' (read from their parsers) and
# the `docker run` of the grading recipe (docs/teaching.md).
BENCHMARK_OPTIONS = {option for path in (REPO / "benchmarks").glob("*.py")
                     for option in re.findall(r'add_argument\("(--[\w-]+)"', path.read_text(encoding="utf-8"))}
DOCKER_OPTIONS = {"--rm", "--network", "--user", "--memory", "--pids-limit", "--read-only", "--tmpfs",
                  "--cap-drop", "--security-opt"}
PROGRAM = re.compile(r"(?:python -m )?npformer (?P<command>[a-z][\w-]*)|(?P<benchmarks>benchmarks\b)"
                     r"|(?P<docker>\b[Dd]ocker)")
OPTION = re.compile(r"(?<![\w-])--[a-z][\w-]*")
# where an option named alone means another program's
DEFAULT_PROGRAM = {"benchmarks/README.md": "benchmarks"}


def command_options():
    """{command: the options its parser takes}, for every npformer command."""
    found = {}
    for name, command in COMMANDS.items():
        parser = argparse.ArgumentParser(prog=f"npformer {name}")
        command.module.add_arguments(parser)
        found[name] = set(parser._option_string_actions)
    return found


OPTIONS = command_options()
ANY_COMMAND = set().union(*OPTIONS.values()) | {"--version"}


def units(text):
    """(text, where its options are) of the pieces of a doc an option is read in: each line of a
    fenced code block (a line ending in a backslash goes on) and each table row, options
    anywhere; each paragraph of prose, options in its backticked spans only."""
    found, fenced, going_on, paragraph = [], False, "", []

    def end_paragraph():
        prose = "\n".join(paragraph)
        found.append((prose, [m.span(1) for m in re.finditer(r"`([^`]+)`", prose)]))
        paragraph.clear()
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif fenced:
            going_on += line
            if not line.endswith("\\"):
                found.append((going_on, [(0, len(going_on))]))
                going_on = ""
        elif line.startswith("|"):
            found.append((line, [(0, len(line))]))
        elif line.strip():
            paragraph.append(line)
            continue
        end_paragraph()
    end_paragraph()
    return found


def misnamed_options(text, default=None):
    """(option, the program it was named with) of every option that program does not take."""
    wrong = []
    for unit, spans in units(text):
        program = default
        options = [m for begin, end in spans for m in OPTION.finditer(unit, begin, end)]
        for match in sorted([*PROGRAM.finditer(unit), *options], key=lambda m: m.start()):
            if match.re is PROGRAM:
                program = match.group("command") if match.group("command") in OPTIONS else (
                    "benchmarks" if match.group("benchmarks") else "docker" if match.group("docker") else program)
                continue
            option = match.group(0)
            allowed = {None: ANY_COMMAND, "benchmarks": BENCHMARK_OPTIONS, "docker": DOCKER_OPTIONS}.get(
                program, OPTIONS.get(program, set()) | {"--help"})
            if option not in allowed:
                wrong.append((option, program or "any npformer command"))
    return wrong


@pytest.mark.parametrize("doc", DOCS, ids=IDS)
def test_every_option_a_doc_names_is_an_option_of_its_command(doc):
    default = DEFAULT_PROGRAM.get(str(doc.relative_to(REPO)))
    assert misnamed_options(doc.read_text(encoding="utf-8"), default) == []


def test_a_misnamed_option_is_found():
    text = ("| `npformer exercises DIR` | hand out (`--list`, `--no-hints`) |\n\n"
            "Run `npformer train --data add --arch llama`; `--steps` too.\n\n"
            "`--plot DIR` writes, --nothing-in-prose, `--nothing`.\n"
            "```bash\nnpformer grade ws --course c.json \\\n  --jobs 2 --steps 3\n```\n")
    assert misnamed_options(text) == [("--no-hints", "exercises"), ("--nothing", "any npformer command"),
                                      ("--steps", "grade")]


# -- paths ------------------------------------------------------------------------------------------
TOP = [".ci"] + sorted(p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith(".")
                       and p.name not in ("build", "dist") and not p.name.endswith(".egg-info"))
SUBPACKAGES = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
PATH = re.compile(rf"(?<![\w/.-])(?:(?:{'|'.join(map(re.escape, TOP + SUBPACKAGES))})/[\w./*-]*"
                  rf"|t\d\d_\w+\.py\b)")
PLACEHOLDER = re.compile(r"NN|<|…|\.\.\.")


def named_paths(text):
    """Repository paths named in backticks or fenced code (placeholders such as tNN_x.py left out)."""
    fenced = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M)
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.S | re.M)
    spans = re.findall(r"`([^`]+)`", prose) + fenced
    return sorted({m.group(0).rstrip(".") for span in spans for m in PATH.finditer(span)
                   if not PLACEHOLDER.search(span[m.start():m.end() + 1])})


def exists(path):
    """A path of the repository, or of the package when it begins below ``npformer/``; a glob matches."""
    for base in (REPO, PACKAGE):
        if any(base.glob(path.rstrip("/"))) if "*" in path else (base / path).exists():
            return True
    return False


@pytest.mark.parametrize("doc", DOCS, ids=IDS)
def test_every_path_a_doc_names_exists(doc):
    assert [p for p in named_paths(doc.read_text(encoding="utf-8")) if not exists(p)] == []


@pytest.mark.parametrize("doc", DOCS, ids=IDS)
def test_every_link_resolves(doc):
    links = re.findall(r"\]\(([^)\s]+)\)", doc.read_text(encoding="utf-8"))
    local = [link.split("#")[0] for link in links if not re.match(r"[a-z]+:", link) and not link.startswith("#")]
    assert [link for link in local if not (doc.parent / link).exists()] == []


def test_the_finders_find_a_missing_path():
    text = "`training/optim.py`, `npformer/t04_attention.py`, `tNN_x.py`, [x](docs/nothing.md)\n"
    assert named_paths(text) == ["npformer/t04_attention.py", "training/optim.py"]
    assert [p for p in named_paths(text) if not exists(p)] == ["training/optim.py"]


def test_the_english_readme_points_to_the_notebooks():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "(notebooks/)" in readme
    assert {p.name for p in (REPO / "notebooks").glob("*.ipynb")} <= set(re.findall(r"[\w]+\.ipynb", readme))


# -- the README's concept map -----------------------------------------------------------------------
def concept_map_rows():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("<!-- concept-map:start -->")[1].split("<!-- concept-map:end -->")[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[1:]]   # skip the header


def defined_in(path):
    """{name defined at the top of ``path``: the set of attribute names its class body or its
    methods (``self.x = ...``) define}."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found[node.name] = {n.name for n in ast.walk(node) if isinstance(n, ast.FunctionDef)}
            found[node.name] |= {t.attr for n in ast.walk(node) if isinstance(n, (ast.Assign, ast.AnnAssign))
                                 for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                                 if isinstance(t, ast.Attribute)}
            found[node.name] |= {n.target.id for n in node.body if isinstance(n, ast.AnnAssign)}
        elif isinstance(node, ast.Assign):
            found.update({t.id: set() for t in node.targets if isinstance(t, ast.Name)})
    return found


def concept_map_pointers():
    """(concept, file, name) for every name the concept map puts in a file (or a folder)."""
    pointers = []
    for concept, code, _ in concept_map_rows():
        for segment in code.split(";"):
            found = re.match(r"\s*`([\w/]+(?:\.py|/))`: (.*)", segment)
            if found:
                names = re.findall(r"`([\w.]+)`", re.sub(r"\(.*?\)", "", found.group(2)))
                pointers += [(concept, found.group(1), name) for name in names]
    return pointers


def test_every_concept_map_pointer_names_what_its_file_defines():
    pointers = concept_map_pointers()
    assert len(pointers) >= 100
    wrong = []
    for concept, where, name in pointers:
        files = sorted((PACKAGE / where).glob("*.py")) if where.endswith("/") else [PACKAGE / where]
        owner, *attribute = name.split(".")
        defined = [defined_in(f)[owner] for f in files if owner in defined_in(f)]
        if not defined or (attribute and attribute[0] not in defined[0]):
            wrong.append(f"{concept}: {name} is not defined in {where}")
    assert wrong == []


def test_the_pointer_check_finds_a_name_only_imported(tmp_path):
    (tmp_path / "m.py").write_text("from npformer.t09_block import build_block\n\n\nclass C:\n"
                                   "    size: int = 1\n\n    def f(self):\n        self.x = 1\n", encoding="utf-8")
    assert defined_in(tmp_path / "m.py") == {"C": {"f", "x", "size"}}


def test_every_concept_map_example_exists_and_every_example_is_on_the_map():
    links = {link for row in concept_map_rows() for link in re.findall(r"\]\(([^)]+)\)", row[2])}
    assert all((REPO / link).is_file() for link in links), links
    scripts = {f"worked_examples/{p.name}" for p in (REPO / "worked_examples").glob("[0-9][0-9]_*.py")}
    assert scripts <= links


def test_the_number_of_exercises_a_doc_gives_with_the_command_is_what_it_lists():
    from npformer.exercises import EXERCISES
    said = [(doc.name, int(n)) for doc in DOCS for line in doc.read_text(encoding="utf-8").splitlines()
            if "npformer exercises" in line for n in re.findall(r"the (\d+) exercises", line)]
    assert said and all(n == len(EXERCISES) for _, n in said), said
