"""A pseudo-terminal that stands in for a board's serial port: host tools open ``port`` (with
``fpga.host.serial_link.Link`` or pyserial, at any baud: a pty has none) and a simulated or fake
board serves the other end.

``PtyServer`` owns the pty (opened raw, non-blocking on the board's end) and the pump that moves
bytes between it and a board (``pump``), for the Amaranth simulator (``tb.linksim``), the cocotb
server (``tb.board_serve``) and the Python fake board of the host tests alike.
"""

from __future__ import annotations

import os
import select
import tty
from collections.abc import Awaitable, Callable

__all__ = ["PtyServer"]

#: Bytes read from the pty at most at once.
_READ_SIZE = 4096


class PtyServer:
    """A pty: the host's end at ``port`` (a path), the board's end here (``read``, ``write``).

    Use it as a context manager or call ``close``.
    """

    def __init__(self):
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)
        os.set_blocking(self._master, False)
        #: The path host tools open.
        self.port = os.ttyname(self._slave)
        self.closed = False

    def read(self, timeout: float = 0.0) -> bytes:
        """The bytes the host has written (at most 4096), waiting up to ``timeout`` seconds for
        some; ``b""`` when there are none."""
        if not select.select([self._master], [], [], timeout)[0]:
            return b""
        try:
            return os.read(self._master, _READ_SIZE)
        except BlockingIOError:
            return b""

    def write(self, data: bytes) -> None:
        """Send ``data`` to the host (waits while the pty's buffer is full)."""
        view = memoryview(bytes(data))
        while view:
            try:
                n = os.write(self._master, view)
            except BlockingIOError:
                select.select([], [self._master], [])
                continue
            view = view[n:]

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self._master)
            os.close(self._slave)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    async def pump(self, send: Callable[[bytes], Awaitable], wait: Callable[[], Awaitable],
                   output: bytearray, stop: Callable[[], bool], *,
                   busy: Callable[[], bool] = lambda: False, idle_polls: int = 200,
                   idle_wait: float = 0.05) -> None:
        """Serve the board until ``stop()`` is true.

        Each poll: the host's bytes go to the board with ``await send(data)``, or, when there are
        none, ``await wait()`` lets the board run (simulated time); then the bytes the board has
        appended to ``output`` since the last poll go to the host. After ``idle_polls`` polls
        without traffic in either direction while ``busy()`` is false, each poll first waits
        up to ``idle_wait`` seconds of real time for the host (so that an idle simulated board
        does not burn a CPU).
        """
        if isinstance(idle_polls, bool) or not isinstance(idle_polls, int) or idle_polls < 0:
            raise ValueError(f"idle_polls must be a non-negative integer, not {idle_polls!r}")
        if isinstance(idle_wait, bool) or not isinstance(idle_wait, int | float) or idle_wait < 0:
            raise ValueError(f"idle_wait must be a non-negative number of seconds, not "
                             f"{idle_wait!r}")
        sent = idle = 0
        while not stop():
            timeout = idle_wait if idle >= idle_polls and not busy() else 0.0
            data = self.read(timeout)
            if data:
                idle = 0
                await send(data)
            else:
                idle += 1
                await wait()
            if len(output) > sent:
                self.write(output[sent:])
                sent = len(output)
                idle = 0
