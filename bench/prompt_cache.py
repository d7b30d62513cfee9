"""Prompt-cache and eviction figures for RuneOperator.

1. Against a real llama.cpp server (``RUNE_LIVE_BASE_URL``, else the embedded one with the
   demo model and Rune's tool-capable template): one multi-iteration turn through
   RuneOperator and OpenAICompatTransport. Every request goes to the real server, which really
   prefills the prompt and reports ``timings.cache_n``/``prompt_n`` (as ``Usage``). A 135M model
   does not call tools on its own, so the *reply* of iterations 1..n-1 is replaced by a scripted
   tool call after the server answered; the prompt of the next iteration is Rune's real prompt.
   Printed: for iterations 2..n, the share of prompt tokens served from the cache (target ≥ 90%).
2. Eviction on a synthetic long conversation (no server): what the budget drops, and how fast.

usage: .venv/bin/python bench/prompt_cache.py [--iterations N]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rune.messages import ChatResult
from rune.models.embedded import DEMO_INSTALL_HINT, EmbeddedLlamaServer, demo_model_path
from rune.operator import ContextBlock, ContextBudget, RuneOperator
from rune.tools.executor import ToolExecutor
from rune.tools.sandbox import SandboxPolicy
from rune.transport.base import Transport
from rune.transport.openai_compat import OpenAICompatTransport
from rune.transport.scripted import ScriptedTransport


class ScriptedReplies:
    """The real server answers every request; its reply is then swapped for the next scripted
    tool call, so the loop goes on. Records each call's usage (cache_n, total prompt)."""

    def __init__(self, inner: Transport, replies: Sequence[Mapping[str, Any]]) -> None:
        self.inner = inner
        self.native_source = inner.native_source
        self.replies = list(replies)
        self.usages: list[Any] = []

    def supports_tools(self, model: str) -> bool:
        return True

    def supports_thinking(self, model: str) -> bool:
        return False

    def context_length(self, model: str) -> int | None:
        return self.inner.context_length(model)

    def chat(self, model: str, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> ChatResult:
        real = self.inner.chat(model, messages, **kwargs)
        self.usages.append(real.usage)
        if not self.replies:
            return real
        reply = self.replies.pop(0)
        return ChatResult({"role": "assistant", "content": "", **reply}, "stop", real.usage)


@contextlib.contextmanager
def model_server() -> Iterator[str]:
    """``RUNE_LIVE_BASE_URL`` if set, else the embedded llama.cpp server with the demo model."""
    base = os.environ.get("RUNE_LIVE_BASE_URL")
    if base:
        yield base
        return
    model = demo_model_path()
    if model is None:
        raise SystemExit(f"no model server: set RUNE_LIVE_BASE_URL or {DEMO_INSTALL_HINT}")
    with EmbeddedLlamaServer(model, chat_template="qwen25-tools") as server:
        yield server.base_url


def cache_figures(base_url: str, iterations: int) -> list[float]:
    workspace = Path(tempfile.mkdtemp(prefix="rune-bench-"))
    for n in range(iterations):
        (workspace / f"part{n}.py").write_text(
            "".join(f"def f{n}_{i}(x):\n    return x + {i}\n" for i in range(6))
        )
    (workspace / "AGENTS.md").write_text("Keep functions short. Run the tests after a change.\n")
    calls = [
        {"tool_calls": [{"function": {"name": "read_file", "arguments": {"path": f"part{n}.py"}}}]}
        for n in range(iterations - 1)
    ]
    model = "smollm2"
    server = OpenAICompatTransport(base_url)
    transport = ScriptedReplies(server, calls)
    op = RuneOperator(
        transport,
        ToolExecutor(SandboxPolicy.workspace_only(workspace), workspace),
        model=model,
        max_iterations=min(iterations, 8),
        reserve_output_tokens=64,
        options={"num_predict": 32, "temperature": 0},
    )
    started = time.perf_counter()
    response = op.send("Read the part files one by one and tell me what f0_1 returns.")
    elapsed = time.perf_counter() - started
    print(f"turn: success={response.success} {response.budget_label} in {elapsed:.1f}s")
    print(
        f"window {op.budget.window(model)} tokens; "
        f"chars/token learned {op.budget.chars_per_token:.2f}"
    )
    shares: list[float] = []
    previous = 0
    for n, usage in enumerate(transport.usages, start=1):
        total, cached = usage.prompt_tokens or 0, usage.cached_prompt_tokens or 0
        share = cached / total if total else 0.0
        if n > 1:
            shares.append(share)
        # cached ≥ the previous prompt means the whole earlier prompt was reused as a prefix
        reuse = f", {cached / previous:6.1%} of the previous prompt" if previous else ""
        print(
            f"  iteration {n}: prompt {total:5d} tokens, from cache {cached:5d} "
            f"({share:6.1%} of this prompt{reuse})"
        )
        previous = total
    if shares:
        print(
            f"iterations 2..{len(transport.usages)}: min {min(shares):.1%}, "
            f"mean {sum(shares) / len(shares):.1%} of prompt tokens from the cache (target ≥ 90%)"
        )
    return shares


def eviction_figures(turns: int = 60, output_chars: int = 6000, window: int = 8192) -> None:
    budget = ContextBudget(ScriptedTransport([], context_length=window), reserve_output_tokens=1024)
    messages: list[dict[str, Any]] = []
    starts: list[int] = []
    for turn in range(turns):
        starts.append(len(messages))
        path = f"file{turn}.py"
        messages += [
            {"role": "user", "content": f"What does {path} do?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "read_file", "arguments": {"path": path}}}],
            },
            {"role": "tool", "tool_name": "read_file", "content": "x = 1\n" * (output_chars // 6)},
            {"role": "assistant", "content": f"{path} sets x to 1 many times."},
        ]
    starts.append(len(messages))
    messages.append({"role": "user", "content": "Which file was the longest?"})
    blocks = [
        ContextBlock("system", "You are Rune.", 100, evictable=False),
        ContextBlock("tools", "Tools: read_file, write_file", 90, evictable=False),
        ContextBlock("environment", "Workspace: /w\n" * 20, 70, evictable=True),
        ContextBlock("project", "Project rules.\n" * 200, 50, evictable=True),
    ]
    budget.start_turn(blocks, starts)
    unshaped = budget.estimate(messages)
    started = time.perf_counter()
    shaped = budget.shape("m", messages)
    took = time.perf_counter() - started
    kept = budget.estimate(shaped.messages)
    outputs = sum(1 for e in shaped.evicted if " output " in e)
    print(
        f"eviction: {turns} turns, {len(messages)} messages, ~{unshaped} tokens unshaped → "
        f"~{kept} tokens sent into a {window}-token window ({window - 1024} for the prompt); "
        f"evicted {len(shaped.evicted) - outputs} blocks and {outputs} of {turns} tool outputs "
        f"in {took * 1000:.1f} ms"
    )
    print(f"  first evicted: {shaped.evicted[:3]}")
    print(f"  last evicted: {shaped.evicted[-1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=6)
    args = parser.parse_args()
    eviction_figures()
    with model_server() as base_url:
        cache_figures(base_url, args.iterations)


if __name__ == "__main__":
    main()
