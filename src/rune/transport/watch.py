"""A transport the edges can watch and stop: what the model call in flight has done so far,
what each call cost, and a way to stop it from another thread.

:class:`WatchedTransport` wraps any :class:`rune.transport.base.Transport` (the composition root
puts it around the one it built). While a call runs, :meth:`WatchedTransport.progress` says
since when and how many pieces the model streamed (every delta counts, also the JSON of a
constrained turn that nobody sees), so a status line can move while nothing is printed. When a
call returns it emits :class:`rune.events.ModelCallFinished` with its time and tokens.

Stopping: in the main thread Ctrl-C already interrupts a blocking read. A call made from another
thread (the TUI's) runs in a helper thread instead, so :meth:`WatchedTransport.stop` can end the
wait at once by raising :class:`rune.errors.CallCancelled` in the caller; the abandoned request
closes its connection at the next piece the server sends (which stops the server's generation),
or ends with the read timeout, in a daemon thread that never holds up the exit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rune import events as ev
from rune.errors import CallCancelled
from rune.messages import ChatResult
from rune.transport.base import DeltaSink, Transport, TransportWrapper

#: how often a waiting caller looks at the stop flag (seconds)
POLL_SECONDS = 0.05


@dataclass(frozen=True, slots=True)
class Progress:
    """The model call in flight: seconds since it started, pieces streamed so far."""

    seconds: float
    tokens: int


class _Call:
    def __init__(self) -> None:
        self.started = time.monotonic()
        self.tokens = 0
        self.cancelled = threading.Event()


class WatchedTransport(TransportWrapper):
    """A :class:`Transport` around ``inner`` that reports progress and can be stopped."""

    def __init__(self, inner: Transport, on_event: ev.EventSink = ev.ignore) -> None:
        super().__init__(inner)
        self.on_event = on_event
        self._call: _Call | None = None
        self._stop = threading.Event()

    # --- the Transport protocol --------------------------------------------------------------

    def chat(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        on_delta: DeltaSink | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self._stop.is_set():
            raise CallCancelled("stopped before the model call")
        call = _Call()
        self._call = call

        def counted(delta: ev.TextDelta | ev.ThinkingDelta) -> None:
            if call.cancelled.is_set():
                raise CallCancelled("the model call was stopped")
            call.tokens += 1
            if on_delta is not None:
                on_delta(delta)

        try:
            if threading.current_thread() is threading.main_thread():
                result = self.inner.chat(model, messages, on_delta=counted, **kwargs)
            else:
                result = self._in_helper(call, model, messages, counted, kwargs)
        finally:
            if self._call is call:
                self._call = None
        seconds = time.monotonic() - call.started
        usage = result.usage
        tokens = usage.completion_tokens if usage.completion_tokens else call.tokens
        self.on_event(ev.ModelCallFinished(seconds, tokens, usage.prompt_tokens))
        return result

    def _in_helper(
        self,
        call: _Call,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        on_delta: DeltaSink,
        kwargs: Mapping[str, Any],
    ) -> ChatResult:
        outcome: list[Any] = []
        done = threading.Event()

        def work() -> None:
            try:
                outcome.append(self.inner.chat(model, messages, on_delta=on_delta, **kwargs))
            except BaseException as err:  # handed to the caller, whatever it is
                outcome.append(err)
            finally:
                done.set()

        helper = threading.Thread(target=work, name="rune-model-call", daemon=True)
        helper.start()
        while not done.wait(POLL_SECONDS):
            if call.cancelled.is_set():
                raise CallCancelled("the model call was stopped")
        value = outcome[0]
        if isinstance(value, BaseException):
            raise value
        result: ChatResult = value
        return result

    # --- watching and stopping ---------------------------------------------------------------

    def progress(self) -> Progress | None:
        """The call in flight, or None between calls."""
        call = self._call
        if call is None:
            return None
        return Progress(time.monotonic() - call.started, call.tokens)

    def stop(self) -> None:
        """Stop the call in flight, and any call started until :meth:`allow` (a tool running
        now finishes first: its result is kept, then no model call follows)."""
        self._stop.set()
        call = self._call
        if call is not None:
            call.cancelled.set()

    def allow(self) -> None:
        """Let model calls run again after :meth:`stop`."""
        self._stop.clear()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()
