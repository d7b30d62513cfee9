"""The demo's check imports calc.py, which the model wrote: it never runs with the user's rights.

Before issue #12 ``rune demo`` imported the model's calc.py in a fresh interpreter, outside any
sandbox and without asking. Now, where checks run contained (bubblewrap, and a policy that lets
the interpreter be read), it runs as ``run_python`` runs one: nothing writable, unasked, as Rune
ran the demo's tests. Elsewhere (here: ``sandbox.workspace_only``) it is a command like any
other: shown, run only when approved (or under ``--yes --yes``), like ``run_command``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.fakes.cli import call, final, rune

from rune.app.demo import FIXED_CALC

needs_bwrap = pytest.mark.bwrap


def evil_calc(marker: Path) -> str:
    """A calc.py whose add() is right, and whose import tries to leave a mark outside."""
    return (
        "import pathlib\n"
        "try:\n"
        f"    pathlib.Path({str(marker)!r}).write_text('ran outside')\n"
        "except OSError:\n"
        "    pass\n\n" + FIXED_CALC
    )


#: a policy under which checks do not run contained: the demo's check is asked for
ASKED = {"RUNE_SANDBOX_WORKSPACE_ONLY": "true"}


def demo(
    home: Path, *flags: str, stdin: str = "", env: dict[str, str] | None = None
) -> tuple[str, str, int]:
    marker = home / "pwned"
    script = [call("write_file", path="calc.py", content=evil_calc(marker)), final("fixed")]
    done = rune(home, "demo", "--backend", "scripted", *flags, script=script, stdin=stdin, env=env)
    return done.stdout, done.stderr, done.returncode


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


@needs_bwrap
def test_where_checks_run_contained_the_check_runs_unasked_and_writes_nothing(home: Path) -> None:
    stdout, stderr, code = demo(home, "--yes")
    assert code == 0, stdout + stderr
    assert "checked add(2, 3) contained and read-only, so unasked" in stdout
    assert "Approval needed: run a command" not in stdout
    assert "✓ fixed: add(2, 3) == 5 now" in stdout
    assert not (home / "pwned").exists()  # the import ran, but nothing outside was writable


def test_under_yes_the_check_asks_and_without_an_answer_does_not_run(home: Path) -> None:
    stdout, stderr, code = demo(home, "--yes", env=ASKED)
    assert code == 0, stdout + stderr
    assert "approved by --yes" in stdout  # the edit: an ordinary file in the workspace
    assert "Approval needed: run a command" in stdout and "calc.add(2, 3)" in stdout
    assert "? not checked" in stdout
    assert "runs only when you approve it" in stderr
    assert not (home / "pwned").exists()


def test_a_rejected_check_does_not_run(home: Path) -> None:
    stdout, stderr, _ = demo(home, "--yes", stdin="r no thanks\n", env=ASKED)
    assert "? not checked" in stdout and "not approved" in stderr
    assert not (home / "pwned").exists()


@needs_bwrap
def test_an_approved_check_runs_contained(home: Path) -> None:
    stdout, stderr, code = demo(home, "--yes", stdin="a\n", env=ASKED)
    assert code == 0, stdout + stderr
    assert "Contained (bubblewrap): no network" in stdout
    assert "✓ fixed: add(2, 3) == 5 now" in stdout
    assert not (home / "pwned").exists()  # the import ran, but could not write outside


@needs_bwrap
def test_yes_yes_approves_the_check_and_it_still_runs_contained(home: Path) -> None:
    stdout, stderr, code = demo(home, "--yes", "--yes", env=ASKED)
    assert code == 0, stdout + stderr
    assert "approved by --yes --yes" in stdout
    assert "✓ fixed: add(2, 3) == 5 now" in stdout
    assert not (home / "pwned").exists()
