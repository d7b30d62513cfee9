"""``rune undo`` and ``rune redo``: real ``rune`` processes, the scripted model applying changes
under ``--yes`` in one process, the undo in another (a restart), on real files in temp dirs."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import zlib
from pathlib import Path
from typing import Any

import pytest
from tests.fakes.cli import call, final, rune

from rune.sessions import SessionStore
from rune.sessions.changes import MAX_KEPT_BYTES, BlobStore, history

BROKEN = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
FIX = call("edit_file", path="calc.py", old_text="a - b", new_text="a + b")


@pytest.fixture
def ws(home: Path) -> Path:
    path = home / "project"
    path.mkdir()
    (path / "calc.py").write_text(BROKEN)
    return path


def applied(
    home: Path,
    ws: Path,
    *turns: dict[str, Any],
    session: str | None = None,
    played: tuple[dict[str, Any], ...] = (),
) -> str:
    """Run the scripted model's turns with --yes in ``ws``; the session's id. Continuing a
    ``session``, the scripted backend skips the turns it ``played`` already."""
    extra = ["--session", session] if session else []
    done = rune(
        home,
        "run",
        "--backend",
        "scripted",
        "--yes",
        "--workspace",
        str(ws),
        *extra,
        "do it",
        script=[*played, *turns, final()],
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.search(r"session (\S+) · workspace", done.stdout)
    assert found is not None, done.stdout
    return found.group(1)


def undo(home: Path, ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return rune(home, "undo", "--workspace", str(ws), *args)


def journal_path(session_id: str) -> Path:
    return Path(os.environ["RUNE_DATA_DIR"]) / "sessions" / session_id / "journal.jsonl"


def append_record(session_id: str, kind: str, data: dict[str, Any]) -> None:
    line = json.dumps({"kind": kind, "ts": "2026-01-01T00:00:00.000+00:00", "data": data})
    with journal_path(session_id).open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# --- the everyday cases ----------------------------------------------------------------------


def test_undo_in_a_new_process_takes_back_the_last_change_then_the_one_before(home: Path) -> None:
    # The workspace is the current directory: `rune undo` finds the session by it.
    (home / "calc.py").write_text(BROKEN)
    applied(home, home, FIX, call("write_file", path="docs/notes.txt", content="why\n"))
    assert (home / "calc.py").read_text() == FIXED
    assert (home / "docs" / "notes.txt").read_text() == "why\n"

    first = rune(home, "undo")
    assert first.returncode == 0, first.stderr
    assert "undid step 2" in first.stdout
    assert "removed docs/notes.txt" in first.stdout
    assert not (home / "docs" / "notes.txt").exists()  # the file the change created is gone
    assert (home / "calc.py").read_text() == FIXED

    second = rune(home, "undo")
    assert second.returncode == 0, second.stderr
    assert "undid step 1" in second.stdout
    assert (home / "calc.py").read_text() == BROKEN

    third = rune(home, "undo")
    assert third.returncode == 1
    assert "nothing to undo" in third.stderr
    assert (home / "calc.py").read_text() == BROKEN


def test_undo_refuses_when_the_user_edited_the_file_and_shows_the_three_versions(
    home: Path, ws: Path
) -> None:
    applied(home, ws, FIX)
    mine = FIXED + "# my own line\n"
    (ws / "calc.py").write_text(mine)

    refused = undo(home, ws)
    assert refused.returncode == 1
    assert (ws / "calc.py").read_text() == mine  # nothing lost
    said = refused.stderr
    assert "calc.py changed since Rune wrote it (step 1)" in said
    for label in ("what Rune wrote:", "what is there now:", "what undo would restore:"):
        assert label in said
    assert "+# my own line" in said  # the user's edit, as a diff from what Rune wrote
    assert "+    return a - b" in said  # what the undo would put back
    # Still undoable once the user puts Rune's version back.
    (ws / "calc.py").write_text(FIXED)
    assert undo(home, ws).returncode == 0
    assert (ws / "calc.py").read_text() == BROKEN


def test_undo_of_a_created_file_refused_when_it_was_deleted_and_recreated_by_hand(
    home: Path, ws: Path
) -> None:
    applied(home, ws, call("write_file", path="new.py", content="x = 1\n"))
    (ws / "new.py").unlink()
    (ws / "new.py").write_text("x = 2  # mine\n")

    refused = undo(home, ws)
    assert refused.returncode == 1
    assert (ws / "new.py").read_text() == "x = 2  # mine\n"
    assert re.search(r"what undo would restore:\s+no file", refused.stderr)
    assert "-x = 2  # mine" in refused.stderr


def test_a_file_deleted_then_created_again_by_rune_is_undone_honestly(home: Path, ws: Path) -> None:
    first = call("write_file", path="out.txt", content="first\n")
    session = applied(home, ws, first)
    (ws / "out.txt").unlink()  # the user deletes it; the session goes on and creates it again
    second = call("write_file", path="out.txt", content="second\n")
    applied(home, ws, second, session=session, played=(first, final()))

    every = undo(home, ws, session, "--all")
    assert every.returncode == 0, every.stderr
    assert not (ws / "out.txt").exists()
    # Step 1's file was gone before step 3 (the second task's first; the first task answered
    # at step 2) created it anew: it is not "restored" to "first".
    assert "step 1 left as it is" in every.stdout
    assert "undid step 3 " in every.stdout + " "

    # Taking back step 1 too leaves no file, as before it: nothing is written.
    last = undo(home, ws, session)
    assert last.returncode == 0, last.stderr
    assert "already as undo leaves it" in last.stdout
    assert not (ws / "out.txt").exists()
    listed = undo(home, ws, session, "--list")
    assert listed.stdout.count("undone") == 2


def three_changes(home: Path, ws: Path, *more: dict[str, Any]) -> None:
    """calc.py fixed (step 1), b.txt rewritten (step 2), calc.py changed again (step 3)."""
    (ws / "b.txt").write_text("b0\n")
    applied(
        home,
        ws,
        FIX,
        call("write_file", path="b.txt", content="b1\n"),
        call("edit_file", path="calc.py", old_text="a + b", new_text="b + a"),
        *more,
    )


def test_undo_all_restores_every_file_to_before_the_session(home: Path, ws: Path) -> None:
    three_changes(home, ws, call("write_file", path="c.txt", content="c1\n"))
    assert (ws / "calc.py").read_text() == "def add(a, b):\n    return b + a\n"

    done = undo(home, ws, "--all")
    assert done.returncode == 0, done.stderr
    assert "undid steps 1, 2, 3, 4" in done.stdout
    assert (ws / "calc.py").read_text() == BROKEN
    assert (ws / "b.txt").read_text() == "b0\n"
    assert not (ws / "c.txt").exists()
    assert undo(home, ws, "--all").returncode == 1  # nothing left in effect


def test_undo_step_n_takes_back_that_change_only(home: Path, ws: Path) -> None:
    three_changes(home, ws)
    done = undo(home, ws, "--step", "2")
    assert done.returncode == 0, done.stderr
    assert (ws / "b.txt").read_text() == "b0\n"
    assert (ws / "calc.py").read_text() == "def add(a, b):\n    return b + a\n"

    later = undo(home, ws, "--step", "1")  # step 3 changed calc.py after it
    assert later.returncode == 1
    assert "step 3 changed" in later.stderr and "undo it first" in later.stderr
    assert (ws / "calc.py").read_text() == "def add(a, b):\n    return b + a\n"
    again = undo(home, ws, "--step", "2")
    assert again.returncode == 1 and "undone already" in again.stderr
    assert undo(home, ws, "--step", "9").returncode == 1
    listed = undo(home, ws, "--list")
    assert re.search(r"step 2 +undone", listed.stdout)
    assert re.search(r"step 3 +in effect", listed.stdout)


def test_steps_are_numbered_as_the_run_showed_them(home: Path, ws: Path) -> None:
    # Reads between the changes: the run showed the edit at step 2/8 and the write at 4/8.
    read = call("read_file", path="calc.py")
    notes = call("write_file", path="notes.txt", content="why\n")
    first = applied(home, ws, read, FIX, read, notes)
    listed = undo(home, ws, "--list")
    assert re.search(r"step 2 +in effect +edit_file changed calc.py", listed.stdout)
    assert re.search(r"step 4 +in effect +write_file created notes.txt", listed.stdout)

    done = undo(home, ws, "--step", "4")
    assert done.returncode == 0, done.stderr
    assert "undid step 4 of session" in done.stdout
    assert not (ws / "notes.txt").exists() and (ws / "calc.py").read_text() == FIXED
    assert undo(home, ws, "--step", "1").returncode == 1  # step 1 read, it changed nothing

    # A second task in the session counts on from the first one's last step (5/8, the answer).
    played = (read, FIX, read, notes, final())
    applied(
        home, ws, call("write_file", path="more.txt", content="x\n"), session=first, played=played
    )
    assert re.search(
        r"step 6 +in effect +write_file created more.txt", undo(home, ws, "--list").stdout
    )


def test_redo_brings_back_what_undo_took_back_and_refuses_over_a_user_edit(
    home: Path, ws: Path
) -> None:
    session = applied(home, ws, FIX, call("write_file", path="n.txt", content="n\n"))
    assert undo(home, ws, "--all").returncode == 0
    assert (ws / "calc.py").read_text() == BROKEN and not (ws / "n.txt").exists()

    redone = rune(home, "redo", "--workspace", str(ws))
    assert redone.returncode == 0, redone.stderr
    assert "redid steps 1, 2" in redone.stdout
    assert (ws / "calc.py").read_text() == FIXED
    assert (ws / "n.txt").read_text() == "n\n"
    assert rune(home, "redo", "--workspace", str(ws)).returncode == 1  # nothing waits

    assert undo(home, ws).returncode == 0  # step 2 again
    (ws / "n.txt").write_text("made by hand\n")
    refused = rune(home, "redo", session, "--workspace", str(ws))
    assert refused.returncode == 1
    assert (ws / "n.txt").read_text() == "made by hand\n"
    assert "what the undo left:" in refused.stderr
    assert re.search(r"what the undo left:\s+no file", refused.stderr)
    records = [json.loads(line) for line in journal_path(session).read_text().splitlines()]
    actions = [r["data"]["action"] for r in records if r["kind"] == "undo"]
    assert actions == ["undo", "redo", "undo"]


def test_undo_in_a_git_repository_leaves_the_index_and_commits_alone(home: Path, ws: Path) -> None:
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(ws)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "calc.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "start"], check=True)
    applied(home, ws, FIX)
    subprocess.run([*git, "add", "calc.py"], check=True)  # the user stages Rune's fix

    def state() -> tuple[str, str, str]:
        def out(*args: str) -> str:
            return subprocess.run([*git, *args], capture_output=True, text=True).stdout

        return out("status", "--porcelain"), out("diff", "--cached"), out("rev-list", "--all")

    status, staged, commits = state()
    assert status == "M  calc.py\n"
    assert undo(home, ws).returncode == 0
    after_status, after_staged, after_commits = state()
    assert (ws / "calc.py").read_text() == BROKEN
    assert after_status[0] == "M"  # the index still holds the staged fix...
    assert after_staged == staged  # ...exactly
    assert after_commits == commits
    assert after_status == "MM calc.py\n"  # the work tree alone went back


# --- what is not kept, and hostile journals ------------------------------------------------


def test_undo_refuses_when_no_copy_was_kept(home: Path, ws: Path) -> None:
    session = applied(home, ws, FIX)
    blobs = Path(os.environ["RUNE_DATA_DIR"]) / "sessions" / session / "blobs"
    (blobs / sha(BROKEN)).unlink()
    refused = undo(home, ws)
    assert refused.returncode == 1
    assert "kept no copy" in refused.stderr
    assert (ws / "calc.py").read_text() == FIXED


def test_a_tampered_copy_is_not_restored(home: Path, ws: Path) -> None:
    session = applied(home, ws, FIX)
    blob = Path(os.environ["RUNE_DATA_DIR"]) / "sessions" / session / "blobs" / sha(BROKEN)
    blob.write_bytes(zlib.compress(b"import os; os.system('evil')\n"))
    refused = undo(home, ws)
    assert refused.returncode == 1
    assert (ws / "calc.py").read_text() == FIXED


def _hostile(home: Path, ws: Path, paths: list[str], content: str) -> list[str]:
    """For each path, a journal whose last change claims Rune created it holding ``content``:
    what each undo said (each must be refused)."""
    session = applied(home, ws, FIX)
    said = []
    for path in paths:
        change = {"tool": "write_file", "path": path, "before": None, "after": sha(content)}
        append_record(session, "change", change)
        refused = undo(home, ws)
        assert refused.returncode == 1, (path, refused.stdout)
        said.append(refused.stderr)
    return said


def test_a_journal_naming_a_file_outside_the_workspace_is_refused(home: Path, ws: Path) -> None:
    outside = home / "precious.txt"
    outside.write_text("keep me\n")
    said = _hostile(home, ws, [str(outside), f"{ws}/../precious.txt", "precious.txt"], "keep me\n")
    assert "outside allowed write directories" in said[0]
    assert "outside allowed write directories" in said[1]
    assert "not an absolute path" in said[2]
    assert outside.read_text() == "keep me\n"
    assert (ws / "calc.py").read_text() == FIXED


def test_a_journal_naming_a_symlink_is_refused_not_followed(home: Path, ws: Path) -> None:
    outside = home / "elsewhere"
    outside.mkdir()
    (outside / "target.txt").write_text("keep me\n")
    (ws / "link.txt").symlink_to(outside / "target.txt")
    (ws / "inner.txt").write_text("keep me\n")
    (ws / "alias.txt").symlink_to(ws / "inner.txt")  # resolves inside, still not followed
    (ws / "sub").symlink_to(outside)
    names = ["link.txt", "alias.txt", "sub/target.txt"]
    for said in _hostile(home, ws, [str(ws / name) for name in names], "keep me\n"):
        assert "symlink" in said or "outside allowed write directories" in said
    assert (outside / "target.txt").read_text() == "keep me\n"
    assert (ws / "inner.txt").read_text() == "keep me\n"
    assert (ws / "link.txt").is_symlink() and (ws / "alias.txt").is_symlink()


def test_a_journal_naming_a_protected_file_is_refused(home: Path, ws: Path) -> None:
    hooks = ws / ".git" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "pre-commit").write_text("#!/bin/sh\n")
    (said,) = _hostile(home, ws, [str(hooks / "pre-commit")], "#!/bin/sh\n")
    assert "protected" in said
    assert (hooks / "pre-commit").read_text() == "#!/bin/sh\n"


def test_a_session_of_another_workspace_is_refused(home: Path, ws: Path) -> None:
    session = applied(home, ws, FIX)
    other = home / "other"
    other.mkdir()
    refused = rune(home, "undo", session, "--workspace", str(other))
    assert refused.returncode == 1
    assert "worked in" in refused.stderr
    assert (ws / "calc.py").read_text() == FIXED
    none = rune(home, "undo", "--workspace", str(other))
    assert none.returncode == 1 and "no session has worked in" in none.stderr


def test_malformed_records_are_skipped_and_named(home: Path, ws: Path) -> None:
    session = applied(home, ws, FIX)
    append_record(session, "change", {"tool": "write_file", "path": 7, "after": "zz"})
    append_record(session, "undo", {"action": "undo", "steps": [99], "files": []})
    listed = undo(home, ws, "--list")
    assert listed.returncode == 0
    assert "a change record Rune cannot use" in listed.stdout
    assert "an undo record Rune cannot use" in listed.stdout
    assert undo(home, ws).returncode == 0  # the good change is still undone
    assert (ws / "calc.py").read_text() == BROKEN


# --- the store itself ------------------------------------------------------------------------


def test_the_blob_store_keeps_bounded_verified_content(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    assert store.put(b"small\n")
    assert store.get(sha("small\n")) == b"small\n"
    big = b"x" * (MAX_KEPT_BYTES + 1)
    assert not store.put(big)  # over the cap: not kept
    assert store.get(hashlib.sha256(big).hexdigest()) is None
    assert store.get("../../etc/passwd") is None
    bomb = zlib.compress(b"\0" * (MAX_KEPT_BYTES + 2))
    fake = "0" * 64
    (tmp_path / "blobs" / fake).write_bytes(bomb)
    assert store.get(fake) is None


def test_changes_are_journaled_in_order_with_their_digests(home: Path, ws: Path) -> None:
    session = applied(home, ws, FIX, call("write_file", path="n.txt", content="n\n"))
    found = history(SessionStore().read(session).records)
    assert [(c.step, c.tool, Path(c.path).name) for c in found.changes] == [
        (1, "edit_file", "calc.py"),
        (2, "write_file", "n.txt"),
    ]
    assert found.changes[0].before == sha(BROKEN) and found.changes[0].after == sha(FIXED)
    assert found.changes[1].before is None
    assert found.applied == {1, 2}


def test_a_front_end_undoes_and_redoes_on_its_own_open_session(tmp_path: Path) -> None:
    # What the TUI's /undo calls: the executor records into the session it holds open.
    from rune.sessions.changes import ChangeLog
    from rune.sessions.undo import redo
    from rune.sessions.undo import undo as undo_in
    from rune.tools.executor import SandboxPolicy, ToolExecutor

    ws = (tmp_path / "ws").resolve()
    ws.mkdir()
    (ws / "calc.py").write_text(BROKEN)
    store = SessionStore(tmp_path / "sessions")
    with store.create(model="m", workspace=str(ws), backend="b") as session:
        executor = ToolExecutor(SandboxPolicy.workspace_only(ws), ws, changes=ChangeLog(session))
        edit = {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}
        executor.apply(executor.prepare("edit_file", edit))
        assert (ws / "calc.py").read_text() == FIXED
        assert undo_in(session, ws).lines()[:2] == [
            f"undid step 1 of session {session.id}",
            "  restored calc.py",
        ]
        assert (ws / "calc.py").read_text() == BROKEN
        assert redo(session, ws).steps == (1,)
        assert (ws / "calc.py").read_text() == FIXED


def test_nothing_is_kept_of_a_file_rune_may_not_read(tmp_path: Path) -> None:
    # A policy that may write a directory it may not read: the change is made (approved) and
    # recorded, but what the file held is not copied into the session.
    from rune.sessions.changes import ChangeLog
    from rune.tools.executor import SandboxPolicy, ToolExecutor

    ws, unread = (tmp_path / "ws").resolve(), (tmp_path / "unread").resolve()
    ws.mkdir()
    unread.mkdir()
    (unread / "token.txt").write_text("s3cr3t\n")
    store = SessionStore(tmp_path / "sessions")
    with store.create(model="m", workspace=str(ws), backend="b") as session:
        policy = SandboxPolicy(read_roots=[ws], write_roots=[ws, unread])
        executor = ToolExecutor(policy, ws, changes=ChangeLog(session))
        change = executor.prepare(
            "write_file", {"path": str(unread / "token.txt"), "content": "x\n"}
        )
        executor.apply(change)
        blobs = BlobStore(session.directory)
        assert not blobs.has(sha("s3cr3t\n")) and not blobs.has(sha("x\n"))
        (recorded,) = history(session.records).changes
        assert recorded.before == sha("s3cr3t\n")
