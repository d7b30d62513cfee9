"""The seam between the loop and a model server."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from rune.events import TextDelta, ThinkingDelta
from rune.messages import ChatResult, ToolSource

DeltaSink = Callable[[TextDelta | ThinkingDelta], None]

#: the window assumed when neither the caller nor the server says: the smallest default
#: Ollama has used since 0.6.7 (see docs/wire.md)
DEFAULT_WINDOW = 4096


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What capability discovery learned about one model (one cached call per model).

    ``context_length`` is the trained maximum; ``num_ctx`` the window the server is configured
    to use for it when it says so (Ollama ``parameters``, llama-server ``n_ctx``).
    """

    tools: bool
    thinking: bool = False
    context_length: int | None = None
    num_ctx: int | None = None


@runtime_checkable
class Transport(Protocol):
    """What ``LocalToolRuntime`` needs from a model server.

    ``chat`` takes Ollama-shaped messages and tool schemas and returns one accumulated
    assistant turn; a transport for another wire format translates both ways. Every failure
    is raised as a :class:`rune.errors.TransportError` subclass. ``response_schema`` (a JSON
    schema) asks the server to constrain the reply's content to it (structured output); the
    caller passes it only when it wants that, so a transport written before it still works.
    """

    #: the ``ToolEvent.source`` for tool calls that arrive as structured ``tool_calls``
    native_source: ToolSource

    def supports_tools(self, model: str) -> bool: ...

    def supports_thinking(self, model: str) -> bool: ...

    def context_length(self, model: str) -> int | None: ...

    def chat(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        think: bool | None = None,
        options: Mapping[str, Any] | None = None,
        on_delta: DeltaSink | None = None,
        response_schema: Mapping[str, Any] | None = None,
    ) -> ChatResult: ...


class TransportWrapper:
    """A :class:`Transport` around ``inner`` that changes how ``chat`` is made (a subclass
    defines it) and nothing else: the capabilities are the inner transport's. It is exactly a
    :class:`Transport`: what else the inner one has (``list_models``, ``close``, a scripted
    transport's ``requests``) is asked of ``inner`` itself, never forwarded unseen."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.native_source: ToolSource = inner.native_source

    def supports_tools(self, model: str) -> bool:
        return self.inner.supports_tools(model)

    def supports_thinking(self, model: str) -> bool:
        return self.inner.supports_thinking(model)

    def context_length(self, model: str) -> int | None:
        return self.inner.context_length(model)
