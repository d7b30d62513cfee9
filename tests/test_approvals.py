"""Approvals that read once (issue 25): diff headers relative to the workspace, a command
shown once with how it runs in one line, and "allow for this session" grants that are
journaled, shown by ``rune sessions show``, kept across a pause, and never offered for a
sensitive change. The real ``rune`` in a subprocess, with the scripted backend."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.fakes.cli import call, final, journals, rune

from rune.cli import EXIT_OK, EXIT_PENDING
from rune.grants import Grant, offer
from rune.messages import PendingApproval


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    (path / "shop").mkdir(parents=True)
    (path / "shop" / "pricing.py").write_text("def price():\n    return 1\n")
    return path


def session_id(output: str) -> str:
    found = re.search(r"session (\d{8}-\d{6}-[0-9a-f]+)", output)
    assert found is not None, output
    return found.group(1)


def grants_journaled() -> list[dict[str, object]]:
    return [
        json.loads(line)["data"]
        for line in journals().splitlines()
        if line.startswith('{"kind": "grant"')
    ]


EDIT = call("edit_file", path="shop/pricing.py", old_text="return 1", new_text="return 2")


def test_a_diff_names_the_file_relative_to_the_workspace(home: Path) -> None:
    done = rune(home, "run", "--backend", "scripted", "fix", script=[EDIT, final()], stdin="a\n")
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    assert "--- a/shop/pricing.py\n+++ b/shop/pricing.py" in done.stdout
    assert "edit_file: modify shop/pricing.py (26 bytes)" in done.stdout
    assert f"a{home}" not in done.stdout


def test_a_command_approval_shows_the_command_once_and_how_it_runs_in_one_line(
    home: Path,
) -> None:
    script = [call("run_command", command="python3 -m platform"), final()]
    done = rune(home, "run", "--backend", "scripted", "go", script=script, stdin="a\n")
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    approval = done.stdout[done.stdout.index("Approval needed") : done.stdout.index("approve?")]
    assert approval.count("python3 -m platform") == 1, approval
    assert "$ $" not in approval
    how = [line for line in approval.splitlines() if "contained" in line.lower()]
    assert len(how) == 1 and "timeout 120 s" in how[0], approval


def test_a_command_prefix_allowed_for_the_session_is_not_asked_again(home: Path) -> None:
    script = [
        call("run_command", command="python3 -m platform"),
        call("run_command", command="python3 -m platform --terse"),
        # The same prefix, but a second command rides along: asked again.
        call("run_command", command="python3 -m platform; echo smuggled"),
        final(),
    ]
    done = rune(home, "run", "--backend", "scripted", "go", script=script, stdin="s\nr no\n")
    assert done.returncode != EXIT_PENDING, done.stdout + done.stderr
    assert "[s]ession: allow commands that begin `python3 -m platform`" in done.stdout
    assert done.stdout.count("approve? ") == 2  # the first, and the compound one
    assert "approved: commands that begin `python3 -m platform` are allowed" in done.stdout
    assert "smuggled" not in done.stdout.split("rejected")[-1]
    assert grants_journaled() == [{"kind": "command", "prefix": ["python3", "-m", "platform"]}]
    shown = rune(home, "sessions", "show", session_id(done.stdout))
    assert "allowed for the rest of the session: commands that begin `python3 -m platform`" in (
        shown.stdout
    )
    assert "rejected: no" in shown.stdout


def test_a_grant_is_kept_when_the_session_pauses_and_resumes(home: Path) -> None:
    script = [
        call("run_command", command="python3 -m platform"),
        EDIT,  # no answer on stdin: the session pauses here
        call("run_command", command="python3 -m platform --terse"),
        final(),
    ]
    first = rune(home, "run", "--backend", "scripted", "go", script=script, stdin="s\n")
    assert first.returncode == EXIT_PENDING, first.stdout + first.stderr
    resumed = session_id(first.stdout)
    again = rune(home, "resume", resumed, "--backend", "scripted", script=script, stdin="a\n")
    assert again.returncode == EXIT_OK, again.stdout + again.stderr
    assert "approved: commands that begin `python3 -m platform` are allowed" in again.stdout
    assert again.stdout.count("approve? ") == 1  # only the edit


def test_file_edits_allowed_for_the_session(home: Path) -> None:
    second = call("write_file", path="shop/new.py", content="x = 1\n")
    done = rune(
        home, "run", "--backend", "scripted", "go", script=[EDIT, second, final()], stdin="s\n"
    )
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    assert "approved: file edits in the workspace are allowed for this session" in done.stdout
    assert (home / "shop" / "new.py").read_text() == "x = 1\n"
    shown = rune(home, "sessions", "show", session_id(done.stdout))
    assert "    -    return 1\n    +    return 2" in shown.stdout  # the diff that was approved
    assert "allowed for the rest of the session: file edits in the workspace" in shown.stdout


def test_a_sensitive_change_never_offers_a_grant_nor_rides_on_one(home: Path) -> None:
    sensitive = call("write_file", path="AGENTS.md", content="obey\n")
    done = rune(
        home, "run", "--backend", "scripted", "go", script=[EDIT, sensitive, final()], stdin="s\n"
    )
    assert done.returncode == EXIT_PENDING, done.stdout + done.stderr
    prompts = [line for line in done.stdout.splitlines() if line.startswith("approve?")]
    assert "[s]ession" in prompts[0] and "[s]ession" not in prompts[1]
    assert not (home / "AGENTS.md").exists()


# --- what a grant covers, as a function -------------------------------------------------


def command(text: str, sensitive: str | None = None) -> PendingApproval:
    return PendingApproval("run_command", {"command": text}, "", "", True, sensitive)


@pytest.mark.parametrize(
    ("text", "prefix"),
    [
        ("python -m pytest -q tests/x.py", ("python", "-m", "pytest")),
        ("python3 tools/check.py --fast", ("python3", "tools/check.py")),
        ("git status", ("git", "status")),
        ("pytest -q", ("pytest",)),
        ("cat notes.txt", ("cat",)),
    ],
)
def test_the_offered_prefix(text: str, prefix: tuple[str, ...]) -> None:
    assert offer(command(text)) == Grant("command", prefix)


@pytest.mark.parametrize(
    "text",
    [
        "python3 -c 'import os'",  # python3 alone would allow every script
        "bash -c 'rm -rf x'",
        "python -m pytest && curl example.org",
        "python -m pytest | tee out",
        "python -m pytest > out",
        "python -m pytest $(echo -k x)",
        "python -m pytest `echo`",
        "python -m pytest\nrm -rf x",
        "'unbalanced",
    ],
)
def test_no_grant_for_a_command_that_is_not_one_plain_command(text: str) -> None:
    assert offer(command(text)) is None


def test_a_grant_covers_its_prefix_only_and_never_a_sensitive_change() -> None:
    grant = Grant("command", ("python", "-m", "pytest"))
    assert grant.covers(command("python -m pytest -q"))
    assert not grant.covers(command("python -m pytest; rm -rf ~"))
    assert not grant.covers(command("python -m pytestx"))
    assert not grant.covers(command("python -m"))
    assert not grant.covers(command("python -m pytest", sensitive="runs outside"))
    edits = Grant("edits")
    edit = PendingApproval("write_file", {"path": "a"}, "", "", None, None)
    assert edits.covers(edit) and not edits.covers(command("ls"))
    assert offer(PendingApproval("write_file", {}, "", "", None, "AGENTS.md steers")) is None


def test_a_damaged_grant_record_is_no_grant() -> None:
    assert Grant.from_json({"kind": "command", "prefix": []}) is None
    assert Grant.from_json({"kind": "command", "prefix": [1]}) is None
    assert Grant.from_json({"kind": "everything"}) is None
    assert Grant.from_json({"kind": "edits", "prefix": ["x"]}) is None
