"""The context budget: window, estimate, eviction order, overflow, num_ctx, correction."""

from __future__ import annotations

import pytest

from rune.errors import ConfigError, ContextOverflow
from rune.messages import ChatResult, Usage
from rune.operator import ContextBlock, ContextBudget
from rune.operator.budget import CHARS_PER_TOKEN
from rune.transport.scripted import ScriptedTransport

SYSTEM = ContextBlock("system", "You are a test agent.", 100, evictable=False)
TOOLS = ContextBlock("tools", "Tools: read_file", 90, evictable=False)
ENV = ContextBlock("environment", "E" * 700, 70, evictable=True)
PROJECT = ContextBlock("project", "P" * 1400, 50, evictable=True)


def conversation(tool_output_chars: int = 3500) -> tuple[list[dict], list[int]]:
    """Two earlier turns with one big tool output each, then the current turn."""
    messages: list[dict] = []
    starts: list[int] = []
    for turn, path in enumerate(["one.txt", "two.txt"], start=1):
        starts.append(len(messages))
        messages += [
            {"role": "user", "content": f"turn {turn}: read {path}"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "read_file", "arguments": {"path": path}}}],
            },
            {"role": "tool", "tool_name": "read_file", "content": str(turn) * tool_output_chars},
            {"role": "assistant", "content": f"read {path}"},
        ]
    starts.append(len(messages))
    messages.append({"role": "user", "content": "the current question"})
    return messages, starts


def budget(window: int, **kwargs: object) -> ContextBudget:
    return ContextBudget(ScriptedTransport([], context_length=window), **kwargs)  # type: ignore[arg-type]


def test_everything_fits_in_a_big_window_and_nothing_is_evicted() -> None:
    b = budget(32768, reserve_output_tokens=512)
    messages, starts = conversation()
    b.start_turn([SYSTEM, TOOLS, ENV, PROJECT], starts)
    shaped = b.shape("m", messages)
    assert shaped.evicted == ()
    assert shaped.options == {"num_ctx": 32768}
    system = shaped.messages[0]
    assert system["role"] == "system"
    # highest bucket first: system, tools, environment, project
    assert system["content"].index("test agent") < system["content"].index("Tools:")
    assert system["content"].index("EEE") < system["content"].index("PPP")
    assert list(shaped.messages[1:]) == messages


def test_lowest_bucket_goes_first_then_oldest_tool_output() -> None:
    messages, starts = conversation()
    full = budget(100_000)
    full.start_turn([SYSTEM, TOOLS, ENV, PROJECT], starts)
    need = full.estimate(full.shape("m", messages).messages)
    project_tokens = full.estimate([{"role": "system", "content": PROJECT.text}])

    # room for everything but the project block
    b = budget(need - project_tokens // 2 + 100, reserve_output_tokens=100)
    b.start_turn([SYSTEM, TOOLS, ENV, PROJECT], starts)
    shaped = b.shape("m", messages)
    assert shaped.evicted == ("project block (bucket 50)",)
    assert "PPP" not in shaped.messages[0]["content"]
    assert "EEE" in shaped.messages[0]["content"]

    # much less room: both blocks, then the oldest tool output, but not the newer one
    b = budget(need - 1000, reserve_output_tokens=100)
    b.start_turn([SYSTEM, TOOLS, ENV, PROJECT], starts)
    shaped = b.shape("m", messages)
    assert shaped.evicted[:2] == ("project block (bucket 50)", "environment block (bucket 70)")
    assert shaped.evicted[2] == 'read_file {"path":"one.txt"} output (3,500 chars, turn 1)'
    assert len(shaped.evicted) == 3
    elided = shaped.messages[3]
    assert elided["role"] == "tool"
    assert elided["content"].startswith("[Rune elided this tool output")
    assert 'read_file {"path":"one.txt"}' in elided["content"]
    assert shaped.messages[7]["content"] == "2" * 3500  # the newer output is still there
    assert shaped.messages[0]["content"].startswith("You are a test agent.")
    assert "Tools: read_file" in shaped.messages[0]["content"]


def test_evictions_are_reported_once_per_turn() -> None:
    messages, starts = conversation()
    b = budget(2600, reserve_output_tokens=100)
    b.start_turn([SYSTEM, TOOLS, ENV, PROJECT], starts)
    first = b.shape("m", messages)
    again = b.shape("m", [*messages, {"role": "assistant", "content": "x"}])
    assert first.evicted
    assert again.evicted == ()
    b.start_turn([SYSTEM, TOOLS, ENV, PROJECT], starts)
    assert b.shape("m", messages).evicted == first.evicted


def test_the_current_turn_and_fixed_blocks_are_never_evicted() -> None:
    messages, starts = conversation()
    big_current = [*messages[:-1], {"role": "user", "content": "Q" * 20_000}]
    b = budget(4096, reserve_output_tokens=256)
    b.start_turn([SYSTEM, TOOLS, ENV, PROJECT], starts)
    with pytest.raises(ContextOverflow, match="current turn alone is too large"):
        b.shape("m", big_current)

    # current-turn tool output stays even when earlier ones are elided
    current = [
        *messages,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "read_file", "arguments": {"path": "c"}}}],
        },
        {"role": "tool", "tool_name": "read_file", "content": "C" * 3000},
    ]
    b = budget(2200, reserve_output_tokens=100)
    b.start_turn([SYSTEM, TOOLS, ENV, PROJECT], starts)
    shaped = b.shape("m", current)
    assert shaped.messages[-1]["content"] == "C" * 3000
    assert all("turn 3" not in e for e in shaped.evicted)
    assert "test agent" in shaped.messages[0]["content"]


def test_window_is_capped_by_max_context_and_defaults_when_unknown() -> None:
    assert budget(131072, max_context=8192).window("m") == 8192
    assert budget(2048, max_context=8192).window("m") == 2048
    unknown = ContextBudget(ScriptedTransport([], context_length=None))
    assert unknown.window("m") == 4096
    assert (
        ContextBudget(ScriptedTransport([], context_length=None), max_context=6000).window("m")
        == 6000
    )


def test_bad_settings_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        budget(4096, reserve_output_tokens=0)
    with pytest.raises(ConfigError):
        budget(4096, max_context="big")  # type: ignore[arg-type]
    b = budget(1024, reserve_output_tokens=1024)
    b.start_turn([SYSTEM], [0])
    with pytest.raises(ConfigError, match="leaves no room"):
        b.shape("m", [{"role": "user", "content": "hi"}])


def test_the_runtime_fallback_prompt_is_merged_into_the_one_system_message() -> None:
    b = budget(8192)
    b.start_turn([SYSTEM, TOOLS], [0])
    shaped = b.shape(
        "m",
        [{"role": "system", "content": "FALLBACK PROMPT"}, {"role": "user", "content": "hi"}],
    )
    assert [m["role"] for m in shaped.messages] == ["system", "user"]
    assert shaped.messages[0]["content"].endswith("FALLBACK PROMPT")


def test_reported_prompt_tokens_correct_the_estimate() -> None:
    b = budget(8192)
    b.start_turn([SYSTEM], [0])
    shaped = b.shape("m", [{"role": "user", "content": "word " * 700}])
    before = b.estimate(shaped.messages)
    chars = sum(len(m["content"]) for m in shaped.messages)
    # the server says the prompt was 2 characters per token: far more tokens than guessed
    reported = chars // 2 + 4 * len(shaped.messages)
    b.observe(shaped, ChatResult(message={"content": "ok"}, usage=Usage(prompt_tokens=reported)))
    assert b.chars_per_token == pytest.approx(2.0, rel=0.01)
    after = b.estimate(shaped.messages)
    assert after > before
    assert after == pytest.approx(reported * 1.05, rel=0.02)


def test_implausible_reports_do_not_correct_the_estimate() -> None:
    b = budget(8192)
    b.start_turn([SYSTEM], [0])
    shaped = b.shape("m", [{"role": "user", "content": "word " * 700}])
    # a cache-only count (a handful of tokens) says nothing about the tokenizer
    b.observe(shaped, ChatResult(message={"content": "ok"}, usage=Usage(prompt_tokens=12)))
    b.observe(shaped, ChatResult(message={"content": "ok"}, usage=Usage(prompt_tokens=None)))
    assert b.chars_per_token == CHARS_PER_TOKEN
