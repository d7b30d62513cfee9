"""A real pseudo-terminal around a child process: what a user at a terminal sees and types.

The child gets the pty as its controlling terminal, so ``\\x03`` written to it is a real Ctrl-C
(SIGINT from the line discipline), and ``isatty()`` is true on its three descriptors.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.fakes.cli import sigint_as_in_the_foreground


def _take_terminal() -> None:
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    sigint_as_in_the_foreground()


class Terminal:
    """``argv`` running on a pty of ``columns`` x ``rows``; :attr:`output` is all it wrote."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        columns: int = 120,
        rows: int = 30,
    ) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        self.process = subprocess.Popen(
            list(argv),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=dict(env),
            cwd=cwd,
            preexec_fn=_take_terminal,  # setsid, the controlling tty, SIGINT as for a terminal job
            close_fds=True,
        )
        os.close(slave)
        self.master = master
        self.raw = bytearray()

    @property
    def output(self) -> str:
        return self.raw.decode("utf-8", "replace")

    def _read(self, timeout: float) -> bool:
        """Read what is there (waiting up to ``timeout``); False at the end of the output."""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the child closed its side
            return False
        if not data:
            return False
        self.raw.extend(data)
        return True

    def expect(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        """Read until ``pattern`` (a regex) shows in the output; AssertionError on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(pattern, self.output)
            if found is not None:
                return found
            left = deadline - time.monotonic()
            assert left > 0, f"{pattern!r} never showed; the terminal shows:\n{self.output}"
            if not self._read(min(left, 0.2)):
                found = re.search(pattern, self.output)
                assert found is not None, f"{pattern!r} never showed:\n{self.output}"
                return found

    def send(self, data: str) -> None:
        os.write(self.master, data.encode("utf-8"))

    def wait(self, timeout: float = 60) -> int:
        """Read to the end of the output and return the exit status."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._read(0.2):
            if self.process.poll() is not None and not select.select([self.master], [], [], 0)[0]:
                break
        try:
            return self.process.wait(timeout=max(deadline - time.monotonic(), 1))
        except subprocess.TimeoutExpired:
            raise AssertionError(f"it never exited; the terminal shows:\n{self.output}") from None

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        with contextlib.suppress(OSError):
            os.close(self.master)
