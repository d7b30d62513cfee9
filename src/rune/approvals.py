"""The approval driver the CLI and the TUI share: what an approval shows, which approvals
need no question (``--yes``, a grant for the session), and how a person's decision is carried
out. Each edge only asks its own way (a prompt on stdin, a screen).
"""

from __future__ import annotations

from rune.app import Rune, auto_approves
from rune.messages import OperatorResponse, PendingApproval
from rune.text import visible
from rune.view import Decision, is_command


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
