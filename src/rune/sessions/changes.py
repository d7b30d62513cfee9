"""What each applied file change replaced, kept in its session so it can be taken back after a
restart (``rune undo``, :mod:`rune.sessions.undo`).

Recording takes two steps. Before the write, the executor hands over the bytes the change
replaces and the bytes it writes; they are kept in the session's blob store,
``<session>/blobs/<sha256>`` (zlib-compressed, named by the sha256 of the content, written to
a temp file, fsynced, renamed). After the write, a ``change`` record in the journal names the
tool, the file and both digests (``before`` null: the change created the file). A process
killed between the two leaves a blob nobody names, never a record without its blob.

Only what Rune may read is kept: the executor keeps nothing for a file the sandbox would not
let ``read_file`` read, so no credential file's content ever lands here. What is kept is
bounded: a content over :data:`MAX_KEPT_BYTES`, or one that would take a session's blobs past
:data:`MAX_SESSION_BYTES`, is not kept; its change is still recorded, and undoing it is
refused with a message saying why (a change that created a file can still be undone).

``undo`` records (``{"action": "undo" | "redo", "steps": [...], "files": [...]}``) say which
changes were taken back or brought back; :func:`history` replays both kinds of record into
where each change stands. Inside the journal, changes are numbered 1, 2, ... in the order they
were applied (:attr:`Change.step`); a person sees them by the step of the run that made them
(:attr:`Change.turn`: the ``step N/8`` the run showed), read from the tool event that follows
each change record.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from rune.sessions import journal, records
from rune.sessions.journal import Record
from rune.sessions.store import Session
from rune.tools.fs import digest_bytes

#: the largest content kept for one file (the largest file the edit tools change is 4 MiB; a
#: write_file may carry a little more, up to the 8 MiB of one model reply)
MAX_KEPT_BYTES = 8 * 1024 * 1024
#: the most one session keeps on disk, compressed
MAX_SESSION_BYTES = 64 * 1024 * 1024
BLOBS_NAME = "blobs"
_DIGEST = re.compile(r"^[0-9a-f]{64}$")

Action = Literal["undo", "redo"]


def is_digest(value: object) -> bool:
    return isinstance(value, str) and bool(_DIGEST.match(value))


class BlobStore:
    """Contents by their sha256, under one session's directory (Rune's own data: mode 700)."""

    def __init__(self, session_directory: Path) -> None:
        self.directory = session_directory / BLOBS_NAME
        self._guard = threading.Lock()

    def _path(self, digest: str) -> Path:
        if not is_digest(digest):
            raise ValueError(f"{digest!r} is not a sha256 digest")
        return self.directory / digest

    def used(self) -> int:
        """Bytes the kept blobs take on disk."""
        try:
            return sum(entry.stat().st_size for entry in os.scandir(self.directory))
        except OSError:
            return 0

    def has(self, digest: str) -> bool:
        return is_digest(digest) and self._path(digest).is_file()

    def put(self, content: bytes) -> bool:
        """Keep ``content`` durably; False when it is over the caps or cannot be written."""
        digest = digest_bytes(content)
        if self.has(digest):
            return True
        if len(content) > MAX_KEPT_BYTES:
            return False
        packed = zlib.compress(content, 6)
        with self._guard:
            if self.used() + len(packed) > MAX_SESSION_BYTES:
                return False
            target = self._path(digest)
            temporary = self.directory / f".{digest}.{os.getpid()}.{threading.get_ident()}"
            try:
                os.makedirs(self.directory, mode=0o700, exist_ok=True)
                fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                try:
                    view = memoryview(packed)
                    while view:
                        view = view[os.write(fd, view) :]
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(temporary, target)
                directory_fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    os.fsync(directory_fd)
                finally:
                    os.close(directory_fd)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                return False
        return True

    def get(self, digest: str) -> bytes | None:
        """The content with ``digest``; None when it was not kept, or what is there does not
        hash to it (damaged, or put there by someone else)."""
        if not is_digest(digest):
            return None
        try:
            fd = os.open(self._path(digest), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            with os.fdopen(fd, "rb") as fh:
                packed = fh.read(MAX_SESSION_BYTES + 1)
        except OSError:
            return None
        inflate = zlib.decompressobj()
        try:
            # bounded: a blob that inflates past the cap was not written by Rune
            content = inflate.decompress(packed, MAX_KEPT_BYTES + 1)
        except zlib.error:
            return None
        if len(content) > MAX_KEPT_BYTES or digest_bytes(content) != digest:
            return None
        return content


class ChangeLog:
    """The executor's :class:`rune.tools.spec.ChangeRecorder` for one session."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.blobs = BlobStore(session.directory)

    def keep(self, content: bytes) -> None:
        self.blobs.put(content)

    def applied(self, tool: str, path: Path, before: str | None, after: str) -> None:
        self.session.write(
            records.ChangeMade({"tool": tool, "path": str(path), "before": before, "after": after})
        )


@dataclass(frozen=True, slots=True)
class Change:
    """One applied file change: the ``step``-th of its session, made at the run's step
    ``turn`` (what ``rune undo`` shows and ``--step`` takes)."""

    step: int
    tool: str
    path: str
    before: str | None
    after: str
    ts: str
    turn: int = 0


@dataclass(frozen=True, slots=True)
class Move:
    """One file put from the content with digest ``source`` to ``target`` (None: absent)."""

    path: str
    source: str | None
    target: str | None

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "from": self.source, "to": self.target}

    def reversed(self) -> Move:
        return Move(self.path, self.target, self.source)


@dataclass(frozen=True, slots=True)
class Reversal:
    """A journaled undo or redo: which steps it took back (or brought back), and how."""

    action: Action
    steps: tuple[int, ...]
    moves: tuple[Move, ...]


@dataclass(slots=True)
class History:
    """Where a session's changes stand after replaying its journal."""

    changes: list[Change] = field(default_factory=list)
    #: the steps in effect (applied, and not undone since)
    applied: set[int] = field(default_factory=set)
    #: undos not redone since, the latest last
    undone: list[Reversal] = field(default_factory=list)
    #: records that could not be used, each named by its journal line
    problems: list[str] = field(default_factory=list)

    def change(self, step: int) -> Change | None:
        return self.changes[step - 1] if 0 < step <= len(self.changes) else None

    def turns(self, steps: Iterable[int]) -> tuple[int, ...]:
        """The run's steps that made the changes numbered ``steps``."""
        return tuple(sorted({c.turn for s in steps if (c := self.change(s)) is not None}))

    def latest_applied(self) -> Change | None:
        return next((c for c in reversed(self.changes) if c.step in self.applied), None)


def _optional_digest(value: object) -> bool:
    return value is None or is_digest(value)


def _move(data: object) -> Move | None:
    if not isinstance(data, Mapping):
        return None
    path, source, target = data.get("path"), data.get("from"), data.get("to")
    if not isinstance(path, str) or not _optional_digest(source) or not _optional_digest(target):
        return None
    return Move(path, source, target)


def _change(record: Record, step: int) -> Change | None:
    data = record.data
    tool, path, before, after = (data.get(k) for k in ("tool", "path", "before", "after"))
    if not isinstance(tool, str) or not isinstance(path, str) or not is_digest(after):
        return None
    if not _optional_digest(before):
        return None
    assert isinstance(after, str)
    return Change(step, tool, path, before, after, record.ts)


def _reversal(record: Record, known: int) -> Reversal | None:
    data = record.data
    action, steps, files = data.get("action"), data.get("steps"), data.get("files")
    if action not in ("undo", "redo") or not isinstance(steps, list) or not isinstance(files, list):
        return None
    if not all(isinstance(s, int) and not isinstance(s, bool) and 0 < s <= known for s in steps):
        return None
    moves = [_move(f) for f in files]
    if any(m is None for m in moves):
        return None
    return Reversal(action, tuple(steps), tuple(m for m in moves if m is not None))


def _iteration(record: Record) -> int | None:
    event = record.data.get("event")
    number = event.get("iteration") if isinstance(event, Mapping) else None
    return number if isinstance(number, int) and not isinstance(number, bool) else None


class _Turns:
    """The run's step numbers, counted on across the session: a later budget or task starts
    at 1 again in what the run showed, so its steps follow the ones before it here (a session
    of one budget reads exactly as its run did)."""

    def __init__(self) -> None:
        self.offset = 0
        self.last = 0

    def new_run(self) -> None:
        self.offset, self.last = self.offset + self.last, 0

    def of(self, iteration: int) -> int:
        if iteration < self.last:  # a renewed budget
            self.new_run()
        self.last = max(self.last, iteration)
        return self.offset + iteration


def history(records: Iterable[Record]) -> History:
    """Replay the change and undo records of a journal."""
    found = History()
    turns = _Turns()
    unnumbered: Change | None = None
    for record in records:
        if record.kind == journal.USER:
            turns.new_run()
        elif record.kind == journal.TURN_END and isinstance(
            used := record.data.get("iterations_used"), int
        ):
            turns.last = max(turns.last, used)  # the answer's step, after the last tool's
        elif record.kind == journal.TOOL_EVENT and (iteration := _iteration(record)) is not None:
            turn = turns.of(iteration)
            if unnumbered is not None:
                found.changes[unnumbered.step - 1] = replace(unnumbered, turn=turn)
                unnumbered = None
        elif record.kind == journal.CHANGE:
            change = _change(record, len(found.changes) + 1)
            if change is None:
                found.problems.append(
                    f"journal line {record.line}: a change record Rune cannot use"
                )
                continue
            # Until its tool event says otherwise: the step of the last event, or its number.
            change = replace(change, turn=turns.offset + turns.last or change.step)
            found.changes.append(change)
            found.applied.add(change.step)
            unnumbered = change
        elif record.kind == journal.UNDO:
            reversal = _reversal(record, len(found.changes))
            if reversal is None:
                found.problems.append(f"journal line {record.line}: an undo record Rune cannot use")
                continue
            if reversal.action == "undo":
                found.applied.difference_update(reversal.steps)
                found.undone.append(reversal)
            else:
                found.applied.update(reversal.steps)
                if found.undone and found.undone[-1].steps == reversal.steps:
                    found.undone.pop()
    return found


def record_reversal(
    session: Session, action: Action, steps: Sequence[int], moves: Sequence[Move]
) -> None:
    files = [m.to_json() for m in moves]
    session.write(records.Undone({"action": action, "steps": list(steps), "files": files}))
