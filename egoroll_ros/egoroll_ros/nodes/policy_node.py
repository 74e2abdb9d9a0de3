"""policy_node node (not implemented yet)."""

import sys


def main(args: list[str] | None = None) -> int:
    """Entry point of the ``policy_node``  console script."""
    print('policy_node: not implemented yet', file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main())
