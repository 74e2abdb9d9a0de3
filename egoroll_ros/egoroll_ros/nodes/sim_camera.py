"""sim_camera node (not implemented yet)."""

import sys


def main(args: list[str] | None = None) -> int:
    """Entry point of the ``sim_camera``  console script."""
    print('sim_camera: not implemented yet', file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main())
