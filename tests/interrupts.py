"""A Ctrl-C at a chosen point of a command's start, for the tests of what the command then says.

:func:`ctrl_c_at_import` gives an environment whose ``sitecustomize`` sends SIGINT to the whole
process group, as a terminal's Ctrl-C does, when one process of the command first imports a given
module: the point is exact whatever the machine's speed. Start the command in a session of its own
(``start_new_session=True``, ``preexec_fn=default_sigint``) so that the signal reaches only it.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_SITECUSTOMIZE = """
import os, signal, sys

class CtrlC:
    '''SIGINT to this process group when {module} is first imported by a process whose command line
    has an argument holding {token!r}; once for the whole command (the marker file).'''
    def find_spec(self, name, path=None, target=None):
        if name == {module!r} and any({token!r} in arg for arg in sys.orig_argv):
            sys.meta_path.remove(self)
            try:
                os.close(os.open({marker!r}, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                return None
            os.killpg(0, signal.SIGINT)
        return None

sys.meta_path.insert(0, CtrlC())
"""


def ctrl_c_at_import(directory: Path, module: str, token: str) -> dict[str, str]:
    """The environment (the current one, ``PYTHONPATH`` extended) in which the first process whose
    arguments include ``token`` sends the Ctrl-C as it imports ``module``. Writes its
    ``sitecustomize.py`` into ``directory``."""
    site = directory / "ctrl-c-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE.format(module=module, token=token, marker=str(directory / "ctrl-c-sent")))
    path = os.pathsep.join(p for p in (str(site), str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


def default_sigint() -> None:
    """``preexec_fn``: the command's SIGINT as a terminal's shell leaves it (a test runner's worker
    may ignore it, and an ignored signal stays ignored across exec)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
