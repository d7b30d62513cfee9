"""``rune run --json``: the run as newline-delimited JSON on stdout, for scripts and CI.

A second renderer of the loop's events (:mod:`rune.events`), beside the human one
(:class:`rune.cli.render.ConsoleReporter`): the same operator, the same approvals, the same
exit statuses; only what reaches stdout differs. Every line is one JSON object with a
``type``; the last one is ``result``. The keys are a contract, written down in docs/json.md
and checked by ``docs/rune-events.schema.json``.

Everything a model wrote is hostile: each line is ``json.dumps(..., ensure_ascii=True)``, so
stdout carries printable ASCII and newlines between objects only (no escape sequence, no raw
control byte, no invalid UTF-8, whatever the model sent). Nothing else is printed on stdout:
a question for a person at a terminal goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO, assert_never

from rich.console import Console

from rune import events as ev
from rune.app.policy import auto_approves
from rune.cli.exits import EXIT_BY_OUTCOME, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE
from rune.cli.render import ConsoleReporter, ask_decision
from rune.errors import ConfigError, RuneError
from rune.frontend.view import Decision, describe_request
from rune.messages import OperatorResponse, PendingApproval, ToolEvent
from rune.settings.config import ApprovalMode, LoadedConfig

if TYPE_CHECKING:
    from rune.app import Rune

#: bumped when a key changes meaning or goes away (new keys and new types do not bump it)
SCHEMA_VERSION = 1
#: what a ``tool_result`` tells of a :class:`ToolEvent` (its call came as ``tool_call``)
TOOL_RESULT_KEYS = ("iteration", "name", "status", "output", "error", "call_id", "exit_code")


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def unicode_only(value: Any) -> Any:
    """``value`` with each lone UTF-16 surrogate (JSON from a model can spell one; no UTF-8
    text holds it, and parsers such as jq refuse its escape) replaced by U+FFFD."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {unicode_only(k): unicode_only(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [unicode_only(v) for v in value]
    return value


class JsonEmitter:
    """Writes one event a line to ``stream`` and keeps what the final ``result`` reports."""

    def __init__(self, stream: TextIO, workspace: str = "") -> None:
        self.stream = stream
        self.workspace = workspace
        self.files_changed: list[str] = []
        #: set once the session exists: a failure after that still names it
        self.session_id: str | None = None
        self.iteration = 0
        self.budget = 0

    def emit(self, kind: str, **fields: Any) -> None:
        event = unicode_only({"type": kind, **fields})
        line = json.dumps(event, ensure_ascii=True, default=str)
        self.stream.write(line + "\n")
        self.stream.flush()

    def __call__(self, event: ev.LoopEvent) -> None:
        """The loop's event sink (``rune.relay.target``)."""
        match event:
            case ev.TextDelta(text=text):
                self.emit("text", text=text)
            case ev.ThinkingDelta(text=text):
                self.emit("thinking", text=text)
            case ev.BudgetRenewed(budget=number, budgets=budgets):
                self.emit("budget_renewed", budget=number, budgets=budgets)
            case ev.IterationStarted(iteration=n, budget=budget):
                self.iteration, self.budget = n, budget
                self.emit("step_start", iteration=n, budget=budget)
            case ev.ModelCallFinished(seconds=seconds, tokens=tokens, prompt_tokens=prompt):
                self.emit(
                    "step_end",
                    iteration=self.iteration,
                    budget=self.budget,
                    seconds=round(seconds, 3),
                    tokens=tokens,
                    prompt_tokens=prompt,
                )
            case ev.AssistModelCall(assist=assist, iteration=n):
                self.emit("assist_call", assist=assist, iteration=n)
            case ev.ToolStarted(request=request, iteration=n):
                arguments = dict(request.arguments)
                self.emit(
                    "tool_call",
                    iteration=n,
                    name=request.name,
                    arguments=arguments,
                    call_id=request.call_id,
                    source=request.source,
                    summary=describe_request(request.name, arguments),
                )
            case ev.ToolFinished(event=done):
                self._changed(done)
                shown = {k: v for k, v in done.to_json().items() if k in TOOL_RESULT_KEYS}
                self.emit("tool_result", **shown)
            case ev.FallbackPromptInjected() as injected:
                self.emit(
                    "protocol",
                    model=injected.model,
                    protocol=injected.protocol,
                    message=injected.describe(),
                )
            case ev.Warning(message=message):
                self.warning(message)
            case ev.ApprovalRequired():
                pass  # the driver emits approval_requested with the decision that follows
            case ev.MessageAdded() | ev.TurnPaused() | ev.TurnEnded():
                pass  # the session's journal keeps them; the driver reports how the turn ended
            case _:
                # a new kind of event must get its line here (mypy finds the case missing)
                assert_never(event)

    def warning(self, message: str) -> None:
        self.emit("warning", message=message)

    def _changed(self, done: ToolEvent) -> None:
        from rune.app import FILE_EDIT_TOOLS

        path = done.arguments.get("path")
        if done.ok and done.name in FILE_EDIT_TOOLS and isinstance(path, str):
            shown = self.relative(path)
            if shown not in self.files_changed:
                self.files_changed.append(shown)

    def relative(self, path: str) -> str:
        """``path`` relative to the workspace when it lies inside, else absolute."""
        if not self.workspace:
            return path
        full = os.path.normpath(os.path.join(self.workspace, path))
        inside = os.path.commonpath([full, self.workspace]) == self.workspace
        return os.path.relpath(full, self.workspace) if inside else full

    def approval(self, pending: PendingApproval) -> None:
        self.emit("approval_requested", **{"grant": None, **pending.to_json()})

    def decision(self, decision: str, by: str, reason: str = "") -> None:
        self.emit("approval_decided", decision=decision, by=by, reason=reason)

    def result(
        self,
        outcome: str,
        exit_status: int,
        session_id: str | None,
        response: OperatorResponse | None = None,
        *,
        error: str | None = None,
        error_kind: str | None = None,
    ) -> int:
        """The last line; returns ``exit_status``."""
        self.emit(
            "result",
            outcome=outcome,
            exit_status=exit_status,
            session_id=session_id,
            answer=response.text if response is not None and response.success else None,
            error=error if response is None else response.error,
            error_kind=error_kind if response is None else response.error_kind,
            incomplete=response.incomplete if response is not None else None,
            files_changed=list(self.files_changed),
            iterations_used=response.iterations_used if response is not None else 0,
            iteration_budget=response.iteration_budget if response is not None else 0,
            changed=response.changed if response is not None else False,
            protocol=response.protocol if response is not None else None,
        )
        return exit_status


def run_json(args: argparse.Namespace, load_config: Callable[..., LoadedConfig]) -> int:
    """``rune run --json TASK``: the exit status is the one ``rune run TASK`` would give."""
    emitter = JsonEmitter(sys.stdout)
    try:
        loaded = load_config(args, warn=False)
        for note in loaded.refused:
            emitter.warning(note)
        return _run(args, loaded, emitter)
    except KeyboardInterrupt:
        if emitter.session_id is not None:
            sys.stderr.write(
                f"interrupted; the session is kept: `rune resume {emitter.session_id}`\n"
            )
        return emitter.result("interrupted", EXIT_INTERRUPTED, emitter.session_id)
    except RuneError as error:
        status = EXIT_USAGE if isinstance(error, ConfigError) else EXIT_FAILED
        return emitter.result(
            "failed", status, emitter.session_id, error=str(error), error_kind=error.kind
        )


def _run(args: argparse.Namespace, loaded: LoadedConfig, emitter: JsonEmitter) -> int:
    from rune.app import open_rune

    # A read outside the workspace is asked at a terminal only, as in `rune run`.
    can_ask = sys.stdin is not None and sys.stdin.isatty()
    with open_rune(loaded, session_id=args.session, title=args.task[:80], can_ask=can_ask) as rune:
        emitter.workspace = str(rune.workspace)
        emitter.session_id = rune.session_id
        emitter.emit(
            "session",
            schema_version=SCHEMA_VERSION,
            session_id=rune.session_id,
            model=rune.model,
            backend=rune.backend.label,
            workspace=str(rune.workspace),
            picked=rune.picked,
        )
        for note in rune.startup_warnings():
            emitter.warning(note)
        rune.relay.target = emitter
        response = _drive(rune, emitter, lambda: rune.operator.send(args.task))
        return emitter.result(
            response.outcome, EXIT_BY_OUTCOME[response.outcome], rune.session_id, response
        )


class _JsonEdge:
    """The approval edge of ``rune run --json``: each approval and its decision a JSON line;
    a person answers on stdin, asked on stderr (stdout is the scripts')."""

    def __init__(self, emitter: JsonEmitter, approval: ApprovalMode) -> None:
        self.emitter = emitter
        self.approval = approval

    def show(self, pending: PendingApproval) -> None:
        self.emitter.approval(pending)

    def approved(self, pending: PendingApproval, why: str) -> None:
        # --yes, or what the user allowed for the rest of the session earlier
        by = "--yes" if auto_approves(self.approval, pending) else "user"
        self.emitter.decision("approve", by, "")

    def ask(self, pending: PendingApproval) -> Decision | None:
        decision = _ask(pending)
        if decision is not None:
            by = "approve" if decision.approve else "reject"
            self.emitter.decision(by, "user", decision.reason)
        return decision


def _drive(
    rune: Rune, emitter: JsonEmitter, start: Callable[[], OperatorResponse]
) -> OperatorResponse:
    """Run, answering each approval as ``rune run`` does (``--yes``, else a person on stdin,
    asked on stderr). An approval nobody answers leaves the run paused: the session keeps it."""
    from rune.frontend.approvals import settle

    response = settle(rune, start(), _JsonEdge(emitter, rune.settings.approval))
    if response.pending is not None:
        sys.stderr.write(
            "An approval is waiting and stdin gave no answer. The session is kept: "
            f"`rune resume {rune.session_id}`\n"
        )
    return response


def _ask(pending: PendingApproval) -> Decision | None:
    """A person's answer on stdin, the change shown and the question asked on stderr (stdout
    is the scripts'); None when stdin has none (closed, or not a terminal with nothing)."""
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    if sys.stdin is not None and sys.stdin.isatty():
        ConsoleReporter(console, status_line=False).show_approval(pending)
    return ask_decision(console)
