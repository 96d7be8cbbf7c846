"""Job: rebuild the NameServer route tables from captured traffic.

    ./spark-submit.sh jobs/rebuild_routes.py                      # embedded demo
    ./spark-submit.sh jobs/rebuild_routes.py --captures PATH --warehouse DIR [--from TIME] [--to TIME]
    ./spark-submit.sh jobs/rebuild_routes.py --warehouse DIR --from T1 --to T2 --run-id ID --stage replay|quality|publish

With no arguments it generates the demo capture (seeded, deterministic) under ``captures/demo`` and
works on it in ``./warehouse``: ingest (bronze/silver) → replay (gold route history) → quality → publish.

``--from T1`` replays only the window (T1, T2], resuming from the replay state the published run of
the previous window left at T1 (``--from-last-good``: from the latest published state before T1 when
there is none at T1); without ``--from``, or on a warehouse with nothing published yet, the replay
starts at each NameServer's first record.
``--stage`` runs one stage (a scheduler runs them as separate tasks, each idempotent for its run id):
``ingest`` (needs ``--captures``), ``replay`` (writes gold, publishes nothing), ``quality`` (Great
Expectations on what that run wrote), ``publish``. A run id replays one window: run again asking
another window than its replay wrote, it is refused (``RunIdSpentError``) — by the replay stage
(where no ``--from`` means the first record and no ``--to`` the last), and by the quality and publish
stages for a ``--from`` or ``--to`` given. A thin shell: every step lives in ``pipelines``.
"""

from __future__ import annotations

from nsreplay.exit_reason import stop_quietly_while_loading

stop_quietly_while_loading(__name__)  # a Ctrl-C among the imports below (a second or more) ends the job as "interrupted"

import argparse
import shlex
import sys
from pathlib import Path

from nsreplay.config import load_settings
from nsreplay.runtime import (
    TIME_FORMS,
    ArgumentParser,
    UsageError,
    build_spark,
    format_ms,
    guarded,
    new_run_id,
    parse_time,
    resolve_path,
    resolve_setting_path,
    run_id_arg,
)
from nsreplay.storage import Warehouse
from pipelines.ingest.capture_files import list_capture_files
from pipelines.ingest.run import IngestQualityError, run_ingest
from pipelines.quality.suites import import_in_background
from pipelines.replay.run import GoldQualityError, check_run_window, check_window, publish_window, replay_window, run_replay
from pipelines.replay.stale import late_data_note
from pipelines.replay.windows import check_window_length

STAGES = ("all", "ingest", "replay", "quality", "publish")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = ArgumentParser(prog="rebuild_routes.py", description=__doc__.splitlines()[0])
    parser.add_argument("--captures", help="capture file, directory or glob (default: the generated demo capture)")
    parser.add_argument("--warehouse", help="warehouse root (default: [warehouse] root in conf)")
    parser.add_argument("--from", dest="window_from", help=f"window start ({TIME_FORMS})")
    parser.add_argument("--to", dest="window_to", help=f"window end ({TIME_FORMS})")
    parser.add_argument("--run-id", type=run_id_arg, help="run id; re-running with the same id commits nothing new")
    parser.add_argument("--stage", choices=STAGES, default="all", help="run one stage only (default: all of them, in order)")
    parser.add_argument("--from-last-good", action="store_true", help="without a published state at --from, resume from the latest one before it")
    args = parser.parse_args(argv)
    if args.stage != "all" and not args.run_id:
        raise UsageError("--stage needs --run-id (the stages of one run share it)")
    if args.stage == "ingest" and args.captures is None:
        raise UsageError("--stage ingest needs --captures")
    if args.stage in ("replay", "quality", "publish") and args.captures is not None:
        raise UsageError(f"--stage {args.stage} reads no captures: --captures goes with --stage ingest (or no --stage)")
    args.window_from = parse_time(args.window_from) if args.window_from else None
    args.window_to = parse_time(args.window_to) if args.window_to else None
    if args.window_from is not None and args.window_to is not None and args.window_from >= args.window_to:
        raise UsageError("--from must be before --to")
    return args


def demo_capture(settings) -> str:
    """The demo capture directory, generated on first use (deterministic for the configured seed)."""
    from nsreplay.generator import apply_overrides, generate, preset

    out = Path(resolve_setting_path(settings.demo.captures))
    if not (out / "_manifest.json").is_file():
        config = apply_overrides(preset(settings.demo.preset), {"seed": settings.demo.seed})
        summary = generate(config, out)
        print(f"generated the {settings.demo.preset} capture: {summary.lines} lines in {summary.files} files under {out}")
    return str(out)


@guarded
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = load_settings()
    if args.window_from is not None and args.window_to is not None:  # a mistyped --to fails before the ingest
        check_window_length(args.window_from, args.window_to, settings.replay.max_window_days)
    warehouse_root = resolve_setting_path(settings.warehouse.root) if args.warehouse is None else resolve_path(args.warehouse)
    if args.stage in ("all", "ingest"):
        captures = demo_capture(settings) if args.captures is None else resolve_path(args.captures)
        list_capture_files(captures)  # a wrong path fails before Spark starts
    if args.stage in ("all", "ingest", "quality"):
        import_in_background()  # Great Expectations, while the Spark session starts
    spark = build_spark(settings, f"nsreplay-rebuild-routes-{args.stage}")
    try:
        if args.stage == "all":
            return rebuild(spark, settings, args, captures, warehouse_root)
        return stage(spark, settings, args, captures if args.stage == "ingest" else None, warehouse_root)
    finally:
        spark.stop()


def stage(spark, settings, args: argparse.Namespace, captures: str | None, warehouse_root: str) -> int:
    """One stage of run ``args.run_id``."""
    warehouse = Warehouse(warehouse_root, spark, settings.warehouse.backend)
    if args.stage == "ingest":
        ingest = run_ingest(spark, warehouse, settings, captures, args.run_id)
        print(ingest.summary())
        print(ingest.quality.text() if ingest.quality else "data quality: nothing new to check")
    elif args.stage == "replay":
        result = replay_window(spark, warehouse, settings, args.run_id, window_from=args.window_from, window_to=args.window_to, from_last_good=args.from_last_good)
        print(result.summary())
        if result.published:
            print(f"published already: the quality and publish stages of {args.run_id} have nothing left to do")
        else:
            print(f"written, not published: run the quality and publish stages of {args.run_id}")
    elif args.stage == "quality":
        check_run_window(warehouse, args.run_id, args.window_from, args.window_to)
        report = check_window(spark, warehouse, args.run_id)
        print(report.text())
        if not report.passed:
            raise GoldQualityError(report)
    else:
        check_run_window(warehouse, args.run_id, args.window_from, args.window_to)
        run = publish_window(spark, warehouse, args.run_id)
        print(f"published run {args.run_id}: window {format_ms(run['window_from'])} .. {format_ms(run['window_to'])}")
        if run["stale"]:
            print(late_data_note(run["stale"], warehouse_root))
    return 0


def rebuild(spark, settings, args: argparse.Namespace, captures: str, warehouse_root: str) -> int:
    """Ingest, replay and publish; print the summary."""
    warehouse = Warehouse(warehouse_root, spark, settings.warehouse.backend)
    run_id = args.run_id or new_run_id("rebuild")
    try:
        ingest = run_ingest(spark, warehouse, settings, captures, run_id)
    except IngestQualityError as exc:
        print(exc.text(), file=sys.stderr)
        raise
    print(ingest.summary())
    print(ingest.quality.text() if ingest.quality else "data quality: nothing new to check")
    replay = run_replay(spark, warehouse, settings, run_id, window_from=args.window_from, window_to=args.window_to, from_last_good=args.from_last_good)
    print(replay.summary())
    print(replay.quality.text() if replay.quality else "")
    print(f"published run {run_id}: window {format_ms(replay.window_from)} .. {format_ms(replay.window_to)}")
    for namesrv, (start, end, profile) in sorted(replay.namesrvs.items()):
        print(f"  {namesrv:<22} {profile:<13} {format_ms(start)} .. {format_ms(end)}")
    print(f"warehouse: {warehouse_root} (backend {warehouse.backend_name})")
    example_ns = sorted(replay.namesrvs)[0]
    print("query it:")
    print(f"  .venv/bin/python -c \"from nsreplay.history import PublishedHistory as H; h = H('{warehouse_root}'); "
          f"print(h.route_at('{example_ns}', 'TBW102', {replay.window_to}).body)\"")
    print("  SQL views and more examples: notebooks/README.md")
    print("serve it (HTTP on 127.0.0.1:8080; add --remoting-port 9876 --namesrv NS for RocketMQ clients):")
    print(f"  .venv/bin/nsreplay serve --warehouse {shlex.quote(warehouse_root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
