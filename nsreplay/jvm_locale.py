"""The locale a JVM that nsreplay starts gets: one whose charset is UTF-8 when the environment's is the
C/POSIX locale's ASCII, so that the JVM names files as Python does.

A JDK 17 JVM converts every file name to and from bytes in the charset of its ``LC_CTYPE`` locale
(``sun.jnu.encoding``, which no ``-D`` option changes). In the C or POSIX locale (``LANG=C``,
``LC_ALL=C``, no locale variable at all, as under cron or a bare container, or a locale that is
not installed) that is ASCII, while Python reads that same locale as UTF-8 (PEP 538, PEP 540). A
warehouse or capture path with a non-ASCII character was then written by the JVM under another
name (``/data/wé`` as ``/data/w??``) and the run failed when Python looked for what it had
written. The JVM is given ``C.UTF-8`` (or another UTF-8 locale the machine has) for ``LC_CTYPE``
only: through ``LC_CTYPE`` when ``LC_ALL`` is not set, else through ``LC_ALL``, which overrides
every other variable. A locale with another charset (ISO-8859-1, say) is the user's choice, and
Python uses it too: it is left alone.

    ./spark-submit.sh ...                 # exports what ``python -m nsreplay.jvm_locale`` prints
    nsreplay.runtime.build_spark(...)     # sets it in os.environ before it starts a JVM
"""

from __future__ import annotations

import locale
import os
import sys
from typing import Mapping

#: What glibc and musl call the C/POSIX locale's charset (and what Python's UTF-8 mode stands in for).
ASCII_CODESETS = frozenset({"ANSI_X3.4-1968", "ASCII", "US-ASCII"})
#: UTF-8 locales tried in order; the first the machine has is given to the JVM.
UTF8_LOCALES = ("C.UTF-8", "C.utf8", "en_US.UTF-8", "en_US.utf8")


def ctype_locale(environ: Mapping[str, str]) -> str:
    """The ``LC_CTYPE`` locale name a process started with ``environ`` asks for: the first
    non-empty of ``LC_ALL``, ``LC_CTYPE`` and ``LANG``, else ``"C"`` (POSIX's precedence)."""
    for name in ("LC_ALL", "LC_CTYPE", "LANG"):
        value = environ.get(name, "")
        if value:
            return value
    return "C"


def codeset(name: str) -> str | None:
    """The charset of locale ``name`` on this machine (``"UTF-8"``, ``"ANSI_X3.4-1968"``, ...);
    ``None`` when the machine does not have it (a process asking for it gets the C locale). Reads it
    by switching this process's ``LC_CTYPE`` for a moment and back (call it from one thread)."""
    before = locale.setlocale(locale.LC_CTYPE)
    try:
        locale.setlocale(locale.LC_CTYPE, name)
        return locale.nl_langinfo(locale.CODESET)
    except (locale.Error, ValueError):
        return None
    finally:
        locale.setlocale(locale.LC_CTYPE, before)


def jvm_locale_overrides(environ: Mapping[str, str]) -> dict[str, str]:
    """The locale variables to set for a JVM started with ``environ`` (module docstring): ``{}``
    when its ``LC_CTYPE`` charset is already something other than ASCII or no UTF-8 locale is
    installed; else ``{"LC_CTYPE": "C.UTF-8"}``, or ``{"LC_ALL": "C.UTF-8"}`` when ``LC_ALL`` is set
    (the first of :data:`UTF8_LOCALES` the machine has)."""
    asked = codeset(ctype_locale(environ))
    if asked is not None and asked.upper() not in ASCII_CODESETS:
        return {}
    for candidate in UTF8_LOCALES:
        if (codeset(candidate) or "").upper().replace("-", "") == "UTF8":
            return {"LC_ALL" if environ.get("LC_ALL") else "LC_CTYPE": candidate}
    return {}


def main() -> int:
    """Print the overrides for this process's environment, one ``NAME=value`` a line (for
    ``spark-submit.sh`` to export)."""
    for key, value in jvm_locale_overrides(os.environ).items():
        print(f"{key}={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
