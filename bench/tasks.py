"""The task suite: small real bugs in Python files, fixed (or not) by a real model through Rune.

Each task in ``bench/tasks/NAME/`` has ``task.md`` (what the user types), ``workspace/`` (the
buggy project) and ``check.py`` (run in a fresh interpreter in a copy of the workspace after
the run; exit 0 means fixed). ``solution/`` holds a reference fix, used only by the tests that
keep the suite honest (each check fails on the bug and passes on the fix).

Every task runs as ``rune run --yes --yes TASK`` does, through the code ``rune check-model``
runs its few tasks with (:func:`rune.model_check.run_task`): the same composition root
(``rune.app.build_operator``: sandboxed tools, the model's generation defaults, the protocol
``auto`` picks for the embedded backend), file edits and contained commands approved. One
model server serves the whole suite, as a running llama-server or Ollama would; the time to
load the model is printed once, apart from the per-task times.

usage: .venv/bin/python bench/tasks.py --model qwen2.5-coder:1.5b [--protocol constrained]
           [--tasks 0*] [--runs 3] [--base-url http://127.0.0.1:8080] [--json results.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

from rune import events as ev
from rune.app import BackendChoice, auto_approves
from rune.catalog import find, pulled_path
from rune.embedded import EmbeddedLlamaServer
from rune.model_check import Task, TaskOutcome
from rune.model_check import check as shared_check
from rune.model_check import run_task as shared_run_task
from rune.prompt_cache import SlotCache
from rune.tools.builtin import BUILTIN_TOOLS
from rune.transport.openai_compat import OpenAICompatTransport

TASKS = Path(__file__).resolve().parent / "tasks"


class FreshStart(OpenAICompatTransport):
    """The suite's shared server, made to answer each task's first call as a server started
    for that task would (as `rune run` starts one): with no prompt cache from the task before,
    whose reuse changes the numerics enough to flip greedy decoding now and then. On the
    embedded server (unless ``--no-prompt-cache``) each task starts instead as ``rune run``
    starts it, from the saved prompt cache (:class:`rune.prompt_cache.SlotCache`), and this
    class only passes calls on."""

    fresh = True

    def chat(self, model: str, messages: Any, **kwargs: Any) -> Any:
        if self.fresh:
            self.fresh = False
            kwargs["options"] = {**(kwargs.get("options") or {}), "cache_prompt": False}
        return super().chat(model, messages, **kwargs)


def check(task: Path, workspace: Path) -> bool:
    """The task's check in a fresh interpreter (:func:`rune.model_check.check`)."""
    return shared_check(Task.from_dir(task), workspace)


def run_task(task: Path, args: argparse.Namespace, transport: FreshStart, model: str,
             choice: BackendChoice, slots: tuple[Path, str] | None) -> TaskOutcome:  # fmt: skip
    def note(event: ev.LoopEvent) -> None:
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

    def ablate(operator: Any) -> None:
        if args.without_files:
            # Ablation: no files in the context up front.
            operator.contributors.remove(operator._contributor_files)

    transport.fresh = slots is None
    wrapped: Any = transport if slots is None else SlotCache(transport, transport.root, *slots)
    offered = [t for t in BUILTIN_TOOLS if t.spec.name not in args.without]
    return shared_run_task(
        Task.from_dir(task),
        wrapped,
        model,
        choice,
        approves=partial(auto_approves, args.approval),
        flags={"approval": args.approval, "protocol": args.protocol},
        on_event=note,
        tools=offered,
        prepare=ablate,
    )


@contextlib.contextmanager
def server_for(
    args: argparse.Namespace,
) -> Iterator[tuple[str, str, BackendChoice, tuple[Path, str] | None]]:
    """``(base_url, model name on the server, the backend choice rune run would make, the
    prompt cache's directory and file name or None)``."""
    entry = find(args.model) if args.model else None
    if args.base_url:
        kind = "embedded" if args.as_embedded else "openai"
        choice = BackendChoice(kind, "bench", url=args.base_url, catalog=entry)  # type: ignore[arg-type]
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
        choice = BackendChoice("embedded", "bench", model_path=entry.path, catalog=entry)
        # A new cache directory: the first task runs as the first run on a machine does.
        slots = None if args.no_prompt_cache else (Path(scratch), server.slot_file_name())
        yield server.base_url, server.model, choice, slots


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder:1.5b", help="a pulled catalogue model")
    parser.add_argument("--protocol", choices=("auto", "native", "text", "constrained"))
    parser.add_argument("--tasks", default="*", help="glob over task names (default: all)")
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
        "--no-prompt-cache",
        action="store_true",
        help="every task reads its whole first prompt (no saved prompt cache)",
    )
    parser.add_argument("--json", type=Path, help="write every outcome here")
    parser.add_argument("--verbose", "-v", action="store_true", help="print the tool calls")
    args = parser.parse_args()
    tasks = sorted(p for p in TASKS.glob(args.tasks) if (p / "check.py").is_file())
    if not tasks:
        sys.exit(f"no task matches {args.tasks!r} in {TASKS}")
    outcomes: list[TaskOutcome] = []
    with server_for(args) as (url, model, choice, slots), FreshStart(url) as transport:
        protocol = args.protocol or "auto"
        print(f"{len(tasks)} tasks x {args.runs} run(s), model {model}, protocol {protocol}")
        for run in range(1, args.runs + 1):
            fixed = 0
            for task in tasks:
                outcome = run_task(task, args, transport, model, choice, slots)
                outcomes.append(outcome)
                fixed += outcome.fixed
                mark = "fixed " if outcome.fixed else "FAILED"
                print(
                    f"  {outcome.task:<28} {mark}  steps {outcome.steps}  "
                    f"{outcome.seconds:5.1f} s  {outcome.ended}",
                    flush=True,
                )
                if args.verbose:
                    print(f"      {' '.join(outcome.tools)}")
            times = [o.seconds for o in outcomes[-len(tasks) :]]
            print(
                f"run {run}: fixed {fixed}/{len(tasks)} ({100 * fixed / len(tasks):.0f}%), "
                f"median {statistics.median(times):.1f} s, total {sum(times):.0f} s"
            )
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1) + "\n")


if __name__ == "__main__":
    main()
