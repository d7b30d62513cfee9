"""``rune demo``: fix a broken add() in a throw-away sample project, then check it."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.text import Text

from rune.cli import consoles
from rune.cli.commands.pull import pull_with_progress
from rune.cli.driving import drive, load_config, opened
from rune.cli.exits import (
    EXIT_FAILED,
    EXIT_OK,
)
from rune.cli.render import ConsoleReporter, ask_decision
from rune.errors import BackendUnavailable, RuneError
from rune.settings.config import LoadedConfig, Settings
from rune.text import visible

out, err = consoles.out, consoles.err


def command(args: argparse.Namespace) -> int:
    from rune.app import DEMO_MODEL_NOTICE
    from rune.app.demo import DEMO_TASK, create_demo_project

    loaded = load_config(args)
    if needs_default_model(loaded):
        from rune.models.catalog import DEFAULT_MODEL, QWEN_CODER_1_5B

        out.print(
            f"No model server answered and no coding model is pulled: getting {DEFAULT_MODEL} "
            "once (Rune runs it itself; later runs start in seconds)."
        )
        status = pull_with_progress(QWEN_CODER_1_5B)
        if status != EXIT_OK:
            return status
    project = create_demo_project()
    out.print(f"sample project: {project} (calc.py has a broken add())")
    loaded = load_config(args, warn=False, workspace=str(project))
    reporter = ConsoleReporter(out)
    with opened(loaded, reporter, title="demo: fix add()") as rune:
        if rune.backend.demo_model:
            reporter.line(Text(DEMO_MODEL_NOTICE, style="yellow"))
        status, response = drive(
            rune, reporter, lambda: rune.operator.send(DEMO_TASK), outcome_line=False
        )
    if response is None or response.outcome == "paused":
        return status
    if response.outcome == "failed":
        reporter.finish(response)
        return status
    # The model answered (or ran out of turns): whether add() works is the outcome.
    budget = response.budget_label
    fixed = verify_demo(project, loaded.settings)
    if fixed is None:
        # An unfinished run (the fix rejected, or failed) keeps its exit status 4: say why.
        why = f": {visible(response.incomplete)}" if response.incomplete else ""
        out.print(
            Text(f"? not checked{why} ({budget}); calc.py is in {project}", style="bold yellow")
        )
        return status
    if fixed:
        out.print(Text(f"✓ fixed: add(2, 3) == 5 now ({budget}; {project})", style="bold green"))
        return EXIT_OK
    # the check ran unasked (contained), so a rejected or failed fix shows here: say why
    why = f": {visible(response.incomplete)}" if response.incomplete else ""
    out.print(
        Text(f"✗ not fixed: add(2, 3) is still wrong{why} ({budget}; {project})", style="bold red")
    )
    return EXIT_FAILED


def needs_default_model(loaded: LoadedConfig) -> bool:
    """Whether the demo would otherwise run on the demo model (or on nothing) although the user
    named neither a model nor a backend: then the default coding model is worth pulling."""
    from rune.app import choose_backend

    settings = loaded.settings
    if settings.model or settings.backend or settings.embedded_model:
        return False
    try:
        return choose_backend(settings).demo_model
    except BackendUnavailable:
        return True


def verify_demo(project: Path, settings: Settings) -> bool | None:
    """Try add(2, 3) in the sample's calc.py, which the model wrote: contained and read-only
    without asking where checks run so (as Rune ran the demo's tests), else a command like any
    other, shown and approved first (``--yes --yes`` approves it). None when it was not run."""
    from rune.app import auto_approves, sandbox_policy
    from rune.app.demo import demo_check, try_contained

    try:
        fixed = try_contained(project, sandbox_policy(settings))
        if fixed is not None:
            out.print(Text("  checked add(2, 3) contained and read-only, so unasked", style="dim"))
            return fixed
        check = demo_check(project)
    except RuneError as error:
        err.print(Text(f"check not run: {error}", style="yellow"))
        return None
    reporter = ConsoleReporter(out)
    reporter.show_approval(check.pending)
    if auto_approves(settings.approval, check.pending):
        reporter.line(Text("approved by --yes --yes", style="dim"))
    else:
        decision = ask_decision(out)
        if decision is None or not decision.approve:
            why = "not approved" if decision is not None else "no answer on stdin"
            err.print(
                f"The check imports calc.py, which the model wrote, so it runs only when you "
                f"approve it (or pass --yes --yes); {why}."
            )
            return None
    try:
        return check.run()
    except RuneError as error:
        err.print(Text(f"check not run: {error}", style="yellow"))
        return None
