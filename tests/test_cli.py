"""The ``rune`` command, run as a real subprocess with HOME and RUNE_DATA_DIR in tmp dirs."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.fakes.cli import scripted_demo_steps
from tests.fakes.ollama_server import FakeModel, FakeOllama, text_reply, tool_call, tool_reply

from rune import __version__
from rune.app.demo import BROKEN_CALC, FIXED_CALC


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def rune(
    home: Path, *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "HOME": str(home),
        "OLLAMA_HOST": f"127.0.0.1:{closed_port()}",
        "NO_COLOR": "1",
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "rune.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=environment,
        cwd=home,
        timeout=60,
        check=False,
    )


def demo_project(home: Path) -> Path:
    project = Path(os.environ["XDG_CACHE_HOME"]) / "rune" / "demo"
    assert project.is_dir() and not (home / ".rune-e2e-probe").exists()
    return project


def no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stdout + done.stderr


@pytest.fixture
def ollama() -> Iterator[FakeOllama]:
    with FakeOllama(
        [
            FakeModel("qwen3:latest", ("completion", "tools", "thinking"), context_length=40960),
            FakeModel("gemma3:latest", ("completion",), architecture="gemma3"),
        ]
    ) as server:
        yield server


# --- start-up --------------------------------------------------------------------------------


def test_version_and_help(home: Path) -> None:
    version = rune(home, "--version")
    # This checkout's commit follows (tests/test_distribution.py checks it exactly).
    assert version.returncode == 0
    assert re.fullmatch(
        rf"rune {re.escape(__version__)}( \(commit \w+(, modified)?\))?\n", version.stdout
    )
    helped = rune(home, "--help")
    assert helped.returncode == 0
    for command in ("run", "demo", "resume", "sessions", "models", "doctor", "config", "tui"):
        assert command in helped.stdout


# --- demo and run with the scripted backend ------------------------------------------------


def test_demo_scripted_yes_really_fixes_calc(home: Path) -> None:
    done = rune(home, "demo", "--backend", "scripted", "--yes")
    no_traceback(done)
    assert done.returncode == 0, done.stdout + done.stderr
    project = demo_project(home)
    assert (project / "calc.py").read_text() == FIXED_CALC
    check = subprocess.run(
        [sys.executable, "-c", "import calc; print(calc.add(2, 3))"],
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    )
    assert check.stdout.strip() == "5"
    assert f"step {scripted_demo_steps(home)}/8" in done.stdout
    assert "+    return a + b" in done.stdout  # the diff was shown before --yes approved it
    assert "approved by --yes" in done.stdout


def test_demo_without_answer_leaves_a_pending_session_then_resume_approves(home: Path) -> None:
    waiting = rune(home, "demo", "--backend", "scripted")
    no_traceback(waiting)
    assert waiting.returncode == 3
    assert "rune resume" in waiting.stderr
    project = demo_project(home)
    assert (project / "calc.py").read_text() == BROKEN_CALC

    listed = rune(home, "sessions")
    assert "pending approval" in listed.stdout

    resumed = rune(home, "resume", stdin="a\n")
    no_traceback(resumed)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "-    return a - b" in resumed.stdout
    assert (project / "calc.py").read_text() == FIXED_CALC
    assert "done" in rune(home, "sessions").stdout


def test_the_demo_runs_its_own_test_with_no_advice_to_install_anything(home: Path) -> None:
    done = rune(home, "demo", "--backend", "scripted", "--yes", "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "install pytest" not in said and "could not run" not in said
    if scripted_demo_steps(home) == 2:  # where Rune runs tests itself (contained)
        # before the fix (pytest's summary, or unittest's where the interpreter has no pytest)
        assert re.search(r"run_tests failed: the tests failed \((1 failed|Ran 2 tests)", said)
        assert "✓ run_tests done" in said  # after it
    # The project's own interpreter runs it as it is, pytest or not.
    ran = subprocess.run(
        [sys.executable, "-E", "-s", "test_calc.py"],
        cwd=demo_project(home),
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0 and "Ran 2 tests" in ran.stderr, ran.stdout + ran.stderr


def test_a_second_demo_reuses_the_first_ones_directory_afresh(home: Path) -> None:
    first = rune(home, "demo", "--backend", "scripted", "--yes")
    assert first.returncode == 0, first.stdout + first.stderr
    project = demo_project(home)
    (project / "left-over.txt").write_text("from the first demo\n")
    second = rune(home, "demo", "--backend", "scripted", "--yes")
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"sample project: {project} " in second.stdout
    assert sorted(p.name for p in project.parent.iterdir()) == ["demo"]  # no pile
    assert not (project / "left-over.txt").exists()
    assert (project / "calc.py").read_text() == FIXED_CALC
    assert sorted(p.name for p in home.iterdir() if p.name.startswith(".rune")) == []


def test_reject_with_reason_on_stdin_keeps_the_file(home: Path) -> None:
    # The change is rejected; the check that follows is approved (a second answer).
    done = rune(home, "demo", "--backend", "scripted", stdin="r not like this\na\n")
    no_traceback(done)
    assert (demo_project(home) / "calc.py").read_text() == BROKEN_CALC
    assert "rejected by the operator: not like this" in done.stdout
    # The scripted model ends its turn anyway; the check after the demo says it is not fixed.
    assert "add(2, 3) is still wrong" in done.stdout
    assert done.returncode == 1


def test_run_against_a_real_http_ollama_with_approval_on_stdin(
    home: Path, ollama: FakeOllama
) -> None:
    workspace = home / "work"
    workspace.mkdir()
    ollama.script(
        tool_reply(tool_call("write_file", {"path": "notes.txt", "content": "hello\n"})),
        text_reply("Wrote notes.txt.", thinking="Done now."),
    )
    done = rune(
        home,
        "run",
        "--workspace",
        str(workspace),
        "--max-iterations",
        "4",
        "write a note",
        stdin="a\n",
        env={"OLLAMA_HOST": ollama.url},
    )
    no_traceback(done)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (workspace / "notes.txt").read_text() == "hello\n"
    assert "+hello" in done.stdout
    assert "step 2/4" in done.stdout
    assert "Wrote notes.txt." in done.stdout
    chat = ollama.bodies()
    assert chat[0]["model"] == "qwen3:latest"  # picked: the first tool-capable model


def test_yes_never_approves_an_unknown_or_command_tool_but_yes_yes_does() -> None:
    from rune.app import auto_approves
    from rune.messages import PendingApproval

    edit = PendingApproval("write_file", {}, "write", "diff")
    command = PendingApproval("run_command", {}, "run", "ls", contained=True)
    assert auto_approves("edits", edit) and not auto_approves("edits", command)
    assert auto_approves("all", command) and not auto_approves("ask", edit)


# --- failures are clear, typed, without a traceback -----------------------------------------


def test_unreachable_ollama_ends_as_a_failure_with_the_next_step(home: Path) -> None:
    done = rune(home, "run", "--backend", "ollama", "--model", "qwen3", "do it")
    no_traceback(done)
    assert done.returncode == 1
    last, then = done.stdout.strip().splitlines()[-2:]
    assert last.startswith("✗ ServerUnreachable: no Ollama at http://127.0.0.1:")
    assert "start it with `ollama serve` or set OLLAMA_HOST" in last
    assert then == "no session was started: once that is fixed, run the same command again"
    assert rune(home, "sessions").stdout.strip() == "no sessions yet"


def test_bad_config_file_is_exit_2_with_file_and_key(home: Path) -> None:
    config = home / "xdg-config" / "rune" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("max_iterations = 99\n")
    done = rune(home, "run", "x", env={"XDG_CONFIG_HOME": str(home / "xdg-config")})
    no_traceback(done)
    assert done.returncode == 2
    assert str(config) in done.stderr and "'max_iterations'" in done.stderr
    assert "1 to 8" in done.stderr


def test_bad_flag_value_is_a_config_error(home: Path) -> None:
    done = rune(home, "run", "--max-iterations", "0", "--backend", "scripted", "x")
    no_traceback(done)
    assert done.returncode == 2
    assert "flag --max-iterations" in done.stderr


# --- config, models, doctor ------------------------------------------------------------------


def test_config_shows_values_and_where_they_came_from(home: Path) -> None:
    project = home / "p"
    (project / ".rune").mkdir(parents=True)
    (project / ".rune" / "config.toml").write_text('max_output_tokens = 99\napproval = "all"\n')
    done = rune(home, "config", "--workspace", str(project), env={"RUNE_MAX_ITERATIONS": "3"})
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    assert "99" in rows["max_output_tokens"] and "project file" in rows["max_output_tokens"]
    assert "3" in rows["max_iterations"] and "env RUNE_MAX_ITERATIONS" in rows["max_iterations"]
    assert rows["approval"].split()[1] == "ask"
    assert "may not auto-approve" in done.stdout


def test_project_file_cannot_turn_on_auto_approval(home: Path) -> None:
    project = home / "p"
    (project / ".rune").mkdir(parents=True)
    (project / ".rune" / "config.toml").write_text('approval = "all"\n')
    done = rune(home, "run", "--backend", "scripted", "--workspace", str(project), "fix calc")
    no_traceback(done)
    assert done.returncode == 3  # it still asked, and nobody answered
    assert "may not auto-approve" in done.stderr
    assert not (project / "calc.py").exists()


def test_models_lists_capabilities_from_a_real_http_server(home: Path, ollama: FakeOllama) -> None:
    done = rune(home, "models", env={"OLLAMA_HOST": ollama.url})
    no_traceback(done)
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines() if line.strip()}
    assert rows["qwen3:latest"][1:] == ["yes", "yes", "8192"]
    assert rows["gemma3:latest"][1:3] == ["no", "(text"]


def test_doctor_reports_server_model_sandbox_and_containment(
    home: Path, ollama: FakeOllama
) -> None:
    done = rune(home, "doctor", "--model", "gemma3", env={"OLLAMA_HOST": ollama.url})
    no_traceback(done)
    assert done.returncode == 1  # gemma3 cannot call tools
    lines = done.stdout.splitlines()
    assert any(line.startswith("ok  server:") and ollama.url in line for line in lines)
    assert any(line.startswith("!!  model: gemma3") for line in lines)
    assert "qwen3" in done.stdout  # what to use instead
    assert any(line.startswith(("ok  sandbox:", "!!  sandbox:")) for line in lines)
    assert "containment:" in done.stdout


def test_doctor_with_nothing_running_says_how_to_get_a_model(home: Path) -> None:
    done = rune(home, "doctor", "--backend", "ollama")
    no_traceback(done)
    assert done.returncode == 1
    assert "!!  server:" in done.stdout
    assert "ollama serve" in done.stdout


def test_doctor_prints_the_effective_sandbox_policy(home: Path) -> None:
    project = home / "proj"
    project.mkdir()
    extra = home / "scratch"
    done = rune(
        home,
        "doctor",
        "--verbose",
        "--backend",
        "scripted",
        "--workspace",
        str(project),
        "--write-root",
        str(extra),
        "--allow-credential",
        str(home / ".aws" / "config"),
    )
    no_traceback(done)
    lines = {line.split(":")[0]: line for line in done.stdout.splitlines() if ":" in line}
    assert f"write: {project}, {extra};" in lines["ok  sandbox"]
    credentials = lines["ok  sandbox, credentials (never read or written)"]
    assert ".aws" in credentials and ".bash_history" not in credentials  # listed as .*_history
    assert f"readable by your config: {home / '.aws' / 'config'}" in credentials
    assert ".git" in lines["ok  sandbox, protected (never written)"]
    sensitive = lines["ok  sandbox, sensitive (always asks, even under --yes)"]
    assert "AGENTS.md" in sensitive and "conftest.py" in sensitive
    assert "outside the workspace" in sensitive
    assert "every change and command asks" in lines["ok  sandbox, approval"]
