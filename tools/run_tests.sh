#!/usr/bin/env bash
# The test command behind `make test`. It first rebuilds what changed (tools/bootstrap.py, the
# same step as `make setup`: seconds when nothing did), so a run never tests a stale install.
# No arguments: lint, the managed runtimes, every unit and integration test, then every `safety`
# and `race` test a second time beside EGOROLL_LOAD_HOGS (default 2) busy processes at nice
# EGOROLL_LOAD_NICE (default 10: background work on a robot computer; 0 starves every node of a
# 2-core box to a third of a core) where a timing assumption shows; then
# the robot half's tests in the Jazzy-like and Humble-like environments (tools/test_distros.py). Arguments go
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
# Nothing is rerun on failure unless marked infra_rerun(reason) (never a safety/race test, nor
# any test in their modules): see egoroll_ros.testing.pytest_plugin.
if [ "$full" = 1 ]; then
  tools/in_env.sh pytest -p no:cacheprovider --durations=25 "$@"
  echo "== safety and race tests again, under load (${EGOROLL_LOAD_HOGS:-2} busy processes, nice ${EGOROLL_LOAD_NICE:-10}) =="
  tools/in_env.sh python tools/under_load.py --hogs "${EGOROLL_LOAD_HOGS:-2}" \
    --nice "${EGOROLL_LOAD_NICE:-10}" -- pytest -p no:cacheprovider --durations=15 \
    -m 'safety or race' "$@"
else
  tools/in_env.sh pytest -p no:cacheprovider "$@"
fi
if [ "$full" = 1 ]; then
  echo "== robot half in distro-like environments (cached outside the clone per lock file) =="
  # A plain python3, outside the main environment (its ROS libraries must not leak in).
  env -u LD_LIBRARY_PATH -u PYTHONPATH -u AMENT_PREFIX_PATH -u CMAKE_PREFIX_PATH \
    -u VIRTUAL_ENV python3 tools/test_distros.py ${EGOROLL_DISTROS:-}
fi
