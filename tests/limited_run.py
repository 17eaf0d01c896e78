"""``run_limited``: a command run under the judge's limits, as the judge runs a learner's process
(``sandbox.limiter`` in the child, ``CappedReader`` on its output, ``end_session`` after), for
the tests of the limits themselves."""
import subprocess
import time
from dataclasses import dataclass

from npformer.exercises.sandbox import CappedReader, Limits, end_session, limiter, user_tasks


@dataclass
class Ran:
    """What a limited run gave: ``code`` (exit code, negative for a signal, or "timeout"),
    ``output`` (bytes kept), ``dropped`` (bytes read past the cap), ``seconds``, ``killed``
    (processes still alive in its session when it ended, and ended by us)."""

    code: object
    output: bytes
    dropped: int
    seconds: float
    killed: int


def run_limited(command, cwd, limits=Limits(), env=None, pass_fds=(), on_wait=None, stdin=b""):
    """Run ``command`` under ``limits`` in a session of its own; returns ``Ran``. ``on_wait(elapsed)``
    is called about four times a second while it runs; ``stdin``: the bytes it reads (then
    end of file)."""
    began = time.monotonic()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, start_new_session=True, pass_fds=pass_fds,
                               preexec_fn=limiter(limits, user_tasks()))
    reader = CappedReader(process.stdout, limits.output)
    reader.start()
    try:
        process.stdin.write(stdin)
        process.stdin.close()
    except OSError:                        # it ended (or closed its stdin) without reading
        pass
    code = None
    try:
        while code is None:
            try:
                code = process.wait(timeout=0.25)
            except subprocess.TimeoutExpired:
                elapsed = time.monotonic() - began
                if elapsed > limits.wall:
                    code = "timeout"
                elif on_wait is not None:
                    on_wait(elapsed)
    finally:
        killed = end_session(process.pid)     # its children too, whatever it did with them
        process.wait()
        reader.join(timeout=2.0)
        process.stdout.close()
    return Ran(code, bytes(reader.kept), reader.dropped, time.monotonic() - began, killed)
