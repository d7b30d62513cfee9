"""Sessions on disk: one directory per session holding its journal and its lock.

``<root>/<session id>/journal.jsonl`` is the append-only journal; ``<root>/<id>/lock`` is held
with ``fcntl.flock`` by the one process driving the session and names its pid. The root is
``$RUNE_DATA_DIR/sessions`` when that variable is set, else the platform's user data
directory (platformdirs) ``/sessions``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from rune.errors import SessionError, SessionLocked, SessionNotFound
from rune.messages import Message
from rune.paths import data_dir
from rune.sessions import journal
from rune.sessions.journal import JournalWriter, Record, read_journal

Status = Literal["done", "pending approval", "failed", "active"]
JOURNAL_NAME = "journal.jsonl"
LOCK_NAME = "lock"
_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def default_root() -> Path:
    return data_dir() / "sessions"


def status_of(records: tuple[Record, ...] | list[Record]) -> Status:
    """Where a session stands, from the last record that changes it."""
    for record in reversed(records):
        if record.kind == journal.PENDING:
            return "pending approval"
        if record.kind == journal.TURN_END:
            return "done" if record.data.get("success") else "failed"
        if record.kind in (journal.USER, journal.DECISION):
            return "active"
    return "active"


def pending_record(records: tuple[Record, ...] | list[Record]) -> Record | None:
    """The pause the session waits on, if its last state-changing record is one."""
    for record in reversed(records):
        if record.kind == journal.PENDING:
            return record
        if record.kind in (journal.DECISION, journal.TURN_END, journal.USER):
            return None
    return None


@dataclass(frozen=True, slots=True)
class SessionSummary:
    id: str
    status: Status
    title: str
    model: str
    updated_at: str
    warnings: tuple[str, ...] = ()


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

    # --- writing ------------------------------------------------------------------------

    def append(self, kind: str, data: Mapping[str, Any]) -> Record:
        """Write one record; it is on disk (fsynced) when this returns."""
        record = self._writer.append(kind, data)
        self._records.append(record)
        return record

    # --- reading ------------------------------------------------------------------------

    @property
    def records(self) -> tuple[Record, ...]:
        return tuple(self._records)

    @property
    def meta(self) -> Mapping[str, Any]:
        header = next((r for r in self._records if r.kind == journal.SESSION), None)
        return header.data if header is not None else {}

    @property
    def messages(self) -> list[Message]:
        """The conversation so far (user turns and everything the loop added), in order."""
        return [
            dict(r.data["message"])
            for r in self._records
            if r.kind in (journal.USER, journal.MESSAGE) and isinstance(r.data.get("message"), dict)
        ]

    @property
    def turn_starts(self) -> list[int]:
        """Indices in :attr:`messages` where the user turns begin."""
        starts: list[int] = []
        count = 0
        for r in self._records:
            if r.kind in (journal.USER, journal.MESSAGE) and isinstance(
                r.data.get("message"), dict
            ):
                if r.kind == journal.USER:
                    starts.append(count)
                count += 1
        return starts

    @property
    def status(self) -> Status:
        return status_of(self._records)

    @property
    def pending_state(self) -> dict[str, Any] | None:
        """The pending approval's state, as the runtime wrote it, when the session waits."""
        record = pending_record(self._records)
        state = record.data.get("state") if record is not None else None
        return dict(state) if isinstance(state, dict) else None

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
        session.append(
            journal.SESSION,
            {
                "model": model,
                "workspace": workspace,
                "backend": backend,
                "title": title,
                "created_at": journal.now(),
            },
        )
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
        """Every session, most recently updated first. Reading takes no lock."""
        if not self.root.is_dir():
            return []
        summaries: list[SessionSummary] = []
        for directory in self.root.iterdir():
            path = directory / JOURNAL_NAME
            if not _SESSION_ID.match(directory.name) or not path.is_file():
                continue
            try:
                contents = read_journal(path)
            except SessionError as err:
                summaries.append(SessionSummary(directory.name, "failed", "", "", "", (str(err),)))
                continue
            header = next((r for r in contents.records if r.kind == journal.SESSION), None)
            meta = header.data if header is not None else {}
            summaries.append(
                SessionSummary(
                    id=directory.name,
                    status=status_of(contents.records),
                    title=str(meta.get("title", "")),
                    model=str(meta.get("model", "")),
                    updated_at=contents.records[-1].ts if contents.records else "",
                    warnings=contents.warnings,
                )
            )
        summaries.sort(key=lambda s: (s.updated_at, s.id), reverse=True)
        return summaries

    def latest(self, status: Status | None = None) -> SessionSummary | None:
        """The most recently updated session, optionally only one with ``status``."""
        return next((s for s in self.list() if status is None or s.status == status), None)
