"""``rune run --json``: the real command in a subprocess (the scripted backend, or a real HTTP
server speaking Ollama's wire format), every stdout line validated against the schema in
docs/rune-events.schema.json, the exit status the human run gives."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from tests.fakes.cli import call, final, rune, sigint_as_in_the_foreground
from tests.fakes.ollama_server import (
    FakeModel,
    FakeOllama,
    reply,
    text_reply,
    tool_call,
    tool_reply,
)
from tests.fakes.ollama_server import final as ollama_final

from rune.cli import (
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_LIMIT,
    EXIT_OK,
    EXIT_PENDING,
    EXIT_USAGE,
)

SCHEMA = json.loads(
    (Path(__file__).resolve().parent.parent / "docs" / "rune-events.schema.json").read_text()
)
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
FIXED = "def add(a, b):\n    return a + b\n"
# The model's answer carries an escape sequence, a bell, a C1 control, a lone surrogate and
# an emoji: none of them may reach stdout raw.
HOSTILE = "Fixed \x1b[31mred\x1b]0;title\x07 \x9b2J \ud800 \U0001f600"


@pytest.fixture
def workspace(home: Path) -> Path:
    path = home / "work"
    path.mkdir()
    (path / "calc.py").write_text("def add(a, b):\n    return a - b\n", encoding="utf-8")
    return path


def events(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    """Every stdout line, each checked against the schema; the last one is the result."""
    lines = done.stdout.splitlines()
    assert lines, done.stderr
    parsed = []
    for line in lines:
        assert line.isascii() and line.isprintable(), repr(line)
        event = json.loads(line)
        errors = [e.message for e in VALIDATOR.iter_errors(event)]
        assert not errors, (event, errors)
        parsed.append(event)
    assert parsed[0]["type"] in ("session", "warning", "result")
    assert parsed[-1]["type"] == "result"
    assert [e["type"] for e in parsed].count("result") == 1
    assert parsed[-1]["exit_status"] == done.returncode
    return parsed


def of(kind: str, parsed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in parsed if e["type"] == kind]


def run_json(home: Path, workspace: Path, *args: str, **kwargs: Any) -> Any:
    return rune(
        home, "run", "--json", "--backend", "scripted", "--workspace", str(workspace), *args,
        **kwargs,
    )  # fmt: skip


FIX_SCRIPT = [
    call("read_file", path="calc.py"),
    call("write_file", path="calc.py", content=FIXED),
    final(HOSTILE),
]


def test_a_whole_run_under_yes_is_schema_valid_json_lines(home: Path, workspace: Path) -> None:
    done = run_json(home, workspace, "--yes", "fix add", script=FIX_SCRIPT)
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    parsed = events(done)
    session = parsed[0]
    assert session["type"] == "session" and session["model"] == "scripted-demo"
    assert session["workspace"] == str(workspace.resolve())
    kinds = [e["type"] for e in parsed]
    # the order a person sees: each step starts, the model writes, its tool runs
    assert kinds.index("step_start") < kinds.index("tool_call") < kinds.index("tool_result")
    assert [e["iteration"] for e in of("step_start", parsed)] == [1, 2, 3]
    assert [e["iteration"] for e in of("step_end", parsed)] == [1, 2, 3]
    assert [c["name"] for c in of("tool_call", parsed)] == ["read_file", "write_file"]
    assert of("tool_call", parsed)[1]["arguments"] == {"path": "calc.py", "content": FIXED}
    asked = of("approval_requested", parsed)
    assert len(asked) == 1 and asked[0]["name"] == "write_file"
    assert "+    return a + b" in asked[0]["preview"]
    assert of("approval_decided", parsed) == [
        {"type": "approval_decided", "decision": "approve", "by": "--yes", "reason": ""}
    ]
    assert [r["status"] for r in of("tool_result", parsed)] == ["done", "done"]
    result = parsed[-1]
    assert result["outcome"] == "done"
    assert result["session_id"] == session["session_id"]
    assert result["files_changed"] == ["calc.py"]
    assert (result["iterations_used"], result["iteration_budget"]) == (3, 8)
    shown = HOSTILE.replace("\ud800", "\ufffd")
    assert result["answer"] == shown
    assert "".join(e["text"] for e in of("text", parsed)) == shown
    assert (workspace / "calc.py").read_text() == FIXED


def test_hostile_model_text_reaches_stdout_only_as_json_escapes(
    home: Path, workspace: Path
) -> None:
    done = run_json(home, workspace, "--yes", "fix add", script=FIX_SCRIPT)
    raw = done.stdout.encode("utf-8")
    assert b"\x1b" not in raw and b"\x07" not in raw and b"\xc2\x9b" not in raw
    assert all(byte == 0x0A or 0x20 <= byte < 0x7F for byte in raw)
    assert "\\u001b[31m" in done.stdout
    # a lone surrogate has no UTF-8 form (jq refuses its escape): it becomes U+FFFD
    assert "\\ud800" not in done.stdout and "\\ufffd" in done.stdout


def test_an_approval_nobody_answers_pauses_with_exit_3_and_nothing_else_on_stdout(
    home: Path, workspace: Path
) -> None:
    done = run_json(home, workspace, "fix add", script=FIX_SCRIPT)
    assert done.returncode == EXIT_PENDING, done.stdout + done.stderr
    parsed = events(done)
    assert parsed[-2]["type"] == "approval_requested"
    result = parsed[-1]
    assert result["outcome"] == "paused" and result["files_changed"] == []
    assert "approve?" in done.stderr and f"rune resume {result['session_id']}" in done.stderr
    assert (workspace / "calc.py").read_text() != FIXED
    # the human run of the same script ends the same way
    human = rune(
        home, "run", "--backend", "scripted", "--workspace", str(workspace), "fix add",
        script=FIX_SCRIPT,
    )  # fmt: skip
    assert human.returncode == done.returncode


def test_a_rejection_on_stdin_is_an_event_and_the_run_is_incomplete(
    home: Path, workspace: Path
) -> None:
    done = run_json(home, workspace, "fix add", script=FIX_SCRIPT, stdin="r keep it\n")
    assert done.returncode == EXIT_INCOMPLETE, done.stdout + done.stderr
    parsed = events(done)
    assert of("approval_decided", parsed) == [
        {"type": "approval_decided", "decision": "reject", "by": "user", "reason": "keep it"}
    ]
    assert of("tool_result", parsed)[-1]["status"] == "rejected"
    result = parsed[-1]
    assert result["outcome"] == "incomplete" and result["files_changed"] == []
    assert "keep it" in result["incomplete"]


def test_the_budget_running_out_is_exit_5_with_its_figures(home: Path, workspace: Path) -> None:
    script = [call("read_file", path="calc.py"), call("list_dir", path=".")]
    done = run_json(home, workspace, "--max-iterations", "1", "look", script=script)
    assert done.returncode == EXIT_LIMIT, done.stdout + done.stderr
    result = events(done)[-1]
    assert result["outcome"] == "limit" and result["error_kind"] == "IterationLimit"
    assert (result["iterations_used"], result["iteration_budget"]) == (1, 1)


def test_a_bad_workspace_still_ends_with_a_result_line(home: Path) -> None:
    done = run_json(home, home / "missing", "fix it", script=FIX_SCRIPT)
    assert done.returncode == EXIT_USAGE
    (result,) = events(done)
    assert result["outcome"] == "failed" and result["error_kind"] == "ConfigError"
    assert result["session_id"] is None and "does not exist" in result["error"]


def test_a_project_config_warning_is_an_event_not_stderr_text(home: Path, workspace: Path) -> None:
    (workspace / ".rune").mkdir()
    (workspace / ".rune" / "config.toml").write_text('model = "evil"\n', encoding="utf-8")
    done = run_json(home, workspace, "--yes", "fix add", script=FIX_SCRIPT)
    parsed = events(done)
    (warning,) = of("warning", parsed)
    assert "ignored 'model'" in warning["message"]
    assert "ignored 'model'" not in done.stderr


@pytest.fixture
def ollama() -> Iterator[FakeOllama]:
    with FakeOllama([FakeModel("qwen3:latest", ("completion", "tools", "thinking"))]) as server:
        yield server


def test_a_streaming_server_gives_thinking_text_and_token_counts(
    home: Path, workspace: Path, ollama: FakeOllama
) -> None:
    ollama.script(
        tool_reply(tool_call("read_file", {"path": "calc.py"}), thinking="look first"),
        text_reply("It subtracts; it should add.", thinking="I see it"),
    )
    done = rune(
        home, "run", "--json", "--workspace", str(workspace), "--model", "qwen3", "why?",
        env={"OLLAMA_HOST": ollama.url},
    )  # fmt: skip
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    parsed = events(done)
    assert parsed[0]["backend"] == "ollama"
    assert "".join(e["text"] for e in of("thinking", parsed)) == "look firstI see it"
    assert "".join(e["text"] for e in of("text", parsed)) == "It subtracts; it should add."
    ends = of("step_end", parsed)
    assert [e["tokens"] for e in ends] == [12, 12]  # the server's eval_count
    assert all(e["prompt_tokens"] and e["prompt_tokens"] > 0 for e in ends)
    assert of("tool_call", parsed)[0]["source"] == "ollama-native"
    assert of("tool_call", parsed)[0]["call_id"].startswith("call_")
    assert parsed[-1]["protocol"] == "native"


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")
def test_the_readme_jq_example_works(home: Path, workspace: Path) -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    found = re.search(r"rune run --json --yes \"[^\"]*\" \| jq -c '([^']+)'", readme)
    assert found is not None, "the README shows `rune run --json ... | jq`"
    done = run_json(home, workspace, "--yes", "fix add", script=FIX_SCRIPT)
    piped = subprocess.run(
        ["jq", "-c", found.group(1)], input=done.stdout, capture_output=True, text=True, check=True
    )
    assert json.loads(piped.stdout) == {"outcome": "done", "files_changed": ["calc.py"]}


def test_ctrl_c_ends_with_an_interrupted_result_naming_the_session(
    home: Path, workspace: Path, ollama: FakeOllama
) -> None:
    ollama.script(reply(ollama_final("too late"), stall=30))
    environment = {
        **os.environ,
        "HOME": str(home),
        "OLLAMA_HOST": ollama.url,
        "NO_COLOR": "1",
        "PYTHONFAULTHANDLER": "1",  # a process that hangs shows where, on SIGABRT
    }
    command = [sys.executable, "-m", "rune.cli", "run", "--json", "--workspace", str(workspace)]
    process = subprocess.Popen(
        [*command, "--model", "qwen3", "wait"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=environment,
        cwd=home,
        preexec_fn=sigint_as_in_the_foreground,
    )
    assert process.stdout is not None
    seen = [process.stdout.readline()]
    while json.loads(seen[-1])["type"] != "step_start":
        seen.append(process.stdout.readline())
    process.send_signal(signal.SIGINT)
    try:
        rest, stderr = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        pytest.fail("rune did not exit after Ctrl-C:\n" + process.communicate(timeout=30)[1])
    done = subprocess.CompletedProcess(command, process.returncode, "".join(seen) + rest, stderr)
    assert done.returncode == EXIT_INTERRUPTED, done.stdout + done.stderr
    parsed = events(done)
    assert parsed[-1]["outcome"] == "interrupted"
    assert parsed[-1]["session_id"] == parsed[0]["session_id"]
    assert f"rune resume {parsed[0]['session_id']}" in done.stderr


def test_a_fresh_budget_after_a_change_is_an_event(home: Path, workspace: Path) -> None:
    script = [call("write_file", path="calc.py", content=FIXED), final("done it")]
    done = run_json(home, workspace, "--yes", "--max-iterations", "1", "fix add", script=script)
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    parsed = events(done)
    (renewed,) = of("budget_renewed", parsed)
    assert renewed["budget"] == 2 and renewed["budgets"] >= 2
    kinds = [e["type"] for e in parsed]
    assert kinds.index("tool_result") < kinds.index("budget_renewed") < len(kinds) - 1
    assert [e["iteration"] for e in of("step_start", parsed)] == [1, 1]
