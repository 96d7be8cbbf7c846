#!/usr/bin/env bash
# Runs an nsreplay job through spark-submit, bootstrapping .venv on first use.
#
#   ./spark-submit.sh jobs/rebuild_routes.py [job args]                 # local, conf/ defaults
#   ./spark-submit.sh --master yarn --deploy-mode cluster jobs/rebuild_routes.py --captures hdfs://...
#
# Spark options before the job file are passed to spark-submit unchanged (they override conf/).
# Environment: NSREPLAY_ENV (conf/<env>, default local); NSREPLAY_CONF_DIR (another conf folder, for
# nsreplay.toml and spark-defaults.conf); NSREPLAY_DELTA=spark adds the delta-spark
# package (--packages io.delta:delta-spark_2.13:$DELTA_VERSION) and its session extensions for
# clusters that can fetch or already have the jars.
set -euo pipefail
NSREPLAY_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export NSREPLAY_ROOT
# shellcheck source=scripts/bootstrap.sh
source "$NSREPLAY_ROOT/scripts/bootstrap.sh"

# A Ctrl-C ends this script, once the command it came in has ended, with "<job>: interrupted" and
# status 130 (as the bootstrap's does). The helpers below ignore it and run to their end (a second or
# less each): cut short, they printed Python's KeyboardInterrupt traceback.
job_name="spark-submit.sh"
trap 'echo "$job_name: interrupted" >&2; exit 130' INT
# The lines a helper prints, appended to extra: read once it has ended (a Ctrl-C while the lines were
# read from a pipe ended the script under the helper, which then found its files gone). Its status
# is not looked at, as before: a helper that cannot tell adds nothing.
add_helper_args() {
  local out
  out="$(nsreplay_uninterrupted "$@")" || true
  if [ -n "$out" ]; then while IFS= read -r arg; do extra+=("$arg"); done <<< "$out"; fi
}

# In the C/POSIX locale (LANG=C, no locale at all, one not installed) a JVM names files in ASCII,
# where Python uses UTF-8: the JVM gets a UTF-8 LC_CTYPE (nsreplay/jvm_locale.py). That Python must
# see the locale as the JVM would: PYTHONCOERCECLOCALE=0 keeps it from changing LC_CTYPE (PEP 538).
locale_settings="$(PYTHONCOERCECLOCALE=0 nsreplay_uninterrupted "$VENV/bin/python" -m nsreplay.jvm_locale)" || true
if [ -n "$locale_settings" ]; then while IFS= read -r setting; do export "${setting?}"; done <<< "$locale_settings"; fi

ENV_NAME="${NSREPLAY_ENV:-local}"
DELTA_VERSION="${DELTA_VERSION:-4.0.0}"
props="$(mktemp)"
trap 'rm -f "$props"' EXIT
# NSREPLAY_CONF_DIR: a conf folder of its own (base/ and <env>/, as conf/), for nsreplay.toml and
# spark-defaults.conf alike; made absolute, as the job runs from the project root.
CONF_DIR="$NSREPLAY_ROOT/conf"
if [ -n "${NSREPLAY_CONF_DIR:-}" ]; then
  if ! CONF_DIR="$(cd "$NSREPLAY_CONF_DIR" 2>/dev/null && pwd)"; then
    echo "spark-submit.sh: NSREPLAY_CONF_DIR=$NSREPLAY_CONF_DIR is not a directory" >&2
    exit 2
  fi
  export NSREPLAY_CONF_DIR="$CONF_DIR"
fi
: > "$props"
for f in "$CONF_DIR/base/spark-defaults.conf" "$CONF_DIR/$ENV_NAME/spark-defaults.conf"; do
  if [ -f "$f" ]; then cat "$f" >> "$props"; fi
done

extra=()
if [ "${NSREPLAY_DELTA:-}" = "spark" ]; then
  extra+=(--packages "io.delta:delta-spark_2.13:$DELTA_VERSION"
          --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension
          --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog)
fi

# spark-submit reads "--opt=value" as "--opt value": spell the options before the job file the second
# way, so that what this script looks for below (--master, --driver-class-path, --conf) is found in
# either spelling. The job's own arguments (after its .py file) are left as they are.
args=()
job_seen=""
for arg in "$@"; do
  if [ -z "$job_seen" ] && [[ "$arg" =~ ^(--[a-z][a-z-]*)=(.*)$ ]]; then
    args+=("${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}")
  else
    args+=("$arg")
    if [ -z "$job_seen" ] && [[ "$arg" == *.py ]]; then job_seen=1; job_name="$(basename "$arg")"; fi
  fi
done
set -- ${args[@]+"${args[@]}"}

# Outside local mode the executors need the project code: ship it as a zip.
master="$(sed -n 's/^spark.master[[:space:]]*//p' "$props" | tail -n1)"
for ((i = 0; i < ${#args[@]}; i++)); do
  [ "${args[$i]}" = "--master" ] && master="${args[$((i + 1))]:-}"
done
case "$master" in
  local|local\[*) ;;
  *)  # a cluster, or local-cluster[...] (separate executor JVMs): ship the code
    mkdir -p "$NSREPLAY_ROOT/dist"
    (cd "$NSREPLAY_ROOT" && rm -f dist/nsreplay-code.zip && nsreplay_uninterrupted "$VENV/bin/python" -m zipfile -c dist/nsreplay-code.zip nsreplay pipelines schemas >/dev/null)
    extra+=(--py-files "$NSREPLAY_ROOT/dist/nsreplay-code.zip")
    ;;
esac

# Local masters: nsreplay's local file system (nsreplay/local_fs.py; nothing when the user set the
# file system or a class path, or when no javac can build it).
case "$master" in
  local|local\[*|local-cluster\[*)
    add_helper_args "$VENV/bin/python" -m nsreplay.local_fs "$master" "$props" ${args[@]+"${args[@]}"}
    # The driver's class archive (nsreplay/jvm_archive.py), for the class path just chosen.
    driver_cp=""
    for ((i = 0; i < ${#extra[@]}; i++)); do
      [ "${extra[$i]}" = "--driver-class-path" ] && driver_cp="${extra[$((i + 1))]}"
    done
    add_helper_args "$VENV/bin/python" -m nsreplay.jvm_archive args "$master" "$props" "$driver_cp"
    ;;
esac

export NSREPLAY_UNDER_SPARK_SUBMIT=1
# The JVMs log warnings and errors to stderr, not into the job's stdout (nsreplay/jvm_logging.py);
# a configuration the user named in the environment is kept.
export LOG4J_CONFIGURATION_FILE="${LOG4J_CONFIGURATION_FILE:-$NSREPLAY_ROOT/conf/base/log4j2.properties}"
export SPARK_HOME="${SPARK_HOME:-$(nsreplay_uninterrupted "$VENV/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')}"
# The job runs from the project root; the paths its user typed are relative to where they typed them.
export NSREPLAY_CALLER_DIR="$PWD"
cd "$NSREPLAY_ROOT"
# spark-submit runs the job's Python with its stderr merged into stdout (PythonRunner), so the job
# also writes its one-line failure reason to this file, copied to stderr here. No exec: the EXIT
# trap must run (it also removes the properties file).
reason="$(mktemp)"
# spark-submit's own stderr passes whole through nsreplay.jvm_stderr, which keeps its first and last
# 64 KiB (in memory) and writes them to this file once spark-submit has ended: what it refuses before
# the job runs (an option or setting: "Exception in thread "main" org.apache.spark.SparkException:
# Executor memory must be a positive number", or the driver JVM's "Invalid maximum heap size:
# -Xmxlots") is said there, and nsreplay.jvm_exit names it. A job that logs gigabytes to stderr
# leaves no more than that. The copy ignores a Ctrl-C and SIGTERM: the JVM's last lines still pass,
# before this script's own line. The EXIT trap removes the files on every end of the script (bash runs
# it for a SIGTERM or SIGHUP too: Airflow stopping the task, a closed terminal); the copy never
# creates the file again once it is gone.
submit_stderr="$(mktemp)"
trap 'rm -f "$props" "$reason" "$submit_stderr"' EXIT
export NSREPLAY_REASON_FILE="$reason"
exec 3>&1
set +e
"$VENV/bin/spark-submit" --properties-file "$props" ${extra[@]+"${extra[@]}"} "$@" 2>&1 >&3 3>&- | nsreplay_uninterrupted "$VENV/bin/python" -m nsreplay.jvm_stderr "$submit_stderr" >&2 3>&-
status=${PIPESTATUS[0]}
set -e
exec 3>&-
if [ "$status" -eq 130 ]; then
  # Ctrl-C (SIGINT): said as such also when it came while the JVM or the Spark session was starting,
  # where the JVM may end before the job writes its reason, or the job take the JVM's end for its failure
  echo "$job_name: interrupted" >&2
elif [ "$status" -eq 52 ]; then
  # Spark ended the JVM as it ran out of memory (with a local master, a task's heap is the driver's):
  # the job went with it before it could say why. The line names the setting (nsreplay/jvm_exit.py).
  nsreplay_uninterrupted "$VENV/bin/python" -m nsreplay.jvm_exit "$job_name" "$status" "$props" "$submit_stderr" "$@" >&2 || true
elif [ "$status" -ne 0 ] && [ -s "$reason" ]; then
  cat "$reason" >&2
elif [ "$status" -ne 0 ]; then
  # the JVM ended before the job said why: spark-submit refused a setting (SparkConfigError), the JVM
  # was killed (the out-of-memory killer), or it could not start
  nsreplay_uninterrupted "$VENV/bin/python" -m nsreplay.jvm_exit "$job_name" "$status" "$props" "$submit_stderr" "$@" >&2 || true
fi
exit "$status"
