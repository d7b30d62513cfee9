"""What the commands that run the loop share: the settings from the command line, the agent
opened with its first lines, and the drive until the run ends or waits (approvals asked on
stdin through :mod:`rune.frontend.approvals`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text

from rune.cli import consoles
from rune.cli.exits import (
    EXIT_BY_OUTCOME,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PENDING,
)
from rune.cli.render import ConsoleReporter, ask_decision, page_text
from rune.cli.unstarted import RunNotStarted
from rune.errors import ConfigError, RuneError, SessionNotFound
from rune.frontend.view import Decision
from rune.messages import OperatorResponse, PendingApproval
from rune.settings.config import ApprovalMode, LoadedConfig, load
from rune.settings.keys import SETTINGS

if TYPE_CHECKING:
    from rune.app import Opening, Rune
from rune.text import plural, visible

out, err = consoles.out, consoles.err


APPROVAL_BY_YES: dict[int, ApprovalMode] = {1: "edits", 2: "all"}


def load_config(args: argparse.Namespace, *, warn: bool = True, **extra: object) -> LoadedConfig:
    """The settings for this command line: only the flags the user gave are a layer."""
    yes = min(getattr(args, "yes", 0) or 0, 2)
    flags: dict[str, object] = {
        setting.key: getattr(args, setting.flag.removeprefix("--").replace("-", "_"), None)
        for setting in SETTINGS
        if setting.flag is not None and setting.key != "approval"
    }
    flags = {**flags, "approval": APPROVAL_BY_YES.get(yes), **extra}
    loaded = load(flags)
    for note in loaded.refused if warn else ():
        err.print(Text(f"warning: {note}", style="yellow"))
    return loaded


# --- driving the loop ---------------------------------------------------------------------


@contextmanager
def opened(
    loaded: LoadedConfig,
    reporter: ConsoleReporter,
    *,
    session_id: str | None = None,
    title: str = "",
) -> Iterator[Rune]:
    """``open_rune`` for the CLI: the model line as soon as the model is known, the status
    line while the server starts or answers questions, the reporter wired to the loop."""
    from rune.app import open_rune

    def announce(opening: Opening) -> None:
        reporter.line(Text(f"rune · {opening.model} via {opening.backend.label}", style="dim"))
        if opening.picked:
            reporter.line(Text(f"  ({opening.picked})", style="dim"))

    # A read outside the workspace is asked at a terminal only: answers piped in were written
    # before anyone saw what the model would ask to read.
    can_ask = sys.stdin is not None and sys.stdin.isatty()
    started = False
    try:
        with open_rune(
            loaded,
            session_id=session_id,
            title=title,
            announce=announce,
            status=reporter.waiting,
            can_ask=can_ask,
        ) as rune:
            started = True
            reporter.waiting(None)
            reporter.session_id = rune.session_id
            reporter.progress = rune.transport.progress
            rune.relay.target = reporter
            reporter.line(
                Text(f"session {rune.session_id} · workspace {rune.workspace}", style="dim")
            )
            for note in rune.startup_warnings():
                err.print(Text(f"warning: {note}", style="yellow"))
            yield rune
    except RuneError as error:
        if started or isinstance(error, ConfigError | SessionNotFound):
            raise
        raise RunNotStarted(error, session_id) from None
    finally:
        reporter.close()


class _Prompt:
    """The approval edge of ``rune run``: the change shown on stdout, the question on stdin."""

    def __init__(self, reporter: ConsoleReporter) -> None:
        self.reporter = reporter

    def show(self, pending: PendingApproval) -> None:
        self.reporter.show_approval(pending)

    def approved(self, pending: PendingApproval, why: str) -> None:
        self.reporter.line(Text(why, style="dim"))

    def ask(self, pending: PendingApproval) -> Decision | None:
        from rune.grants import offer

        return ask_decision(out, page=_pager(pending), grant=offer(pending))


def drive(
    rune: Rune,
    reporter: ConsoleReporter,
    start: Callable[[], OperatorResponse | None],
    *,
    outcome_line: bool = True,
) -> tuple[int, OperatorResponse | None]:
    """Run until the run ends or waits: the shared flow of run, demo and resume. The exit
    status says how it ended (:data:`EXIT_BY_OUTCOME`)."""
    from rune.frontend.approvals import settle

    try:
        response = start()
        if response is not None:
            response = settle(rune, response, _Prompt(reporter))
        if response is not None and response.pending is not None:
            hint = approval_hint(response.pending)
            err.print(
                "An approval is waiting and stdin gave no answer (it is not a terminal?). "
                f"The session is kept: `rune resume {rune.session_id}`; {hint}."
            )
            return EXIT_PENDING, response
    except KeyboardInterrupt:
        from rune.frontend.kept import changes_left

        reporter.close()
        reporter.line("")
        left = changes_left(rune, cwd=Path.cwd())
        if left is not None:
            err.print(Text(left, style="yellow"))
        err.print(f"interrupted; the session is kept: `rune resume {rune.session_id}`")
        return EXIT_INTERRUPTED, None
    reporter.close()
    if response is None:
        return EXIT_OK, None
    from rune.frontend.kept import kept_changes

    kept = kept_changes(rune, response, cwd=Path.cwd())
    reporter.finish(response, outcome_line=outcome_line, before_outcome=kept)
    if response.outcome == "limit":
        reporter.line(
            Text(
                f"the budget of {plural(response.iteration_budget, 'model turn')} is spent; "
                f"`rune resume {rune.session_id} --continue` runs the task on with a fresh one",
                style="yellow",
            )
        )
    elif response.outcome == "failed":
        reporter.line(
            Text(
                f"`rune resume {rune.session_id}` tries again from the last good point",
                style="yellow",
            )
        )
    return EXIT_BY_OUTCOME[response.outcome], response


def approval_hint(pending: PendingApproval) -> str:
    """How a run whose approval no one could answer gets past it next time."""
    from rune.app import FILE_EDIT_TOOLS

    if pending.sensitive:
        return "it is sensitive, so it needs your answer even under --yes"
    if pending.name in FILE_EDIT_TOOLS:
        return "or pass --yes to approve file edits"
    return "or pass --yes --yes to approve commands and other tools too"


def _pager(pending: PendingApproval) -> Callable[[], None] | None:
    """ "d" at the approval prompt: the whole diff in the pager, on a terminal."""
    from rune.frontend.view import is_command

    if not out.is_terminal or is_command(pending) or pending.grant or not pending.preview:
        return None
    return lambda: page_text(visible(pending.preview))
