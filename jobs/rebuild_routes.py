"""Job: rebuild the NameServer route tables from captured traffic.

    ./spark-submit.sh jobs/rebuild_routes.py                      # embedded demo
    ./spark-submit.sh jobs/rebuild_routes.py --captures PATH --warehouse DIR [--from TIME] [--to TIME]

With no arguments it generates the demo capture (seeded, deterministic) under ``captures/demo`` and
works on it in ``./warehouse``: ingest (bronze/silver) → replay (gold route history) → publish.
A thin shell: every step lives in ``pipelines``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nsreplay.config import load_settings
from nsreplay.runtime import UsageError, build_spark, format_ms, guarded, new_run_id, parse_time, resolve_path
from nsreplay.storage import Warehouse
from pipelines.ingest.run import IngestQualityError, run_ingest
from pipelines.replay.run import run_replay


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="rebuild_routes.py", description=__doc__.splitlines()[0])
    parser.add_argument("--captures", help="capture file, directory or glob (default: the generated demo capture)")
    parser.add_argument("--warehouse", help="warehouse root (default: [warehouse] root in conf)")
    parser.add_argument("--from", dest="window_from", help="window start, ISO-8601 or epoch ms")
    parser.add_argument("--to", dest="window_to", help="window end, ISO-8601 or epoch ms")
    parser.add_argument("--run-id", help="run id; re-running with the same id commits nothing new")
    args = parser.parse_args(argv)
    args.window_from = parse_time(args.window_from) if args.window_from else None
    args.window_to = parse_time(args.window_to) if args.window_to else None
    if args.window_from is not None and args.window_to is not None and args.window_from >= args.window_to:
        raise UsageError("--from must be before --to")
    return args


def demo_capture(settings) -> str:
    """The demo capture directory, generated on first use (deterministic for the configured seed)."""
    from nsreplay.generator import apply_overrides, generate, preset

    out = Path(resolve_path(settings.demo.captures))
    if not (out / "_manifest.json").is_file():
        config = apply_overrides(preset(settings.demo.preset), {"seed": settings.demo.seed})
        summary = generate(config, out)
        print(f"generated the {settings.demo.preset} capture: {summary.lines} lines in {summary.files} files under {out}")
    return str(out)


@guarded
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = load_settings()
    captures = resolve_path(args.captures) if args.captures else demo_capture(settings)
    warehouse_root = resolve_path(args.warehouse or settings.warehouse.root)
    spark = build_spark(settings, "nsreplay-rebuild-routes")
    try:
        return rebuild(spark, settings, args, captures, warehouse_root)
    finally:
        spark.stop()


def rebuild(spark, settings, args: argparse.Namespace, captures: str, warehouse_root: str) -> int:
    """Ingest, replay and publish; print the summary."""
    warehouse = Warehouse(warehouse_root, spark, settings.warehouse.backend)
    run_id = args.run_id or new_run_id("rebuild")
    try:
        ingest = run_ingest(spark, warehouse, settings, captures, run_id)
    except IngestQualityError as exc:
        print(exc.report.text(), file=sys.stderr)
        raise
    print(ingest.summary())
    print(ingest.quality.text() if ingest.quality else "data quality: nothing new to check")
    replay = run_replay(spark, warehouse, settings, run_id, window_from=args.window_from, window_to=args.window_to)
    print(replay.summary())
    print(f"published run {run_id}: window {format_ms(replay.window_from)} .. {format_ms(replay.window_to)}")
    for namesrv, (start, end, profile) in sorted(replay.namesrvs.items()):
        print(f"  {namesrv:<22} {profile:<13} {format_ms(start)} .. {format_ms(end)}")
    print(f"warehouse: {warehouse_root} (backend {warehouse.backend_name})")
    example_ns = sorted(replay.namesrvs)[0]
    print("query it:")
    print(f"  .venv/bin/python -c \"from nsreplay.history import PublishedHistory as H; h = H('{warehouse_root}'); "
          f"print(h.route_at('{example_ns}', 'TBW102', {replay.window_to}).body)\"")
    print("  SQL views and more examples: notebooks/README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
