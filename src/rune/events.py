"""What the loop emits while it works. The CLI, the TUI, the session journal and tests all
consume the same stream (one ``on_event`` callback); nothing here blocks the loop."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rune.messages import OperatorResponse, PendingApproval, ToolEvent, ToolRequest


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    text: str


@dataclass(frozen=True, slots=True)
class IterationStarted:
    """A model call is about to be made: ``step {iteration}/{budget}``."""

    iteration: int
    budget: int


@dataclass(frozen=True, slots=True)
class FallbackPromptInjected:
    """The runtime chose a protocol of its own (``text-fallback`` or ``constrained``) instead of
    native tool calls, and put that protocol's prompt in the request."""

    model: str
    prompt: str
    protocol: str = "text-fallback"

    def describe(self) -> str:
        if self.protocol == "constrained":
            return (
                f"{self.model}: constrained protocol (each reply is one JSON object the "
                "server's grammar checks)"
            )
        if self.protocol == "blocks":
            return f"{self.model}: code-block protocol (changes as code blocks under a file's path)"
        return f"{self.model} has no native tool calling here; using the text protocol"


@dataclass(frozen=True, slots=True)
class ToolStarted:
    request: ToolRequest
    iteration: int


@dataclass(frozen=True, slots=True)
class ToolFinished:
    event: ToolEvent


@dataclass(frozen=True, slots=True)
class ApprovalRequired:
    pending: PendingApproval


@dataclass(frozen=True, slots=True)
class Warning:
    message: str


@dataclass(frozen=True, slots=True)
class ModelCallFinished:
    """A model call returned: how long it took and how many tokens the model wrote (the
    server's count when it gives one, else the streamed pieces), and the prompt's tokens."""

    seconds: float
    tokens: int
    prompt_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class AssistModelCall:
    """An assist (``rune.assists``) is about to make a model call of its own, outside the step
    count: ``assist`` names it (``repair``: drawing another change), during step
    ``iteration``."""

    assist: str
    iteration: int


@dataclass(frozen=True, slots=True)
class BudgetRenewed:
    """The last budget of turns ran out after it made a change: a fresh one starts, ``budget``
    of ``budgets`` for this task (``step 1/8 · budget 2/3``)."""

    budget: int
    budgets: int


@dataclass(frozen=True, slots=True)
class MessageAdded:
    """The loop added ``message`` to the conversation. Sent before each model call and when
    the run returns, for the messages added since: a call the loop rewrote before anyone saw
    it (a repaired change) is sent as it was kept. ``message`` is the loop's own: read it, copy
    it, never change it (the journal writes it at once). With :class:`ToolFinished`,
    :class:`TurnPaused` and :class:`TurnEnded`, enough to rebuild the session (its journal)."""

    message: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class TurnPaused:
    """The user's turn waits for approval: ``response.pending_state`` is what it goes on from."""

    response: OperatorResponse


@dataclass(frozen=True, slots=True)
class TurnEnded:
    """The user's turn ended: answered, out of budget, or failed."""

    response: OperatorResponse


LoopEvent = (
    TextDelta
    | ThinkingDelta
    | IterationStarted
    | FallbackPromptInjected
    | ToolStarted
    | ToolFinished
    | ApprovalRequired
    | Warning
    | ModelCallFinished
    | AssistModelCall
    | BudgetRenewed
    | MessageAdded
    | TurnPaused
    | TurnEnded
)
EventSink = Callable[[LoopEvent], None]


def ignore(_event: LoopEvent) -> None:
    """The default sink."""
