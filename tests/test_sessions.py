"""The session store and journal: durability, lock, listing, corrupt-line recovery."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rune.errors import SessionError, SessionLocked, SessionNotFound
from rune.sessions import SessionStore, read_journal
from rune.sessions.store import default_root


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SessionStore:
    monkeypatch.setenv("RUNE_DATA_DIR", str(tmp_path / "data"))
    return SessionStore()


def run_python(code: str, env_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RUNE_DATA_DIR": str(env_dir)}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )


def test_root_comes_from_rune_data_dir(store: SessionStore, tmp_path: Path) -> None:
    assert store.root == tmp_path / "data" / "sessions"
    assert default_root() == store.root


def test_create_append_and_reopen(store: SessionStore) -> None:
    with store.create(model="qwen3", workspace="/w", backend="ollama", title="fix add") as s:
        s.append("user", {"message": {"role": "user", "content": "hi"}})
        s.append("message", {"message": {"role": "assistant", "content": "hello"}})
        s.append("turn_end", {"success": True, "text": "hello"})
        session_id = s.id
    with store.open(session_id) as again:
        assert again.meta["model"] == "qwen3"
        assert again.messages == [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
        ]
        assert again.status == "done"
        assert again.warnings == []
    [summary] = store.list()
    assert (summary.id, summary.status, summary.title, summary.model) == (
        session_id,
        "done",
        "fix add",
        "qwen3",
    )
    assert store.latest().id == session_id
    assert store.latest(status="pending approval") is None


def test_every_record_is_fsynced_before_append_returns(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    s = store.create(model="m", workspace="/w", backend="b")
    journal_path = str(s.journal_path)
    before = synced.count(journal_path)
    for n in range(5):
        s.append("message", {"message": {"role": "assistant", "content": str(n)}})
        assert synced.count(journal_path) == before + n + 1
        # and another process sees it at once
        lines = Path(journal_path).read_text().splitlines()
        assert json.loads(lines[-1])["data"]["message"]["content"] == str(n)
    s.close()


def test_a_second_process_is_refused_with_the_holders_pid(
    store: SessionStore, tmp_path: Path
) -> None:
    s = store.create(model="m", workspace="/w", backend="b")
    code = (
        "from rune.sessions import SessionStore\n"
        "from rune.errors import SessionLocked\n"
        "try:\n"
        f"    SessionStore().open({s.id!r})\n"
        "except SessionLocked as err:\n"
        "    print('LOCKED', err)\n"
    )
    out = run_python(code, tmp_path / "data")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("LOCKED")
    assert f"pid {os.getpid()}" in out.stdout
    s.close()
    out = run_python(code, tmp_path / "data")
    assert out.stdout == "", "the lock must be free once the session is closed"


def test_the_lock_also_refuses_a_second_open_in_the_same_process(store: SessionStore) -> None:
    s = store.create(model="m", workspace="/w", backend="b")
    with pytest.raises(SessionLocked, match=s.id):
        store.open(s.id)
    s.close()
    store.open(s.id).close()


def test_unknown_and_malformed_ids(store: SessionStore) -> None:
    with pytest.raises(SessionNotFound):
        store.open("20990101-000000-abcdef")
    with pytest.raises(SessionNotFound):
        store.open("../../etc")


def test_corrupt_and_truncated_lines_are_reported_by_number_and_the_rest_recovered(
    store: SessionStore,
) -> None:
    s = store.create(model="m", workspace="/w", backend="b")
    for n in range(4):
        s.append("message", {"message": {"role": "assistant", "content": str(n)}})
    s.close()
    path = s.journal_path
    lines = path.read_bytes().split(b"\n")
    lines[2] = b'{"kind": "message", "data": {"mess'  # line 3: damaged in the middle
    path.write_bytes(b"\n".join(lines[:-1]) + b"\n" + b'{"kind": "message", "da')  # torn tail

    with store.open(s.id) as again:
        assert [m["content"] for m in again.messages] == ["0", "2", "3"]
        assert len(again.warnings) == 2
        assert "line 3: not valid JSON" in again.warnings[0]
        assert "line 6: truncated record" in again.warnings[1]
        # appending after a torn tail starts a fresh line: the new record is readable
        again.append("message", {"message": {"role": "assistant", "content": "4"}})
    contents = read_journal(path)
    assert [r.data["message"]["content"] for r in contents.records if r.kind == "message"] == [
        "0",
        "2",
        "3",
        "4",
    ]
    assert [w.split(":")[0] for w in contents.warnings] == [
        "journal.jsonl line 3",
        "journal.jsonl line 6",
    ]
    assert store.list()[0].warnings == contents.warnings


def test_a_journal_with_nothing_readable_is_a_typed_error(store: SessionStore) -> None:
    s = store.create(model="m", workspace="/w", backend="b")
    s.close()
    s.journal_path.write_bytes(b"garbage\nmore garbage\n")
    with pytest.raises(SessionError, match="nothing in the journal"):
        store.open(s.id)


def test_status_follows_the_last_state_record(store: SessionStore) -> None:
    s = store.create(model="m", workspace="/w", backend="b")
    assert s.status == "new"
    s.append("user", {"message": {"role": "user", "content": "go"}})
    assert s.status == "running"
    s.append("pending", {"state": {"rune_pending_state": 1}, "pending": {}})
    assert s.status == "pending approval"
    assert s.pending_state == {"rune_pending_state": 1}
    s.append("decision", {"decision": "approved", "reason": ""})
    assert s.status == "running"
    assert s.pending_state is None
    s.append("turn_end", {"success": False, "error": "model went away", "error_kind": "X"})
    assert s.status == "failed"
    s.append("turn_end", {"success": False, "outcome": "limit", "error_kind": "IterationLimit"})
    assert s.status == "iteration limit"
    s.append("turn_end", {"success": True, "outcome": "incomplete", "incomplete": "rejected"})
    assert s.status == "incomplete"
    s.append("turn_end", {"success": True})  # a journal from before outcomes were recorded
    assert s.status == "done"
    s.close()
