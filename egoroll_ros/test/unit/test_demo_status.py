"""`egoroll demo`'s live status line: redrawn in place on a terminal only; piped (CI, a systemd
journal, `| tee`) one whole line every few seconds."""

import io

from egoroll_ros.demo.run import StatusPrinter


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_line_is_redrawn_in_place():
    out = Tty()
    status = StatusPrinter(out)
    for k in range(3):
        status.show(f'line {k}', now=float(k))
    status.finish()
    assert out.getvalue() == '\rline 0\rline 1\rline 2\n'


def test_piped_it_prints_one_line_every_period_without_carriage_returns():
    out = io.StringIO()
    status = StatusPrinter(out, period=5.0)
    for k in range(41):                      # 10 s at 4 Hz
        status.show(f'line {k}', now=k * 0.25)
    status.finish()
    assert '\r' not in out.getvalue()
    assert out.getvalue().splitlines() == ['line 0', 'line 20', 'line 40']
