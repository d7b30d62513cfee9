"""A reply that repeats itself is stopped where the repetition shows, not at the output cap.

Small models under greedy decoding fall into loops: the same line, the same few characters,
or whitespace, again and again until the reply reaches its token cap. On two cores a
1,024-token reply takes about two minutes, and what it holds cannot be used. So
:class:`RepetitionGuard` reads the reply as it streams and, once its end is one piece of text
repeated (at least :data:`MIN_COPIES` copies over at least :data:`MIN_SPAN` characters, numbers
aside: a loop that counts is a loop too), it stops reading. Closing the stream ends the
request, which stops the server's generation (llama-server and Ollama stop a request whose
client went away). The turn it returns is cut off, like a reply that hit the output cap
(``done_reason`` ``"length"``): never an answer, and the loop sends it back as unusable, with
a warning that says why it was cut.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from rune.events import TextDelta, ThinkingDelta
from rune.messages import ChatResult
from rune.transport.base import DeltaSink, Transport, TransportWrapper

#: a repeated piece longer than this is not looked for (a function written out twice is not
#: the loop this guard is for, and longer periods cost more to look for)
MAX_PERIOD = 200
MIN_COPIES = 4
MIN_SPAN = 240
#: the end of the reply that is looked at, and how often (in characters)
WINDOW = MAX_PERIOD * MIN_COPIES
CHECK_EVERY = 16
#: how the warning of a reply stopped here begins
REPEATED = "the model's reply repeated itself"
_NUMBER = re.compile(r"\d+")


def repeating_tail(text: str) -> int | None:
    """The length of the piece that ``text`` ends by repeating (at least :data:`MIN_COPIES`
    times, over at least :data:`MIN_SPAN` characters), or None."""
    for period in range(1, MAX_PERIOD + 1):
        span = max(MIN_SPAN, MIN_COPIES * period)
        if span > len(text):
            break
        # The last ``span`` characters have period ``period`` when they equal themselves
        # shifted by it.
        if text[len(text) - span + period :] == text[len(text) - span : len(text) - period]:
            return period
    return None


def same_shape(text: str) -> str:
    """``text`` with every number written as 0: a loop that counts (``14: "th",``, then
    ``15: "th",`` and on: the 1.5B wrote 991 tokens of it) repeats itself in this shape."""
    return _NUMBER.sub("0", text)


class _Repeated(Exception):
    def __init__(self, period: int) -> None:
        super().__init__(period)
        self.period = period


class _Watch:
    """The delta sink that sees the reply grow and stops it when it repeats itself."""

    def __init__(self, sink: DeltaSink | None) -> None:
        self.sink = sink
        self.text = ""
        self.thinking = ""
        self._checked = 0

    def __call__(self, delta: TextDelta | ThinkingDelta) -> None:
        if isinstance(delta, ThinkingDelta):
            self.thinking += delta.text
        else:
            self.text += delta.text
        if self.sink is not None:
            self.sink(delta)
        grown = len(self.text) + len(self.thinking)
        if grown - self._checked >= CHECK_EVERY:
            self._checked = grown
            for stream in (self.text, self.thinking):
                period = repeating_tail(same_shape(stream[-WINDOW:]))
                if period is not None:
                    raise _Repeated(period)


class RepetitionGuard(TransportWrapper):
    """A :class:`Transport` around ``inner`` whose replies stop when they repeat themselves."""

    def __init__(self, inner: Transport) -> None:
        super().__init__(inner)

    def chat(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        on_delta: DeltaSink | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        watch = _Watch(on_delta)
        try:
            return self.inner.chat(model, messages, on_delta=watch, **kwargs)
        except _Repeated as repeated:
            message: dict[str, Any] = {"role": "assistant", "content": watch.text}
            if watch.thinking:
                message["thinking"] = watch.thinking
            size = len(watch.text) + len(watch.thinking)
            warning = (
                f"{REPEATED} (the same {repeated.period} characters "
                f"over and over); Rune stopped it after {size} characters: it is cut off"
            )
            return ChatResult(message=message, done_reason="length", warnings=(warning,))
