"""One model call as a value: what the loop (and an assist) sends to ``Transport.chat``.

:class:`ChatRequest` holds everything of a call but the model's name; the protocol fills in its
part (tools, a response schema, how deltas are streamed: :mod:`rune.runtime.protocol`), the
shaper fits the messages into the window (:class:`RequestShaper`), and :meth:`ChatRequest.send`
is the one place that calls ``chat``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rune.errors import RuneError
from rune.messages import ChatResult, Message
from rune.transport.base import DeltaSink, Transport

__all__ = ["ChatRequest", "RequestShaper", "ShapedRequest", "transport_failure"]


@dataclass(frozen=True)
class ShapedRequest:
    """What one chat call sends: the messages after eviction, options such as ``num_ctx``."""

    messages: Sequence[Message]
    options: Mapping[str, Any] | None = None
    evicted: tuple[str, ...] = ()


class RequestShaper(Protocol):
    """Fits a request into the model's window (see ``rune.operator``). May raise
    :class:`rune.errors.ContextOverflow`; ``observe`` learns from the server's token counts.
    ``tools`` are the tool schemas the request sends beside the messages (the protocol says
    which: none when its prompt already holds them), so the estimate counts them once."""

    def shape(
        self,
        model: str,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] = (),
    ) -> ShapedRequest: ...

    def observe(self, shaped: ShapedRequest, result: ChatResult) -> None: ...


@dataclass(slots=True)
class ChatRequest:
    """The arguments of one ``Transport.chat`` call, but the model. A value: nothing changes
    one once built (not frozen only because a frozen dataclass is slow to build, and one is
    built for every model call)."""

    messages: Sequence[Message]
    tools: Sequence[Mapping[str, Any]] | None = None
    think: bool | None = None
    options: Mapping[str, Any] | None = None
    on_delta: DeltaSink | None = None
    response_schema: Mapping[str, Any] | None = None

    def send(self, transport: Transport, model: str) -> ChatResult:
        extra: dict[str, Any] = {}
        if self.response_schema is not None:
            # Passed only when set, so a Transport written before structured output still works.
            extra["response_schema"] = self.response_schema
        return transport.chat(
            model,
            self.messages,
            tools=self.tools,
            think=self.think,
            options=self.options,
            on_delta=self.on_delta,
            **extra,
        )

    def shaped(
        self, shaper: RequestShaper | None, model: str
    ) -> tuple[ChatRequest, ShapedRequest | None]:
        """This request with its messages and options as ``shaper`` fits them, and what the
        shaper returned (for its ``observe``); without a shaper, this request as it is."""
        if shaper is None:
            return self, None
        shaped = shaper.shape(model, self.messages, self.tools or ())
        fitted = ChatRequest(
            shaped.messages,
            self.tools,
            self.think,
            shaped.options,
            self.on_delta,
            self.response_schema,
        )
        return fitted, shaped


def transport_failure(err: Exception) -> RuneError:
    """A non-Rune exception from the transport, as the typed failure it ends the run with: its
    ``kind`` (the response's ``error_kind``) is the exception's class name."""
    failure = _ForeignFailure(f"the model transport failed: {type(err).__name__}: {err}"[:2000])
    failure.foreign_kind = type(err).__name__
    return failure


class _ForeignFailure(RuneError):
    foreign_kind = "Exception"

    @property
    def kind(self) -> str:
        return self.foreign_kind
