#!/usr/bin/env bash
# Creates or refreshes the project's virtual environment (.venv) and checks for Java.
# Sourced by spark-submit.sh and run-tests.sh; idempotent and quick when nothing changed
# (a stamp holds the hash of pyproject.toml and the extras installed). Prints one line and exits
# non-zero on failure.
#
# NSREPLAY_EXTRAS names the optional dependencies to install as well: run-tests.sh sets it to
# "test" (pytest, chispa, the real RocketMQ clients...); the jobs and the scheduler's workers leave
# it empty and get the runtime dependencies only. A .venv that has the test extras serves the jobs
# as it is.
set -euo pipefail
# A Ctrl-C here (Java's check, pip, the class archive) ends the caller, once the command it cut short
# has ended, with the line "<script>: interrupted" and status 130: a check cut short is not reported
# as its failure ("Python ... is too old"). The caller may set a trap of its own afterwards.
trap 'echo "$(basename "$0"): interrupted" >&2; exit 130' INT
# A short command run with SIGINT ignored (inherited through exec), so that a Ctrl-C does not cut it
# short with Python's KeyboardInterrupt traceback: it ends, then the trap above (or the caller's) runs.
nsreplay_uninterrupted() { (trap '' INT; exec "$@"); }

NSREPLAY_ROOT="${NSREPLAY_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
VENV="$NSREPLAY_ROOT/.venv"

nsreplay_die() { echo "$(basename "$0"): $*" >&2; exit 1; }

nsreplay_check_java() {
  local java_bin
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then java_bin="$JAVA_HOME/bin/java"
  elif command -v java >/dev/null 2>&1; then java_bin="$(command -v java)"
  else nsreplay_die "no Java found: Spark needs a JDK 17 or newer; install one (e.g. apt-get install openjdk-17-jdk-headless) and put java on PATH or set JAVA_HOME"
  fi
  local major said
  # A JVM that cannot start (its class space and heap are reserved up front: an address-space limit,
  # a small machine without overcommit) fails here first: say so, or set -e ends the script silently.
  if ! said="$("$java_bin" -version 2>&1)"; then
    nsreplay_die "$java_bin cannot start a JVM (too little memory or address space for it? ulimit -v): $(printf '%s' "$said" | grep -v '^\s*$' | head -n3 | paste -sd ';' | sed 's/;/; /g')"
  fi
  major="$(printf '%s\n' "$said" | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)"
  if [ -z "$major" ] || [ "$major" -lt 17 ]; then
    nsreplay_die "Java ${major:-?} found at $java_bin; Spark 4 needs a JDK 17 or newer"
  fi
}

nsreplay_bootstrap_venv() {
  local python="${NSREPLAY_PYTHON:-python3}"
  command -v "$python" >/dev/null 2>&1 || nsreplay_die "no $python found: install Python 3.10 or newer"
  nsreplay_uninterrupted "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' \
    || nsreplay_die "$("$python" --version 2>&1) is too old: nsreplay needs Python 3.10 or newer"
  local extras="${NSREPLAY_EXTRAS:-}" want have="" installed="" covered=no
  want="$(cat "$NSREPLAY_ROOT/pyproject.toml" | sha256sum | cut -c1-16)"
  # The stamp: the hash on its first line, the extras installed (comma-separated) on its second.
  if [ -f "$VENV/.nsreplay-stamp" ]; then
    have="$(sed -n 1p "$VENV/.nsreplay-stamp")"
    installed="$(sed -n 2p "$VENV/.nsreplay-stamp")"
  fi
  case ",$installed," in *",$extras,"*) covered=yes ;; esac
  [ -z "$extras" ] && covered=yes
  if [ "$want" = "$have" ] && [ "$covered" = yes ] && [ -x "$VENV/bin/nsreplay" ]; then return 0; fi
  # What is installed stays installed: keep it in the install (and the stamp) when adding to it.
  [ "$covered" = yes ] && extras="$installed" || extras="${installed:+$installed,}$extras"
  echo "setting up $VENV (first run or dependencies changed; takes a minute or two)..." >&2
  [ -x "$VENV/bin/python" ] || "$python" -m venv "$VENV" || nsreplay_die "could not create $VENV (on Debian: apt-get install python3-venv)"
  "$VENV/bin/python" -m pip install --disable-pip-version-check -q --upgrade pip >/dev/null 2>&1 || true
  "$VENV/bin/python" -m pip install --disable-pip-version-check -q -e "$NSREPLAY_ROOT${extras:+[$extras]}" \
    || nsreplay_die "pip could not install the dependencies into $VENV (see the messages above)"
  printf '%s\n%s\n' "$want" "$extras" > "$VENV/.nsreplay-stamp"
}

# The driver JVM's class archive (nsreplay/jvm_archive.py): written once per JDK and class path (about
# a minute), mapped by every later local driver. NSREPLAY_JVM_ARCHIVE=off skips it.
nsreplay_jvm_archive() {
  [ "${NSREPLAY_JVM_ARCHIVE:-}" = "off" ] && return 0
  "$VENV/bin/python" -m nsreplay.exit_reason nsreplay.jvm_archive build >/dev/null || true
}

nsreplay_check_java
nsreplay_bootstrap_venv
nsreplay_jvm_archive
export PYSPARK_PYTHON="$VENV/bin/python"
export PYSPARK_DRIVER_PYTHON="$VENV/bin/python"
