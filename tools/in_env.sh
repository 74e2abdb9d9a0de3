#!/usr/bin/env bash
# Run a command inside the egoroll environment: the venv (when there is one) and the colcon
# install space of this checkout. Usage: tools/in_env.sh CMD [ARGS...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -x "$root/.venv/bin/python" ]; then
  # shellcheck disable=SC1091
  source "$root/.venv/bin/activate"
  export AMENT_PREFIX_PATH="$root/.venv${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
  export CMAKE_PREFIX_PATH="$root/.venv${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
fi
if [ ! -f "$root/install/setup.bash" ]; then
  echo "egoroll: no install space at $root/install; run 'make setup' first" >&2
  exit 2
fi
# colcon's scripts read unset variables; relax -u while sourcing.
set +u
# shellcheck disable=SC1091
source "$root/install/setup.bash"
set -u
# The console scripts live in lib/egoroll_ros (where `ros2 run` finds them); put them on PATH.
export PATH="$root/install/egoroll_ros/lib/egoroll_ros:$PATH"
exec "$@"
