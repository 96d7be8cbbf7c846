"""The one line a command leaves when it fails or is stopped, and a Ctrl-C while a job loads.

This module imports nothing of nsreplay's and nothing heavy: a job calls
:func:`stop_quietly_while_loading` before its other imports, which take a second or more (PySpark,
pyarrow, pandas), so that a Ctrl-C among them ends the job as one in the job itself does (the line
``<job>: interrupted``, status 130) instead of with Python's ``KeyboardInterrupt`` traceback of the
import it cut. :func:`nsreplay.runtime.guarded` takes the signal over when the job's ``main`` starts.

``python -m nsreplay.exit_reason MODULE [ARG...]`` runs ``python -m MODULE [ARG...]`` for a shell
script that says "interrupted" itself (``scripts/bootstrap.sh``): a Ctrl-C ends it with status 130
and prints nothing.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType

#: The status of a command stopped by Ctrl-C (128 + SIGINT), as a shell reports it.
INTERRUPTED_STATUS = 130


def report(line: str) -> None:
    """Print ``line`` to stderr; under ``spark-submit.sh``, write it to its reason file instead
    (``NSREPLAY_REASON_FILE``), which the script copies to its own stderr once spark-submit has
    ended: spark-submit runs the job's Python with its stderr merged into stdout (Spark's
    PythonRunner), so a line printed here too would reach the script's output twice (once among the
    job's output, once as its last line), as it did in every Airflow task log. When the file cannot
    be written (a driver on another host, say), the line goes to stderr."""
    reason_file = os.environ.get("NSREPLAY_REASON_FILE")
    if reason_file:
        try:
            with open(reason_file, "w", encoding="utf-8") as out:
                out.write(line + "\n")
            return
        except OSError:
            pass
    print(line, file=sys.stderr, flush=True)


def _stopped_silently(signum: int, frame: FrameType | None) -> None:
    sys.stdout.flush()
    os._exit(INTERRUPTED_STATUS)


def _stopped_while_loading(signum: int, frame: FrameType | None) -> None:
    """SIGINT before the job's ``main`` runs: nothing is started yet, so say so and end now."""
    report(f"{os.path.basename(sys.argv[0]) or 'nsreplay'}: interrupted")
    sys.stdout.flush()
    os._exit(INTERRUPTED_STATUS)  # not SystemExit: an import machinery's handler must not see it


def stop_quietly_while_loading(module_name: str) -> None:
    """For a job run as a script (``module_name`` is ``"__main__"``): until
    :func:`nsreplay.runtime.guarded` takes over, a Ctrl-C (SIGINT) ends the process at once with
    :data:`INTERRUPTED_STATUS` and the line ``<job>: interrupted``. Does nothing for a job imported
    as a module, from a thread other than the main one, or when SIGINT is not Python's own handler
    (ignored, as for a background job, or handled by the caller)."""
    if module_name != "__main__" or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _stopped_while_loading)


def is_loading_handler(handler: object) -> bool:
    """Whether ``handler`` is the one :func:`stop_quietly_while_loading` installs."""
    return handler is _stopped_while_loading


def run_module_silently_stopped(argv: list[str]) -> None:
    """``python -m nsreplay.exit_reason MODULE [ARG...]`` (module docstring)."""
    if not argv:
        raise SystemExit("usage: python -m nsreplay.exit_reason MODULE [ARG...]")
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _stopped_silently)
    import runpy

    sys.argv = list(argv)
    runpy.run_module(argv[0], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    run_module_silently_stopped(sys.argv[1:])
