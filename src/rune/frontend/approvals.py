"""The approval driver the CLI and the TUI share: what an approval shows, which approvals
need no question (``--yes``, a grant for the session), and how a person's decision is carried
out. Each edge only shows and asks its own way (a prompt on stdin, JSON lines, a screen):
:func:`settle` is the loop for an edge that can wait for the answer (``rune run``, ``rune run
--json``); the TUI, which cannot block, calls :func:`answered` and :func:`carry_out` itself.
"""

from __future__ import annotations

from typing import Protocol

from rune.app import Rune, auto_approves
from rune.frontend.view import Decision, is_command
from rune.messages import OperatorResponse, PendingApproval
from rune.text import visible


def heading(pending: PendingApproval) -> str:
    """What an approval is about, in a few words: a command is shown once, below, so its
    heading does not repeat it."""
    if is_command(pending):
        return "run a command"
    return visible(pending.summary)


def command_lines(pending: PendingApproval) -> tuple[list[str], str]:
    """A command approval's body: the command (``$ …``, with any note on hidden characters),
    and the one line that says how it runs."""
    lines = visible(pending.preview.strip(), keep="\t\n").split("\n")
    if len(lines) < 2:
        return lines, ""
    return lines[:-1], lines[-1]


def answered(rune: Rune, pending: PendingApproval) -> str | None:
    """Why ``pending`` is approved without a question (the line to show), or None to ask."""
    if auto_approves(rune.settings.approval, pending):
        return (
            "approved by --yes" if rune.settings.approval == "edits" else "approved by --yes --yes"
        )
    grant = rune.operator.granted(pending)
    if grant is not None:
        return f"approved: {grant.describe()} are allowed for this session"
    return None


def carry_out(rune: Rune, decision: Decision) -> OperatorResponse:
    """Approve (recording the grant first, when one was chosen) or reject with the reason."""
    operator = rune.operator
    if not decision.approve:
        return operator.reject(decision.reason)
    if decision.grant is not None:
        operator.allow(decision.grant)
    return operator.approve()


class Edge(Protocol):
    """How one front end shows an approval and gets its answer."""

    def show(self, pending: PendingApproval) -> None:
        """The approval, before it is answered."""

    def approved(self, pending: PendingApproval, why: str) -> None:
        """It needed no question: ``why`` (``--yes``, a grant)."""

    def ask(self, pending: PendingApproval) -> Decision | None:
        """A person's decision; None when there is nobody to answer (the run stays paused)."""


def settle(rune: Rune, response: OperatorResponse, edge: Edge) -> OperatorResponse:
    """Answer approvals until the run ends, or one waits with no answer: then the response
    still holds it (``pending``), and the session keeps it."""
    while response.pending is not None:
        pending = response.pending
        edge.show(pending)
        why = answered(rune, pending)
        if why is not None:
            edge.approved(pending, why)
            response = rune.operator.approve()
            continue
        decision = edge.ask(pending)
        if decision is None:
            return response
        response = carry_out(rune, decision)
    return response
