"""Durable sessions: an append-only journal per session, locked by the process driving it."""

from rune.sessions.journal import JournalContents, Record, read_journal
from rune.sessions.status import Status
from rune.sessions.store import Session, SessionStore, SessionSummary, default_root

__all__ = [
    "JournalContents",
    "Record",
    "Session",
    "SessionStore",
    "SessionSummary",
    "Status",
    "default_root",
    "read_journal",
]
