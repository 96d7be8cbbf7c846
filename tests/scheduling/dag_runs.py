"""Run by the Airflow 3 venv's python (tests/scheduling/test_dag_backfill.py): reads and settles the DAG
runs of the metadata database, which the CLI can create (``airflow dags trigger``) but, without an API
server, neither end nor list with their data intervals and backfills.

    python dag_runs.py list DAG_ID
        DAG_ID's runs and backfills as JSON on the last line: {"runs": [{run_id, run_type, state,
        logical_date, data_interval_start, data_interval_end (ISO-8601), backfill_id}, ...],
        "backfills": [{id, max_active_runs, reprocess_behavior}, ...]}
    python dag_runs.py settle DAG_ID LOGICAL_DATE STATE [--scheduled HOURS]
        ends the one run at LOGICAL_DATE in STATE ("success", "failed"); with --scheduled, makes it
        the row a scheduler writes for the interval of HOURS starting at LOGICAL_DATE (run type
        "scheduled", that data interval)
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timedelta


def _iso(value) -> str | None:
    return None if value is None else value.isoformat()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="dag_runs.py")
    sub = parser.add_subparsers(dest="command", required=True)
    listed = sub.add_parser("list")
    listed.add_argument("dag_id")
    settle = sub.add_parser("settle")
    settle.add_argument("dag_id")
    settle.add_argument("logical_date", type=datetime.fromisoformat)
    settle.add_argument("state", choices=["success", "failed"])
    settle.add_argument("--scheduled", type=float, metavar="HOURS")
    args = parser.parse_args(argv)

    from airflow.models import DagRun
    from airflow.models.backfill import Backfill
    from airflow.utils.session import create_session

    with create_session() as session:
        runs = session.query(DagRun).filter(DagRun.dag_id == args.dag_id)
        if args.command == "list":
            listed = sorted(
                ({"run_id": r.run_id, "run_type": str(r.run_type), "state": str(r.state), "logical_date": _iso(r.logical_date),
                  "data_interval_start": _iso(r.data_interval_start), "data_interval_end": _iso(r.data_interval_end),
                  "backfill_id": r.backfill_id} for r in runs),
                key=lambda r: (r["logical_date"] or "", r["run_id"]))
            backfills = [{"id": b.id, "max_active_runs": b.max_active_runs, "reprocess_behavior": str(b.reprocess_behavior)}
                         for b in session.query(Backfill).filter(Backfill.dag_id == args.dag_id).order_by(Backfill.id)]
            print(json.dumps({"runs": listed, "backfills": backfills}))
            return 0
        (run,) = runs.filter(DagRun.logical_date == args.logical_date).all()
        run.state = args.state
        if args.scheduled is not None:
            run.run_type = "scheduled"
            run.data_interval_start = args.logical_date
            run.data_interval_end = args.logical_date + timedelta(hours=args.scheduled)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
