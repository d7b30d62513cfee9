"""Typed values the loop passes around: tool requests, tool events, chat results, responses.

All are frozen. Conversation messages themselves stay Ollama-shaped dicts
(``{"role": "user", "content": "..."}``) because that is what callers hold and what the
transports translate from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from rune.errors import ProtocolError
from rune.limits import shape_problem

#: where a call came from; "rune": a check the loop ran itself (``rune.tools.spec.AutoCheck``)
ToolSource = Literal[
    "ollama-native", "openai-native", "text-fallback", "constrained", "blocks", "rune"
]
ToolStatus = Literal["done", "failed", "denied", "pending_approval", "rejected"]
#: how a run ended (:attr:`OperatorResponse.outcome`)
Outcome = Literal["done", "incomplete", "paused", "limit", "failed"]
Message = dict[str, Any]


class FrozenDict(dict[str, Any]):
    """A dict that refuses mutation; still a dict, so ``json.dumps`` takes it as is."""

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("FrozenDict is immutable")

    __setitem__ = __delitem__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse
    __ior__ = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(canonical_json(self))


_SCALARS = (str, int, float, bool, type(None))


def freeze(value: Any) -> Any:
    """Deep-freeze JSON-like data: dicts become FrozenDict, lists become tuples."""
    # Exact-type checks first: this runs on every tool call, and ABC checks are slow.
    if type(value) in _SCALARS or type(value) is FrozenDict:
        return value
    if isinstance(value, Mapping):
        return FrozenDict({str(k): freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The inverse of :func:`freeze`: plain dicts and lists, safe to hand to anyone."""
    if type(value) in _SCALARS:
        return value
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    return value


def canonical_json(value: Any) -> str:
    """The one canonical form used for dedup, the breaker and approval seals."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def leading_system(messages: Sequence[Mapping[str, Any]]) -> int:
    """How many system messages lead the list (the caller's, then the runtime's own)."""
    at = 0
    while at < len(messages) and messages[at].get("role") == "system":
        at += 1
    return at


def message_chars(message: Mapping[str, Any]) -> int:
    """The characters a message puts in a prompt: content, thinking and tool calls as JSON.
    What the context budget and the truncation check estimate tokens from."""
    chars = len(str(message.get("content") or "")) + len(str(message.get("thinking") or ""))
    if message.get("tool_calls"):
        chars += len(json.dumps(thaw(message["tool_calls"]), ensure_ascii=False))
    return chars


def tools_chars(tools: Sequence[Mapping[str, Any]]) -> int:
    """The characters the tool schemas of a request take, as JSON."""
    return len(json.dumps([thaw(t) for t in tools], ensure_ascii=False))


@dataclass(frozen=True, slots=True)
class ToolRequest:
    """One tool call the model asked for."""

    name: str
    arguments: Mapping[str, Any]
    call_id: str | None = None
    source: ToolSource = "ollama-native"
    #: name + canonical arguments: what dedup and the circuit breaker compare
    signature: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "arguments", freeze(self.arguments))
        object.__setattr__(self, "signature", self.name + canonical_json(self.arguments))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "arguments": thaw(self.arguments),
            "call_id": self.call_id,
            "source": self.source,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ToolRequest:
        return cls(
            name=str(data["name"]),
            arguments=dict(data["arguments"]),
            call_id=data.get("call_id"),
            source=data.get("source", "ollama-native"),
        )


@dataclass(frozen=True, slots=True)
class ToolEvent:
    """What happened to one tool request. ``output`` on success, ``error`` otherwise."""

    name: str
    arguments: Mapping[str, Any]
    status: ToolStatus
    source: ToolSource
    output: str | None = None
    error: str | None = None
    call_id: str | None = None
    iteration: int = 0
    preview: str | None = None
    #: a command's exit status when it ran and exited non-zero (``rune.outcome`` names it)
    exit_code: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "arguments", freeze(self.arguments))

    @property
    def ok(self) -> bool:
        return self.status == "done"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "arguments": thaw(self.arguments),
            "status": self.status,
            "source": self.source,
            "output": self.output,
            "error": self.error,
            "call_id": self.call_id,
            "iteration": self.iteration,
            "preview": self.preview,
            "exit_code": self.exit_code,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ToolEvent:
        return cls(
            name=data["name"],
            arguments=data["arguments"],
            status=data["status"],
            source=data["source"],
            output=data.get("output"),
            error=data.get("error"),
            call_id=data.get("call_id"),
            iteration=int(data.get("iteration", 0)),
            preview=data.get("preview"),
            exit_code=None if data.get("exit_code") is None else int(data["exit_code"]),
        )


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """The human-readable view of what a paused run waits for.

    ``contained`` is set for commands; ``sensitive`` says why this change is asked for even
    under ``--yes`` (None: ``--yes`` may approve it); ``grant`` is set for a read outside the
    workspace: the tree approving it lets the session read.
    """

    name: str
    arguments: Mapping[str, Any]
    summary: str
    preview: str
    contained: bool | None = None
    sensitive: str | None = None
    grant: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "arguments", freeze(self.arguments))

    def to_json(self) -> dict[str, Any]:
        data = {
            "name": self.name,
            "arguments": thaw(self.arguments),
            "summary": self.summary,
            "preview": self.preview,
            "contained": self.contained,
            "sensitive": self.sensitive,
        }
        if self.grant is not None:
            data["grant"] = self.grant
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PendingApproval:
        return cls(
            name=str(data["name"]),
            arguments=dict(data["arguments"]),
            summary=str(data["summary"]),
            preview=str(data["preview"]),
            contained=data.get("contained"),
            sensitive=data.get("sensitive"),
            grant=None if data.get("grant") is None else str(data["grant"]),
        )


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_prompt_tokens: int | None = None
    prompt_tokens_sent_estimate: int | None = None


@dataclass(frozen=True, slots=True)
class ChatResult:
    """One assistant turn as a transport returns it, already accumulated from the stream.
    A reply over :mod:`rune.limits` raises :class:`rune.errors.ProtocolError`.

    ``message`` is Ollama-shaped: ``role``, ``content``, optional ``thinking`` and
    ``tool_calls`` (``[{"id"?, "function": {"index"?, "name", "arguments": {...}}}]``).
    """

    message: Mapping[str, Any]
    done_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    warnings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # The one door every reply comes through, whatever the transport: a shape that would
        # exhaust the stack or memory further on is refused here (rune.limits).
        problem = shape_problem(self.message)
        if problem is not None:
            raise ProtocolError(f"the model's reply is {problem}; Rune does not take it")
        object.__setattr__(self, "message", freeze(self.message))


class Pause(Protocol):
    """A run's pause as a response carries it (:class:`rune.pause.state.PendingState`, sealed)."""

    def to_json(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class OperatorResponse:
    """The result of ``run``/``approve``/``reject``: success, pause, or typed failure.

    ``pause`` is the sealed state of a run that paused for approval (a
    :class:`rune.pause.state.PendingState`); ``pending_state`` is its plain JSON (a fresh dict on
    every access). Pass either to ``approve``/``reject``: the JSON on any runtime, in any
    process.
    """

    success: bool
    text: str = ""
    error: str | None = None
    error_kind: str | None = None
    events: tuple[ToolEvent, ...] = ()
    iterations_used: int = 0
    iteration_budget: int = 0
    pending: PendingApproval | None = None
    messages: tuple[Mapping[str, Any], ...] = ()
    thinking: str = ""
    protocol: str = "native"
    warnings: tuple[str, ...] = ()
    evicted: tuple[str, ...] = ()
    pause: Pause | None = field(default=None, repr=False)
    #: on a final answer that leaves the task unfinished, why (:mod:`rune.outcome`): the last
    #: change the model asked for failed or was rejected, a command or check run after it
    #: failed, or the answer was cut off at the output token limit
    incomplete: str | None = None
    #: whether the run applied a change (a file change, or a command that ran)
    changed: bool = False

    @property
    def pending_state(self) -> dict[str, Any] | None:
        return None if self.pause is None else self.pause.to_json()

    @property
    def paused(self) -> bool:
        return self.pause is not None

    @property
    def outcome(self) -> Outcome:
        """``done``: a final answer, the last change the model asked for was made and no
        command or check after it failed (:attr:`changed` says whether anything changed);
        ``incomplete``: a final answer, but see :attr:`incomplete`; ``paused``: a change
        waits for approval; ``limit``: the iteration budget ran out; ``failed``: any other
        typed failure."""
        if self.paused or self.pending is not None:
            return "paused"
        if self.success:
            return "incomplete" if self.incomplete else "done"
        return "limit" if self.error_kind == "IterationLimit" else "failed"

    @property
    def budget_label(self) -> str:
        return f"step {self.iterations_used}/{self.iteration_budget}"

    def history(self) -> list[Message]:
        """The conversation as plain dicts, ready to extend with the next user turn."""
        return [thaw(m) for m in self.messages]
