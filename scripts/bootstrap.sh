#!/usr/bin/env bash
# Sets up everything `make demo` and `make test` need, idempotently:
#   Java 17+, PostgreSQL server binaries, Maven, a Python 3.11+ virtualenv with the project
#   installed, and the JVM libraries Spark is given (sketch_core/spark/jars.py).
# A second run only checks and returns. Installs system packages with apt-get when run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

apt_updated=0
apt_install() {
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "error: $* is missing; install it (Debian: apt-get install $*) and run again" >&2
    exit 1
  fi
  if [ "$apt_updated" = 0 ]; then
    log "apt-get update"
    apt-get update -qq
    apt_updated=1
  fi
  log "installing $*"
  # Keep Debian's postinst from starting a system-wide cluster; we run our own server.
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  rm -f /usr/sbin/policy-rc.d
}

java_major() {
  java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1
}
if ! command -v java >/dev/null || [ "$(java_major)" -lt 17 ]; then
  apt_install openjdk-17-jre-headless
fi

pg_bindir() {
  if command -v pg_config >/dev/null && [ -x "$(pg_config --bindir)/initdb" ]; then
    pg_config --bindir
    return
  fi
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}
if [ -z "$(pg_bindir)" ] || [ ! -x "$(pg_bindir)/initdb" ]; then
  apt_install postgresql
fi
if [ "$(id -u)" = 0 ] && ! command -v runuser >/dev/null; then
  apt_install util-linux
fi
# Maven fetches the JVM libraries Spark is given (Iceberg's Spark runtime, the JDBC driver).
if ! command -v mvn >/dev/null; then
  apt_install maven
fi
# Headless Chromium for the UI test (skipped where it cannot be installed).
if ! command -v chromium >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt_install chromium
  else
    log "chromium not found: the browser test of the sketches page will be skipped"
  fi
fi

PYTHON=${PYTHON:-}
if [ -z "$PYTHON" ]; then
  for candidate in python3.11 python3.12 python3; do
    if command -v "$candidate" >/dev/null &&
       "$candidate" -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] < (3, 13) else 1)'; then
      PYTHON=$candidate
      break
    fi
  done
fi
if [ -z "$PYTHON" ]; then
  apt_install python3 python3-venv
  PYTHON=python3
fi

if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV with $($PYTHON --version)"
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.installed-$(cat pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  log "installing the project and its dependencies into $VENV (takes a few minutes the first time)"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -e '.[dev]'
  # The build leaves an egg-info here; from this directory, Python would then see the project's
  # entry points twice (Airflow warns of a plugin registered twice). The venv has its own copy.
  rm -rf ./*.egg-info
  rm -f "$VENV"/.installed-*
  touch "$stamp"
fi
# Into $SKETCH_JARS (default $SKETCH_HOME/jars, git-ignored under .cache); a second run finds
# them there and fetches nothing.
"$VENV/bin/python" -m sketch_core.spark.jars
# Spark's classes, parsed and verified once into an archive every session then maps (about a
# minute, once per JVM and set of jars; see sketch_core/spark/class_archive.py). Sessions start
# without it if this fails, so a failure is reported, not fatal.
if ! "$VENV/bin/python" -m sketch_core.spark.class_archive; then
  log "warning: the class archive was not built; Spark sessions start without it (slower)"
fi
log "ready: $($VENV/bin/python --version), java $(java_major), PostgreSQL binaries in $(pg_bindir)"
