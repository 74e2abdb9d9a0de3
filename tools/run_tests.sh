#!/usr/bin/env bash
# The test command behind `make test`. It first rebuilds what changed (tools/bootstrap.py, the
# same step as `make setup`: seconds when nothing did), so a run never tests a stale install.
# No arguments: lint, the managed runtimes, every unit and integration test, then the robot half's
# tests in the Jazzy-like and Humble-like environments (tools/test_distros.py). Arguments go
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
full=0
if [ "$#" -eq 0 ]; then
  full=1
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
tools/in_env.sh pytest -p no:cacheprovider "$@"
if [ "$full" = 1 ]; then
  echo "== robot half in distro-like environments (cached outside the clone per lock file) =="
  # A plain python3, outside the main environment (its ROS libraries must not leak in).
  env -u LD_LIBRARY_PATH -u PYTHONPATH -u AMENT_PREFIX_PATH -u CMAKE_PREFIX_PATH \
    -u VIRTUAL_ENV python3 tools/test_distros.py ${EGOROLL_DISTROS:-}
fi
