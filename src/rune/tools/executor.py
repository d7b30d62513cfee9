"""``ToolExecutor``: the built-in tools behind the sandbox, as the loop sees them.

``validate_write_path`` / ``validate_read_path`` live in :mod:`rune.tools.sandbox` and are
re-exported here, the import path that docs/loop.md ("Names that stay") keeps.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rune.errors import RuneError, SandboxDenied, ToolError, ToolInputError
from rune.messages import thaw
from rune.tools import fs
from rune.tools.builtin import BUILTIN_TOOLS, BuiltinTool, ToolContext
from rune.tools.commands import containment
from rune.tools.files import current_content
from rune.tools.sandbox import (
    ReadNeedsApproval,
    SandboxPolicy,
    validate_read_path,
    validate_write_path,
)
from rune.tools.spec import ChangeRecorder, NeedsApproval, PreparedChange, ToolSpec, Trial

__all__ = [
    "SandboxPolicy",
    "ToolExecutor",
    "validate_read_path",
    "validate_write_path",
]

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict, Mapping),
    "array": (list, tuple),
}


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _value_problem(name: str, prop: Mapping[str, Any], value: Any) -> str | None:
    kind = prop.get("type", "")
    expected = _JSON_TYPES.get(kind, ())
    wrong_bool = isinstance(value, bool) and kind in ("integer", "number")
    if expected and (not isinstance(value, expected) or wrong_bool):
        return f"argument {name!r} must be {kind}, got {type(value).__name__}"
    if isinstance(value, str) and _has_lone_surrogate(value):
        # JSON can spell "\ud800" but no file or terminal can hold it.
        return f"argument {name!r} contains a lone UTF-16 surrogate; send valid Unicode text"
    if "minimum" in prop and value < prop["minimum"]:
        return f"argument {name!r} must be at least {prop['minimum']}, got {value}"
    if "maximum" in prop and value > prop["maximum"]:
        return f"argument {name!r} must be at most {prop['maximum']}, got {value}"
    return None


def check_arguments(spec: ToolSpec, arguments: Any) -> None:
    """Refuse arguments that do not fit the schema, showing the schema to the model."""
    schema = spec.parameters
    problems: list[str] = []
    if not isinstance(arguments, Mapping):
        problems.append(f"arguments must be a JSON object, got {type(arguments).__name__}")
    else:
        for name in schema.get("required", ()):
            if name not in arguments:
                problems.append(f"missing required argument {name!r}")
        properties = schema.get("properties", {})
        for name, value in arguments.items():
            prop = properties.get(name)
            if prop is None:
                problems.append(f"unknown argument {name!r}")
                continue
            problem = _value_problem(name, prop, value)
            if problem:
                problems.append(problem)
    if problems:
        raise ToolInputError(
            f"invalid arguments for {spec.name}: {'; '.join(problems)}. Expected schema: "
            + json.dumps(thaw(schema), sort_keys=True)
        )


@contextlib.contextmanager
def _os_errors_as_tool_errors(tool: str) -> Iterator[None]:
    # The tools translate the failures they expect; this is the boundary for the rest, so the
    # model hears a ToolError instead of the loop seeing a foreign exception.
    try:
        yield
    except OSError as err:
        raise ToolError(f"{tool} failed: {err.strerror or err}.") from None


class ToolExecutor:
    """The built-in tools, confined by ``policy`` (default: ``SandboxPolicy.default()``,
    docs/sandbox.md).

    Relative paths resolve against ``workspace`` (default: the current directory at
    construction), never against a directory the model names. ``contain_commands``: True =
    run_command only inside bubblewrap, False = never, None = whenever bwrap works here.
    The check tools (``run_python``) are offered only where they can run contained: they run
    without approval because the sandbox makes them read-only. ``changes`` records each
    applied file change with what it replaced (the session's undo log, docs/undo.md).

    A read in the policy's ``ask_read_roots`` needs the user's approval: ``run`` raises
    :class:`NeedsApproval` (the loop pauses), or, with ``ask_reads=False`` (no one to ask: no
    terminal), a :class:`SandboxDenied` the model reads. An approved directory stays readable
    for this executor's life (:meth:`read_grants`).
    """

    def __init__(
        self,
        policy: SandboxPolicy | None = None,
        workspace: str | os.PathLike[str] | None = None,
        *,
        tools: Iterable[BuiltinTool] = BUILTIN_TOOLS,
        contain_commands: bool | None = None,
        changes: ChangeRecorder | None = None,
        ask_reads: bool = True,
    ) -> None:
        self.policy = policy if policy is not None else SandboxPolicy.default()
        self.workspace = Path(os.path.realpath(workspace if workspace is not None else os.getcwd()))
        self._ctx = ToolContext(self.policy, self.workspace, contain_commands)
        self._ask_reads = ask_reads
        self._grants: list[str] = []
        self._tools = {t.spec.name: t for t in tools if t.offered is None or t.offered(self._ctx)}
        self._specs = tuple(t.spec for t in self._tools.values())
        #: each file this executor changed, with its content before the first change
        self._originals: dict[Path, bytes | None] = {}
        #: where each applied file change is recorded (the session's undo log), if anywhere
        self.changes = changes

    def specs(self) -> Sequence[ToolSpec]:
        return self._specs

    def is_mutating(self, name: str) -> bool:
        tool = self._tools.get(name)
        return tool is not None and tool.spec.mutating

    def _tool(self, name: str, arguments: Any) -> BuiltinTool:
        tool = self._tools.get(name)
        if tool is None:
            raise ToolInputError(
                f"unknown tool {name!r}. Valid tools: {', '.join(sorted(self._tools))}."
            )
        check_arguments(tool.spec, arguments)
        return tool

    def run(self, name: str, arguments: Mapping[str, Any]) -> str:
        tool = self._tool(name, arguments)
        if tool.run is None:
            raise ToolError(f"{name} changes files and needs approval; it cannot run directly.")
        try:
            with _os_errors_as_tool_errors(name):
                return tool.run(self._ctx, arguments)
        except ReadNeedsApproval as needed:
            raise self._ask_to_read(name, arguments, needed) from None

    def _ask_to_read(
        self, name: str, arguments: Mapping[str, Any], needed: ReadNeedsApproval
    ) -> ToolError:
        if not self._ask_reads:
            return SandboxDenied(
                f"{needed} No one can approve it in this run (Rune is not at a terminal), so "
                "it was not read. Work with the files in the workspace, or tell the user what "
                "you need to read."
            )
        tree, path = needed.tree, needed.path
        scope = (
            f"approving lets Rune read everything under {tree} for the rest of this session"
            if tree.is_dir()
            else f"approving lets Rune read {tree}, this once"
        )
        return NeedsApproval(
            PreparedChange(
                tool=name,
                arguments=arguments,
                summary=f"{name} reads {path}, outside the workspace",
                preview=f"{scope} (credential stores stay refused)\n",
                sensitive=f"{path} is outside the workspace {self.workspace}",
                grant=str(tree),
            )
        )

    def read_grants(self) -> tuple[str, ...]:
        """The directory trees the user let this session read (in the order approved)."""
        return tuple(self._grants)

    def restore_read_grants(self, trees: Sequence[str]) -> None:
        """Take back grants a paused state carried; one the policy no longer asks for (a
        changed config) is dropped, never widened."""
        for tree in trees:
            if os.path.realpath(tree) not in self._grants and os.path.isdir(tree):
                with contextlib.suppress(SandboxDenied):
                    self._grant(tree)

    def _grant(self, tree: str) -> None:
        self.policy = self.policy.granting(tree)
        self._ctx = replace(self._ctx, policy=self.policy)
        self._grants.append(os.path.realpath(tree))

    def _apply_grant(self, change: PreparedChange) -> str:
        """Run the approved read: with its tree granted for good, or, for a file alone, with
        a policy that reads its directory for this one call (the call reads only that file:
        it was validated to resolve there, and is opened without following links)."""
        assert change.grant is not None
        tool = self._tool(change.tool, change.arguments)
        if tool.run is None:
            raise ToolError(f"{change.tool} is not a read; nothing was read.")
        try:
            with _os_errors_as_tool_errors(change.tool):
                return tool.run(self._ctx, change.arguments)
        except ReadNeedsApproval as needed:
            if str(needed.tree) != change.grant:
                raise SandboxDenied(
                    f"{change.tool} now reads {needed.path}, not under {change.grant} that was "
                    "approved; nothing was read. Ask again."
                ) from None
        ctx = self._ctx
        if os.path.isdir(change.grant):
            self._grant(change.grant)
            ctx = self._ctx
        else:
            ctx = replace(ctx, policy=self.policy.granting(os.path.dirname(change.grant)))
        with _os_errors_as_tool_errors(change.tool):
            return tool.run(ctx, change.arguments)

    def prepare(self, name: str, arguments: Mapping[str, Any]) -> PreparedChange:
        tool = self._tool(name, arguments)
        if tool.prepare is None:
            raise ToolError(f"{name} is read-only; nothing to prepare.")
        with _os_errors_as_tool_errors(name):
            return tool.prepare(self._ctx, arguments)

    def apply(self, change: PreparedChange) -> str:
        if change.grant is not None:
            return self._apply_grant(change)
        tool = self._tool(change.tool, change.arguments)
        if tool.apply is None:
            raise ToolError(f"{change.tool} is read-only; nothing to apply.")
        if tool.planned is not None:
            plan = self._plan(tool, change.arguments)
            if plan is not None:
                self._originals.setdefault(plan[0], plan[1])
                self._keep(change, *plan)
        with _os_errors_as_tool_errors(change.tool):
            result = tool.apply(self._ctx, change)
        if tool.planned is not None:
            self._record(change)
        return result

    def _plan(
        self, tool: BuiltinTool, arguments: Mapping[str, Any]
    ) -> tuple[Path, bytes | None, bytes] | None:
        """The file, its content now and after the change, as the planner reads them (through
        the sandbox's checks): the original a file had before this executor first changed it
        (for :meth:`try_before_changes`) and what an undo needs. A file that cannot be planned
        is not changed either."""
        assert tool.planned is not None
        try:
            return tool.planned(self._ctx, arguments)
        except (RuneError, OSError):
            return None

    def _keep(self, change: PreparedChange, path: Path, before: bytes | None, after: bytes) -> None:
        """Hand the recorder the bytes the change replaces and writes, when they are exactly
        the approved ones and the file is one Rune may read (never a credential file's)."""
        fingerprint = change.fingerprint
        if self.changes is None or fingerprint.get("path") != str(path):
            return
        old = None if before is None else fs.digest_bytes(before)
        if old != fingerprint.get("sha256") or fs.digest_bytes(after) != fingerprint.get(
            "new_sha256"
        ):
            return
        try:
            validate_read_path(path, self.policy, self.workspace)
        except RuneError:
            return
        if before is not None:
            self.changes.keep(before)
        self.changes.keep(after)

    def _record(self, change: PreparedChange) -> None:
        fingerprint = change.fingerprint
        path, before, after = (fingerprint.get(k) for k in ("path", "sha256", "new_sha256"))
        if self.changes is None or not isinstance(path, str) or not isinstance(after, str):
            return
        if before is None or isinstance(before, str):
            self.changes.applied(change.tool, Path(path), before, after)

    def content_before_changes(self, path: str) -> bytes | None:
        """What the file ``path`` (relative to the workspace, or absolute) held before this
        executor first changed it, or holds now when it has not changed it; None when it
        created it, or it is not a file of the workspace a change may write (read as a change
        reads it: nothing is read for the model that it could not read without asking)."""
        resolved = Path(os.path.realpath(self.workspace / path))
        if resolved in self._originals:
            return self._originals[resolved]
        if not resolved.is_relative_to(os.path.realpath(self.workspace)):
            return None
        try:
            return current_content(self._ctx, path)[1]
        except (RuneError, OSError):
            return None

    def try_before_changes(self, check: str, check_args: Mapping[str, Any]) -> Trial | None:
        """The check run on the workspace as it was before this executor changed any file
        (the files it changed seen with their old content; nothing written; with nothing
        changed yet, the workspace as it is). None when it cannot be tried: a file was created
        since, or ``check`` is not a check tool."""
        checker = self._tools.get(check)
        if checker is None or checker.trial is None:
            return None
        if any(before is None for before in self._originals.values()):
            return None
        old = {path: before for path, before in self._originals.items() if before is not None}
        try:
            check_arguments(checker.spec, check_args)
            with _os_errors_as_tool_errors(check):
                return checker.trial(self._ctx, check_args, old)
        except RuneError:
            return None

    def try_change(
        self,
        name: str,
        arguments: Mapping[str, Any],
        check: str,
        check_args: Mapping[str, Any],
    ) -> Trial | None:
        """The check ``check(check_args)`` run on the workspace as it would be after the
        change ``name(arguments)``: in the check's sandbox, nothing written. A change that
        cannot be made fails with its error; None when it cannot be tried this way (not a file
        change, a file that does not exist yet, not a check tool, no sandbox)."""
        tool, checker = self._tools.get(name), self._tools.get(check)
        if tool is None or tool.planned is None or checker is None or checker.trial is None:
            return None
        try:
            check_arguments(checker.spec, check_args)
        except RuneError:
            return None
        try:
            check_arguments(tool.spec, arguments)
            with _os_errors_as_tool_errors(name):
                path, _, after = tool.planned(self._ctx, arguments)
        except RuneError as err:
            return Trial(passed=False, report=str(err), made=False)
        if not path.is_file():
            return None
        try:
            with _os_errors_as_tool_errors(check):
                return checker.trial(self._ctx, check_args, {path: after})
        except RuneError:
            return None

    def commands_contained(self) -> bool:
        """Whether run_command would run inside bubblewrap now (for `rune doctor`)."""
        try:
            return containment(self._ctx) is not None
        except ToolError:
            return False
