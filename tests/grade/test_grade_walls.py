"""A student who has read every line of npformer can neither cheat nor harm: the kernel's walls.

Each attack a submission may try is a throwaway workspace of the softmax exercise. The class is
graded twice, as root and as an unprivileged user (made by the test), through ``npformer grade
--course``; each test then reads its submission's row in both gradebooks. An attack that got
through would be graded done, or would leave its mark on the machine (a file written, a process
left running, a secret in a report); the tests look for both. ``test_without_walls_...`` grades
two of the attacks with no sandbox, and they succeed there: the walls are what stops them.

Where bubblewrap cannot make namespaces, these tests are skipped, except in CI
(``NPFORMER_REQUIRE_WALLS=1``), where they fail instead.
"""
import csv
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

import npformer
from npformer.exercises.course import write_course
from npformer.exercises.walls.bubblewrap import Isolation, detect
from npformer.exercises.workspace import MARKER, write_workspace

from support.as_user import can_switch_user, give, run_as, shared_folder, student

if detect().bwrap is None:
    if os.environ.get("NPFORMER_REQUIRE_WALLS"):
        raise RuntimeError(f"the walls' tests must run here, but {detect().why_not}")
    pytest.skip(f"no walls here: {detect().why_not}", allow_module_level=True)

RIGHT = "    return y * (d_out - np.sum(d_out * y, axis=cache.axis, keepdims=True))\n"
WRONG = "    return 0 * d_out\n"
TIMEOUT = 15                     # --timeout: a learner's process that stops answering is waited for 2x + 20 s
PACKAGE = os.path.dirname(os.path.abspath(npformer.__file__))
ROOT = os.path.dirname(PACKAGE)
# npformer's own softmax_backward, compiled (the plain function under its track dispatch)
CODE = npformer.t03_softmax.softmax_backward.plain.__code__.co_code.hex()

# (name, code at the end of the file, the body of softmax_backward after `y = cache.y`). An
# attack that reaches what it wants returns the right gradient; else a wrong one.
ATTACKS = {
    # -- nothing to steal: npformer's own softmax_backward is nowhere the process can reach
    "own-function-imported": ("from npformer.t03_softmax import softmax_backward as _own\n",
                              "    return _own(d_out, cache)\n"),
    "own-function-in-a-thread": ("", """\
    import threading
    import npformer.t03_softmax as t
    box = []
    def run():
        try:
            box.append(t.softmax_backward(d_out, cache))
        except Exception as error:
            print("thread:", type(error).__name__)
    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    return box[0] if box else 0 * d_out
"""),
    "disguised-as-the-standard-library": ("", """\
    import os, types, npformer.t03_softmax as t
    call = lambda: t.softmax_backward.__wrapped__(d_out, cache) if hasattr(t.softmax_backward, "__wrapped__") \\
        else t.softmax_backward(d_out, cache)
    call.__code__ = call.__code__.replace(co_filename=os.__file__)
    try:
        return call()
    except Exception as error:
        print("disguised:", type(error).__name__)
        return 0 * d_out
"""),
    "installed-source": ("""\
import npformer.t03_softmax as t
try:
    print("installed:", len(open(PATHS["installed"]).read()))
except OSError as error:
    print("installed:", type(error).__name__)
print("the line in the build's file:", LINE in open(t.__file__, "rb").read(), t.__file__)
""", WRONG),
    "every-file-searched": ("""\
import os
found = []
for top, folders, files in os.walk("/"):
    if top.startswith(("/proc", "/sys", "/dev", "/submission")):     # the last holds this file: LINE
        folders[:] = []
        continue
    for name in files:
        if name.endswith((".py", ".pyc", ".json", ".txt", ".md", ".pth", ".cfg", ".toml", ".csv")):
            try:
                with open(os.path.join(top, name), "rb") as f:
                    if LINE in f.read(4 << 20):
                        found.append(os.path.join(top, name))
            except OSError:
                pass
print("files holding the line:", len(found), found[:3])
""", WRONG),
    "memory-searched": ("""\
import gc, types
found = 0
def codes(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from codes(const)
for thing in gc.get_objects():
    code = getattr(thing, "__code__", thing)
    if isinstance(code, types.CodeType):
        found += sum(c.co_code.hex() == PATHS["code"] for c in codes(code))
print("code objects of npformer's softmax_backward:", found)
""", WRONG),
    "answer-key-by-climbing": ("""\
import os
fd = os.open(".", os.O_RDONLY)
for _ in range(30):
    fd = os.open("..", os.O_RDONLY, dir_fd=fd)
print("climbed to:", sorted(os.listdir(fd)))
try:
    print("key: read", len(open(PATHS["key"]).read()))
except OSError as error:
    print("key:", type(error).__name__)
""", WRONG),
    # -- other students and the next session
    "another-submission-rewritten": ("""\
try:
    with open(PATHS["other"], "a") as f:
        f.write("\\nraise SystemExit('rewritten')\\n")
    print("other: rewritten")
except OSError as error:
    print("other:", type(error).__name__)
""", WRONG),
    "grader-patched-for-the-next-judge": ("""\
import npformer.exercises.verdict as verdict
for path in (PATHS["judging"], verdict.__file__, PATHS["cwd"] + "/sitecustomize.py", "/scratch/../sitecustomize.py"):
    try:
        with open(path, "a") as f:
            f.write("\\nimport npformer.exercises.verdict as j; j.judge_exercise = None\\n")
        print("patched:", path)
    except OSError as error:
        print("patch:", type(error).__name__)
""", WRONG),
    "gradebook-daemon": ("""\
import os, time, ctypes
for _ in range(2):
    try:
        if os.fork() == 0:
            os.setsid()
            ctypes.CDLL(None).prctl(15, b"npf-daemon", 0, 0, 0)
            for _ in range(300):
                try:
                    open(PATHS["gradebook"], "a").write("daemon,softmax,done,,9,9,99,10\\n")
                except OSError:
                    pass
                time.sleep(0.2)
            os._exit(0)
    except OSError as error:
        print("daemon:", type(error).__name__)
""", WRONG),
    # -- harm
    "survivor-started": ("""\
import subprocess, sys
try:
    subprocess.Popen([sys.executable, "-c", "import ctypes, time; ctypes.CDLL(None).prctl(15, b'npf-survivor', 0, 0, 0); time.sleep(600)"],
                     start_new_session=True)
    print("survivor: started")
except OSError as error:
    print("survivor:", type(error).__name__)
""", WRONG),
    "finalizer-after-return": ("", """\
    import os, weakref
    out = y * (d_out - np.sum(d_out * y, axis=cache.axis, keepdims=True))
    def later(path=PATHS["marker"]):
        os.system("touch " + path)
        try:
            open(path, "w").write("finalizer")
        except OSError:
            pass
    weakref.finalize(out, later)
    return out
"""),
    "teacher-files": ("""\
import shutil
try:
    open(PATHS["teacher"] + "/notes.txt", "a").write("changed")
except OSError as error:
    print("write:", type(error).__name__)
shutil.rmtree(PATHS["teacher"], ignore_errors=True)
""", WRONG),
    "secrets-read": ("""\
import os
print("environment:", dict(os.environ))
for path in (PATHS["secret_file"], os.path.expanduser("~/.ssh/id_rsa")):
    try:
        print("secret:", open(path).read())
    except OSError as error:
        print("secret:", type(error).__name__)
""", WRONG),
    "network": ("""\
import socket
tries = {"udp": lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", PATHS["port"])),
         "listen": lambda: socket.create_server(("0.0.0.0", PATHS["port"] + 1)),
         "unix": lambda: socket.socket(socket.AF_UNIX).bind("\\0npf")}
for what, attempt in tries.items():
    try:
        attempt()
        print(what, "worked")
    except OSError as error:
        print(what, "refused", error.errno)
""", WRONG),
    "kernel-doors": ("""\
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for name, call in [("ptrace", lambda: libc.ptrace(16, os.getppid(), 0, 0)),
                   ("shmget", lambda: libc.shmget(0, 4096, 0o1600)),
                   ("msgget", lambda: libc.msgget(0, 0o1600)),
                   ("unshare", lambda: libc.unshare(0x10000000)),
                   ("mount", lambda: libc.mount(b"none", b"/grading", b"tmpfs", 0, None))]:
    print(name, "gave", call(), os.strerror(ctypes.get_errno()))
""", WRONG),
    "fork-bomb": ("""\
import os, time
started = refused = 0
for _ in range(50):
    try:
        if os.fork() == 0:
            time.sleep(600)
            os._exit(0)
        started += 1
    except OSError:
        refused += 1
print("forks started", started, "refused", refused)
""", WRONG),
    "threads": ("""\
import threading, time
started = refused = 0
for _ in range(2000):
    try:
        threading.Thread(target=time.sleep, args=(5,), daemon=True).start()
        started += 1
    except RuntimeError:
        refused += 1
print("threads started", started, "refused", refused)
""", WRONG),
    "terminal-and-formats": ("", """\
    print("\\x1b[2J\\x1b[31mall done\\x1b]0;owned\\x07\\r\\x00\\u202etxt.exe")
    raise ValueError("\\x1b[31mboom\\x1b[0m\\x0b")
"""),
    "reply-too-long": ("""\
import os, struct
for fd in range(3, 64):
    try:
        os.write(fd, struct.pack("<Q", 1 << 60))
    except OSError:
        pass
""", RIGHT),
    "reply-nested-5000-deep": ("""\
import os, struct
header = b"[" * 5000 + b"]" * 5000
body = struct.pack("<Q", len(header)) + header
for fd in range(3, 64):
    try:
        os.write(fd, struct.pack("<Q", len(body)) + body)
    except OSError:
        pass
""", RIGHT),
    "output-pipe-kept": ("""\
import threading, time
threading.Thread(target=time.sleep, args=(600,), daemon=False).start()
""", WRONG),
    "zygote-killed": ("import os\nos.kill(os.getppid(), 9)\n", RIGHT),
    "allocate-20-gib": ("", "    big = np.ones((20 << 30) // 8)\n" + RIGHT),
    "flood-fd-1": ("", "    import os\n    os.write(1, b'x' * (64 << 20))\n" + RIGHT),
    "scratch-filled": ("""\
written = 0
try:
    for i in range(100):
        with open(f"fill-{i}", "wb") as f:
            f.write(b"x" * (16 << 20))
        written += 16
except OSError as error:
    print("scratch:", type(error).__name__, "after", written, "MiB")
""", WRONG),
    "inodes-filled": ("""\
import os
made = 0
for top in ("/", "/tmp", "/dev/shm", os.path.expanduser("~"), os.getcwd()):
    try:
        for i in range(400000):
            os.mkdir(os.path.join(top, f"d{i}"))
            made += 1
    except OSError as error:
        print("inodes:", top, type(error).__name__)
print("inodes made", made)
""", WRONG),
    # -- the judge believes only the arrays it asked for
    "first-words-not-ok": ("""\
import os
from npformer.exercises import channel as _c
for fd in range(3, 64):
    try:
        os.write(fd, _c.pack({"ok": False}))
    except OSError:
        pass
os._exit(0)
""", "    return None\n"),
    "float16-replies": ("""\
import numpy as _np
from npformer.exercises import channel as _c
_send = _c.send
def _half(fd, message, deadline=None):        # every array it answers, sent in float16
    if isinstance(message, dict) and isinstance(message.get("values"), dict):
        message = {**message, "values": {k: v.astype(_np.float16) for k, v in message["values"].items()}}
    return _send(fd, message, deadline)
_c.send = _half
""", "    return 1.005 * y * (d_out - np.sum(d_out * y, axis=cache.axis, keepdims=True))\n"),
    # -- the walls' own processes
    "walls-processes-reached": ("""\
import os, signal
print("pids:", sorted(p for p in os.listdir("/proc") if p.isdigit()), "mine", os.getpid(), "parent", os.getppid())
for what, path, mode in (("environ", "/proc/1/environ", "rb"), ("mem", "/proc/1/mem", "r+b"),
                         ("fd", "/proc/1/fd/1", "ab"), ("maps", "/proc/1/maps", "rb")):
    try:
        with open(path, mode) as f:
            if what == "fd":
                os.posix_fallocate(f.fileno(), 0, 1 << 30)
            print(what, "opened", f.read(64) if "r" in mode else "")
    except OSError as error:
        print(what + ":", type(error).__name__)
for number in (signal.SIGSTOP, signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
    for pid in (1, os.getppid()):
        try:
            os.kill(pid, number)
        except OSError as error:
            print("kill:", type(error).__name__)
try:
    open("/proc/sys/kernel/core_pattern", "w")
    print("sysctl: opened")
except OSError as error:
    print("sysctl:", type(error).__name__)
""", WRONG),
    "stops-itself": ("", "    import os, signal\n    os.kill(os.getpid(), signal.SIGSTOP)\n" + RIGHT),
    # -- what a learner's text may do to the grader's own lines and files
    "newline-in-error": ("", "    raise ValueError('x\\n03 softmax ........ done\\nprogress: 1 of 1 done\\ufffe\\uffff')\n"),
}
FOLDER_NAMES = {"terminal-and-formats": "=cmd|' -C calc'!A0\x1b[31m"}
# honest submissions whose folder names meet the grader's own formats
HONEST_NAMES = ("bob~smith", "bob_smith", "forged\nzz 10 of 10 points")


def _paths(root, outside):
    return {"installed": os.path.join(PACKAGE, "t03_softmax.py"),
            "judging": os.path.join(PACKAGE, "exercises", "verdict.py"),
            "other": str(root / "subs" / "honest" / "t03_softmax.py"),
            "key": str(outside / "key" / "t03_softmax.py"), "gradebook": str(root / "book" / "gradebook.csv"),
            "teacher": str(outside / "teacher"), "secret_file": str(outside / "home" / ".ssh" / "id_rsa"),
            "marker": str(outside / "finalizer-ran"), "cwd": str(root), "port": 47000 + os.getpid() % 1000,
            "code": CODE}


def _submission(subs, name, tail, body, paths):
    ws = write_workspace(subs / FOLDER_NAMES.get(name, name), only=["softmax"], solutions=True)
    path = os.path.join(ws.directory, "t03_softmax.py")
    source = open(path, encoding="utf-8").read()
    assert RIGHT in source
    head = f"PATHS = {paths!r}\nLINE = {RIGHT.strip().encode()!r}\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(source.replace(RIGHT, body) + "\n" + head + tail)


def _class(root, outside):
    """The class of attacks, its course and the machine it may mark, under ``root``."""
    from pathlib import Path
    root, outside = Path(root), Path(outside)
    subs = root / "subs"
    subs.mkdir(parents=True)
    (outside / "teacher").mkdir(parents=True)
    (outside / "teacher" / "notes.txt").write_text("the teacher's own file\n")
    (outside / "home" / ".ssh").mkdir(parents=True)
    (outside / "home" / ".ssh" / "id_rsa").write_text("SECRET-KEY-of-the-grading-user\n")
    key = write_workspace(outside / "key", only=["softmax"], solutions=True)
    course = write_course(root / "course.json", key)
    write_workspace(subs / "honest", only=["softmax"], solutions=True)
    paths = _paths(root, outside)
    for name, (tail, body) in ATTACKS.items():
        _submission(subs, name, tail, body, paths)
    marker = subs / "fewer-exercises"                  # the marker edited to drop the exercise
    write_workspace(marker, only=["softmax"])
    data = json.loads((marker / MARKER).read_text())
    data["exercises"] = []
    (marker / MARKER).write_text(json.dumps(data))
    linked = subs / "symlink-to-key"                   # a file that is a link to the answer key
    write_workspace(linked, only=["softmax"])
    os.remove(linked / "t03_softmax.py")
    os.symlink(key.directory + "/t03_softmax.py", linked / "t03_softmax.py")
    for name in HONEST_NAMES:
        write_workspace(subs / name, only=["softmax"], solutions=True)
    _unreadable(subs, key)
    return course


def _unreadable(subs, key):
    """Submissions whose files the grader, outside the walls, must read with care."""
    fifo = subs / "fifo-file"                          # the exercise file is a pipe no one writes
    write_workspace(fifo, only=["softmax"])
    os.remove(fifo / "t03_softmax.py")
    os.mkfifo(fifo / "t03_softmax.py")
    huge = subs / "expression-800-kb"                  # one expression nested too deep to compile
    write_workspace(huge, only=["softmax"], solutions=True)
    with open(huge / "t03_softmax.py", "a", encoding="utf-8") as f:
        f.write("\nx = " + "(" * 400000 + "1" + ")" * 400000 + "\n")
    nested = subs / "marker-nested-100000-deep"        # a marker the JSON reader recurses into
    write_workspace(nested, only=["softmax"], solutions=True)
    (nested / MARKER).write_text("[" * 100000 + "]" * 100000)
    sparse = subs / "readme-of-one-tib"                # a README of 1 TiB, sparse
    write_workspace(sparse, only=["softmax"], solutions=True)
    os.truncate(sparse / "README.md", 1 << 40)
    os.symlink(key.directory, subs / "folder-linked-to-key")   # a whole submission that is a link


def _digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _named(process_name):
    """Pids of the live processes whose name is ``process_name``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == process_name:
                    found.append(int(pid))
        except OSError:
            pass
    return found


def _grade(root, outside, user):
    """Grade the class through the command line (as ``user``, or as this process's user);
    {name: book}, the run's output, what the machine looked like after it."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "NPFORMER_GRADE_EXAMPLES": "4", "PYTHONPATH": ROOT,
           "HOME": str(outside / "home"), "NPFORMER_TEST_SECRET": "SECRET-TOKEN-in-the-environment"}
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", _paths(root, outside)["port"]))
    listener.setblocking(False)
    judging_before = _digest(os.path.join(PACKAGE, "exercises", "verdict.py"))
    argv = [sys.executable, "-m", "npformer", "grade", str(root / "subs"), "--course", str(root / "course.json"),
            "--out", str(root / "book"), "--jobs", "2", "--junit", "--gradescope", "--timeout", str(TIMEOUT)]
    began = time.monotonic()
    if user is None:
        ran = subprocess.run(argv, cwd=root, env={**os.environ, **env}, capture_output=True, text=True,
                             timeout=900)
    else:
        ran = run_as(user, argv, cwd=root, env=env, timeout=900)
    seconds = time.monotonic() - began
    assert ran.returncode == 0, ran.stderr[-3000:]
    time.sleep(1.0)                                 # a daemon that outlived grading would write now
    try:
        packets = listener.recv(100)
    except BlockingIOError:
        packets = b""
    listener.close()
    books, files = {}, sorted(os.listdir(root / "book" / "submissions"))
    for name in files:
        with open(root / "book" / "submissions" / name, encoding="utf-8") as f:
            book = json.load(f)
        books[book["submission"]] = book
    return {"books": books, "files": files, "stdout": ran.stdout, "stderr": ran.stderr, "seconds": seconds,
            "packets": packets, "as_root": user is None and os.getuid() == 0, "judging_changed": _digest(os.path.join(PACKAGE, "exercises", "verdict.py"))
            != judging_before, "left": _named("npf-daemon") + _named("npf-survivor"), "root": root,
            "outside": outside}


@pytest.fixture(scope="module", params=["root", "user"])
def graded(request, tmp_path_factory):
    if request.param == "user":
        if os.getuid() == 0 and not can_switch_user():
            pytest.skip("no useradd, unshare or setpriv to grade as another user")
        folder = shared_folder()
    else:
        if os.getuid() != 0:
            pytest.skip("grading as root needs root")
        folder = str(tmp_path_factory.mktemp("walls"))
    from pathlib import Path
    root, outside = Path(folder) / "class", Path(folder) / "outside"
    _class(root, outside)
    user = None
    if request.param == "user" and os.getuid() == 0:
        user = student()
        give(folder, user)
    return _grade(root, outside, user)


def _row(graded, name):
    (row,) = graded["books"][name]["exercises"]
    return row


def _said(graded, name):
    return " ".join(_row(graded, name)["report"].split())


def test_the_first_line_names_the_walls(graded):
    walls = "isolation: bubblewrap (user, pid, net, ipc, uts, mount namespaces"
    assert walls + (", as nobody)" if graded["as_root"] else ")") in graded["stderr"], graded["stderr"][:500]
    assert all(r["isolation"].startswith("bubblewrap") for b in graded["books"].values() for r in b["exercises"])


def test_the_honest_submission_is_done(graded):
    assert _row(graded, "honest")["status"] == "done"


RIGHT_CODE = ("finalizer-after-return", "flood-fd-1", "zygote-killed")   # their gradient is right: done is their due


@pytest.mark.parametrize("name", [n for n in ATTACKS if n not in RIGHT_CODE])
def test_no_attack_gets_wrong_code_graded_done(graded, name):
    name = FOLDER_NAMES.get(name, name)
    row = _row(graded, name.replace("\x1b", "\\x1b"))
    assert row["status"] == "failing" and row["points"] == 0, row["report"]


def test_npformer_s_own_function_is_nowhere_the_learner_s_process_reaches(graded):
    assert "files holding the line: 0 []" in _said(graded, "every-file-searched")
    assert "code objects of npformer's softmax_backward: 0" in _said(graded, "memory-searched")
    said = _said(graded, "installed-source")
    assert "installed: FileNotFoundError" in said
    assert "the line in the build's file: False /grading/npformer/t03_softmax.py" in said
    assert "thread: NotImplementedError" in _said(graded, "own-function-in-a-thread")
    said = _said(graded, "answer-key-by-climbing")
    assert "key: FileNotFoundError" in said and "'grading', " in said and "'submission', " in said
    assert not any(f"'{top}'" in said for top in ("home", "work", "mnt", "opt", "srv", "var"))


def test_the_searches_would_find_npformer_s_function_where_it_is(tmp_path):
    """The two searches above, run where npformer is installed, find it: a 0 there means absent."""
    import gc
    import types
    line = RIGHT.strip().encode()
    assert line in open(os.path.join(PACKAGE, "t03_softmax.py"), "rb").read()
    # functions' code only: getattr on every object would resolve lazy modules (six.moves)
    codes = [o.__code__ if isinstance(o, types.FunctionType) else o for o in gc.get_objects()]
    assert any(isinstance(c, types.CodeType) and c.co_code.hex() == CODE for c in codes)


def test_another_submission_and_the_next_session_are_out_of_reach(graded):
    assert "other: FileNotFoundError" in _said(graded, "another-submission-rewritten")
    assert "rewritten" not in (graded["root"] / "subs" / "honest" / "t03_softmax.py").read_text()
    assert "patched:" not in _said(graded, "grader-patched-for-the-next-judge")
    assert not graded["judging_changed"]
    assert not (graded["root"] / "sitecustomize.py").exists()


def test_nothing_started_by_a_learner_outlives_grading(graded):
    assert graded["left"] == []
    with open(graded["root"] / "book" / "gradebook.csv", encoding="utf-8") as f:
        assert "daemon,softmax,done" not in f.read()
    assert "daemon: PermissionError" in _said(graded, "gradebook-daemon")
    assert "forks started 0 refused 50" in _said(graded, "fork-bomb")
    assert "survivor: PermissionError" in _said(graded, "survivor-started")


def test_a_finalizer_after_return_changes_nothing(graded):
    assert _row(graded, "finalizer-after-return")["status"] == "done"      # its code is right
    assert not (graded["outside"] / "finalizer-ran").exists()


def test_the_teacher_s_files_and_secrets_stay_the_teacher_s(graded):
    assert (graded["outside"] / "teacher" / "notes.txt").read_text() == "the teacher's own file\n"
    everything = "".join(open(os.path.join(top, n), encoding="utf-8", errors="replace").read()
                         for top, _, names in os.walk(graded["root"] / "book") for n in names)
    assert "SECRET-TOKEN" not in everything and "SECRET-KEY" not in everything
    said = _said(graded, "secrets-read")
    assert "environment:" in said and "secret: FileNotFoundError" in said


def test_no_network(graded):
    said = _said(graded, "network")
    assert "worked" not in said and all(f"{what} refused" in said for what in ("udp", "listen", "unix")), said
    assert graded["packets"] == b""


def test_the_kernel_s_other_doors_are_shut(graded):
    said = _said(graded, "kernel-doors")
    for name in ("ptrace", "shmget", "msgget", "unshare", "mount"):
        assert f"{name} gave -1" in said, said


def test_threads_are_bounded(graded):
    """Nobody inside is root: the process limit binds (root's does not), to a few dozen."""
    said = _said(graded, "threads")
    started = int(said.split("threads started ")[1].split()[0])
    assert 0 < started < 200, said


def test_what_a_learner_prints_cannot_rewrite_a_terminal_or_break_a_file(graded):
    name = "=cmd|' -C calc'!A0\\x1b[31m"
    assert "\x1b" not in graded["stdout"] + graded["stderr"]
    row = _row(graded, name)
    assert "\\x1b[2J" in row["report"] and "\x1b" not in row["report"] and "\x00" not in row["report"]
    with open(graded["root"] / "book" / "gradebook.csv", encoding="utf-8", newline="") as f:
        cells = [r["submission"] for r in csv.DictReader(f)]
    assert "'" + name in cells and not any(c.startswith(("=", "+", "-", "@")) for c in cells)
    ET.parse(graded["root"] / "book" / "junit.xml")                      # well-formed for the whole class
    text = (graded["root"] / "book" / "junit.xml").read_text(encoding="utf-8")
    assert "\x1b" not in text and "\x0b" not in text


def test_a_broken_reply_is_the_learner_s_failure(graded):
    for name in ("reply-too-long", "reply-nested-5000-deep"):
        assert "your code wrote a result of its own to the grader's channel" in _said(graded, name)


def test_grading_does_not_wait_on_a_process_that_keeps_a_pipe(graded):
    assert graded["books"]["output-pipe-kept"]["seconds"] < 30


def test_limits_hold(graded):
    assert "MemoryError" in _said(graded, "allocate-20-gib")
    assert _row(graded, "flood-fd-1")["status"] == "done"
    assert len(json.dumps(graded["books"]["flood-fd-1"])) < 1 << 20
    said = _said(graded, "scratch-filled")
    assert "scratch: OSError after 0 MiB" in said, said              # nothing is writable
    said = _said(graded, "inodes-filled")
    assert "inodes made 0" in said and "inodes: / OSError" in said, said
    assert _row(graded, "zygote-killed")["status"] == "done"         # its kill reached no one


def test_the_course_s_list_and_links_out_of_the_workspace(graded):
    book = graded["books"]["fewer-exercises"]
    assert [r["exercise"] for r in book["exercises"]] == ["softmax"]
    assert any("npformer-workspace.json differs from the hand-out" in n for n in book["notes"])
    assert "t03_softmax.py is a link: refused" in _said(graded, "symlink-to-key")
    row = _row(graded, "folder-linked-to-key")
    assert row["status"] == "not graded" and row["points"] == 0 and "is a link to" in row["why"], row


# -- the judge believes only the arrays it asked for -----------------------------------------------------
def test_first_words_a_dtype_or_forged_claims_decide_nothing(graded):
    """A process that says it cannot serve and leaves, and one that answers in float16 (which
    would have set a tolerance of 1e-2) with a gradient 0.5% off: failing, the learner's own."""
    for name in ("first-words-not-ok", "float16-replies"):
        row = _row(graded, name)
        assert row["status"] == "failing" and row["points"] == 0, (name, row["report"])
        assert "the grader itself failed" not in row["report"], row["report"]
    assert "float16 array where the judge asked for float64" in _said(graded, "float16-replies")


# -- the walls' own processes are out of reach -------------------------------------------------------------
def test_the_sandbox_s_first_process_can_be_neither_read_nor_signalled(graded):
    said = _said(graded, "walls-processes-reached")
    pids = said.split("pids: ")[1].split("]")[0]
    assert pids.count("'") == 4 and "'1'" in pids, said          # the zygote and itself: no bubblewrap
    for what in ("environ", "mem", "fd", "maps"):
        assert f"{what}: PermissionError" in said, said
    assert "opened" not in said.replace("sysctl:", ""), said
    assert "sysctl: PermissionError" in said or "sysctl: OSError" in said or "sysctl: FileNotFoundError" in said


def test_a_process_that_stops_itself_is_failing_within_its_deadline(graded):
    row = _row(graded, "stops-itself")
    assert row["status"] == "failing" and "stopped after" in row["report"], row["report"]
    assert graded["books"]["stops-itself"]["seconds"] < 2 * TIMEOUT + 20 + 30


# -- files the grader reads outside the walls ---------------------------------------------------------------
def test_files_read_outside_the_walls_are_bounded_and_one_failure_does_not_sink_the_class(graded):
    said = {name: _said(graded, name) for name in ("fifo-file", "expression-800-kb", "readme-of-one-tib")}
    assert "t03_softmax.py is not a regular file" in said["fifo-file"], said
    assert "RecursionError" in said["expression-800-kb"] or "MemoryError" in said["expression-800-kb"] or \
        "SyntaxError" in said["expression-800-kb"], said
    assert _row(graded, "readme-of-one-tib")["status"] == "done"        # the README is only compared
    assert any("README.md is missing" in n or "README.md differs" in n
               for n in graded["books"]["readme-of-one-tib"]["notes"])
    row = _row(graded, "marker-nested-100000-deep")
    assert row["status"] == "not graded" and "cannot read" in row["why"], row
    assert _row(graded, "honest")["status"] == "done"


# -- the grader's own formats -----------------------------------------------------------------------------------
def test_every_submission_has_files_of_its_own(graded):
    for name in ("bob~smith", "bob_smith"):
        assert _row(graded, name)["status"] == "done" and _row(graded, name)["points"] == 10
    assert len(graded["files"]) == len(graded["books"]), graded["files"]


def test_a_learner_s_newline_starts_no_line_of_the_grader_s_own(graded):
    name = "forged\\nzz 10 of 10 points"
    assert _row(graded, name)["status"] == "done"
    assert not any(line.startswith("zz") for line in (graded["stdout"] + graded["stderr"]).splitlines())
    report = _row(graded, "newline-in-error")["report"].splitlines()
    assert [line for line in report if line.startswith("03 softmax")] == [report[0]], report
    assert not any(line.startswith("progress:") for line in report), report


def test_without_walls_two_attacks_succeed(tmp_path):
    """The same two attacks graded with no sandbox: the secret is read and the other submission
    rewritten. What stops them above is the walls."""
    from npformer.exercises.grader import grade
    root, outside = tmp_path / "class", tmp_path / "outside"
    _class(root, outside)
    none = Isolation(None, False, "a control without walls")
    printed = []
    os.environ["NPFORMER_GRADE_EXAMPLES"] = "4"
    try:
        for name in ("secrets-read", "another-submission-rewritten"):
            grade(root / "subs" / name, out=printed.append, say=lambda text: None, isolation=none)
    finally:
        os.environ.pop("NPFORMER_GRADE_EXAMPLES")
    said = " ".join(" ".join(printed).split())
    assert "secret: SECRET-KEY-of-the-grading-user" in said
    assert "rewritten" in (root / "subs" / "honest" / "t03_softmax.py").read_text()


def test_a_loop_without_end_is_stopped_where_it_was(tmp_path):
    """The learner's own time (``--timeout``) ends an endless loop, and the report says where."""
    from npformer.exercises.grader import grade
    ws = write_workspace(tmp_path / "ws", only=["softmax"], solutions=True)
    path = os.path.join(ws.directory, "t03_softmax.py")
    source = open(path, encoding="utf-8").read()
    with open(path, "w", encoding="utf-8") as f:
        f.write(source.replace(RIGHT, "    while True:\n        pass\n"))
    outcome, = grade(ws.directory, timeout=3, out=lambda text: None, say=lambda text: None)
    assert outcome.status == "failing"
    assert outcome.lines[0].startswith("stopped after 3 s in softmax_backward (t03_softmax.py:"), outcome.lines


GRADE_ENTRY = """
import ctypes, sys
import npformer.cli.grade as entry
import npformer.exercises.gradebook as gradebook
from npformer.exercises.course import Course
libc = ctypes.CDLL(None, use_errno=True)
seen = []
def look(*args, **kwargs):          # where the first learner's process would start
    seen.append(libc.prctl(3, 0, 0, 0, 0))      # PR_GET_DUMPABLE
    return []
entry.grade = gradebook.grade_class = look
import npformer.exercises.course as course
course.load_course = lambda path: None
parser = __import__("argparse").ArgumentParser()
entry.add_arguments(parser)
before = libc.prctl(3, 0, 0, 0, 0)
entry.run(parser.parse_args(sys.argv[1:]))
print("dumpable:", before, *seen)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
@pytest.mark.parametrize("argv", [["ws"], ["submissions", "--course", "course.json", "--out", "book"]])
def test_the_grading_parent_is_not_dumpable_before_a_learner_process_starts(argv, tmp_path):
    """``npformer grade`` (one workspace, or a class) makes itself non-dumpable before it grades:
    where there are no walls, a learner's process of the same user cannot ptrace it or read
    /proc/PID/mem."""
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    ran = subprocess.run([sys.executable, "-c", GRADE_ENTRY, *argv], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    line = next(line for line in ran.stdout.splitlines() if line.startswith("dumpable:"))
    assert line.split()[1:] == ["1", "0"], ran.stdout          # dumpable before, not once grading
