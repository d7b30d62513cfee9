"""The task suites, fixed (or not) by a real model through Rune.

``--suite`` picks what to run (``bench/task_suites.py`` defines them): ``bugs`` (the default:
the 16 small bugs of ``bench/tasks/``), ``algo`` (one-line bugs in textbook algorithms, a hidden
check), ``spec`` (functions written from a docstring, checked by the test file beside the stub),
``repo`` (one-line bugs planted in pinned PyPI libraries, checked by the library's own test
file), or ``all``. A task's check runs in a fresh interpreter after the run; test files the
workspace held must be unchanged for a task to count as fixed.

Every task runs as ``rune run --yes --yes TASK`` does, through the code ``rune check-model``
runs its few tasks with (:func:`rune.app.model_check.run_task`): the same composition root
(``rune.app.build_operator``: sandboxed tools, the model's generation defaults, the protocol
``auto`` picks for the embedded backend), file edits and contained commands approved. One
model server serves the whole run, as a running llama-server or Ollama would; the time to
load the model is printed once, apart from the per-task times. Per suite it reports: fixed,
false ``done`` (the run ended done, exit 0, while the check fails), median seconds, model
calls and prompt tokens.

usage: .venv/bin/python bench/tasks.py --model qwen2.5-coder:1.5b [--suite bugs|algo|spec|repo|all]
           [--protocol constrained] [--tasks 0*] [--runs 3] [--base-url http://127.0.0.1:8080]
           [--json results.json]

Sampling: ``--option temperature=0.7 --option top_k=20`` sets generation options over the
catalogue model's (greedy by default); with ``--runs K --seed-per-run`` each run samples with
its own seed, and the summary says in how many tasks at least one run fixed it (pass@K; with
``--first-reply``, of the first reply alone).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from rune import events as ev
from rune.app import BackendChoice, EmbeddedBackend, OpenAIBackend, auto_approves
from rune.app.model_check import Runnable
from rune.app.model_check import run_task as shared_run_task
from rune.assists import ASSIST_NAMES
from rune.models.catalog import find, pulled_path
from rune.models.embedded import EmbeddedLlamaServer
from rune.tools.builtin import BUILTIN_TOOLS
from rune.transport.openai_compat import OpenAICompatTransport
from rune.transport.prompt_cache import SlotCache
from task_suites import (
    SUITE_NAMES,
    TASKS,
    Row,
    Task,
    changed_test_files,
    check,
    digest_of_tests,
    load_suite,
    selected,
    summary,
)

__all__ = ["TASKS", "Outcome", "check", "run_task"]


class FreshStart(OpenAICompatTransport):
    """The suite's shared server, made to answer each task's first call as a server started
    for that task would (as `rune run` starts one): with no prompt cache from the task before,
    whose reuse changes the numerics enough to flip greedy decoding now and then. On the
    embedded server (unless ``--no-prompt-cache``) each task starts instead as ``rune run``
    starts it, from the saved prompt cache
    (:class:`rune.transport.prompt_cache.SlotCache`), and this class only passes calls on."""

    fresh = True

    def chat(self, model: str, messages: Any, **kwargs: Any) -> Any:
        if self.fresh:
            self.fresh = False
            kwargs["options"] = {**(kwargs.get("options") or {}), "cache_prompt": False}
        return super().chat(model, messages, **kwargs)


@dataclass
class Outcome:
    suite: str
    task: str
    fixed: bool
    exit0: bool
    """The run ended done, as ``rune run`` exits 0."""
    steps: int
    seconds: float
    ended: str
    calls: int
    prompt_tokens: int
    tests_changed: list[str]
    tools: list[str]
    replies: list[str]
    messages: list[dict[str, Any]]
    """The conversation the model saw (``--json`` keeps it, to read a run back)."""
    assist_calls: list[str]
    """The assist behind each model call Rune's help made (``repair``, ``reask``), in order."""
    call_seconds: list[float]
    """How long each model call took, in order."""

    def row(self) -> Row:
        return Row(self.fixed, self.exit0, self.seconds, self.calls, self.prompt_tokens)


def run_task(task: Task, args: argparse.Namespace, transport: FreshStart, model: str,
             choice: BackendChoice, slots: tuple[Path, str] | None,
             run: int = 1) -> Outcome:  # fmt: skip
    """``task`` run as ``rune run --yes --yes`` runs it (:func:`rune.app.model_check.run_task`),
    with what the suites report besides: model calls, prompt tokens, test files changed."""
    calls: list[int] = []
    call_seconds: list[float] = []
    assist_calls: list[str] = []
    tests_before: dict[str, str] = {}
    changed: list[str] = []

    def note(event: ev.LoopEvent) -> None:
        if isinstance(event, ev.ModelCallFinished):
            calls.append(event.prompt_tokens or 0)
            call_seconds.append(round(event.seconds, 1))
        if isinstance(event, ev.AssistModelCall):
            assist_calls.append(event.assist)
        if args.verbose and isinstance(event, ev.ToolStarted):
            call = json.dumps(dict(event.request.arguments), ensure_ascii=False)
            print(f"      > {event.request.name} {call[:300]}", flush=True)
        if args.verbose and isinstance(event, ev.ModelCallFinished):
            print(
                f"      model {event.seconds:.1f} s, prompt {event.prompt_tokens} tokens, "
                f"wrote {event.tokens}",
                flush=True,
            )
        if args.verbose and isinstance(event, ev.ToolFinished) and event.event.error:
            print(f"      ! {event.event.name}: {event.event.error[:160]}", flush=True)

    def write(workspace: Path) -> None:
        task.prepare(workspace)
        tests_before.update(digest_of_tests(workspace))

    def judge(workspace: Path) -> bool:
        changed.extend(changed_test_files(tests_before, workspace))
        return task.check(workspace) and not changed

    def ablate(operator: Any) -> None:
        if args.without_files:
            # Ablation: no files in the context up front.
            operator.contributors.remove(operator._contributor_files)

    transport.fresh = slots is None
    wrapped: Any = transport if slots is None else SlotCache(transport, transport.root, *slots)
    offered = [t for t in BUILTIN_TOOLS if t.spec.name not in args.without]
    flags: dict[str, Any] = {"approval": args.approval, "protocol": args.protocol}
    if args.seed_per_run:
        flags["seed"] = run
    without_assists = set(args.without_assist)
    if args.first_reply:
        # a fast proxy for prompt and format changes: minutes a suite instead of an hour
        flags |= {"max_iterations": 1, "max_budgets": 1}
        without_assists |= {"repair", "again", "reask"}
    result = shared_run_task(
        Runnable(task.name, task.request, write),
        wrapped,
        model,
        choice,
        approves=partial(auto_approves, args.approval),
        flags={k: v for k, v in flags.items() if v},
        on_event=note,
        tools=offered,
        prepare=ablate,
        judge=judge,
        without_assists=frozenset(without_assists),
        # The workspace's path is in the prompt: a fixed one makes a task run the same every
        # time at temperature 0 (with a new random one, the 1.5B flipped tasks run to run).
        scratch=Path(tempfile.gettempdir()) / "rune-bench" / task.suite / task.name,
    )
    return Outcome(
        task.suite, task.name, result.fixed, result.outcome == "done", result.steps,
        result.seconds, result.ended, len(calls), sum(calls), changed, result.tools,
        result.replies, result.messages, assist_calls, call_seconds,
    )  # fmt: skip


@contextlib.contextmanager
def server_for(
    args: argparse.Namespace,
) -> Iterator[tuple[str, str, BackendChoice, tuple[Path, str] | None]]:
    """``(base_url, model name on the server, the backend choice rune run would make, the
    prompt cache's directory and file name or None)``."""
    entry = find(args.model) if args.model else None
    if entry is not None and args.option:
        entry = replace(entry, options={**entry.options, **generation_options(args.option)})
    if args.base_url:
        choice: BackendChoice = (
            EmbeddedBackend("bench", entry.path if entry else None, entry, url=args.base_url)
            if args.as_embedded
            else OpenAIBackend("bench", args.base_url)
        )
        with OpenAICompatTransport(args.base_url) as probe:
            models = probe.list_models()
        yield args.base_url, (models[0] if models else args.model or ""), choice, None
        return
    if entry is None or pulled_path(entry) is None:
        sys.exit(f"pull the model first: rune pull {args.model}")
    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory(prefix="rune-bench-cache-") as scratch,
        EmbeddedLlamaServer(entry.path, ctx=entry.context, slot_dir=Path(scratch)) as server,
    ):
        print(f"model {entry.name} loaded in {time.perf_counter() - started:.1f} s", flush=True)
        choice = EmbeddedBackend("bench", entry.path, entry)
        # A new cache directory: the first task runs as the first run on a machine does.
        slots = None if args.no_prompt_cache else (Path(scratch), server.slot_file_name())
        yield server.base_url, server.model, choice, slots


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder:1.5b", help="a pulled catalogue model")
    parser.add_argument("--protocol", choices=("auto", "native", "text", "constrained", "blocks"))
    parser.add_argument("--suite", choices=(*SUITE_NAMES, "all"), default="bugs")
    parser.add_argument(
        "--tasks", default="*", help="globs over task names, comma-separated (default: all)"
    )
    parser.add_argument("--runs", type=int, default=1, help="run the suite this many times")
    parser.add_argument("--approval", choices=("edits", "all"), default="all")
    parser.add_argument("--base-url", help="use this running OpenAI-compatible server instead")
    parser.add_argument(
        "--as-embedded",
        action="store_true",
        help="with --base-url: choose the protocol as for the embedded backend",
    )
    parser.add_argument(
        "--without", action="append", default=[], metavar="TOOL", help="ablation: drop a tool"
    )
    parser.add_argument(
        "--without-files", action="store_true", help="ablation: no files in the context"
    )
    parser.add_argument(
        "--without-assist",
        action="append",
        default=[],
        choices=ASSIST_NAMES,
        help="ablation: leave out a small-model assist (rune.assists)",
    )
    parser.add_argument(
        "--no-prompt-cache",
        action="store_true",
        help="every task reads its whole first prompt (no saved prompt cache)",
    )
    parser.add_argument(
        "--first-reply",
        action="store_true",
        help="judge the model's first reply alone: one step, one budget, no assist's own calls",
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a generation option over the catalogue model's (temperature=0.7, top_k=20)",
    )
    parser.add_argument(
        "--seed-per-run", action="store_true", help="run N samples with seed N (for pass@K)"
    )
    parser.add_argument("--json", type=Path, help="write every outcome here")
    parser.add_argument("--verbose", "-v", action="store_true", help="print the tool calls")
    args = parser.parse_args()
    suites = {name: load_suite(name, args.tasks) for name in selected(args.suite)}
    suites = {name: tasks for name, tasks in suites.items() if tasks}
    if not suites:
        sys.exit(f"no task matches {args.tasks!r} in suite {args.suite}")
    outcomes: list[Outcome] = []
    with server_for(args) as (url, model, choice, slots), FreshStart(url) as transport:
        protocol = args.protocol or "auto"
        count = sum(len(tasks) for tasks in suites.values())
        print(f"{count} tasks x {args.runs} run(s), model {model}, protocol {protocol}")
        for run in range(1, args.runs + 1):
            for name, tasks in suites.items():
                for task in tasks:
                    outcome = run_task(task, args, transport, model, choice, slots, run)
                    outcomes.append(outcome)
                    if args.json:  # after every task: a run cut short keeps what it did
                        write_outcomes(args.json, outcomes)
                    mark = "fixed " if outcome.fixed else "FAILED"
                    changed = (
                        f"  edited {','.join(outcome.tests_changed)}"
                        if outcome.tests_changed
                        else ""
                    )
                    print(
                        f"  {name:<5} {outcome.task:<34} {mark}  steps {outcome.steps}  "
                        f"{outcome.seconds:5.1f} s  calls {outcome.calls}  "
                        f"prompt {outcome.prompt_tokens}  {outcome.ended}{changed}",
                        flush=True,
                    )
                    if args.verbose:
                        print(f"      {' '.join(outcome.tools)}")
                rows = [o.row() for o in outcomes[-len(tasks) :]] if tasks else []
                print(f"run {run}: {summary(name, rows)}", flush=True)
    if args.runs > 1:
        for name in suites:
            print(f"all runs: {summary(name, [o.row() for o in outcomes if o.suite == name])}")
            fixed = {o.task for o in outcomes if o.suite == name and o.fixed}
            print(f"  fixed in at least one of {args.runs} runs: {len(fixed)}/{len(suites[name])}"
                  f" ({', '.join(sorted(fixed))})")  # fmt: skip


def generation_options(pairs: list[str]) -> dict[str, float | int]:
    """``KEY=VALUE`` pairs as generation options (a number each)."""
    options: dict[str, float | int] = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        number = float(value)
        options[key.strip()] = int(number) if number.is_integer() and "." not in value else number
    return options


def write_outcomes(path: Path, outcomes: list[Outcome]) -> None:
    path.write_text(json.dumps([asdict(o) for o in outcomes], indent=1) + "\n")


if __name__ == "__main__":
    main()
