"""``nsreplay``: the project's command line.

    nsreplay generate --preset demo --out DIR      write a simulated capture (see nsreplay.generator)
    nsreplay ingest --captures PATH --warehouse DIR
    nsreplay bench ingest --captures PATH          ingest time vs. Spark reading the same files as text
    nsreplay bench rebuild --preset bench-day      ingest + replay + publish vs. the same floor, model check
    nsreplay bench incremental --captures PATH     one more window resumed from state vs. that window alone
    nsreplay bench scale --preset bench-day        H hours vs. 4 x H hours, each in a fresh process (linearity)
    nsreplay backfill --warehouse DIR --from T1 [--to T2]   re-run the published windows of a range, in order
    nsreplay stale --warehouse DIR                 published windows that late input made stale
    nsreplay vacuum --warehouse DIR [--dry-run]    delete files no reader needs (published versions kept)
    nsreplay compact --warehouse DIR [--dry-run]   merge the small files of the settled history (no row changes)
    nsreplay thin-states --warehouse DIR [--dry-run]   remove the replay states no run resumes from by default
    nsreplay serve --warehouse DIR                 the serving shim: HTTP API (+ remoting), no Spark
    nsreplay bench serve --warehouse DIR           shim throughput and latency vs. a trivial endpoint

Spark-backed commands run Spark in-process with ``conf/`` defaults (``spark-submit.sh`` is the way to
run the jobs on a cluster).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import sys

from nsreplay.runtime import TIME_FORMS, ArgumentParser, at_least, guarded, run_id_arg


def _positive_float(text: str) -> float:
    """An argparse type: a finite number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a number above 0, got {text!r}")
    return value


class NotAWarehouseError(FileNotFoundError):
    """The ``--warehouse`` path holds no nsreplay warehouse."""


class MaintenanceError(RuntimeError):
    """Some tables of a maintenance command failed (the others were done); its report says which."""


def _fail_on_errors(command: str, errors: list[tuple[str, str]], tables: int) -> int:
    """0, or :class:`MaintenanceError` with the one-line reason the exit status promises on stderr
    (``errors``: (table, error) of the failed ones, after the report went to stdout)."""
    if not errors:
        return 0
    table, error = errors[0]
    error = (error.strip().splitlines() or [""])[0]  # a delta-rs error may carry a Rust backtrace
    more = f" and {len(errors) - 1} more" if len(errors) > 1 else ""
    raise MaintenanceError(f"{command}: {len(errors)} of {tables} table(s) failed, the others were done "
                           f"(see the report on stdout): {table}: {error}{more}")


def _add_ingest(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ingest", help="ingest capture files into bronze and silver")
    p.add_argument("--captures", required=True)
    p.add_argument("--warehouse", required=True)
    p.add_argument("--run-id", type=run_id_arg)
    p.set_defaults(func=_run_ingest)


def _run_ingest(args: argparse.Namespace) -> int:
    from nsreplay.config import load_settings
    from nsreplay.runtime import build_spark, new_run_id, resolve_path
    from nsreplay.storage import Warehouse
    from pipelines.ingest.run import run_ingest

    settings = load_settings()
    spark = build_spark(settings, "nsreplay-ingest")
    warehouse = Warehouse(resolve_path(args.warehouse), spark, settings.warehouse.backend)
    result = run_ingest(spark, warehouse, settings, resolve_path(args.captures), args.run_id or new_run_id("ingest"))
    print(result.summary())
    print(result.quality.text() if result.quality else "data quality: nothing new to check")
    return 0


def _add_bench(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmarks (ratios against a baseline measured in the same run)")
    bench = p.add_subparsers(dest="bench", required=True)
    ingest = bench.add_parser("ingest", help="ingest vs. Spark reading the same files as text and counting lines")
    ingest.add_argument("--captures", required=True, help="capture directory (e.g. from nsreplay generate --preset bench-day)")
    ingest.add_argument("--warehouse", help="scratch warehouse (default: a temporary directory, removed after)")
    ingest.add_argument("--master", default=None, help="Spark master (default: conf)")
    ingest.set_defaults(func=_bench_ingest)
    rebuild = bench.add_parser("rebuild", help="ingest + replay + publish vs. the read-as-text floor, with a reference-model check")
    source = rebuild.add_mutually_exclusive_group(required=True)
    source.add_argument("--captures", help="an existing capture directory")
    source.add_argument("--preset", help="generate this preset first (e.g. bench-day) into --out")
    rebuild.add_argument("--out", default=None, help="where --preset writes its capture (reused when present; default: captures/bench in the project)")
    rebuild.add_argument("--warehouse", help="scratch warehouse (default: a temporary directory, removed after)")
    rebuild.add_argument("--samples", type=at_least(0), default=1000, help="ticks checked against the reference model (0: skip the check)")
    rebuild.add_argument("--master", default=None)
    rebuild.add_argument("--event-log", default=None, metavar="DIR",
                         help="write Spark's event log to DIR and add the task seconds of each phase and its costliest stages to the report")
    rebuild.set_defaults(func=_bench_rebuild)
    incremental = bench.add_parser("incremental", help="one more window resumed from the previous state vs. a standalone run of that window")
    incremental.add_argument("--captures", required=True, help="a capture directory (e.g. nsreplay generate --preset bench-hour --set timing.hours=2)")
    incremental.add_argument("--split", help=f"where the last window starts ({TIME_FORMS}; default: the middle of the capture)")
    incremental.add_argument("--rounds", type=at_least(1), default=2, help="alternate the two sides this many times, keep each side's best (default 2)")
    incremental.add_argument("--master", default=None)
    incremental.set_defaults(func=_bench_incremental)
    scale = bench.add_parser("scale", help="the rebuild of H hours vs. factor x H hours of the same preset, each in a fresh process (linearity, driver memory)")
    scale.add_argument("--preset", default="bench-day", help="generator preset both captures come from (default: bench-day)")
    scale.add_argument("--hours", type=_positive_float, default=6.0, help="hours of the smaller capture (default: 6)")
    scale.add_argument("--factor", type=_positive_float, default=4.0, help="the larger capture has factor x the hours (default: 4; goal: <= 1.1 x factor the time)")
    scale.add_argument("--out", default=None, help="where the captures are written (reused when their generator config matches; default: captures/bench in the project)")
    scale.add_argument("--rounds", type=at_least(1), default=1, help="alternating rounds; each size keeps its fastest (default: 1)")
    scale.add_argument("--seed", type=int, default=None, help="generator seed (default: the preset's)")
    scale.add_argument("--master", default=None)
    scale.set_defaults(func=_bench_scale)
    serve = bench.add_parser("serve", help="serving shim: index build, memory, HTTP throughput (wrk) and latency at a fixed rate, remoting")
    serve.add_argument("--warehouse", required=True, help="a published warehouse")
    serve.add_argument("--duration", type=_positive_float, default=10.0, help="seconds per measurement (default 10)")
    serve.add_argument("--rate", type=at_least(1), default=500, help="requests/s of the fixed-rate latency runs (default 500)")
    serve.add_argument("--connections", type=at_least(1), default=32, help="wrk connections for the throughput runs (default 32)")
    serve.add_argument("--requests", type=at_least(1), default=20000, help="size of the pre-generated random request list")
    serve.add_argument("--seed", type=int, default=7)
    serve.set_defaults(func=_bench_serve)


def _bench_ingest(args: argparse.Namespace) -> int:
    from nsreplay.bench import bench_ingest

    print(bench_ingest(args.captures, warehouse=args.warehouse, master=args.master).report())
    return 0


def _bench_out(out: str | None) -> str:
    """A bench's ``--out``: the user's directory, or the project's ``captures/bench``."""
    from nsreplay.runtime import resolve_path, resolve_setting_path

    return resolve_setting_path("captures/bench") if out is None else resolve_path(out)


def _bench_rebuild(args: argparse.Namespace) -> int:
    from pathlib import Path

    from nsreplay.bench import bench_rebuild

    captures = args.captures
    if args.preset:
        from nsreplay.generator import generate, preset

        out = Path(_bench_out(args.out)) / args.preset
        manifest = out / "_manifest.json"
        if not manifest.is_file() or json.loads(manifest.read_text()).get("preset") != args.preset:
            print(generate(preset(args.preset), out).describe())
        captures = str(out)
    print(bench_rebuild(captures, warehouse=args.warehouse, master=args.master, samples=args.samples, event_log=args.event_log).report())
    return 0


def _bench_scale(args: argparse.Namespace) -> int:
    from functools import partial
    from pathlib import Path

    from nsreplay.bench_scale import ScaleBenchError, bench_scale, rebuild_in_fresh_process
    from nsreplay.generator import ConfigError

    try:
        bench = bench_scale(args.preset, args.hours, factor=args.factor, out=Path(_bench_out(args.out)), rounds=args.rounds,
                            seed=args.seed, rebuild=partial(rebuild_in_fresh_process, master=args.master))
    except (ConfigError, ValueError, ScaleBenchError) as error:
        print(f"bench scale: {error}", file=sys.stderr)
        return 2
    print(bench.report())
    return 0


def _bench_serve(args: argparse.Namespace) -> int:
    from nsreplay.runtime import resolve_path
    from nsreplay.serving.bench import bench_serve

    print(bench_serve(resolve_path(args.warehouse), duration=args.duration, rate=args.rate, connections=args.connections,
                      requests=args.requests, seed=args.seed).report())
    return 0


def _bench_incremental(args: argparse.Namespace) -> int:
    from nsreplay.bench import bench_incremental
    from nsreplay.runtime import parse_time

    print(bench_incremental(args.captures, split_ts=parse_time(args.split) if args.split else None, master=args.master,
                            rounds=args.rounds).report())
    return 0


def _add_backfill(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("backfill", help="re-run (replay, check, publish) the windows of a range in order, e.g. after late data")
    p.add_argument("--warehouse", required=True)
    p.add_argument("--from", dest="start", required=True, help=f"range start: the end of a published window ({TIME_FORMS}), or 'start' for the first record")
    p.add_argument("--to", dest="end", help=f"range end ({TIME_FORMS}; default: the end of the published coverage)")
    p.add_argument("--run-id", type=run_id_arg, help="prefix of the run ids (default: backfill-<time>)")
    p.set_defaults(func=_run_backfill)
    s = sub.add_parser("stale", help="list the published windows that late input made stale")
    s.add_argument("--warehouse", required=True)
    s.set_defaults(func=_run_stale)


def _run_backfill(args: argparse.Namespace) -> int:
    from nsreplay.config import load_settings
    from nsreplay.runtime import build_spark, new_run_id, parse_time, resolve_path
    from nsreplay.storage import Warehouse
    from pipelines.replay.run import run_backfill

    settings = load_settings()
    start = None if args.start == "start" else parse_time(args.start)
    end = parse_time(args.end) if args.end else None
    spark = build_spark(settings, "nsreplay-backfill")
    try:
        warehouse = Warehouse(resolve_path(args.warehouse), spark, settings.warehouse.backend)
        for result in run_backfill(spark, warehouse, settings, args.run_id or new_run_id("backfill"), start=start, end=end):
            print(result.summary())
    finally:
        spark.stop()
    return 0


def _run_stale(args: argparse.Namespace) -> int:
    from nsreplay.runtime import format_ms
    from nsreplay.vacuum import WAREHOUSE_TABLES
    from pipelines.replay.stale import open_stale
    from schemas.gold import PUBLISH_LOG

    root, warehouse = _opened_warehouse(args.warehouse)  # a mistyped path must not read as "nothing stale"
    if not warehouse.exists(PUBLISH_LOG):
        if any(warehouse.exists(spec) for spec in WAREHOUSE_TABLES):
            print("nothing has been published yet: no stale windows")
            return 0
        raise NotAWarehouseError(f"{root}: not an nsreplay warehouse (it has no {PUBLISH_LOG.name})")
    stale = open_stale(warehouse)
    if not stale:
        print("no stale windows")
        return 0
    for s in stale:
        print(f"{s.namesrv:<22} ({format_ms(s.window_from)}, {format_ms(s.window_to)}]  late records from {format_ms(s.late_from_ts)} (found by run {s.detected_by})")
    print(f"re-run them: nsreplay backfill --warehouse {args.warehouse} --from {min(s.window_from for s in stale)}")
    return 0


def _add_vacuum(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("vacuum", help="delete the files no reader can need; the published versions' files are kept")
    p.add_argument("--warehouse", required=True)
    p.add_argument("--retention-hours", type=int, help="keep files removed less than this long ago (default: [vacuum] retention_hours, 168)")
    p.add_argument("--dry-run", action="store_true", help="list what would be deleted; delete nothing")
    p.add_argument("--table", action="append", dest="tables", metavar="NAME", help="only this table (repeatable; default: every table)")
    p.set_defaults(func=_run_vacuum)


def _run_vacuum(args: argparse.Namespace) -> int:
    from nsreplay.config import load_settings
    from nsreplay.runtime import UsageError, new_run_id
    from nsreplay.vacuum import WAREHOUSE_TABLES, render, vacuum_warehouse

    settings = load_settings()
    hours = settings.vacuum.retention_hours if args.retention_hours is None else args.retention_hours
    if hours > _MAX_RETENTION_HOURS:
        raise UsageError(f"--retention-hours {hours} is more than a century ({_MAX_RETENTION_HOURS} h): nothing could ever be deleted")
    if hours < settings.vacuum.min_retention_hours:
        raise UsageError(f"--retention-hours {hours} is below [vacuum] min_retention_hours ({settings.vacuum.min_retention_hours}): "
                         "a running write's files, or a version a reader still reads, could be deleted")
    tables = _chosen_tables(args.tables, {spec.name: spec for spec in WAREHOUSE_TABLES}, "a warehouse table")
    root, warehouse = _maintained_warehouse(args.warehouse, WAREHOUSE_TABLES)
    results = vacuum_warehouse(warehouse, retention_hours=hours, dry_run=args.dry_run, run_id=new_run_id("vacuum"), tables=tables)
    print(f"vacuum of {root}: retention {hours} h" + (" (dry run: nothing deleted)" if args.dry_run else ""))
    print(render(results, dry_run=args.dry_run), flush=True)
    return _fail_on_errors("vacuum", [(r.table, r.error) for r in results if r.error is not None], len(results))


_MAX_RETENTION_HOURS = 100 * 366 * 24


def _chosen_tables(names: list[str] | None, known: dict, kind: str) -> list:
    """The ``--table`` choices among ``known`` (name → table), in their order; every one without
    ``--table``. :class:`UsageError` naming the first unknown name and the known ones."""
    from nsreplay.runtime import UsageError

    unknown = sorted(set(names or ()) - set(known))
    if unknown:
        raise UsageError(f"--table {unknown[0]}: not {kind}; known: {', '.join(known)}")
    return [known[name] for name in names] if names else list(known.values())


def _maintained_warehouse(path: str, specs):
    """:func:`_opened_warehouse` of a maintenance command's ``--warehouse``, which must hold one of
    ``specs`` (:class:`NotAWarehouseError` otherwise)."""
    root, warehouse = _opened_warehouse(path)
    if not any(warehouse.exists(spec) for spec in specs):
        raise NotAWarehouseError(f"{root}: not an nsreplay warehouse (none of its tables is there)")
    return root, warehouse


def _opened_warehouse(path: str):
    """(root, Spark-free delta-rs ``Warehouse``) of a command's ``--warehouse``, for the commands that
    read or maintain one without Spark: :class:`NotAWarehouseError` when a local directory is missing
    or a table there is not nsreplay's (:func:`_check_tables`)."""
    from nsreplay.runtime import resolve_path
    from nsreplay.storage import Warehouse

    root = resolve_path(path)
    if "://" not in root and not os.path.isdir(root):
        raise NotAWarehouseError(f"{root}: no such directory")
    warehouse = Warehouse(root, None, "delta-rs")  # no Spark: the Delta log, pyarrow for the files
    _check_tables(root, warehouse)
    return root, warehouse


def _check_tables(root: str, warehouse) -> None:
    """:class:`NotAWarehouseError` when a table at one of nsreplay's table paths is not nsreplay's
    (another schema or partitioning): a command must not read, rewrite or vacuum what another tool
    wrote there. Columns a later nsreplay adds may be missing. A table whose log cannot be read is
    left to the command, which reports it among the tables it could not do."""
    from nsreplay.storage import SchemaMismatchError, StorageError
    from nsreplay.vacuum import WAREHOUSE_TABLES

    for spec in WAREHOUSE_TABLES:
        if not warehouse.exists(spec):
            continue
        try:
            warehouse.check(spec)
        except StorageError:  # a log that cannot be read: the command reports that table's failure itself
            continue
        except SchemaMismatchError as exc:
            first = exc.differences[0] if exc.differences else "another schema"
            raise NotAWarehouseError(f"{root}: not an nsreplay warehouse: its table {spec.name} is not nsreplay's ({first})") from None


def _add_compact(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compact", help="merge the small files of the published history's settled rows, of the past days' events and lines, and of the ledgers; no row changes")
    p.add_argument("--warehouse", required=True)
    p.add_argument("--dry-run", action="store_true", help="list what would be merged; write nothing")
    p.add_argument("--table", action="append", dest="tables", metavar="NAME", help="only this table (repeatable; default: every history, daily and ledger table)")
    p.set_defaults(func=_run_compact)


def _run_compact(args: argparse.Namespace) -> int:
    from datetime import datetime, timezone

    from nsreplay.compaction import (
        DATED_TABLES, HISTORY_TABLES, LEDGER_TABLES, LedgerPolicy, Policy, compact_dated, compact_ledgers, compact_warehouse, render,
    )
    from nsreplay.config import load_settings
    from nsreplay.runtime import new_run_id

    settings = load_settings()
    specs = [spec for spec, _ in HISTORY_TABLES] + [spec for spec, _, _ in DATED_TABLES] + [spec for spec, _ in LEDGER_TABLES]
    chosen = {spec.name for spec in _chosen_tables(args.tables, {spec.name: spec for spec in specs}, "a compacted table")}
    history = [t for t in HISTORY_TABLES if t[0].name in chosen]
    dated = [t for t in DATED_TABLES if t[0].name in chosen]
    ledgers = [t for t in LEDGER_TABLES if t[0].name in chosen]
    root, warehouse = _maintained_warehouse(args.warehouse, specs)
    run_id = new_run_id("compact")
    policy = Policy.from_config(settings.compact)
    results = compact_warehouse(warehouse, policy, dry_run=args.dry_run, run_id=run_id, tables=history) if history else []
    if dated:  # every day before today's (UTC): a scheduled ingest still writes to today's
        today = datetime.now(timezone.utc).strftime("%Y-%m-%d")
        results += compact_dated(warehouse, policy, today=today, dry_run=args.dry_run, run_id=run_id, tables=dated)
    if ledgers:
        results += compact_ledgers(warehouse, LedgerPolicy.from_config(settings.compact), dry_run=args.dry_run, run_id=run_id, tables=ledgers)
    print(f"compaction of {root}" + (" (dry run: nothing written)" if args.dry_run else ""))
    print(render(results, dry_run=args.dry_run), flush=True)
    return _fail_on_errors("compact", [(r.table, r.error) for r in results if r.error is not None], len(results))


def _add_thin_states(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("thin-states", help="remove the replay states no run resumes from by default (gold.replay_state)")
    p.add_argument("--warehouse", required=True)
    p.add_argument("--dry-run", action="store_true", help="count what would be removed; commit nothing")
    p.add_argument("--keep-recent-hours", type=int, help="keep every window end this long before the latest publish's end "
                   "(default: [thin_states] keep_recent_hours, 168)")
    p.add_argument("--checkpoint-hours", type=int, help="before that, keep the last window end of each such UTC-aligned span "
                   "(default: [thin_states] checkpoint_hours, 24)")
    p.set_defaults(func=_run_thin_states)


def _run_thin_states(args: argparse.Namespace) -> int:
    from nsreplay.config import ThinStatesConfig, load_settings
    from nsreplay.runtime import UsageError, new_run_id
    from nsreplay.state_thinning import Policy, render, thin_states
    from nsreplay.vacuum import WAREHOUSE_TABLES

    settings = load_settings()
    recent = settings.thin_states.keep_recent_hours if args.keep_recent_hours is None else args.keep_recent_hours
    span = settings.thin_states.checkpoint_hours if args.checkpoint_hours is None else args.checkpoint_hours
    if recent < 0 or span < 1:
        raise UsageError(f"--keep-recent-hours must be >= 0 and --checkpoint-hours >= 1 (got {recent}, {span})")
    root, warehouse = _maintained_warehouse(args.warehouse, WAREHOUSE_TABLES)  # without replay_state: "nothing done"
    policy = Policy.from_config(ThinStatesConfig(keep_recent_hours=recent, checkpoint_hours=span))
    result = thin_states(warehouse, policy, dry_run=args.dry_run, run_id=new_run_id("thin-states"))
    print(f"thinning of {root}: every window end of the last {recent} h kept, then one per {span} h"
          + (" (dry run: nothing removed)" if args.dry_run else ""))
    print(render(result), flush=True)
    return _fail_on_errors("thin-states", [("gold.replay_state", result.error)] if result.error is not None else [], 1)


def _add_serve(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the published route history over HTTP (and the RocketMQ remoting protocol)")
    p.add_argument("--warehouse", required=True, help="warehouse root (the latest published run is served)")
    p.add_argument("--http-port", type=int, default=8080, help="HTTP port (default 8080; 0 = any free port)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: loopback only; IPv6 with or without brackets: ::1, [::1])")
    p.add_argument("--remoting-port", type=int, help="also answer RocketMQ remoting requests (105/106/206) on this port")
    p.add_argument("--namesrv", help="with --remoting-port: the NameServer whose history it answers (optional when only one is covered)")
    p.add_argument("--as-of", dest="as_of", help=f"with --remoting-port: the instant answered ({TIME_FORMS}; default the latest state)")
    p.add_argument("--reload-interval", type=float, default=5.0, help="seconds between checks for a newer publish (default 5; 0 = never)")
    p.set_defaults(func=_run_serve)


def bind_host(text: str) -> str:
    """The address ``--host`` names: an IPv6 address (one holding ":") may come in the brackets of a
    URL or of RocketMQ's ``[addr]:port`` (the startup line prints it so), which a bind does without."""
    return text[1:-1] if text.startswith("[") and text.endswith("]") and ":" in text else text


def _run_serve(args: argparse.Namespace) -> int:
    from nsreplay.runtime import UsageError, parse_time
    from nsreplay.serving.server import ServeOptions, run

    for name in ("http_port", "remoting_port"):
        port = getattr(args, name)
        if port is not None and not 0 <= port <= 65535:
            raise UsageError(f"--{name.replace('_', '-')} {port}: not a port number")
    if args.remoting_port is None and (args.namesrv or args.as_of):
        raise UsageError("--namesrv and --as-of configure the remoting endpoint: give --remoting-port too")
    if not args.reload_interval >= 0 or math.isinf(args.reload_interval):  # NaN compares false
        raise UsageError(f"--reload-interval must be a number of seconds >= 0, got {args.reload_interval}")
    host = bind_host(args.host)
    if host.strip() in ("", "[]"):
        raise UsageError(f"--host {args.host!r}: an empty address; give the one to bind, e.g. 127.0.0.1, ::1 or 0.0.0.0")
    try:
        socket.getaddrinfo(host, None)
    except (socket.gaierror, UnicodeError) as exc:
        raise UsageError(f"--host {args.host}: {getattr(exc, 'strerror', None) or exc}") from None
    root, _ = _opened_warehouse(args.warehouse)
    options = ServeOptions(
        warehouse=root, host=host, http_port=args.http_port, remoting_port=args.remoting_port,
        namesrv=args.namesrv, as_of=parse_time(args.as_of) if args.as_of else None, reload_interval=args.reload_interval,
    )
    return run(options)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="nsreplay", description="What did the RocketMQ NameServer believe, and when?")
    sub = parser.add_subparsers(dest="command", required=True)
    from nsreplay.generator.cli import register as register_generate

    register_generate(sub)
    _add_ingest(sub)
    _add_serve(sub)
    _add_backfill(sub)
    _add_vacuum(sub)
    _add_compact(sub)
    _add_thin_states(sub)
    _add_bench(sub)
    return parser


@guarded
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
