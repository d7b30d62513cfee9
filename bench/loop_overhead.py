"""The loop's own cost per iteration, with ScriptedTransport and a trivial read-only tool.

Prints the median per-iteration time for 8 iterations on an empty history and after 400
earlier messages, their ratio, and the process's peak RSS. Targets (issue #2): at most
100 µs per iteration, no more than 1.5x slower with the long history, peak RSS at most 30 MB.

    python bench/loop_overhead.py [--runs 2000]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any

from rune.runtime.local_tool_runtime import LocalToolRuntime
from rune.tools.spec import PreparedChange, ToolSpec
from rune.transport.scripted import ScriptedTransport

ITERATIONS = 8


class TrivialExecutor:
    """One read-only tool that does nothing: what remains is the loop's own cost."""

    _specs = (ToolSpec("ping", "answers pong", {"type": "object", "properties": {}}),)

    def specs(self) -> Sequence[ToolSpec]:
        return self._specs

    def is_mutating(self, name: str) -> bool:
        return False

    def run(self, name: str, arguments: Mapping[str, Any]) -> str:
        return "pong"

    def prepare(self, name: str, arguments: Mapping[str, Any]) -> PreparedChange:
        raise NotImplementedError

    def apply(self, change: PreparedChange) -> str:
        raise NotImplementedError


def history(length: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for n in range(length // 2):
        messages.append({"role": "user", "content": f"earlier question {n} " * 8})
        messages.append({"role": "assistant", "content": f"earlier answer {n} " * 8})
    return messages


def turns() -> list[dict[str, Any]]:
    calls = [
        {
            "content": "",
            "tool_calls": [{"id": f"c{n}", "function": {"name": "ping", "arguments": {"n": n}}}],
        }
        for n in range(ITERATIONS - 1)
    ]
    return [*calls, {"content": "done"}]


def per_iteration_us(earlier: int, runs: int) -> float:
    executor = TrivialExecutor()
    script = turns()
    messages = [*history(earlier), {"role": "user", "content": "go"}]
    samples = []
    for _ in range(runs):
        runtime = LocalToolRuntime(ScriptedTransport(script), executor, model="bench")
        start = time.perf_counter()
        response = runtime.run(messages)
        samples.append(time.perf_counter() - start)
        assert response.success and response.iterations_used == ITERATIONS
    return statistics.median(samples) / ITERATIONS * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()
    per_iteration_us(0, 50)  # warm up imports and caches
    empty = per_iteration_us(0, args.runs)
    long = per_iteration_us(400, args.runs)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"loop overhead, {ITERATIONS} iterations, median of {args.runs} runs")
    print(f"  empty history:        {empty:7.1f} us/iteration   (target <= 100)")
    print(f"  after 400 messages:   {long:7.1f} us/iteration")
    print(f"  long/empty ratio:     {long / empty:7.2f}x             (target <= 1.5)")
    print(f"  peak RSS:             {rss_mb:7.1f} MB             (target <= 30)")


if __name__ == "__main__":
    main()
