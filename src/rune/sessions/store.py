"""Sessions on disk: one directory per session holding its journal and its lock.

``<root>/<session id>/journal.jsonl`` is the append-only journal; ``<root>/<id>/lock`` is held
with ``fcntl.flock`` by the one process driving the session and names its pid. The root is
``$RUNE_DATA_DIR/sessions`` when that variable is set, else the platform's user data
directory (platformdirs) ``/sessions``.

``<root>/<id>/summary.json`` is a cache for ``rune sessions``: the header's title, model and
workspace and the state after the last state-changing record, with the journal's size at that
record. A listing trusts it only when no state-changing record follows that offset (it reads
just the first bytes of the lines after it), so a stale or missing summary costs a full read of
that one journal, never a wrong answer.

The journal grows linearly: a pause for approval carries the whole conversation, but its record
keeps only what the journal does not already hold (the messages and tool events before it are
referred to by count: ``rune.pause.state.journal_form``; the fold puts them back).
"""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from rune.errors import SessionError, SessionLocked, SessionNotFound
from rune.messages import Message, ToolEvent
from rune.paths import data_dir
from rune.sessions import journal
from rune.sessions.journal import JournalWriter, Record, read_journal
from rune.sessions.status import STATUSES, Status

if TYPE_CHECKING:
    from rune.sessions.fold import SessionState
    from rune.sessions.records import Header, JournalRecord

__all__ = ["STATUSES", "Session", "SessionStore", "SessionSummary", "Status"]

JOURNAL_NAME = "journal.jsonl"
LOCK_NAME = "lock"
SUMMARY_NAME = "summary.json"
SUMMARY_VERSION = 2  # 2: an untitled session takes its first task as title
_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
#: the states ``prune`` may remove: the session ended, or never began
PRUNABLE: frozenset[Status] = frozenset({"new", "done", "incomplete", "iteration limit", "failed"})


def default_root() -> Path:
    return data_dir() / "sessions"


@dataclass(frozen=True, slots=True)
class SessionSummary:
    id: str
    status: Status
    title: str
    model: str
    updated_at: str
    warnings: tuple[str, ...] = ()
    workspace: str = ""
    backend: str = ""


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _lock(path: Path, session_id: str) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip() or "unknown"
        os.close(fd)
        raise SessionLocked(
            f"session {session_id} is being driven by another Rune process (pid {holder}); "
            "finish or close it there first"
        ) from None
    except OSError:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    return fd


def held_by_a_process(directory: Path) -> bool:
    """Whether a live process holds the session's lock (it is running, not interrupted)."""
    try:
        fd = os.open(directory / LOCK_NAME, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # also releases the shared lock, if it was taken
    return False


def _write_summary(directory: Path, summary: Mapping[str, Any]) -> None:
    """Replace the summary cache atomically; a failure only costs a slower listing."""
    target = directory / SUMMARY_NAME
    temporary = directory / f".{SUMMARY_NAME}.{os.getpid()}.{threading.get_ident()}"
    try:
        temporary.write_text(json.dumps(dict(summary), ensure_ascii=True), encoding="ascii")
        os.replace(temporary, target)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink()


def _summary(header: Header, status: Status, end: int, updated_at: str) -> dict[str, Any]:
    return {
        "v": SUMMARY_VERSION,
        "end": end,
        "status": status,
        "updated_at": updated_at,
        "title": header.title,
        "model": header.model,
        "workspace": header.workspace,
        "backend": header.backend,
    }


class Session:
    """One open, locked session. Use it as a context manager, or call :meth:`close`."""

    def __init__(self, session_id: str, directory: Path) -> None:
        self.id = session_id
        self.directory = directory
        self.journal_path = directory / JOURNAL_NAME
        try:
            self._lock_fd: int | None = _lock(directory / LOCK_NAME, session_id)
        except FileNotFoundError:
            raise SessionNotFound(f"no session {session_id} in {directory.parent}") from None
        try:
            contents = read_journal(self.journal_path)
            self.warnings: list[str] = list(contents.warnings)
            self._records = list(contents.records)
            if contents.lines and not self._records:
                raise SessionError(
                    f"nothing in the journal of session {session_id} can be read "
                    f"({contents.lines} damaged lines): {'; '.join(contents.warnings[:3])}"
                )
            self._writer = JournalWriter(
                self.journal_path, lines=contents.lines, ends_mid_line=contents.ends_mid_line
            )
        except BaseException:
            self._unlock()
            raise
        # (imported here: listing sessions reads their summaries, not their records)
        from rune.sessions.fold import Folding

        self._folding = Folding()
        for record in self._records:
            self._folding.add(record)

    # --- writing ------------------------------------------------------------------------

    def write(self, body: JournalRecord) -> Record:
        """Write one record; it is on disk (fsynced) when this returns. A pause is written in
        the journal's form: without what the journal already holds (``rune.pause.state``)."""
        from rune.sessions.records import Paused, Shared, data_of, kind_of

        if isinstance(body, Paused) and body.shared is None:
            from rune.pause.state import (
                journal_form,  # not at import: ``rune sessions`` starts fast
            )

            folded = self._folding
            state, shared = journal_form(body.state, folded.messages, folded.events)
            body = Paused(state, None if shared is None else Shared(*shared))
        return self.append(kind_of(body), data_of(body))

    def append(self, kind: str, data: Mapping[str, Any]) -> Record:
        """Write one record of ``kind`` as it is (:meth:`write` writes a typed one)."""
        record = self._writer.append(kind, data)
        self._records.append(record)
        self._folding.add(record)
        if kind in journal.STATE_KINDS:
            _write_summary(
                self.directory,
                _summary(self._folding.header, self.status, self._writer.size, record.ts),
            )
        return record

    # --- reading ------------------------------------------------------------------------

    @property
    def records(self) -> tuple[Record, ...]:
        return tuple(self._records)

    @property
    def state(self) -> SessionState:
        """Where the session stands (:func:`rune.sessions.fold.fold` of its records)."""
        return self._folding.state()

    @property
    def turn_events(self) -> list[ToolEvent]:
        """The tool events of the last user turn so far (``Folding.turn_events``)."""
        return self._folding.turn_events()

    @property
    def meta(self) -> Mapping[str, Any]:
        from rune.sessions.records import data_of

        return data_of(self._folding.header)

    @property
    def messages(self) -> list[Message]:
        """The conversation so far (user turns and everything the loop added), in order."""
        return [dict(m) for m in self._folding.messages]

    @property
    def turn_starts(self) -> list[int]:
        """Indices in :attr:`messages` where the user turns begin."""
        return list(self._folding.turn_starts)

    @property
    def status(self) -> Status:
        return self._folding.status

    @property
    def pending_state(self) -> dict[str, Any] | None:
        """The pending approval's state, exactly as the runtime wrote it, when the session
        waits."""
        waiting = self.state.waiting
        return dict(waiting.state) if waiting is not None else None

    # --- lifetime -----------------------------------------------------------------------

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    def close(self) -> None:
        writer = getattr(self, "_writer", None)
        if writer is not None:
            writer.close()
        self._unlock()

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class SessionStore:
    """Creates, opens and lists sessions under ``root`` (see :func:`default_root`)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_root()

    def _directory(self, session_id: str) -> Path:
        if not isinstance(session_id, str) or not _SESSION_ID.match(session_id):
            raise SessionNotFound(f"{session_id!r} is not a session id")
        return self.root / session_id

    def create(self, *, model: str, workspace: str, backend: str, title: str = "") -> Session:
        """A new session, open and locked, its header record already on disk."""
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            while True:
                stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
                session_id = f"{stamp}-{secrets.token_hex(3)}"
                directory = self.root / session_id
                try:
                    directory.mkdir(mode=0o700)
                    break
                except FileExistsError:
                    continue
        except OSError as err:
            raise SessionError(
                f"cannot create a session under {self.root}: {err.strerror}"
            ) from None
        session = Session(session_id, directory)
        from rune.sessions.records import Header

        session.write(Header(model, workspace, backend, title, journal.now()))
        _fsync_dir(directory)
        _fsync_dir(self.root)
        return session

    def open(self, session_id: str) -> Session:
        """Open and lock an existing session; another process holding it → SessionLocked."""
        directory = self._directory(session_id)
        if not (directory / JOURNAL_NAME).is_file():
            raise SessionNotFound(f"no session {session_id} in {self.root}")
        return Session(session_id, directory)

    def list(self) -> list[SessionSummary]:
        """Every session, most recently updated first. Reading takes no lock.

        Each session costs a ``stat``, its small summary file, and the first bytes of any
        records written after the summary's state; only a session without a usable summary
        (written by an older Rune, or caught between a state record and its summary) is read
        in full, and its summary is written for the next time.
        """
        if not self.root.is_dir():
            return []
        summaries: list[SessionSummary] = []
        for directory in self.root.iterdir():
            if not _SESSION_ID.match(directory.name):
                continue
            summary = self._summarize(directory)
            if summary is not None:
                summaries.append(summary)
        summaries.sort(key=lambda s: (s.updated_at, s.id), reverse=True)
        return summaries

    def _summarize(self, directory: Path) -> SessionSummary | None:
        path = directory / JOURNAL_NAME
        try:
            size = path.stat().st_size
        except OSError:
            return None
        cached = _cached_summary(directory, path, size)
        if cached is None:
            try:
                contents = read_journal(path)
            except SessionError as err:
                return SessionSummary(directory.name, "failed", "", "", "", (str(err),))
            from rune.sessions.fold import fold

            folded = fold(contents.records)
            updated = contents.records[-1].ts if contents.records else ""
            summary = _summary(folded.header, folded.status, size, updated)
            if not contents.warnings:
                _write_summary(directory, summary)
            cached = ({**summary, "warnings": contents.warnings}, updated)
        data, updated = cached
        status = data["status"]
        if status == "running" and not held_by_a_process(directory):
            status = "interrupted"
        return SessionSummary(
            id=directory.name,
            status=status,
            title=str(data.get("title", "")),
            model=str(data.get("model", "")),
            updated_at=updated,
            warnings=tuple(data.get("warnings", ())),
            workspace=str(data.get("workspace", "")),
            backend=str(data.get("backend", "")),
        )

    def read(self, session_id: str) -> journal.JournalContents:
        """A session's records, read without its lock (it may be running elsewhere)."""
        directory = self._directory(session_id)
        if not (directory / JOURNAL_NAME).is_file():
            raise SessionNotFound(f"no session {session_id} in {self.root}")
        return read_journal(directory / JOURNAL_NAME)

    def prune(self, older_than: timedelta) -> tuple[builtins.list[str], builtins.list[str]]:
        """Remove the sessions that ended (or never began) and were not updated for
        ``older_than``; one waiting for approval, running or interrupted is kept. Returns the
        ids removed and the ids skipped because a process holds them."""
        cutoff = (datetime.now(UTC) - older_than).isoformat(timespec="milliseconds")
        removed: builtins.list[str] = []
        busy: builtins.list[str] = []
        for summary in self.list():
            if summary.status not in PRUNABLE or summary.updated_at > cutoff:
                continue
            try:
                self.remove(summary.id)
            except SessionLocked:
                busy.append(summary.id)
            else:
                removed.append(summary.id)
        return removed, busy

    def remove(self, session_id: str) -> None:
        """Delete a session; one that a live process drives is refused (SessionLocked)."""
        directory = self._directory(session_id)
        if not (directory / JOURNAL_NAME).is_file():
            raise SessionNotFound(f"no session {session_id} in {self.root}")
        try:
            fd = _lock(directory / LOCK_NAME, session_id)
        except FileNotFoundError:
            fd = None
        try:
            shutil.rmtree(directory)
        except OSError as err:
            raise SessionError(f"cannot remove session {session_id}: {err.strerror}") from None
        finally:
            if fd is not None:
                os.close(fd)

    def latest(self, status: Status | None = None) -> SessionSummary | None:
        """The most recently updated session, optionally only one with ``status``."""
        return next((s for s in self.list() if status is None or s.status == status), None)


def _cached_summary(
    directory: Path, journal_path: Path, size: int
) -> tuple[dict[str, Any], str] | None:
    """The summary file and the time of the journal's last record, when the summary still
    tells the truth: nothing written after it changes the session's state."""
    try:
        data = json.loads((directory / SUMMARY_NAME).read_text(encoding="ascii"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("v") != SUMMARY_VERSION:
        return None
    end = data.get("end")
    if not isinstance(end, int) or data.get("status") not in STATUSES or end > size:
        return None
    updated = str(data.get("updated_at", ""))
    if end == size:
        return data, updated
    try:
        with journal_path.open("rb") as fh:
            fh.seek(end)
            tail = fh.read(size - end)
    except OSError:
        return None
    for line in tail.split(b"\n"):
        if not line:
            continue
        head = journal.line_head(line)
        if head is None or head[0] in journal.STATE_KINDS:
            return None
        updated = head[1]
    return data, updated
