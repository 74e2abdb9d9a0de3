#!/usr/bin/env bash
# The test command behind `make test`. It first rebuilds what changed (tools/bootstrap.py, the
# same step as `make setup`: seconds when nothing did), so a run never tests a stale install.
# No arguments: lint, the managed runtimes, then every unit and integration test. Arguments go
# to pytest and run that subset against the freshly installed packages, e.g.
#   tools/run_tests.sh egoroll_ros/test/unit -k sampling     (or: make test ARGS="-k gate")
# EGOROLL_SKIP_BUILD=1 skips the rebuild (make test sets it: its setup step just ran).
# Exits non-zero on any build or lint error or test failure.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [ "${EGOROLL_SKIP_BUILD:-0}" != 1 ]; then
  "${PYTHON:-python3}" tools/bootstrap.py
fi
if [ "$#" -eq 0 ]; then
  echo "== lint (ruff) =="
  tools/in_env.sh ruff check .
  echo "== managed runtimes (built once per lock file, outside the clone) =="
  tools/in_env.sh egoroll runtime lerobot
  set -- egoroll_ros/test
fi
echo "== pytest =="
# -p no:cacheprovider: never write next to the sources of a read-only checkout.
# Integration tests (real processes over DDS) get up to 2 reruns on failure, see
# egoroll_ros.testing.pytest_plugin; unit tests never do.
exec tools/in_env.sh pytest -p no:cacheprovider "$@"
