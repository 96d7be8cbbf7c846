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
# The npm client (ali-ons, pinned by tests/serving/clients/package-lock.json) where npm is installed;
# without it those tests skip with the reason (and fail under CI=true, where nothing may skip).
# Installed again only when the lock file's contents change (a stamp of its hash in node_modules),
# not when a checkout merely gives it a newer mtime (a fresh git worktree sharing node_modules).
clients=tests/serving/clients
lock_hash="$(sha256sum < "$clients/package-lock.json" | cut -d' ' -f1)"
stamp="$clients/node_modules/.nsreplay-lock.sha256"
if command -v npm >/dev/null 2>&1 && [ "$(cat "$stamp" 2>/dev/null)" != "$lock_hash" ]; then
  if npm ci --prefix "$clients" --no-audit --no-fund --loglevel=error >/dev/null; then
    echo "$lock_hash" > "$stamp"
  else
    echo "run-tests.sh: npm ci --prefix $clients failed; the ali-ons tests will skip" >&2
  fi
fi
exec "$VENV/bin/python" -m pytest "$@"
