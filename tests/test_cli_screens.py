"""Short, truthful screens (issue 25): ``rune doctor`` one line per check with the long lists
behind ``--verbose``, a closed pipe ending in 141 for every command, text never eaten as
markup, plurals, and no contradiction without the ``embedded`` extra. The real ``rune`` in a
subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tests.fakes.cli import call, closed_port, final, rune

from rune.cli import EXIT_BROKEN_PIPE, EXIT_OK, EXIT_USAGE


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def test_doctor_says_one_line_per_check_and_lists_names_only_when_verbose(home: Path) -> None:
    short = rune(home, "doctor", "--backend", "scripted")
    for line in short.stdout.splitlines():
        assert line.startswith(("ok  ", "!!  ", "    → ")), line
    assert "ok  sandbox, credentials" not in short.stdout
    assert "`rune doctor --verbose` lists the paths and names it guards" in short.stdout
    assert "ok  sandbox, approval: every change and command asks" in short.stdout
    names = [
        line.split(":")[0] for line in short.stdout.splitlines() if line[:4] in ("ok  ", "!!  ")
    ]
    assert len(names) == len(set(names))  # each check once
    verbose = rune(home, "doctor", "--backend", "scripted", "--verbose")
    assert "ok  sandbox, credentials (never read or written): .aws" in verbose.stdout


def test_a_reader_that_goes_away_mid_run_leaves_the_session_interrupted(home: Path) -> None:
    """`rune run --json ... | head -2`: the reader went away, not the model; the session was
    listed as failed, "the model transport failed: BrokenPipeError"."""
    (home / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    command = [sys.executable, "-m", "rune.cli", "run", "--json", "--backend", "scripted"]
    with subprocess.Popen(
        [*command, "--yes", "--workspace", str(home), "fix add"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=home,
        env={**os.environ, "HOME": str(home), "OLLAMA_HOST": f"127.0.0.1:{closed_port()}"},
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.readline()
        process.stdout.readline()
        process.stdout.close()  # as head -2 does
        errors = process.stderr.read().decode()
        assert process.wait(timeout=90) == EXIT_BROKEN_PIPE, errors
    assert "Traceback" not in errors
    listed = rune(home, "sessions").stdout
    assert "interrupted" in listed and "failed" not in listed, listed


def test_doctor_never_loads_the_embedded_model(home: Path) -> None:
    """Loading a model takes seconds: the doctor says what would run, without running it."""
    done = rune(home, "doctor", "--backend", "embedded")
    server = [
        line for line in done.stdout.splitlines() if line.startswith(("ok  server", "!!  server"))
    ]
    assert len(server) == 1 and "started with each task" in server[0], done.stdout
    assert done.stdout.count("embedded:") == 1


@pytest.mark.parametrize(
    "args",
    [
        ("doctor", "--backend", "scripted"),
        ("config",),
        ("models", "--backend", "scripted"),
        ("pull",),
        ("mcp",),
        ("sessions",),
        ("--help",),
        ("run", "--help"),
        ("run", "--backend", "scripted", "--yes", "fix calc.py"),
    ],
)
def test_a_closed_pipe_exits_141(home: Path, args: tuple[str, ...]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before Rune writes a byte
    try:
        done = subprocess.run(
            [sys.executable, "-m", "rune.cli", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            cwd=home,
            env={**os.environ, "HOME": str(home), "OLLAMA_HOST": f"127.0.0.1:{closed_port()}"},
            timeout=90,
            check=False,
        )
    finally:
        os.close(write_end)
    assert done.returncode == EXIT_BROKEN_PIPE, done.stderr
    assert "Traceback" not in done.stderr


def test_brackets_in_a_hint_are_printed_not_eaten_as_markup(home: Path) -> None:
    done = rune(home, "mcp")
    assert done.returncode == EXIT_OK
    assert "add [mcp.servers.NAME] to " in done.stdout


def test_one_token_is_one_token(home: Path) -> None:
    done = rune(home, "run", "--backend", "scripted", "hi", script=[final("Hi.")])
    assert ", 1 token)" in done.stdout and "1 tokens" not in done.stdout


def test_sessions_show_never_prints_the_protocol_json(home: Path) -> None:
    raw = '{"tool": "read_file", "arguments": {"path": "x"}}'
    turn = call("read_file", path="x")
    turn["content"] = raw  # the text protocol journals the call as the model wrote it
    done = rune(home, "run", "--backend", "scripted", "go", script=[turn, final("[bold]ok")])
    session = done.stdout.split("session ")[1].split()[0]
    shown = rune(home, "sessions", "show", session)
    assert raw not in shown.stdout
    assert "→ read_file path='x'" in shown.stdout
    assert "[bold]ok" in shown.stdout  # the model's brackets, as written


# --- without the embedded extra ---------------------------------------------------------

#: Runs `rune` where `import xllamacpp` fails, as in an install without the extra.
WITHOUT_EMBEDDED = """
import sys

class NoEmbedded:
    def find_spec(self, name, path=None, target=None):
        if name == "xllamacpp" or name.startswith("xllamacpp."):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, NoEmbedded())
from rune.cli import main
sys.exit(main(sys.argv[1:]))
"""


def without_embedded(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_EMBEDDED, *args],
        capture_output=True,
        text=True,
        cwd=home,
        env={
            **os.environ,
            "HOME": str(home),
            "OLLAMA_HOST": f"127.0.0.1:{closed_port()}",
            "NO_COLOR": "1",
        },
        timeout=90,
        check=False,
    )
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    return done


def test_without_the_extra_pull_refuses_and_says_what_to_install(home: Path) -> None:
    done = without_embedded(home, "pull", "smollm2:135m")
    assert done.returncode == EXIT_USAGE
    assert "embedded backend, which is not installed" in done.stderr
    assert "-m pip install xllamacpp==" in done.stderr  # the hint for this venv
    assert "pulling" not in done.stdout


def test_without_the_extra_the_no_server_message_puts_what_works_first(home: Path) -> None:
    done = without_embedded(home, "run", "fix it")
    assert done.returncode != EXIT_OK
    message = done.stdout  # the outcome line: a failure before the first step
    assert "embedded backend is not installed" in message
    assert message.index("start Ollama") < message.index("rune pull")
    assert message.index("pip install") < message.index("rune pull")  # install first, then pull


def test_without_the_extra_a_named_catalogue_model_says_install_before_pull(home: Path) -> None:
    """From the newcomer tour: check-model with a catalogue model said only `rune pull`, which
    then refuses without the extra."""
    done = without_embedded(home, "check-model", "qwen2.5-coder:1.5b")
    assert done.returncode != EXIT_OK
    said = done.stdout + done.stderr
    assert "embedded backend, which is not installed" in said
    assert said.index("pip install") < said.index("rune pull qwen2.5-coder:1.5b")


def test_without_the_extra_doctor_gives_one_verdict(home: Path) -> None:
    done = without_embedded(home, "doctor")
    checks = [line for line in done.stdout.splitlines() if line[:4] in ("ok  ", "!!  ")]
    embedded = [line for line in checks if "embedded" in line.split(":")[0]]
    assert embedded == ["!!  embedded: not installed (it runs models without a server)"]
    assert "ok  server" not in done.stdout
    assert "rune pull" not in done.stdout.split("pip install")[0]  # install comes first


def test_doctors_no_model_suggestion_is_safe_to_type_in_a_users_project(home: Path) -> None:
    mine = "def add(a, b):\n    return a - b  # the user's own, not Rune's demo\n"
    (home / "calc.py").write_text(mine)
    doctor = without_embedded(home, "doctor")
    found = re.search(r"no model at all[^:]*: (rune [^.\n]*--backend scripted)", doctor.stdout)
    assert found is not None, doctor.stdout
    assert found.group(1).startswith("rune demo ")
    # Typed as it is, here, with every change approved: the user's calc.py stays as it was.
    typed = rune(home, *found.group(1).split()[1:], "--yes", "--yes")
    assert typed.returncode == EXIT_OK, typed.stdout + typed.stderr
    assert (home / "calc.py").read_text() == mine
