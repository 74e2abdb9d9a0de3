"""trajectory_server node (not implemented yet)."""

import sys


def main(args: list[str] | None = None) -> int:
    """Entry point of the ``trajectory_server``  console script."""
    print('trajectory_server: not implemented yet', file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main())
