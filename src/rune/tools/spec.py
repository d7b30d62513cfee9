"""Tool specifications, prepared changes, and the executor seam the loop talks to."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from rune.errors import ToolError
from rune.messages import freeze, thaw


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it (name, description, JSON schema) plus whether it mutates,
    and whether it is a check: a read-only run of the project's code that a change can be
    verified with (the constrained protocol asks for one after each change). A ``command``
    is approved like a change, but what it says is its exit status: a failure after the last
    change leaves the task unfinished (:mod:`rune.outcome`)."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    mutating: bool = False
    checks: bool = False
    command: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "parameters", freeze(self.parameters))

    def schema(self) -> dict[str, Any]:
        """The entry for the ``tools`` parameter of /api/chat and /v1/chat/completions."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": thaw(self.parameters),
            },
        }


@dataclass(frozen=True, slots=True)
class PreparedChange:
    """A validated mutating request and exactly what the operator is asked to approve.

    ``fingerprint`` binds the approval to the state of the world at prepare time (resolved
    path, content digest); ``apply`` refuses when it no longer holds. ``contained`` is set for
    commands (whether they run inside bubblewrap); ``sensitive`` says why a file change must be
    asked for even under ``--yes`` (outside the workspace, or a file that steers an agent or
    runs code), None when it need not.

    ``grant`` is set when the "change" is a read-only call that reads outside what the
    session reads freely: approving it lets the session read that directory tree from then on
    (a file alone: that file, this once), and ``apply`` runs the call.
    """

    tool: str
    arguments: Mapping[str, Any]
    summary: str
    preview: str
    fingerprint: Mapping[str, Any] = field(default_factory=dict)
    contained: bool | None = None
    sensitive: str | None = None
    grant: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "arguments", freeze(self.arguments))
        object.__setattr__(self, "fingerprint", freeze(self.fingerprint))

    def to_json(self) -> dict[str, Any]:
        data = {
            "tool": self.tool,
            "arguments": thaw(self.arguments),
            "summary": self.summary,
            "preview": self.preview,
            "fingerprint": thaw(self.fingerprint),
            "contained": self.contained,
            "sensitive": self.sensitive,
        }
        if self.grant is not None:
            data["grant"] = self.grant
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PreparedChange:
        return cls(
            tool=str(data["tool"]),
            arguments=dict(data["arguments"]),
            summary=str(data["summary"]),
            preview=str(data["preview"]),
            fingerprint=dict(data.get("fingerprint") or {}),
            contained=data.get("contained"),
            sensitive=data.get("sensitive"),
            grant=None if data.get("grant") is None else str(data["grant"]),
        )


class NeedsApproval(ToolError):
    """Raised by :meth:`Executor.run`: this read-only call needs the user's approval first
    (it reads outside what the session reads freely). ``change`` is what to ask; the loop
    pauses on it as on a prepared change, and ``apply`` runs the call once approved."""

    def __init__(self, change: PreparedChange) -> None:
        super().__init__(change.summary)
        self.change = change


@runtime_checkable
class Executor(Protocol):
    """What ``LocalToolRuntime`` needs from a tool set.

    Read-only tools go through ``run``; mutating ones through ``prepare`` (nothing on disk
    changes) and, after approval, ``apply`` (re-validates, then changes the world). All three
    raise :class:`rune.errors.ToolError` for anything the model should hear about; ``run``
    raises :class:`NeedsApproval` for a read that must be approved first.
    """

    def specs(self) -> Sequence[ToolSpec]: ...

    def is_mutating(self, name: str) -> bool: ...

    def run(self, name: str, arguments: Mapping[str, Any]) -> str: ...

    def prepare(self, name: str, arguments: Mapping[str, Any]) -> PreparedChange: ...

    def apply(self, change: PreparedChange) -> str: ...


@dataclass(frozen=True, slots=True)
class Trial:
    """A check run on a change that was not made: whether it passed, and what the check
    tool would have said (its output, or its error as the model would see it). ``made``:
    False when the change itself could not be made (``report`` says why; nothing ran).
    ``asserted``: it failed at one of its asserts (the code ran and gave another value);
    ``own_fault``: it failed in its own code (a name it never defined, bad syntax).
    ``failing``: for a test run, each failing test's title and the first line of its error
    (None: not a test run, or one whose failures could not be told apart)."""

    passed: bool
    report: str
    made: bool = True
    asserted: bool = False
    own_fault: bool = False
    failing: tuple[tuple[str, str], ...] | None = None


@runtime_checkable
class Trials(Protocol):
    """A service that tries a change against a check before anyone approves it, nothing
    written (the sampled repair, :mod:`rune.assists.sampled_repair`, picks among a small
    model's alternative fixes with it). :class:`rune.tools.executor.ToolExecutor` is one; the
    composition root hands it to the assist."""

    def try_change(
        self,
        name: str,
        arguments: Mapping[str, Any],
        check: str,
        check_args: Mapping[str, Any],
    ) -> Trial | None: ...

    def try_before_changes(self, check: str, check_args: Mapping[str, Any]) -> Trial | None: ...

    def content_before_changes(self, path: str) -> bytes | None: ...


def trials_of(given: Trials | None, executor: Executor) -> Trials | None:
    """The service an assist tries changes with: ``given`` (the composition root's), else the
    loop's executor when it is one, else None."""
    if given is not None:
        return given
    return executor if isinstance(executor, Trials) else None


#: the name this protocol had when the loop asked the executor for it
TriesChanges = Trials


@runtime_checkable
class ChangeRecorder(Protocol):
    """Where an executor records each file change it applies, so it can be taken back later
    (``rune undo``; :mod:`rune.sessions.changes` keeps them in the session).

    ``keep`` is called before the write with the bytes the change replaces and the bytes it
    writes (only for a file the sandbox lets Rune read); ``applied`` after the write succeeded,
    with the change's fingerprint digests (``before`` None: the change created the file)."""

    def keep(self, content: bytes) -> None: ...

    def applied(self, tool: str, path: Path, before: str | None, after: str) -> None: ...


@runtime_checkable
class GrantsReads(Protocol):
    """An executor whose approved reads widen what the session reads (optional): the loop
    keeps the grants in a paused state, sealed, and gives them back on resume."""

    def read_grants(self) -> tuple[str, ...]: ...

    def restore_read_grants(self, trees: Sequence[str]) -> None: ...


@dataclass(frozen=True, slots=True)
class AutoCheck:
    """A check the loop runs itself, not the model: the project's tests a request names.

    It runs before the first model call (the model starts from the failure) and again after
    each change the loop applied, without a model turn; a run whose check failed at the start
    and passes after a change ends there. ``what`` names it in messages ("the tests
    tests/test_x.py"); ``refusal`` says why a change with these arguments may not be made
    (a test file, when the request said the tests are right), None when it may.
    """

    tool: str
    arguments: Mapping[str, Any]
    what: str
    refusal: Callable[[Mapping[str, Any]], str | None] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "arguments", freeze(self.arguments))


#: what a request gets from the composition root: its auto check, or None
AutoChecks = Callable[[str], AutoCheck | None]
