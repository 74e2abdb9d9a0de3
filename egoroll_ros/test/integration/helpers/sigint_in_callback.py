"""A test peer: a node whose timer callback sends its own process SIGINT and then keeps
working for a while, to show whether Ctrl-C can interrupt a callback half-way.

Prints ``interrupted inside the callback`` if a KeyboardInterrupt landed in the callback,
``callback completed`` if the callback ran to its end. Not installed.
"""

import os
import signal
import sys
import time

from rclpy.node import Node

from egoroll_ros.ros.runner import run_node


class SigintInCallback(Node):
    def __init__(self) -> None:
        super().__init__('sigint_in_callback')
        self.timer = self.create_timer(0.05, self.work)

    def work(self) -> None:
        self.timer.cancel()
        try:
            os.kill(os.getpid(), signal.SIGINT)
            end = time.monotonic() + 0.3
            while time.monotonic() < end:    # Python bytecode: where a handler's raise lands
                pass
        except KeyboardInterrupt:
            print('interrupted inside the callback', flush=True)
            raise
        print('callback completed', flush=True)


if __name__ == '__main__':
    sys.exit(run_node(SigintInCallback, num_threads=1))
