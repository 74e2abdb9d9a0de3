#!/usr/bin/env python3
"""Write a distro environment's lock file (tools/distros/*.lock) from a venv with one clean
install of its packages. Run with that venv's interpreter:

    /tmp/v/bin/python tools/lock_distro.py 'HEADER LINE' > tools/distros/jazzy.lock

Pins every distribution pip installed (``name==version``); the metadata directories some ROS
wheels carry inside them (``rclpy``, ``action_msgs``: not installable on their own) are left
out, since pip did not install them. A distribution pip installed from an sdist by the legacy
``setup.py install`` path (pip < 23.1 without ``wheel``: EmPy on Python 3.10) has no INSTALLER
file but an ``installed-files.txt``; it is pinned too.

humble.lock was made in a Python 3.10 venv in two steps: ``pip install`` of jazzy.lock's
``ros-jazzy-*`` names, ``ros-jazzy-rclpy[fastrtps]``, numpy==1.21.5,
opencv-python-headless==4.5.5.64, PyYAML==6.0.1, rosbags, rosbags-image, ruckig, colcon and the
test tools (hypothesis==6.168.5); then ``pip install --no-deps -r requirements-robot-nodeps.txt``.
"""

from __future__ import annotations

from importlib.metadata import distributions
import sys


def main(argv: list[str]) -> int:
    pins = {f"{d.metadata['Name']}=={d.version}" for d in distributions()
            if ((d.read_text('INSTALLER') or '').strip() == 'pip'
                or d.read_text('installed-files.txt') is not None)
            and d.metadata['Name'] not in ('pip',)}
    for line in argv:
        print(f'# {line}')
    print(f'# Python {sys.version_info[0]}.{sys.version_info[1]}; written by '
          'tools/lock_distro.py; install with pip install --no-deps -r THIS_FILE')
    print('\n'.join(sorted(pins, key=str.lower)))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
