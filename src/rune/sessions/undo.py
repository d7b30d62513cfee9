"""Taking back a session's file changes, and bringing them back: ``rune undo``, ``rune redo``
and the TUI's ``/undo`` all call :func:`undo` and :func:`redo` with an open session.

An undo restores what the chosen changes replaced (:mod:`rune.sessions.changes` kept it); a
change that created a file is undone by removing the file. Nothing is written unless every file
still holds exactly what Rune left there: otherwise the whole undo is refused with the
situation file by file (what Rune wrote, what is there now, what the undo would restore), so
the user's own edits are never overwritten. Every write goes through the sandbox's choke point
(``validate_write_path``) and is atomic (``fs.atomic_write``, ``fs.atomic_remove``), under a
policy that writes the session's workspace only: a journal naming a path outside it, or one
that now resolves elsewhere (a symlink), is refused, never followed. Git is never run: in a
repository, the index and the commits stay as they are.

For ``--all``, the changes of one file are undone back to the start of the last unbroken run
of them: when a file did not hold what one change wrote by the time the next one changed it (it
was deleted, or edited outside Rune, in between), the earlier changes are left as they are and
the report says so. Each undo and redo is journaled (an ``undo`` record); ``redo`` brings back
what the latest undo not yet redone took back.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rune.errors import RuneError, UndoRefused
from rune.sessions.changes import (
    MAX_KEPT_BYTES,
    Action,
    BlobStore,
    Change,
    History,
    Move,
    history,
    record_reversal,
)
from rune.sessions.store import Session
from rune.text import for_display, plural
from rune.tools import fs
from rune.tools.display import is_binary
from rune.tools.sandbox import SandboxPolicy, validate_write_path

#: how many lines of each diff a refusal shows
SHOWN_DIFF_LINES = 40
#: per action: what the file should hold now, what the action would put there, and how the
#: first reads in a sentence
_LABELS: dict[Action, tuple[str, str, str]] = {
    "undo": ("what Rune wrote", "what undo would restore", "what Rune wrote"),
    "redo": ("what the undo left", "what redo would put back", "what the undo left"),
}
_DONE: dict[Action, str] = {"undo": "undone", "redo": "redone"}


@dataclass(frozen=True, slots=True)
class Report:
    """What an undo or redo did: the run's steps it took back (or brought back) and each
    file."""

    action: Action
    session_id: str
    steps: tuple[int, ...]
    moves: tuple[Move, ...]
    workspace: Path
    notes: tuple[str, ...] = ()
    #: files that held what the action leaves already (nothing was written to them)
    settled: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        verb = "undid" if self.action == "undo" else "redid"
        plural = "s" if len(self.steps) != 1 else ""
        listed = ", ".join(str(s) for s in self.steps)
        lines = [f"{verb} step{plural} {listed} of session {self.session_id}"]
        for move in self.moves:
            name = _shown(move.path, self.workspace)
            if move.path in self.settled:
                lines.append(f"  {name} is already as {self.action} leaves it; nothing written")
            elif move.target is None:
                lines.append(f"  removed {name}")
            elif move.source is None:
                lines.append(f"  recreated {name}")
            else:
                lines.append(f"  restored {name}")
        lines.extend(f"  note: {note}" for note in self.notes)
        return lines


@dataclass(frozen=True, slots=True)
class _Planned:
    move: Move
    steps: tuple[int, ...]
    #: the run's step whose content the file should hold now (for the messages)
    step: int


def _shown(path: str, workspace: Path) -> str:
    candidate = Path(path)
    if candidate.is_relative_to(workspace) and candidate != workspace:
        return for_display(str(candidate.relative_to(workspace)), keep="")
    return for_display(path, keep="")


def _steps(steps: Sequence[int]) -> str:
    return ("step " if len(steps) == 1 else "steps ") + ", ".join(str(s) for s in steps)


def _undo_plan(found: History, targets: Sequence[Change]) -> tuple[list[_Planned], list[str]]:
    """For each file, from what the latest chosen change wrote back to what the earliest of
    its unbroken run replaced."""
    by_path: dict[str, list[Change]] = {}
    for change in targets:
        by_path.setdefault(change.path, []).append(change)
    planned: list[_Planned] = []
    notes: list[str] = []
    for path, changes in by_path.items():
        ordered = sorted(changes, key=lambda c: c.step, reverse=True)
        head = ordered[0]
        target, covered = head.before, [head.step]
        for index, earlier in enumerate(ordered[1:], start=1):
            if earlier.after != target:
                left = sorted({c.turn for c in ordered[index:]})
                notes.append(
                    f"{_steps(left)} left as {'it is' if len(left) == 1 else 'they are'}: the "
                    f"file did not hold what step {earlier.turn} wrote when step "
                    f"{ordered[index - 1].turn} changed it (it was changed outside Rune in "
                    "between)"
                )
                break
            target = earlier.before
            covered.append(earlier.step)
        planned.append(_Planned(Move(path, head.after, target), tuple(sorted(covered)), head.turn))
    return planned, notes


def _refuse_later_changes(found: History, targets: Sequence[Change], workspace: Path) -> None:
    chosen = {c.step for c in targets}
    for change in targets:
        later = [
            c.turn
            for c in found.changes
            if c.path == change.path
            and c.step > change.step
            and c.step in found.applied
            and c.step not in chosen
        ]
        if later:
            raise UndoRefused(
                f"{_steps(sorted(set(later)))} changed {_shown(change.path, workspace)} after "
                f"step {change.turn}; undo {'it' if len(later) == 1 else 'them'} first (or use "
                "--all). Nothing was restored."
            )


def _check_workspace(session: Session, workspace: Path) -> Path:
    here = Path(os.path.realpath(workspace))
    recorded = session.meta.get("workspace")
    if not isinstance(recorded, str) or Path(os.path.realpath(recorded)) != here:
        shown = for_display(str(recorded), keep="")
        raise UndoRefused(
            f"session {session.id} worked in {shown}, not in {for_display(str(here), keep='')}; "
            f"undo it from there (or with --workspace {shown}). Nothing was restored."
        )
    return here


def undo(
    session: Session, workspace: Path, *, step: int | None = None, every: bool = False
) -> Report:
    """Take back the session's latest change in effect (or change ``step``, or all of them)."""
    here = _check_workspace(session, workspace)
    found = history(session.records)
    if every:
        targets = [c for c in found.changes if c.step in found.applied]
    elif step is not None:
        at_step = [c for c in found.changes if c.turn == step]
        if not at_step:
            raise UndoRefused(
                f"session {session.id} changed no file at step {step}: it made "
                f"{plural(len(found.changes), 'file change')} (`rune undo --list`)"
            )
        targets = [c for c in at_step if c.step in found.applied]
        if not targets:
            raise UndoRefused(f"step {step} is undone already; `rune redo` brings it back")
    else:
        latest = found.latest_applied()
        targets = [latest] if latest is not None else []
    if not targets:
        made = len(found.changes)
        why = "it changed no file" if not made else f"its {made} change(s) are all undone"
        raise UndoRefused(f"nothing to undo in session {session.id}: {why}")
    _refuse_later_changes(found, targets, here)
    planned, notes = _undo_plan(found, targets)
    return _carry_out(session, here, "undo", planned, notes, found)


def redo(session: Session, workspace: Path) -> Report:
    """Bring back what the latest undo of the session (not redone yet) took back."""
    here = _check_workspace(session, workspace)
    found = history(session.records)
    if not found.undone:
        raise UndoRefused(f"nothing to redo in session {session.id}: no undo waits to be redone")
    last = found.undone[-1]
    planned = [_Planned(m.reversed(), last.steps, 0) for m in last.moves]
    return _carry_out(session, here, "redo", planned, [], found)


def _carry_out(
    session: Session,
    workspace: Path,
    action: Action,
    planned: list[_Planned],
    notes: list[str],
    found: History,
) -> Report:
    policy = SandboxPolicy.workspace_only(workspace)
    blobs = BlobStore(session.directory)
    #: each file: its path, the content to put there (None: remove it), and whether it holds
    #: that already (a process stopped after the write, before journaling it)
    writes: list[tuple[_Planned, Path, bytes | None, bool]] = []
    refusals: list[str] = []
    for item in planned:
        move = item.move
        path = _allowed_path(move.path, policy, workspace)
        now = _current(path, policy, workspace)
        now_digest = None if now is None else fs.digest_bytes(now)
        if now_digest == move.target:
            writes.append((item, path, None, True))
            continue
        wanted = None if move.target is None else blobs.get(move.target)
        if now_digest != move.source:
            refusals.append(_situation(action, item, workspace, blobs, now, wanted))
            continue
        if move.target is not None and wanted is None:
            refusals.append(_not_kept(action, item, workspace))
            continue
        if now is not None:
            blobs.put(now)  # what a later redo (or undo) of this needs back
        writes.append((item, path, wanted, False))
    if refusals:
        raise UndoRefused("\n".join(refusals))
    done: list[_Planned] = []
    try:
        for item, path, content, already in writes:
            move = item.move
            if already:
                pass
            elif move.target is None:
                assert move.source is not None
                fs.atomic_remove(path, policy, workspace=workspace, expected_digest=move.source)
            else:
                assert content is not None
                fs.atomic_write(
                    path, content, policy, workspace=workspace, expected_digest=move.source
                )
            done.append(item)
    except RuneError as err:
        if done:
            _journal(session, action, done, planned)
        name = _shown(item.move.path, workspace)
        finished = ", ".join(_shown(d.move.path, workspace) for d in done) or "none"
        raise UndoRefused(
            f"{action} stopped at {name}: {err} Files {_DONE[action]} before it: {finished}."
        ) from None
    steps = _journal(session, action, done, planned)
    settled = tuple(item.move.path for item, _, _, already in writes if already)
    moves = tuple(i.move for i in done)
    return Report(action, session.id, found.turns(steps), moves, workspace, tuple(notes), settled)


def _journal(
    session: Session, action: Action, done: list[_Planned], planned: list[_Planned]
) -> tuple[int, ...]:
    """Record what was done; after a failure part-way, only the steps whose every file was
    moved count as undone (or redone)."""
    missed = {s for item in planned if item not in done for s in item.steps}
    steps = sorted({s for item in done for s in item.steps} - missed)
    record_reversal(session, action, steps, [item.move for item in done])
    return tuple(steps)


def _allowed_path(raw: str, policy: SandboxPolicy, workspace: Path) -> Path:
    """The journal's path, if the undo may write it: inside the workspace, not protected, and
    resolving to itself (no symlink on the way)."""
    shown = _shown(raw, workspace)
    if not os.path.isabs(raw):
        raise UndoRefused(f"the journal names {shown}, not an absolute path; nothing was restored")
    try:
        resolved = validate_write_path(raw, policy, workspace)
    except RuneError as err:
        raise UndoRefused(f"{err} Nothing was restored.") from None
    if resolved != Path(os.path.normpath(raw)):
        raise UndoRefused(
            f"{shown} now resolves to {for_display(str(resolved), keep='')} (a symlink on the "
            "way); Rune does not follow it. Nothing was restored."
        )
    return resolved


def _current(path: Path, policy: SandboxPolicy, workspace: Path) -> bytes | None:
    """What the file holds now (None: no file), read without following a symlink."""
    try:
        with fs.open_parent(path, policy.write_roots, create=False) as parent:
            found = fs.read_at(parent, path.name, path, MAX_KEPT_BYTES)
    except FileNotFoundError:
        return None
    except RuneError as err:
        raise UndoRefused(f"{err} Nothing was restored.") from None
    if found.truncated:
        raise UndoRefused(
            f"{_shown(str(path), workspace)} is {found.size} bytes now, more than Rune ever "
            "wrote there: it changed since. Nothing was restored."
        )
    return found.data


def _describe(content: bytes | None, digest: str | None) -> str:
    if digest is None:
        return "no file"
    if content is None:
        return f"sha256 {digest[:12]}, no copy kept"
    if is_binary(content):
        return f"{len(content)} bytes, binary (sha256 {digest[:12]})"
    return f"{len(content.splitlines())} lines (sha256 {digest[:12]})"


def _diff(old: bytes | None, new: bytes | None, old_label: str, new_label: str) -> list[str]:
    if is_binary(old) or is_binary(new):
        return ["    (binary content: no diff shown)"]
    a = [] if old is None else old.decode("utf-8", "replace").splitlines()
    b = [] if new is None else new.decode("utf-8", "replace").splitlines()
    lines = list(difflib.unified_diff(a, b, old_label, new_label, lineterm="", n=2))
    shown = [f"    {for_display(line, keep=chr(9))}" for line in lines[:SHOWN_DIFF_LINES]]
    if len(lines) > SHOWN_DIFF_LINES:
        shown.append(f"    [{len(lines) - SHOWN_DIFF_LINES} more diff lines not shown]")
    return shown


def _situation(
    action: Action,
    item: _Planned,
    workspace: Path,
    blobs: BlobStore,
    now: bytes | None,
    wanted: bytes | None,
) -> str:
    move = item.move
    name = _shown(move.path, workspace)
    expected = None if move.source is None else blobs.get(move.source)
    now_digest = None if now is None else fs.digest_bytes(now)
    left, restores, phrase = _LABELS[action]
    since = f"Rune wrote it (step {item.step})" if action == "undo" else "the undo"
    lines = [
        f"{name} changed since {since}; nothing was restored, nothing lost.",
        f"  {left + ':':<26}{_describe(expected, move.source)}",
        f"  {'what is there now:':<26}{_describe(now, now_digest)}",
        f"  {restores + ':':<26}{_describe(wanted, move.target)}",
    ]
    if move.source is None or expected is not None:
        lines.append("  changed since:")
        lines.extend(_diff(expected, now, f"{name} ({phrase})", f"{name} (now)"))
    if move.target is None or wanted is not None:
        lines.append(f"  what {action} would do to it now:")
        lines.extend(_diff(now, wanted, f"{name} (now)", f"{name} (after {action})"))
    lines.append(
        f"  Keep the file as it is, or put back {phrase} and run `rune {action}` once more."
    )
    return "\n".join(lines)


def _not_kept(action: Action, item: _Planned, workspace: Path) -> str:
    name = _shown(item.move.path, workspace)
    return (
        f"{name}: Rune kept no copy of the content {action} would put back (over "
        "the size Rune keeps, a file Rune may not read, or a damaged copy); nothing was "
        "restored. Restore it from your version control or a backup."
    )


def listing(session: Session, workspace: Path) -> list[str]:
    """The session's changes by the run's step that made them, each with where it stands."""
    found = history(session.records)
    lines = [f"session {session.id}: {plural(len(found.changes), 'file change')}"]
    for change in found.changes:
        state = "in effect" if change.step in found.applied else "undone"
        verb = "created" if change.before is None else "changed"
        lines.append(
            f"  step {change.turn:<3} {state:<9}  {change.tool} {verb} "
            f"{_shown(change.path, workspace)}  ({change.ts})"
        )
    lines.extend(f"  warning: {problem}" for problem in found.problems)
    return lines
