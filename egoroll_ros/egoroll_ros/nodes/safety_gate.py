"""safety_gate node (not implemented yet)."""

import sys


def main(args: list[str] | None = None) -> int:
    """Entry point of the ``safety_gate``  console script."""
    print('safety_gate: not implemented yet', file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main())
