#!/usr/bin/env bash
# The test command behind `make test` (after `make setup`): lint, then unit and integration
# tests with pytest against the INSTALLED packages. Extra arguments go to pytest, e.g.
#   tools/run_tests.sh egoroll_ros/test/unit -k sampling
# Exits non-zero on any lint error or test failure.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
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
