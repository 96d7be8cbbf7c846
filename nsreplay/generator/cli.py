"""The ``nsreplay generate`` subcommand.

Usage (wired into the main CLI by ``register(subparsers)``)::

    nsreplay generate --preset demo --out DIR [--seed N] [--workers N] [--hours H]
                      [--start TIME] [--plain] [--set knob=value ...] [--list-knobs] [--json]

``--set`` takes any knob of :mod:`nsreplay.generator.config` by dotted (``incidents.crashes=3``) or bare
(``crashes=3``) name; values are JSON or plain text. Prints a one-paragraph summary (or JSON with
``--json``); exit status 2 with a one-line reason on a bad knob.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from nsreplay.runtime import TIME_FORMS, UsageError, at_least, parse_time, resolve_path

from .api import generate
from .config import PRESETS, ConfigError, apply_overrides, knob_names, preset

__all__ = ["register", "main", "run"]


def _time_ms(text: str) -> int:
    """A time as every nsreplay command reads one (:func:`nsreplay.runtime.parse_time`: ISO-8601,
    naive meaning UTC, or epoch ms)."""
    try:
        return parse_time(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _out_dir(text: str) -> Path:
    """``--out``: a path relative to where the command runs unless absolute (:func:`nsreplay.runtime.resolve_path`)."""
    try:
        return Path(resolve_path(text))
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", default="demo", choices=sorted(PRESETS), help="named configuration (default: demo)")
    parser.add_argument("--out", type=_out_dir, help="output directory, relative to where the command runs as every command's paths "
                        "(created if needed; the files an earlier run wrote there are replaced, any other file is kept)")
    parser.add_argument("--seed", type=int, help="random seed (default: the preset's)")
    parser.add_argument("--workers", type=at_least(1), default=2, help="worker processes (default: 2)")
    parser.add_argument("--hours", type=float, help="window length in hours")
    parser.add_argument("--start", type=_time_ms, help=f"window start ({TIME_FORMS})")
    parser.add_argument("--plain", action="store_true", help="write .jsonl instead of .jsonl.gz")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KNOB=VALUE",
                        help="override any knob (repeatable), e.g. --set incidents.crashes=3")
    parser.add_argument("--list-knobs", action="store_true", help="list every knob and exit")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``generate`` subcommand to an argparse subparsers object."""
    parser = subparsers.add_parser(
        "generate",
        help="generate a synthetic NameServer capture (capture-format v1)",
        description="Simulate RocketMQ clusters and write what their NameServers saw as capture files.",
    )
    _add_arguments(parser)
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Execute the subcommand for parsed ``args``; returns the exit status."""
    if args.list_knobs:
        print("\n".join(knob_names()))
        return 0
    if args.out is None:
        print("generate: --out DIR is required", file=sys.stderr)
        return 2
    overrides: dict[str, Any] = {}
    if args.seed is not None:
        overrides["seed"] = args.seed
    if args.hours is not None:
        overrides["timing.hours"] = args.hours
    if args.start is not None:
        overrides["timing.start_ms"] = args.start
    if args.plain:
        overrides["output.compress"] = False
    for item in args.overrides:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            print(f"generate: --set expects KNOB=VALUE, got {item!r}", file=sys.stderr)
            return 2
        overrides[name.strip()] = value
    try:
        config = apply_overrides(preset(args.preset), overrides)
    except ConfigError as exc:
        print(f"generate: {exc}", file=sys.stderr)
        return 2
    summary = generate(config, args.out, workers=args.workers)
    print(json.dumps(summary.to_dict(), indent=2) if args.json else summary.describe())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry (``python -m nsreplay.generator.cli``): failures and usage errors as the
    ``nsreplay`` command reports them (one line on stderr; exit 2 for usage)."""
    from nsreplay.runtime import ArgumentParser, guarded

    def parse_and_run(args: list[str] | None) -> int:
        parser = ArgumentParser(prog="nsreplay generate")
        _add_arguments(parser)
        return run(parser.parse_args(args))

    return guarded(parse_and_run)(None if argv is None else list(argv))


if __name__ == "__main__":
    raise SystemExit(main())
