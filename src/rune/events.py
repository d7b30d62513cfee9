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
    """The runtime chose the text-fallback protocol and put its own prompt in the request."""

    model: str
    prompt: str


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


LoopEvent = (
    TextDelta
    | ThinkingDelta
    | IterationStarted
    | FallbackPromptInjected
    | ToolStarted
    | ToolFinished
    | ApprovalRequired
    | Warning
)
EventSink = Callable[[LoopEvent], None]


def ignore(_event: LoopEvent) -> None:
    """The default sink."""
