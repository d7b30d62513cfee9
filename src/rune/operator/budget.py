"""The context budget: fits every request into the model's real window, or refuses it.

It is the runtime's :class:`rune.runtime.chat.RequestShaper`. Before each model call it
renders the turn's context blocks into one system message ahead of the conversation, estimates
the prompt without a tokenizer (characters / ~3.5, with a safety margin, corrected from the
prompt token counts the server reports) and, when the prompt does not fit the window minus
the tokens reserved for the answer, evicts in this order:

1. evictable context blocks, lowest bucket first;
2. tool outputs of earlier turns, oldest first, each replaced by a one-line note;

never a non-evictable block and never the current turn. What it evicted is reported once per
turn on :attr:`ShapedRequest.evicted`. A request that still does not fit raises
:class:`rune.errors.ContextOverflow`; it is never sent for the server to cut silently. Every
request carries ``options={"num_ctx": window}`` (plus the caller's options), so Ollama never
falls back to its default.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from rune.errors import ConfigError, ContextOverflow
from rune.messages import (
    ChatResult,
    Message,
    canonical_json,
    leading_system,
    message_chars,
    thaw,
    tools_chars,
)
from rune.operator.blocks import ContextBlock, render
from rune.runtime.chat import ShapedRequest
from rune.transport.base import DEFAULT_WINDOW, Transport

#: the cap on the window when the caller sets none: a bigger KV cache rarely fits a local GPU
DEFAULT_MAX_CONTEXT = 32768
CHARS_PER_TOKEN = 3.5
#: headroom while the estimate is a guess, and once the server's counts have corrected it
SAFETY_MARGIN = 1.15
CORRECTED_MARGIN = 1.05
#: role markers and separators each message costs in a chat template
MESSAGE_OVERHEAD_TOKENS = 4
#: a correction outside this range is not about the tokenizer (a cache-only count, a cut)
PLAUSIBLE_CHARS_PER_TOKEN = (1.5, 6.0)
CALL_LABEL_LIMIT = 120


def split_system(
    messages: Sequence[Mapping[str, object]],
) -> tuple[list[Message], list[Message]]:
    """The leading system messages and the rest."""
    at = leading_system(messages)
    return [dict(m) for m in messages[:at]], [dict(m) for m in messages[at:]]


def describe_tool_output(conversation: Sequence[Message], index: int) -> str:
    """``name {arguments}`` of the call a tool result answers, found from the assistant turn."""
    message = conversation[index]
    name = str(message.get("tool_name") or "tool")
    at, position = index - 1, 0
    while at >= 0 and conversation[at].get("role") != "assistant":
        position += 1
        at -= 1
    calls = list(conversation[at].get("tool_calls") or ()) if at >= 0 else []
    call_id = message.get("tool_call_id")
    chosen = next((c for c in calls if call_id and c.get("id") == call_id), None)
    if chosen is None and position < len(calls):
        chosen = calls[position]
    if chosen is not None:
        function = chosen.get("function") or {}
        name = str(function.get("name") or name)
        arguments = function.get("arguments")
        if arguments:
            text = arguments if isinstance(arguments, str) else canonical_json(thaw(arguments))
            if len(text) > CALL_LABEL_LIMIT:
                text = text[: CALL_LABEL_LIMIT - 1] + "…"
            return f"{name} {text}"
    return name


def elision_note(label: str, chars: int) -> str:
    return (
        f"[Rune elided this tool output to fit the context window: {label}, {chars:,} "
        "characters. Call the tool again if you need it.]"
    )


def cut_note(label: str, chars: int, kept: int) -> str:
    return (
        f"\n[Rune cut this tool output to fit the context window: {label}, {chars:,} "
        f"characters, of which the first {kept:,} are above. Read the rest in pieces: "
        "read_file with offset and limit (lines), or a command that prints less.]"
    )


def cut_to_fit(message: Message, label: str, excess_chars: float) -> tuple[Message, int]:
    """``message`` with its content cut by at least ``excess_chars`` (and the note's length),
    keeping its head, at a line break when there is one; and how many characters it kept."""
    content = str(message.get("content") or "")
    room = len(content) - math.ceil(excess_chars) - len(cut_note(label, len(content), 10**9))
    kept = max(room, 0)
    line_end = content.rfind("\n", 0, kept)
    if line_end > kept // 2:
        kept = line_end + 1
    text = content[:kept] + cut_note(label, len(content), kept)
    return {**message, "content": text}, kept


class ContextBudget:
    """A :class:`RequestShaper` that keeps every request inside the model's window."""

    def __init__(
        self,
        transport: Transport,
        *,
        max_context: int | None = None,
        reserve_output_tokens: int = 1024,
        tools: Sequence[Mapping[str, object]] = (),
        options: Mapping[str, object] | None = None,
    ) -> None:
        for label, value in (
            ("max_context", max_context),
            ("reserve_output_tokens", reserve_output_tokens),
        ):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigError(f"{label} must be a whole number of tokens, got {value!r}")
            if value is not None and value <= 0:
                raise ConfigError(f"{label} must be positive, got {value}")
        self.transport = transport
        self.max_context = max_context
        self.reserve_output_tokens = reserve_output_tokens
        self.options = dict(options or {})
        self._default_tools = tuple(tools)
        self._tools_chars = tools_chars(tools)
        self._counted: Sequence[Mapping[str, Any]] = self._default_tools
        self._windows: dict[str, int] = {}
        self._chars_per_token = CHARS_PER_TOKEN
        self._corrected = False
        self._blocks: tuple[ContextBlock, ...] = ()
        self._turn_starts: tuple[int, ...] = ()
        self._reported: set[str] = set()

    # --- configuration per turn ---------------------------------------------------------

    def start_turn(self, blocks: Sequence[ContextBlock], turn_starts: Sequence[int]) -> None:
        """The turn's blocks (computed once per turn) and where each user turn starts in the
        conversation (indices without the leading system messages); the last is current."""
        self._blocks = tuple(blocks)
        self._turn_starts = tuple(turn_starts)
        self._reported = set()

    @property
    def chars_per_token(self) -> float:
        return self._chars_per_token

    def window(self, model: str) -> int:
        """The model's window: what discovery reports, capped by ``max_context``."""
        if model not in self._windows:
            cap = self.max_context if self.max_context is not None else DEFAULT_MAX_CONTEXT
            discovered = self.transport.context_length(model)
            if discovered is None:
                discovered = self.max_context if self.max_context is not None else DEFAULT_WINDOW
            self._windows[model] = min(discovered, cap)
        return self._windows[model]

    def prompt_limit(self, model: str) -> int:
        window = self.window(model)
        limit = window - self.reserve_output_tokens
        if limit <= 0:
            raise ConfigError(
                f"reserve_output_tokens ({self.reserve_output_tokens}) leaves no room for a "
                f"prompt in the {window}-token window of {model}; lower it"
            )
        return limit

    # --- estimation ---------------------------------------------------------------------

    def _count_tools(self, tools: Sequence[Mapping[str, object]] | None) -> None:
        """The tool schemas the next estimates (and ``observe``) count: a protocol whose prompt
        holds the tools sends none beside it (counting them would count them twice)."""
        tools = self._default_tools if tools is None else tools
        if tools is not self._counted:
            self._counted = tools
            self._tools_chars = tools_chars(tools)

    def _units(self, message: Mapping[str, object]) -> float:
        return message_chars(message) / self._chars_per_token + MESSAGE_OVERHEAD_TOKENS

    def _total(self, units: float) -> int:
        margin = CORRECTED_MARGIN if self._corrected else SAFETY_MARGIN
        return math.ceil((units + self._tools_chars / self._chars_per_token) * margin)

    def estimate(self, messages: Sequence[Mapping[str, object]]) -> int:
        """Estimated prompt tokens of ``messages`` plus the tool schemas, with the margin."""
        return self._total(sum(self._units(m) for m in messages))

    # --- RequestShaper ------------------------------------------------------------------

    def shape(
        self,
        model: str,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, object]] | None = None,
    ) -> ShapedRequest:
        """``messages`` fitted into ``model``'s window, with ``tools`` (the schemas the request
        sends beside them; by default the ones this budget was built with) counted once."""
        self._count_tools(tools)
        window = self.window(model)
        limit = self.prompt_limit(model)
        lead, conversation = split_system(messages)
        current = min(self._turn_starts[-1], len(conversation)) if self._turn_starts else 0
        kept = list(self._blocks)
        evictable = sorted((b for b in kept if b.evictable), key=lambda b: b.bucket)
        starts = set(self._turn_starts)
        elidable = [
            i
            for i in range(current)
            if conversation[i].get("role") == "tool"
            or (conversation[i].get("role") == "user" and i not in starts)
        ]
        evicted: list[str] = []
        cuttable: list[int] | None = None

        def system_message() -> Message | None:
            # What is the same in every run (the blocks that never leave, then the protocol's
            # prompt) comes first, the workspace's own blocks after it: a prefix the prompt
            # cache keeps from one run to the next (rune.transport.prompt_cache).
            lasting = render([b for b in kept if not b.evictable])
            workspace = render([b for b in kept if b.evictable])
            protocol = [str(m.get("content") or "") for m in lead]
            text = "\n\n".join(part for part in [lasting, *protocol, workspace] if part)
            return {"role": "system", "content": text} if text else None

        system = system_message()
        body = sum(self._units(m) for m in conversation)
        total = self._total(body + (self._units(system) if system else 0))
        while total > limit:
            if evictable:
                block = evictable.pop(0)
                kept.remove(block)
                evicted.append(block.label)
                system = system_message()
            elif elidable:
                index = elidable.pop(0)
                original = conversation[index]
                label = describe_tool_output(conversation, index)
                chars = len(str(original.get("content") or ""))
                replaced = {**original, "content": elision_note(label, chars)}
                body += self._units(replaced) - self._units(original)
                conversation[index] = replaced
                turn = sum(1 for s in self._turn_starts if s <= index)
                evicted.append(f"{label} output ({chars:,} chars, turn {turn})")
            elif cuttable is None or cuttable:
                if cuttable is None:
                    # Last resort: this turn's own tool results, the largest first, cut to fit
                    # with a note on how to read the rest in pieces.
                    cuttable = self._results_of_turn(conversation, current, starts)
                if not cuttable:
                    continue
                index = cuttable.pop(0)
                original = conversation[index]
                excess = (total - limit) / (CORRECTED_MARGIN if self._corrected else SAFETY_MARGIN)
                replaced, kept_chars = cut_to_fit(
                    original,
                    describe_tool_output(conversation, index),
                    excess * self._chars_per_token,
                )
                body += self._units(replaced) - self._units(original)
                conversation[index] = replaced
                chars = len(str(original.get("content") or ""))
                label = describe_tool_output(conversation, index)
                evicted.append(f"{label} output cut to {kept_chars:,} of {chars:,} chars")
            else:
                raise ContextOverflow(
                    f"the request needs about {total} tokens but {model}'s {window}-token window "
                    f"leaves {limit} for the prompt ({self.reserve_output_tokens} are kept for "
                    "the answer), even with every evictable block and earlier tool output "
                    "dropped: the current turn alone is too large. Ask for less at once, "
                    "start a new session, or raise max_context if the model allows more."
                )
            total = self._total(body + (self._units(system) if system else 0))
        fresh = tuple(e for e in evicted if e not in self._reported)
        self._reported.update(fresh)
        shaped = [system, *conversation] if system else conversation
        return ShapedRequest(shaped, {**self.options, "num_ctx": window}, fresh)

    @staticmethod
    def _results_of_turn(
        conversation: Sequence[Message], current: int, starts: set[int]
    ) -> list[int]:
        """The current turn's tool results (also those sent back as user text), largest first."""
        found = [
            i
            for i in range(current, len(conversation))
            if conversation[i].get("role") == "tool"
            or (conversation[i].get("role") == "user" and i not in starts)
        ]
        return sorted(found, key=lambda i: -len(str(conversation[i].get("content") or "")))

    def observe(self, shaped: ShapedRequest, result: ChatResult) -> None:
        """Learn characters per token from the prompt size the server reports."""
        reported = result.usage.prompt_tokens
        if not reported:
            return
        chars = sum(message_chars(m) for m in shaped.messages) + self._tools_chars
        content_tokens = reported - MESSAGE_OVERHEAD_TOKENS * len(shaped.messages)
        if content_tokens <= 0 or chars <= 0:
            return
        measured = chars / content_tokens
        low, high = PLAUSIBLE_CHARS_PER_TOKEN
        if low <= measured <= high:
            self._chars_per_token = measured
            self._corrected = True
