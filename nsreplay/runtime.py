"""What every entry point needs: a SparkSession configured from ``conf/``, DataFrames of the few
rows a driver holds, run ids, time parsing, and a guard that turns any failure into a one-line
reason on stderr and a non-zero exit status.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import re
import select
import signal
import sys
import threading
import traceback
import urllib.parse
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, NoReturn, Sequence

from nsreplay.config import PROJECT_ROOT, Settings
from nsreplay.exit_reason import INTERRUPTED_STATUS, is_loading_handler, report


class UsageError(ValueError):
    """A command-line argument is wrong; the message says which and why."""


class SparkConfigError(ValueError):
    """Spark refused a setting it was given (``spark-submit`` options, a job's ``spark_args``,
    ``conf/<env>/spark-defaults.conf``) as the session started: a value it cannot parse or that is
    out of range. The same settings fail the same way (the DAG does not retry it)."""


#: What Spark's settings checks raise (java.lang.IllegalArgumentException: NumberFormatException,
#: SparkIllegalArgumentException and SQLConf's "should be int, but was abc" are of its kind).
_REFUSED_SETTING = "java.lang.IllegalArgumentException"

#: How the reason of a :class:`SparkConfigError` starts (``spark-submit.sh`` says it too, of a setting
#: spark-submit itself refuses: :mod:`nsreplay.jvm_exit`).
SPARK_REFUSED = "Spark refused its settings (spark-submit options, the DAG's spark_args, conf/<env>/spark-defaults.conf)"

#: The class whose methods make a SparkContext's task scheduler from its settings.
_SCHEDULER_MAKER = "org.apache.spark.SparkContext$"
#: Spark's checks, as a SparkContext starts, of the master and of the cores of a task and of an
#: executor, which refuse a setting with another exception than an IllegalArgumentException
#: (``spark.master=local[0]``: SparkException "Asked to run locally with 0 threads";
#: ``spark.task.cpus=64``: "The number of cores per executor (=2) has to be >= the number of cpus per
#: task = 64"; ``spark.task.cpus=0``: ArithmeticException "/ by zero"): the method of
#: :data:`_SCHEDULER_MAKER` that runs the check, and the settings it reads. They read those settings
#: and nothing else, so the same settings fail the same way.
_SCHEDULER_CHECKS = {
    # its own checks: the master URL (a local master's threads, local-cluster's cores and memory)
    "createTaskScheduler": ("spark.master",),
    # the cores a task takes against those an executor has (the local master's threads)
    "checkResourcesPerTask": ("spark.master", "spark.executor.cores", "spark.task.cpus"),
}


def _refused_setting(exc: BaseException, given: Mapping[str, str] | None = None) -> str | None:
    """When ``exc``, raised while a Spark session started, is Spark refusing a setting, Spark's
    reason as ``SimpleName: message`` after the settings it concerns when its words name none;
    ``None`` for any other failure (a cluster that could not be reached, a port taken, a JVM that
    died: those may go away).

    Spark refuses a setting (a) with the deepest :data:`_REFUSED_SETTING` of the Java cause chain
    (the outer ones only say "Error while instantiating 'SessionStateBuilder'"), named after the
    given settings refused with that message (:func:`_settings_refused_with`), or (b) with the chain's
    root, without a cause, thrown by one of :data:`_SCHEDULER_CHECKS` (by
    ``createTaskScheduler`` itself, or with a frame of ``checkResourcesPerTask`` on its stack),
    named after the given settings that check reads, with their values. A failure of what a
    cluster manager does when its scheduler is made (``createTaskScheduler`` makes it too) is
    neither: its frames come first, or it is raised with a cause. ``given``: the settings a session
    built from Python gave the builder, over the JVM's (spark-submit's, the JVM's first session's)."""
    throwable = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)  # Py4JJavaError, or pyspark's converted error
    if throwable is None:
        return None
    try:
        from pyspark import SparkContext

        gateway = SparkContext._gateway
        if gateway is None:
            return None
        kind = gateway.jvm.java.lang.Class.forName(_REFUSED_SETTING)
        found, root, seen = None, None, 0
        while throwable is not None and seen < 20:
            if kind.isInstance(throwable):
                found = throwable
            root, throwable, seen = throwable, throwable.getCause(), seen + 1
        if found is not None:
            message = " ".join(str(found.getMessage() or "").split())
            named = _settings_refused_with(gateway, message, given)
        else:
            check = _scheduler_check(root)
            if check is None:
                return None
            found, message = root, " ".join(str(root.getMessage() or "").split())
            settings = _given_settings(gateway, given)
            named = ", ".join(f"{key}={settings[key]}" for key in _SCHEDULER_CHECKS[check] if key in settings)
        return f"{named + ': ' if named else ''}{found.getClass().getSimpleName()}: {message}"
    except Exception:  # noqa: BLE001 - the JVM is gone, or py4j cannot ask it: not a setting's fault that we can tell
        return None


def _scheduler_check(throwable: Any) -> str | None:
    """The key of :data:`_SCHEDULER_CHECKS` whose check threw ``throwable`` (a Java exception without
    a cause: its top frame is ``createTaskScheduler``'s own, or a frame of ``checkResourcesPerTask``
    comes before ``createTaskScheduler``'s); ``None`` otherwise."""
    if throwable.getCause() is not None:
        return None
    frames = throwable.getStackTrace()
    for depth in range(min(len(frames), 8)):
        frame = frames[depth]
        if frame.getClassName() != _SCHEDULER_MAKER:
            continue
        method = frame.getMethodName()
        if "checkResourcesPerTask" in method:
            return "checkResourcesPerTask"
        if method.endswith("createTaskScheduler"):
            return "createTaskScheduler" if depth == 0 else None
    return None


def _given_settings(gateway: Any, given: Mapping[str, str] | None) -> dict[str, str]:
    """The Spark settings given to the session that failed to start: the JVM's (spark-submit options,
    spark-defaults, the ``--conf`` of the JVM's first session), then ``given`` over them."""
    settings = {t._1(): t._2() for t in gateway.jvm.org.apache.spark.SparkConf(True).getAll()}
    settings.update(given or {})
    return settings


def _settings_refused_with(gateway: Any, message: str, given: Mapping[str, str] | None = None) -> str:
    """The Spark settings given to the session (:func:`_given_settings`) whose value their own
    setting refuses with exactly ``message`` (whitespace aside), as ``key, key``;
    ``''`` when ``message`` names a given setting itself (``spark.sql.*``: "... should be int") or no
    given value fails so: Spark's own message about a core setting (``spark.driver.maxResultSize=abc``:
    "Size must be specified as bytes ...") names no setting, and a name is only given when converting
    that very value with that setting's converter fails the same way, never guessed."""
    if not message:
        return ""
    try:
        given_settings = _given_settings(gateway, given)
        entries = gateway.jvm.org.apache.spark.internal.config.ConfigEntry
    except Exception:  # noqa: BLE001 - a Spark whose classes differ: Spark's message as it is
        return ""
    if any(key in message for key in given_settings):
        return ""
    named = []
    for key, value in sorted(given_settings.items()):
        try:
            entry = entries.findEntry(key)
            if entry is None:  # not a registered setting (or one whose module is not loaded): Spark did not check it
                continue
            entry.valueConverter().apply(value)
        except Exception as exc:  # noqa: BLE001 - py4j's error of the JVM's exception, or pyspark's converted one
            refused = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
            if refused is not None and " ".join(str(refused.getMessage() or "").split()) == message:
                named.append(key)
    return ", ".join(named)


def _started(builder: Any, given: Mapping[str, str] | None = None) -> Any:
    """``builder.getOrCreate()``, with the session's SQL state made at once (Spark makes it lazily, at
    the first query or ``spark.conf`` access, and checks the ``spark.sql.*`` settings then): a
    setting Spark refuses, there or in the SparkContext, is a :class:`SparkConfigError` naming
    Spark's reason (:func:`_refused_setting`; ``given``: the settings ``builder`` was given), before
    the job touches any table. So is a negative ``spark.task.cpus``, which Spark takes, and with
    which no job of the session would ever run, and a value of the wrong kind for a setting Spark
    reads only when a job needs it (:mod:`nsreplay.late_settings`: ``spark.default.parallelism=abc``
    failed the session's first job). The session is stopped before either is raised."""
    from nsreplay.late_settings import late_refusals

    try:
        spark = builder.getOrCreate()
        spark.conf.get("spark.sql.session.timeZone")
    except Exception as exc:
        refused = _refused_setting(exc, given)
        if refused is None:
            raise
        raise SparkConfigError(f"{SPARK_REFUSED}: {refused}") from exc
    settings = dict(spark.sparkContext.getConf().getAll())
    cpus = settings.get("spark.task.cpus", "1")
    if cpus.strip().lstrip("-").isdigit() and int(cpus) < 1:
        # Spark takes a negative value (0 it refuses: "/ by zero"), starts, and then runs no task:
        # every job waits for ever ("CPUs per task should be > 0" in the JVM's log only)
        spark.stop()
        raise SparkConfigError(f"{SPARK_REFUSED}: spark.task.cpus={cpus}: a task takes at least one cpu (Spark would start and run no task)")
    late = late_refusals(spark.sparkContext._jvm, settings)
    if late:
        spark.stop()
        raise SparkConfigError(f"{SPARK_REFUSED}: {'; '.join(late)}")
    return spark


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose usage errors are :class:`UsageError`: one line on stderr, exit 2 (:func:`guarded`),
    instead of argparse's usage block."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see {self.prog} --help)")


def read_spark_defaults(files: list[Path]) -> dict[str, str]:
    """Key/value pairs of spark-defaults files (later files override earlier ones), read as UTF-8 as
    spark-submit reads them, whatever the locale's charset."""
    settings: dict[str, str] = {}
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                key, _, value = line.partition(" ")
                settings[key] = value.strip()
    return settings


def build_spark(settings: Settings, app_name: str, master: str | None = None, conf: Mapping[str, str] | None = None):
    """The SparkSession for a job.

    Under ``spark-submit`` (``spark-submit.sh``) the session takes what spark-submit was given. Run
    directly (``nsreplay ingest``, tests, notebooks), it applies ``conf/<base,env>/spark-defaults.conf``,
    then ``conf`` (settings of this one session, e.g. a benchmark's event log), and, when this
    starts the JVM on a local master, nsreplay's local file system (:mod:`nsreplay.local_fs`) and
    the driver's class archive (:mod:`nsreplay.jvm_archive`). A setting Spark refuses raises
    :class:`SparkConfigError` here, the session's SQL settings included, and so do those that
    spark-submit or the driver JVM refuse as this starts the JVM (:func:`_start_jvm`). A JVM it starts logs to stderr
    (:mod:`nsreplay.jvm_logging`) and, in the C/POSIX locale, gets a UTF-8 one for its file names
    (:mod:`nsreplay.jvm_locale`: this process's environment keeps it).
    """
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if os.environ.get("NSREPLAY_UNDER_SPARK_SUBMIT"):
        spark = _started(SparkSession.builder.appName(app_name))
        _note_interrupts()
        return spark
    from pyspark import SparkContext

    from nsreplay import jvm_archive, jvm_locale, jvm_logging, local_fs

    builder = SparkSession.builder.appName(app_name)
    settings_conf = {**read_spark_defaults(settings.spark_defaults_files()), **(conf or {})}
    starting = SparkContext._gateway is None
    if starting:  # the JVM starts now, so it can get nsreplay's local file system
        os.environ.update(jvm_locale.jvm_locale_overrides(os.environ))  # file names in UTF-8, as Python's
        jvm_logging.configure()
        settings_conf.update(local_fs.session_conf(master, settings_conf))
        settings_conf.update(jvm_archive.session_conf(master, settings_conf))
    for key, value in settings_conf.items():
        builder = builder.config(key, value)
    if master:
        builder = builder.master(master)
    if starting and "PYSPARK_GATEWAY_PORT" not in os.environ:
        _start_jvm({**settings_conf, "spark.app.name": app_name, **({"spark.master": master} if master else {})})
    spark = _started(builder, {**settings_conf, **({"spark.master": master} if master else {})})
    spark.sparkContext.setLogLevel("ERROR")
    _note_interrupts()
    return spark


def _start_jvm(conf: Mapping[str, str]) -> None:
    """Start the driver JVM through spark-submit with ``conf``, as PySpark does when a session is first
    built, with its stderr passed through a copy that keeps what spark-submit or the JVM refuse
    there before the JVM is up (``spark.executor.memory=lots``, ``spark.driver.memory=lots``): a
    :class:`SparkConfigError` naming it, as ``spark-submit.sh`` says it, not PySpark's
    ``JAVA_GATEWAY_EXITED`` (:func:`nsreplay.jvm_stderr.launch_gateway`)."""
    from pyspark import SparkConf, SparkContext

    from nsreplay import jvm_stderr

    spark_conf = SparkConf(loadDefaults=False)
    for key, value in conf.items():
        spark_conf.set(key, value)
    SparkContext._ensure_initialized(gateway=jvm_stderr.launch_gateway(spark_conf))


_INTERRUPTED = threading.Event()  # set by a Ctrl-C (SIGINT) once a Spark session has started


def _note_interrupts() -> None:
    """Make Ctrl-C (SIGINT) stop a command that runs Spark, and let :func:`guarded` tell an
    interrupted command from a failed one. Only from the main thread (where signal handlers live);
    idempotent in effect.

    PySpark's own handler (installed when the SparkContext starts) cancels the jobs and raises
    KeyboardInterrupt, but it asks the JVM to cancel over the connection that the main thread is
    waiting on (py4j pins one per thread): that call fails as a reentrant read, py4j takes the
    failure for a network error and sends the interrupted command again, and the command runs on to
    its end as if no Ctrl-C had come. This handler replaces it: the jobs are cancelled from a thread
    of their own, and KeyboardInterrupt is raised in the main thread (py4j closes the connection a
    call was waiting on when KeyboardInterrupt cuts it short, and logs that with its traceback: that
    log is left out once a Ctrl-C was seen, as the command says "interrupted", with its report of
    closing that connection and PySpark's warning that the JVM did not stop cleanly). Another handler
    found in place (not PySpark's) is still called."""
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGINT)
    if getattr(previous, "_nsreplay_notes", False):
        return
    pyspark_handler = getattr(previous, "__qualname__", "").startswith("SparkContext.")
    _quiet_interrupt_noise()

    def handler(signum: int, frame: Any) -> None:
        _INTERRUPTED.set()
        _stop_spark_work()
        if callable(previous) and not pyspark_handler:
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt

    handler._nsreplay_notes = True  # type: ignore[attr-defined]
    signal.signal(signal.SIGINT, handler)


#: Where the reports of what a Ctrl-C cut short are logged: py4j on the root logger (the call) and
#: on its own (the connection it closes), PySpark's warnings through ``py.warnings``.
_INTERRUPT_NOISE_LOGGERS = ("", "py4j.java_gateway", "py4j.clientserver", "py.warnings")
#: What those reports say: the call cut short, the closing of its connection (with a traceback), and
#: that the JVM, sent the same SIGINT by the terminal, did not stop cleanly.
_INTERRUPT_NOISE = ("while sending command.", "while shutting down connection", "Unable to cleanly shutdown Spark JVM process")


def _quiet_interrupt_noise() -> None:
    """Filter :data:`_INTERRUPT_NOISE` out of :data:`_INTERRUPT_NOISE_LOGGERS` (a logger's filter sees
    only the records logged on it; adding the same filter again changes nothing)."""
    for name in _INTERRUPT_NOISE_LOGGERS:
        logging.getLogger(name).addFilter(_quiet_after_interrupt)


def _quiet_after_interrupt(record: logging.LogRecord) -> bool:
    """Once a Ctrl-C was seen, leave out py4j's and PySpark's reports of the JVM call, connection
    and JVM it cut short (:data:`_INTERRUPT_NOISE`): the command says "interrupted". Every other
    record passes."""
    if not _INTERRUPTED.is_set():
        return True
    message = record.getMessage()
    return not any(noise in message for noise in _INTERRUPT_NOISE)


def _stop_spark_work() -> None:
    """Cancel the running Spark jobs from a thread of its own: the main thread's JVM connection may
    be waiting on a call (see :func:`_note_interrupts`). Best effort: nothing here may fail the
    signal handler."""
    try:
        from pyspark import SparkContext

        sc = SparkContext._active_spark_context
        if sc is not None:
            threading.Thread(target=_cancel_jobs, args=(sc,), name="nsreplay-cancel-jobs", daemon=True).start()
    except Exception:  # noqa: BLE001 - an interrupt must not fail on its way
        pass


def _cancel_jobs(sc: Any) -> None:
    try:
        sc.cancelAllJobs()
    except Exception:  # noqa: BLE001 - the JVM may be stopping too
        pass


def local_frame(spark, rows: Iterable[Sequence[Any] | Mapping[str, Any]], schema):
    """A DataFrame of rows the driver holds (run and publish rows, quality results, routing and
    epoch tables: metadata, never event data), handed to Spark as one Arrow table that the JVM
    reads itself. ``createDataFrame`` of a Python list runs a Python worker task per partition
    instead, each time the frame is computed (a ~0.1 s job; 30 frames of 48 rows written to
    ``noop``: 138-187 ms each from a list, 24-37 ms from Arrow).

    ``schema``: a ``StructType`` or a DDL string. ``rows``: tuples in the schema's field order, or
    dicts by field name (a missing name is null). Values are not cast: a value of the wrong type,
    an unknown name, a tuple of the wrong length or a null in a non-nullable column raises
    ``ValueError`` or ``TypeError`` here (pyarrow's ``ArrowInvalid`` / ``ArrowTypeError`` for values).
    """
    import pyarrow as pa
    from pyspark.sql.types import StructType

    from nsreplay.storage.arrow_types import to_arrow_schema

    struct = schema if isinstance(schema, StructType) else StructType.fromDDL(schema)
    names = struct.fieldNames()
    known = set(names)
    records = []
    for row in rows:
        if isinstance(row, Mapping):
            unknown = set(row) - known
            if unknown:
                raise ValueError(f"row names columns the schema does not have: {sorted(unknown)}")
            records.append(row)
        else:
            if len(row) != len(names):
                raise ValueError(f"row has {len(row)} values for {len(names)} columns ({', '.join(names)})")
            records.append(dict(zip(names, row)))
    table = pa.Table.from_pylist(records, schema=to_arrow_schema(struct))
    for field in struct.fields:
        if not field.nullable and table.column(field.name).null_count:
            raise ValueError(f"column {field.name!r} is not nullable but a row has no value for it")
    return spark.createDataFrame(table, struct)


def at_least(low: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    return parse


def run_id_arg(text: str) -> str:
    """A ``--run-id`` as given: any printable text of at most 200 characters, not blank. A control
    character (a newline, say) would split the summary lines and logs that name the run."""
    if not text.strip():
        raise argparse.ArgumentTypeError("a run id cannot be empty")
    if len(text) > 200 or not text.isprintable():
        raise argparse.ArgumentTypeError(f"a run id is printable text of at most 200 characters, got {text[:60]!r}")
    return text


def new_run_id(prefix: str = "run") -> str:
    """A unique, sortable run id: ``<prefix>-20261121T170942Z-1a2b3c4d``."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{prefix}-{stamp}-{uuid.uuid4().hex[:8]}"


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
#: How every option that takes a TIME says what it reads (:func:`parse_time`): a time without an
#: offset is UTC, never the machine's time zone.
TIME_FORMS = "ISO-8601, UTC when without an offset, or epoch ms"
_EPOCH_MS = re.compile(r"-?[0-9]+")  # ASCII digits only: str.isdigit() also takes '²' and '١٢٣'


_ISO_8601 = re.compile(
    r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{8})"
    r"(?:[Tt ](?P<h>[0-9]{2})(?:(?P<colon>:?)(?P<m>[0-9]{2})(?:(?P=colon)(?P<s>[0-9]{2})(?:[.,](?P<f>[0-9]+))?)?)?"
    r"(?P<tz>[Zz]|[+-][0-9]{2}(?::?[0-9]{2})?)?)?"
)


# the offset at the end of a time as fromisoformat reads it: ±HH:MM[:SS[.ffffff]] (minutes, seconds)
_OFFSET_TAIL = re.compile(r"[+-]\d\d:(\d\d)(?::(\d\d)(?:\.\d+)?)?\Z")


def _isoformat_form(text: str) -> str:
    """``text`` in the one form ``datetime.fromisoformat`` reads on every Python this project runs on
    (3.10 reads only what ``isoformat()`` writes: a fraction of 3 or 6 digits, an offset ``±HH:MM``).
    Takes ISO-8601's extended and basic forms, as 3.11 does: a date (``YYYY-MM-DD`` or ``YYYYMMDD``),
    then optionally ``T`` or a space, hours[, minutes[, seconds[, a fraction of any length after ``.``
    or ``,``]]] (with colons or without) and an offset ``Z``/``z``, ``±HH``, ``±HHMM`` or ``±HH:MM``.
    Anything else is returned as it is, for ``fromisoformat`` to accept or refuse. Digits past the sixth of a fraction are dropped: they
    cannot move the millisecond the instant is floored to.

    >>> _isoformat_form("20241121T091205,25+0530")
    '2024-11-21T09:12:05.250000+05:30'
    """
    found = _ISO_8601.fullmatch(text)
    if found is None:
        return text
    date, h, m, s, f, tz = found.group("date", "h", "m", "s", "f", "tz")
    if len(date) == 8:
        date = f"{date[:4]}-{date[4:6]}-{date[6:]}"
    out = f"{date}T{h or '00'}:{m or '00'}:{s or '00'}"
    if f:
        out += "." + (f + "00000")[:6]
    if tz in ("Z", "z"):  # RFC 3339 allows a lowercase z
        out += "+00:00"
    elif tz:
        digits = tz[1:].replace(":", "")
        out += f"{tz[0]}{digits[:2]}:{digits[2:] or '00'}"
    return out


def parse_time(text: str) -> int:
    """Epoch milliseconds from ISO-8601 (extended or basic form, the same on Python 3.10 and later;
    with an offset, Z or z; naive means UTC; a fraction of a millisecond is floored) or from epoch ms (ASCII digits; more than 19 of them name an instant just
    beyond a Java long, outside any history). Anything else: :class:`UsageError`."""
    text = text.strip()
    if _EPOCH_MS.fullmatch(text):
        if len(text.lstrip("-")) > 19:  # beyond any long (and int() refuses over 4,300 digits): just outside one
            return -(2**63) - 1 if text.startswith("-") else 2**63
        return int(text)
    form = _isoformat_form(text)
    offset = _OFFSET_TAIL.search(form)
    try:
        if offset is not None and any(int(part) >= 60 for part in offset.groups() if part):
            raise ValueError("an offset's minutes and seconds are below 60")  # fromisoformat would carry them over
        moment = datetime.fromisoformat(form)
    except ValueError as exc:
        raise UsageError(f"not a time: {text!r} (use ISO-8601 like 2024-11-21T03:12:05Z, or epoch milliseconds)") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    # exact integer arithmetic, floored (a sub-millisecond fraction belongs to the millisecond it is in)
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def format_ms(ms: int | None) -> str:
    """Epoch milliseconds as ISO-8601 UTC (``"-"`` for None); an instant no calendar year 1-9999 holds
    (a mistyped ``--from``, say) as the number itself: ``"9999999999999999999 ms"``."""
    if ms is None:
        return "-"
    try:
        moment = _EPOCH + timedelta(milliseconds=ms)  # exact: no float, whatever the year
    except OverflowError:
        return f"{ms} ms"
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def format_size(n: int) -> str:
    """A byte count for a report: ``"1.5 MB"``, ``"912 B"`` (binary units).

    >>> format_size(1536 << 10), format_size(912)
    ('1.5 MB', '912 B')
    """
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


#: The directory a command was run from, which ``spark-submit.sh`` passes to its job before moving to the
#: project root (where spark-submit runs the job). Unset, the process's own working directory.
CALLER_DIR_VARIABLE = "NSREPLAY_CALLER_DIR"


def resolve_path(path: str) -> str:
    """A path given on a command line, as its user meant it: absolute paths and URIs as they are, a
    relative one against the directory the command was run from (:data:`CALLER_DIR_VARIABLE`), as any
    command reads its arguments: ``--captures .`` is the directory the user stands in, never the
    project's. :class:`UsageError` for an empty or blank one (``--warehouse ""`` must not name that
    directory, or fall back to a default)."""
    return _resolved(path, os.environ.get(CALLER_DIR_VARIABLE) or os.getcwd())


def resolve_setting_path(path: str) -> str:
    """A path from ``conf/`` or a command's default (``[warehouse] root``, the demo capture,
    ``captures/bench``): relative ones are the project's, against its root, wherever the command was
    run from. :class:`UsageError` for an empty or blank one."""
    return _resolved(path, PROJECT_ROOT)


def _resolved(path: str, base: str | Path) -> str:
    if not path.strip():
        raise UsageError(f"an empty path: {path!r}")
    local = local_path_of_uri(path)
    if local is not None:
        return local
    if "://" in path or os.path.isabs(path):
        return path
    return str(Path(base) / path)


def local_path_of_uri(uri: str) -> str | None:
    """The local path a ``file:`` URI names, in each spelling Hadoop and browsers use: ``file:/p``
    (how Spark prints a local path), ``file:///p`` and ``file://localhost/p``, percent-decoded
    (``file:///my%20wh`` is ``/my wh``); a trailing ``/`` and glob characters are kept. ``None``
    for anything else: a plain path (``ns1-2026-11-30T04:00:00.jsonl.gz`` is a name, not a URI),
    another scheme's URI, or a ``file:`` URI of another host (``file://nas/share``)."""
    if not uri.startswith("file:/"):
        return None
    rest = uri[len("file:") :]
    if rest.startswith("//"):
        host, slash, path = rest[2:].partition("/")
        if host not in ("", "localhost"):
            return None
        rest = slash + path
    return urllib.parse.unquote(rest)


def _stdout_closed() -> bool:
    """Whether stdout's reader has gone away (its pipe or socket reports an error to poll). If so,
    stdout is pointed at /dev/null, so that what is still buffered does not fail again at exit."""
    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        gone = any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no descriptor (a captured stream): not a closed pipe
        return False
    if gone:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    return gone


_JAVA_CAUSE = re.compile(r"^Caused by: (.+)$", re.MULTILINE)  # a cause of the main chain: a nested one is indented


_PYTHON_TRACEBACK = "Traceback (most recent call last):"
_PYTHON_RAISED = re.compile(r"^[A-Za-z_][\w.]*(: .*)?$")  # a traceback's last line: "MemoryError", "ValueError: bad"


def _python_cause(text: str) -> str:
    """The exception line that ends the last Python traceback in ``text`` (a Python worker's error,
    as Spark's message carries it: ``MemoryError``), or ``""`` when ``text`` holds none."""
    if _PYTHON_TRACEBACK not in text:
        return ""
    raised = [line for line in text.rsplit(_PYTHON_TRACEBACK, 1)[1].splitlines() if _PYTHON_RAISED.match(line)]
    return raised[-1] if raised else ""


#: What a Python worker's MemoryError asks for (docs/operations.md, "Memory").
_WORKER_MEMORY_HINT = "raise spark.executor.pyspark.memory if it is set, else give the machine or executors more memory"

#: A terminal's control sequences (ANSI CSI: colours and the like).
_TERMINAL_CODES = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def _one_line(exc: BaseException, limit: int = 500) -> str:
    """``exc``'s message on one line, at most about ``limit`` characters. A message that holds a Java
    stack trace (a Spark failure, as py4j renders it) is cut at its first frame, and the root cause
    of the trace, its last ``Caused by:``, is added: it is the line that says what went wrong (``No
    space left on device``), and it sits below hundreds of frames the cut would drop. Without one,
    the last line of a Python worker's traceback is added instead (``MemoryError``, with the setting
that limits a worker's memory). A terminal's
    colour codes in it (delta-rs marks each cause with a red ``↳``) are left out."""
    text = _TERMINAL_CODES.sub("", str(exc))
    head = text.split("\n\tat ", 1)[0]
    causes = _JAVA_CAUSE.findall(text)
    root = " ".join((causes[-1] if causes else _python_cause(head)).split())[:200]
    if root.split(":", 1)[0] == "MemoryError":  # a Python worker's, the setting that limits it named
        root += f" in a Python worker: {_WORKER_MEMORY_HINT}"
    line = " ".join(head.split()) or type(exc).__name__
    if not root or root in line[:limit]:
        return line[:limit]
    return f"{line[:max(limit - len(root) - 13, 100)]} (caused by {root})"


def _lost_jvm(exc: BaseException) -> BaseException | None:
    """The earliest of py4j's network errors in ``exc``'s chain (its causes, and what it was
    raised while handling), when there is one: the driver lost its connection to the Spark JVM,
    which was killed or died (the kernel's out-of-memory killer picks the largest process). The
    error the command ends with then says nothing of that: a ``finally`` that stops the session
    fails in turn, with a bare ``ConnectionRefusedError``. ``None`` otherwise."""
    found = None
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if type(exc).__name__ == "Py4JNetworkError" and type(exc).__module__.startswith("py4j"):
            found = exc  # keep going: the earliest is the one the JVM's death caused first
        exc = exc.__cause__ or exc.__context__
    return found


#: Spark's words for a Python worker gone during a task, followed by a hint to turn on its fault handler.
_WORKER_LOST = "Python worker exited unexpectedly (crashed)."


def _lost_worker(exc: BaseException) -> str | None:
    """``exc``'s message on one line, cut after Spark's words for a Python worker that died during a
    task (:data:`_WORKER_LOST`), when it holds them; ``None`` otherwise. Spark cannot tell how the
    worker died: a SIGKILL (the kernel's out-of-memory killer) reaches no fault handler, so its hint
    to turn one on is left out, and so is the trace's root cause, the worker's pipe (``Broken pipe``,
    ``Connection reset by peer``), which is what the death did, not what caused it."""
    head = str(exc).split("\n\tat ", 1)[0]
    at = head.find(_WORKER_LOST)
    return None if at < 0 else " ".join(head[: at + len(_WORKER_LOST)].split())


def guarded(main: Callable[[list[str] | None], int]) -> Callable[[list[str] | None], int]:
    """Run ``main``; on failure print ``<prog>: <one-line reason>`` to stderr and return non-zero.

    The reason of a Spark failure is its headline and the Java trace's root cause
    (:func:`_one_line`); a Spark JVM lost under the command (killed) is named as such
    (:func:`_lost_jvm`), status 1, and so is a Python worker that died during a task
    (:func:`_lost_worker`). Set ``NSREPLAY_DEBUG=1`` to also print the traceback.
    """

    @functools.wraps(main)
    def wrapper(argv: list[str] | None = None) -> int:
        prog = os.path.basename(sys.argv[0]) or "nsreplay"
        _INTERRUPTED.clear()  # a Ctrl-C seen by an earlier command of this process is not this one's
        early = _note_early_interrupts()
        try:
            return main(argv)
        except KeyboardInterrupt:
            report(f"{prog}: interrupted")
            return INTERRUPTED_STATUS
        except BrokenPipeError:
            if _stdout_closed():  # the reader went away (`| head`): stop quietly, as a tool killed by SIGPIPE
                return 128 + signal.SIGPIPE
            report(f"{prog}: BrokenPipeError: a connection or pipe closed by the other side")
            return 1
        except UsageError as exc:
            report(f"{prog}: {exc}")
            return 2
        except Exception as exc:  # noqa: BLE001 - the one place every failure is reported
            if _INTERRUPTED.is_set():  # Ctrl-C surfaced as the failure of the JVM call it cut short
                report(f"{prog}: interrupted")
                return INTERRUPTED_STATUS
            if os.environ.get("NSREPLAY_DEBUG"):
                traceback.print_exc()
            lost = _lost_jvm(exc)
            if lost is not None:
                report(f"{prog}: the Spark JVM is gone (killed, or it crashed: its own lines above may say why): "
                       f"{type(lost).__name__}: {_one_line(lost)[:300]}")
                return 1
            worker = _lost_worker(exc)
            if worker is not None:
                report(f"{prog}: a Python worker of Spark died during a task (killed, as the kernel's out-of-memory killer does when "
                       f"memory runs short, or crashed): {type(exc).__name__}: {worker}")
                return 1
            report(f"{prog}: {type(exc).__name__}: {_one_line(exc)}")
            return 1
        finally:
            if early is not None and signal.getsignal(signal.SIGINT) is early:
                signal.signal(signal.SIGINT, signal.default_int_handler)

    return wrapper


def _note_early_interrupts() -> Callable[[int, Any], None] | None:
    """Note a Ctrl-C (SIGINT) that comes before a Spark session is up, as :func:`_note_interrupts`
    does once it is: the handler raises KeyboardInterrupt, as Python's own does, and sets
    ``_INTERRUPTED``. py4j turns a KeyboardInterrupt that cuts a call to the JVM short (the session
    being built, its JVM starting) into a ``Py4JError``, which :func:`guarded` then reports as
    "interrupted". The handler installed, or ``None``: only from the main thread, and only over
    Python's own handler or the one a job installs while it loads
    (:func:`nsreplay.exit_reason.stop_quietly_while_loading`); an ignored SIGINT, a background
    job's, stays ignored."""
    current = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not (current is signal.default_int_handler or is_loading_handler(current)):
        return None

    def handler(signum: int, frame: Any) -> None:
        _INTERRUPTED.set()
        raise KeyboardInterrupt

    _quiet_interrupt_noise()  # py4j logs the session's call that the KeyboardInterrupt cuts short
    signal.signal(signal.SIGINT, handler)
    return handler
