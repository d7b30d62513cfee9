"""The session journal: one JSON record per line, appended, flushed and fsynced one by one.

A record is ``{"kind": ..., "ts": ..., "data": {...}}``. The journal is the source of truth
for a session; reading it never gives up on the whole file because of one bad line: a corrupt
or truncated line becomes a warning naming its line number, and every other record is kept.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rune.errors import SessionError

SESSION = "session"  # the header: model, workspace, backend, title, created_at
USER = "user"  # a user turn begins: {"message": {...}}
MESSAGE = "message"  # a message the loop added (assistant, tool result): {"message": {...}}
TOOL_EVENT = "tool_event"  # {"event": ToolEvent.to_json()}
PENDING = "pending"  # the loop paused: {"state": pending_state}
DECISION = "decision"  # {"decision": "approved" | "rejected", "reason": str}
TURN_END = "turn_end"  # {"success", "text", "error", "error_kind", "iterations_used", ...}
CHANGE = "change"  # a file change applied: {"tool", "path", "before", "after"} (sha256 digests)
UNDO = "undo"  # changes taken back or brought back: {"action", "steps", "files"}
GRANT = "grant"  # allowed for the rest of the session: rune.grants.Grant.to_json()
KINDS = frozenset(
    {SESSION, USER, MESSAGE, TOOL_EVENT, PENDING, DECISION, TURN_END, CHANGE, UNDO, GRANT}
)


@dataclass(frozen=True, slots=True)
class Record:
    line: int
    kind: str
    ts: str
    data: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class JournalContents:
    records: tuple[Record, ...]
    warnings: tuple[str, ...]
    lines: int
    #: the file does not end with a newline: the next append must start a new line first
    ends_mid_line: bool


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def read_journal(path: Path) -> JournalContents:
    """Every readable record of ``path``; bad lines are reported by number, never dropped."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return JournalContents((), (), 0, False)
    except OSError as err:
        raise SessionError(f"cannot read the session journal {path}: {err.strerror}") from None
    ends_mid_line = bool(raw) and not raw.endswith(b"\n")
    lines = raw.split(b"\n")
    if not ends_mid_line:
        lines = lines[:-1]
    records: list[Record] = []
    warnings: list[str] = []
    for number, line in enumerate(lines, start=1):
        last = number == len(lines)
        problem = None
        if not line.strip():
            problem = "empty line"
        else:
            try:
                obj = json.loads(line.decode("utf-8"))
            except UnicodeDecodeError:
                problem = "not UTF-8 text"
            except json.JSONDecodeError as err:
                problem = f"not valid JSON ({err.msg} at column {err.colno})"
            else:
                if (
                    isinstance(obj, dict)
                    and obj.get("kind") in KINDS
                    and isinstance(obj.get("data"), dict)
                ):
                    records.append(Record(number, obj["kind"], str(obj.get("ts", "")), obj["data"]))
                    continue
                problem = "not a Rune journal record"
        if last and ends_mid_line:
            problem = f"truncated record, the writer stopped mid-line ({problem})"
        warnings.append(f"{path.name} line {number}: {problem}; skipped, the rest was recovered")
    return JournalContents(tuple(records), tuple(warnings), len(lines), ends_mid_line)


#: the kinds that change where a session stands (see ``rune.sessions.store.status_of``)
STATE_KINDS = frozenset({SESSION, USER, PENDING, DECISION, TURN_END})
#: how every record line begins: ``json.dumps`` keeps the keys in the order they are written
_HEAD = re.compile(rb'^\{"kind": "([a-z_]+)", "ts": "([^"]*)"')


def line_head(line: bytes) -> tuple[str, str] | None:
    """The kind and timestamp of a record line, read from its first bytes without parsing the
    rest (a record may hold megabytes of tool output); None for a line that is not a record."""
    found = _HEAD.match(line[:96])
    if found is None:
        return None
    return found.group(1).decode("ascii"), found.group(2).decode("ascii", "replace")


class JournalWriter:
    """Appends records durably: each one is on disk (fsync) before ``append`` returns.

    One writer is driven by one thread at a time; a lock still guards the descriptor, so a
    ``close`` from another thread (the TUI quitting while a call ends) never races a write
    onto a descriptor number the system has already handed to another file."""

    def __init__(self, path: Path, *, lines: int = 0, ends_mid_line: bool = False) -> None:
        self.path = path
        self._lines = lines
        self._guard = threading.Lock()
        #: the journal's size in bytes after the last record this writer appended
        self.size = 0
        try:
            self._fd: int | None = os.open(
                path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600
            )
        except OSError as err:
            raise SessionError(f"cannot open the session journal {path}: {err.strerror}") from None
        if ends_mid_line:
            # Close off a line a killed writer left half-written, so it stays one bad line.
            self._write(b"\n")
        self.size = os.fstat(self._fd).st_size

    def append(self, kind: str, data: Mapping[str, Any]) -> Record:
        if kind not in KINDS:
            raise ValueError(f"unknown journal record kind {kind!r}")
        ts = now()
        try:
            # ASCII escapes: whatever text a model produced (lone surrogates included) is
            # written and read back exactly, never refused halfway through a turn.
            line = json.dumps({"kind": kind, "ts": ts, "data": data}, ensure_ascii=True)
        except (TypeError, ValueError) as err:
            raise SessionError(f"a {kind} record cannot be written as JSON: {err}") from None
        self._write(line.encode("utf-8") + b"\n")
        self._lines += 1
        return Record(self._lines, kind, ts, json.loads(line)["data"])

    def _write(self, payload: bytes) -> None:
        with self._guard:
            if self._fd is None:
                raise SessionError(f"the session journal {self.path} is closed")
            try:
                view = memoryview(payload)
                while view:
                    written = os.write(self._fd, view)
                    view = view[written:]
                os.fsync(self._fd)
            except OSError as err:
                raise SessionError(
                    f"cannot write the session journal {self.path}: {err.strerror}"
                ) from None
            self.size += len(payload)

    def close(self) -> None:
        with self._guard:
            if self._fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
                self._fd = None
