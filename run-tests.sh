#!/usr/bin/env bash
# Runs the test suite (bootstrapping .venv on first use). Extra arguments go to pytest,
# e.g. ./run-tests.sh -m "not slow" or ./run-tests.sh tests/ingest -x
set -euo pipefail
NSREPLAY_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export NSREPLAY_ROOT
# The test extras too (pytest, chispa, hypothesis, the real RocketMQ clients); the jobs need only the runtime.
export NSREPLAY_EXTRAS=test
# shellcheck source=scripts/bootstrap.sh
source "$NSREPLAY_ROOT/scripts/bootstrap.sh"
cd "$NSREPLAY_ROOT"
exec "$VENV/bin/python" -m pytest "$@"
