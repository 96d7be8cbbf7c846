"""``nsreplay``: the project's command line.

    nsreplay generate --preset demo --out DIR      write a simulated capture (see nsreplay.generator)
    nsreplay ingest --captures PATH --warehouse DIR
    nsreplay bench ingest --captures PATH          ingest time vs. Spark reading the same files as text
    nsreplay bench rebuild --preset bench-day      ingest + replay + publish vs. the same floor, model check

Spark-backed commands run Spark in-process with ``conf/`` defaults (``spark-submit.sh`` is the way to
run the jobs on a cluster).
"""

from __future__ import annotations

import argparse
import json
import sys

from nsreplay.runtime import guarded


def _add_ingest(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ingest", help="ingest capture files into bronze and silver")
    p.add_argument("--captures", required=True)
    p.add_argument("--warehouse", required=True)
    p.add_argument("--run-id")
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
    rebuild.add_argument("--out", default="captures/bench", help="where --preset writes its capture (reused when present)")
    rebuild.add_argument("--warehouse", help="scratch warehouse (default: a temporary directory, removed after)")
    rebuild.add_argument("--samples", type=int, default=1000, help="ticks checked against the reference model")
    rebuild.add_argument("--master", default=None)
    rebuild.set_defaults(func=_bench_rebuild)


def _bench_ingest(args: argparse.Namespace) -> int:
    from nsreplay.bench import bench_ingest

    print(bench_ingest(args.captures, warehouse=args.warehouse, master=args.master).report())
    return 0


def _bench_rebuild(args: argparse.Namespace) -> int:
    from pathlib import Path

    from nsreplay.bench import bench_rebuild
    from nsreplay.runtime import resolve_path

    captures = args.captures
    if args.preset:
        from nsreplay.generator import generate, preset

        out = Path(resolve_path(args.out)) / args.preset
        manifest = out / "_manifest.json"
        if not manifest.is_file() or json.loads(manifest.read_text()).get("preset") != args.preset:
            print(generate(preset(args.preset), out).describe())
        captures = str(out)
    print(bench_rebuild(captures, warehouse=args.warehouse, master=args.master, samples=args.samples).report())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nsreplay", description="What did the RocketMQ NameServer believe, and when?")
    sub = parser.add_subparsers(dest="command", required=True)
    from nsreplay.generator.cli import register as register_generate

    register_generate(sub)
    _add_ingest(sub)
    _add_bench(sub)
    return parser


@guarded
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
