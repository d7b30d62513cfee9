"""A stop request an edge can make for the work running in one thread.

The loop runs tools in the thread that drives the operator. An edge that drives it from a
worker thread (``rune acp``, where an editor may cancel a turn at any time) wraps the call in
:func:`stoppable` with an event it sets from elsewhere; a command running in that thread polls
:func:`stop_requested` and, when it turns true, is killed with everything it started. The flag
lives in a context variable, so stopping one editor session never touches another's command.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_FLAG: ContextVar[threading.Event | None] = ContextVar("rune_stop", default=None)


@contextmanager
def stoppable(flag: threading.Event) -> Iterator[None]:
    """Within this block, setting ``flag`` (from any thread) stops the running command."""
    token = _FLAG.set(flag)
    try:
        yield
    finally:
        _FLAG.reset(token)


def stop_requested() -> bool:
    flag = _FLAG.get()
    return flag is not None and flag.is_set()
