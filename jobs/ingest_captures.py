"""Job: ingest capture files into bronze and silver.

    ./spark-submit.sh jobs/ingest_captures.py --captures PATH [--warehouse DIR] [--run-id ID]

A thin shell: arguments → settings → Spark → ``pipelines.ingest.run.run_ingest`` → summary.
"""

from __future__ import annotations

from nsreplay.exit_reason import stop_quietly_while_loading

stop_quietly_while_loading(__name__)  # a Ctrl-C among the imports below (a second or more) ends the job as "interrupted"

import argparse
import sys

from nsreplay.config import load_settings
from nsreplay.runtime import ArgumentParser, build_spark, guarded, new_run_id, resolve_path, resolve_setting_path, run_id_arg
from nsreplay.storage import Warehouse
from pipelines.ingest.capture_files import list_capture_files
from pipelines.ingest.run import IngestQualityError, run_ingest
from pipelines.quality.suites import import_in_background


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = ArgumentParser(prog="ingest_captures.py", description=__doc__.splitlines()[0])
    parser.add_argument("--captures", required=True, help="capture file, directory or glob (JSONL, plain or gzip)")
    parser.add_argument("--warehouse", help="warehouse root (default: [warehouse] root in conf)")
    parser.add_argument("--run-id", type=run_id_arg, help="run id; re-running with the same id commits nothing new")
    return parser.parse_args(argv)


@guarded
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = load_settings()
    list_capture_files(resolve_path(args.captures))  # a wrong path fails before Spark starts
    root = resolve_setting_path(settings.warehouse.root) if args.warehouse is None else resolve_path(args.warehouse)  # so does ''
    import_in_background()  # Great Expectations, while the Spark session starts
    spark = build_spark(settings, "nsreplay-ingest")
    warehouse = Warehouse(root, spark, settings.warehouse.backend)
    try:
        result = run_ingest(spark, warehouse, settings, resolve_path(args.captures), args.run_id or new_run_id("ingest"))
    except IngestQualityError as exc:
        print(exc.text(), file=sys.stderr)
        raise
    finally:
        spark.stop()
    print(result.summary())
    print(result.quality.text() if result.quality else "data quality: nothing new to check")
    return 0


if __name__ == "__main__":
    sys.exit(main())
