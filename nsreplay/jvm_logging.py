"""Where the JVMs that nsreplay starts on this machine log: ``conf/base/log4j2.properties``.

Contract:

* That file sends the JVM's warnings and errors to stderr, so that a job's stdout holds only what the
  job prints (its summary, a benchmark's report). Without it, log4j2 falls back to its own defaults,
  which write to stdout.
* :func:`configure` names the file to log4j2 through the environment (``LOG4J_CONFIGURATION_FILE``,
  which log4j2 reads as its ``log4j2.configurationFile`` property) before a JVM starts, unless the
  environment names a configuration already. JVMs started from this process inherit it: the driver
  of a session built by :func:`nsreplay.runtime.build_spark` and the executors of a
  ``local-cluster`` master. ``spark-submit.sh`` does the same in the shell. A cluster's JVMs do not
  inherit this environment and keep their own logging.
* A ``-Dlog4j2.configurationFile`` in the driver's Java options wins over the environment.
"""

from __future__ import annotations

import os
from typing import MutableMapping

from nsreplay.config import PROJECT_ROOT

ENV = "LOG4J_CONFIGURATION_FILE"
CONFIG_FILE = PROJECT_ROOT / "conf" / "base" / "log4j2.properties"


def configure(environ: MutableMapping[str, str] = os.environ) -> str:
    """Name nsreplay's log4j2 file in ``environ`` unless a configuration is named there already;
    returns the one named."""
    return environ.setdefault(ENV, str(CONFIG_FILE))
