"""What the loop emits while it works. The CLI, the TUI, the session journal and tests all
consume the same stream (one ``on_event`` callback); nothing here blocks the loop."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rune.messages import PendingApproval, ToolEvent, ToolRequest


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
)
EventSink = Callable[[LoopEvent], None]


def ignore(_event: LoopEvent) -> None:
    """The default sink."""
