"""``rune check-model [MODEL]``: does this model work with Rune? A few small bugs of the task
suite (:mod:`rune.app.model_check`), each in a throw-away project, on the configured server and
model with the chosen protocol: per task fixed or not, steps and time, then a verdict that
names the protocol ``auto`` would pick and what to change when the model does not work.

Approvals answer themselves by :func:`rune.app.model_check.approves_in_scratch`: file changes
inside the throw-away project, commands only when bubblewrap contains them; the project is the
only directory Rune may write. ``--json`` prints one line for a machine instead.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.text import Text

from rune import events as ev
from rune.app.model_check import (
    AutoChoice,
    TaskOutcome,
    Verdict,
    approves_in_scratch,
    auto_choice,
    builtin_tasks,
    run_task,
    verdict,
)
from rune.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from rune.settings.config import LoadedConfig
from rune.text import visible

SCRIPTED_IS_NO_MODEL = (
    "the scripted backend is not a model: it replays the demo's fixed turns (for tests, and "
    "to watch the flow: rune demo --backend scripted), so there is nothing to check. Name a "
    "model: rune check-model NAME, with --backend ollama, an OpenAI-compatible URL, or a "
    ".gguf path as NAME"
)
#: model turns per task: a fix takes three (change, check, answer); a few spare for a retry
DEFAULT_TURNS = 6


def check_model(args: Any, loaded: LoadedConfig, out: Console, err: Console) -> int:
    from rune.app import choose_backend, open_transport

    settings = loaded.settings
    turns = args.max_iterations or DEFAULT_TURNS
    flags = {"protocol": settings.protocol, "max_iterations": turns}
    tasks = builtin_tasks()
    choice = choose_backend(settings)
    if choice.kind == "scripted":
        err.print(Text(SCRIPTED_IS_NO_MODEL, style="bold red"))
        return EXIT_USAGE
    with ExitStack() as stack:
        if choice.kind == "embedded":
            err.print(f"starting the embedded llama.cpp server with {choice.model_path}")
        transport, model = open_transport(choice, settings, stack)
        auto = auto_choice(choice, model, transport.supports_tools(model))
        if not args.json:
            out.print(Text(visible(f"rune check-model · {model} via {choice.label}"), "bold"))
            out.print(Text(visible(plan_line(len(tasks), turns, settings.protocol, auto)), "dim"))
        outcomes: list[TaskOutcome] = []
        for number, task in enumerate(tasks, 1):
            label = f"{task.name} ({number}/{len(tasks)})"
            # a spinner on a terminal's stderr only: stdout stays the lines (or the one line)
            with err.status(label) as spinner:

                def step(event: ev.LoopEvent, label: str = label, spinner: Any = spinner) -> None:
                    if isinstance(event, ev.IterationStarted):
                        spinner.update(f"{label}: step {event.iteration}/{event.budget}")

                outcome = run_task(
                    task,
                    transport,
                    model,
                    choice,
                    approves=approves_in_scratch,
                    flags=flags,
                    on_event=step,
                )
            outcomes.append(outcome)
            if not args.json:
                out.print(task_line(outcome))
    found = verdict(outcomes, auto)
    if args.json:
        line = json.dumps(machine_line(model, choice.label, auto, outcomes, found))
        out.file.write(line + "\n")  # one line, every string escaped as ASCII
    else:
        style = "bold green" if found.works else "bold yellow"
        out.print(Text(visible(f"verdict: {found.line}"), style=style))
    return EXIT_OK if found.works else EXIT_FAILED


def plan_line(tasks: int, turns: int, protocol: str, auto: AutoChoice) -> str:
    if protocol == "auto":
        chosen = f"protocol auto: {auto.protocol} ({auto.why})"
    else:
        chosen = f"protocol {protocol} (auto would pick {auto.protocol}: {auto.why})"
    return f"  {tasks} small bugs, each in a throw-away project, at most {turns} turns; {chosen}"


def task_line(outcome: TaskOutcome) -> Text:
    mark, style = ("✓ fixed    ", "green") if outcome.fixed else ("✗ not fixed", "red")
    line = Text(f"  {mark} ", style=style)
    line.append(
        f"{outcome.task:<22} steps {outcome.steps}/{outcome.budget}  {outcome.seconds:5.1f} s  "
    )
    as_text = outcome.sources.get("text-fallback", 0)
    calls = sum(outcome.model_calls().values())
    detail = f"{calls} tool call{'s' if calls != 1 else ''}"
    if as_text and outcome.protocol == "native":
        detail += f" ({as_text} written as prose)"
    if outcome.ended != "answered":
        detail += f"; ended: {outcome.ended}"
    line.append(visible(detail), style="dim")
    return line


def machine_line(
    model: str, backend: str, auto: AutoChoice, outcomes: list[TaskOutcome], found: Verdict
) -> dict[str, Any]:
    tasks = []
    for outcome in outcomes:
        entry = asdict(outcome)
        entry.pop("replies")
        entry["seconds"] = round(outcome.seconds, 2)
        tasks.append(entry)
    return {
        "model": model,
        "backend": backend,
        "protocol": outcomes[0].protocol if outcomes else None,
        "auto_protocol": auto.protocol,
        "auto_reason": auto.why,
        "tasks": tasks,
        "fixed": sum(o.fixed for o in outcomes),
        "total": len(outcomes),
        "works": found.works,
        "verdict": found.line,
        "recommended_protocol": found.recommended,
    }
