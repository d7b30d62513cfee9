"""``rune check-model``: the real command in a subprocess against a real HTTP server speaking
Ollama's wire format, with fake models that answer from what they are sent: one fixes each
shipped bug with native tool calls, one writes its calls as prose, one only talks. The shipped
tasks stay the bench's own (``bench/tasks/``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from tests.fakes.cli import rune
from tests.fakes.ollama_server import (
    FakeModel,
    FakeOllama,
    Reply,
    text_reply,
    tool_call,
    tool_reply,
)

from rune.app import OllamaBackend
from rune.app.model_check import (
    AutoChoice,
    Task,
    TaskOutcome,
    approves_in_scratch,
    builtin_tasks,
    run_task,
    tasks_json,
    verdict,
)
from rune.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from rune.messages import PendingApproval
from rune.transport.ollama import OllamaChatTransport

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench" / "tasks"
TASKS = builtin_tasks()


def solution(task: Task) -> dict[str, str]:
    folder = BENCH / task.name / "solution"
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.iterdir())}


def task_of(body: Mapping[str, Any]) -> tuple[Task, int]:
    """The shipped task the request is about, and how many turns the model already took."""
    messages = body.get("messages") or []
    said = " ".join(str(m.get("content")) for m in messages if m.get("role") == "user")
    (task,) = [t for t in TASKS if t.request in said]
    return task, sum(1 for m in messages if m.get("role") == "assistant")


def native_fixer(body: Mapping[str, Any]) -> Reply:
    task, turns = task_of(body)
    if turns == 0:
        writes = [
            tool_call("write_file", {"path": name, "content": text}, index=i)
            for i, (name, text) in enumerate(solution(task).items())
        ]
        return tool_reply(*writes)
    return text_reply("Fixed it.")


def prose_caller(body: Mapping[str, Any]) -> Reply:
    """The failure small models show under native tool calling: the call written as a fenced
    JSON object in the text, no ``tool_calls``."""
    task, turns = task_of(body)
    if turns == 0:
        ((name, text),) = solution(task).items()
        call = json.dumps({"name": "write_file", "arguments": {"path": name, "content": text}})
        return text_reply(f"I will fix it by writing the file:\n```json\n{call}\n```")
    return text_reply("The file is fixed now.")


def talker(body: Mapping[str, Any]) -> Reply:
    return text_reply("You should change the operator in the function; then it works.")


@pytest.fixture
def ollama() -> Iterator[FakeOllama]:
    with FakeOllama([FakeModel("coder:latest", ("completion", "tools"))]) as server:
        yield server


def check_model(
    home: Path, ollama: FakeOllama, model: Callable[[Mapping[str, Any]], Reply], *args: str
) -> Any:
    ollama.script(*[model] * 12)
    return rune(
        home, "check-model", "coder", "--backend", "ollama", *args,
        env={"OLLAMA_HOST": ollama.url},
    )  # fmt: skip


def verdict_line(stdout: str) -> str:
    (line,) = [line for line in stdout.splitlines() if line.startswith("verdict: ")]
    return line


def test_a_model_that_fixes_with_native_calls_works(home: Path, ollama: FakeOllama) -> None:
    done = check_model(home, ollama, native_fixer)
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    fixed = [line for line in done.stdout.splitlines() if "✓ fixed" in line]
    assert len(fixed) == len(TASKS) >= 3
    for task, line in zip(TASKS, fixed, strict=True):
        assert task.name in line and "steps 2/6" in line
    assert verdict_line(done.stdout) == (
        f"verdict: works with Rune: {len(TASKS)}/{len(TASKS)} fixed with the native protocol; "
        "auto picks native too (the server says coder takes tools)"
    )
    assert ollama.unused_replies == 12 - 2 * len(TASKS)


def test_calls_written_as_prose_are_named_and_constrained_is_advised(
    home: Path, ollama: FakeOllama
) -> None:
    done = check_model(home, ollama, prose_caller)
    line = verdict_line(done.stdout)
    assert "tool calls came back as prose" in line, done.stdout + done.stderr
    assert f"{len(TASKS)} of {len(TASKS)} calls were read from the text" in line
    assert "use --protocol constrained" in line
    assert "written as prose" in done.stdout


def test_a_model_that_only_talks_does_not_work(home: Path, ollama: FakeOllama) -> None:
    done = check_model(home, ollama, talker)
    assert done.returncode == EXIT_FAILED, done.stdout + done.stderr
    assert done.stdout.count("✗ not fixed") == len(TASKS)
    assert verdict_line(done.stdout) == (
        f"verdict: the model answered in prose and called no tool (0/{len(TASKS)} fixed): "
        "use --protocol constrained"
    )


def test_json_is_one_machine_line(home: Path, ollama: FakeOllama) -> None:
    done = check_model(home, ollama, prose_caller, "--json")
    (line,) = done.stdout.splitlines()
    assert line.isascii()
    result = json.loads(line)
    assert result["model"] == "coder" and result["backend"] == "ollama"
    assert (result["auto_protocol"], result["protocol"]) == ("native", "native")
    assert result["recommended_protocol"] == "constrained"
    assert result["total"] == len(TASKS) and result["fixed"] == len(TASKS)
    assert "came back as prose" in result["verdict"]
    first = result["tasks"][0]
    assert first["task"] == TASKS[0].name and first["sources"] == {"text-fallback": 1}
    assert first["fixed"] is True and first["steps"] == 2 and first["budget"] == 6


def test_the_scripted_backend_is_not_blamed_as_a_model(home: Path) -> None:
    done = rune(home, "check-model", "--backend", "scripted")
    assert done.returncode == EXIT_USAGE
    assert "the scripted backend is not a model" in done.stderr
    assert "rune demo --backend scripted" in done.stderr
    assert "verdict" not in done.stdout and "not fixed" not in done.stdout


def test_the_shipped_tasks_are_the_bench_tasks() -> None:
    """``model_check_tasks.json`` is bench/tasks/ copied: regenerate it with
    ``tasks_json([Task.from_dir(bench/tasks/NAME) ...])`` when a task changes."""
    from_bench = [Task.from_dir(BENCH / task.name) for task in TASKS]
    shipped = (REPO / "src" / "rune" / "app" / "model_check_tasks.json").read_text(encoding="utf-8")
    assert shipped == tasks_json(from_bench)


def pending(name: str, *, sensitive: str | None = None, contained: bool | None = None) -> Any:
    return PendingApproval(name, {}, "", "", contained=contained, sensitive=sensitive)


def test_approvals_are_confined_to_what_cannot_leave_the_scratch_project() -> None:
    assert approves_in_scratch(pending("write_file"))
    assert approves_in_scratch(pending("run_command", contained=True))
    assert not approves_in_scratch(pending("run_command", contained=False))
    assert not approves_in_scratch(pending("write_file", sensitive="steers an agent"))
    assert not approves_in_scratch(pending("some_mcp_tool"))
    outside = PendingApproval("read_file", {}, "", "", grant="/home/someone")
    assert not approves_in_scratch(outside)


def outcome(fixed: bool, protocol: str, ended: str = "answered", **sources: int) -> TaskOutcome:
    names = {"native": "ollama-native", "text": "text-fallback"}
    counts = {names.get(k, k): v for k, v in sources.items()}
    return TaskOutcome("t", fixed, 3, 6, 1.0, ended, protocol, sources=counts, error="why")


def test_the_verdict_names_what_to_change() -> None:
    embedded = AutoChoice("constrained", "Rune runs this model itself")
    weak = verdict([outcome(False, "constrained", constrained=3)] * 3, embedded)
    assert not weak.works and weak.recommended is None
    assert "too weak" in weak.line
    text = verdict([outcome(False, "text-fallback", text=2)] * 3, AutoChoice("text", "no tools"))
    assert text.recommended == "constrained" and "try --protocol constrained" in text.line
    chosen = verdict([outcome(True, "constrained", constrained=2)] * 3, AutoChoice("native", "x"))
    assert chosen.works and "auto would pick native (x): pass --protocol constrained" in chosen.line


def test_a_model_stopped_by_the_breaker_is_weak_not_a_server_problem() -> None:
    embedded = AutoChoice("constrained", "Rune runs this model itself")
    stuck = verdict([outcome(False, "constrained", "CircuitBreaker", constrained=2)] * 3, embedded)
    assert "too weak" in stuck.line and "server" not in stuck.line
    down = verdict([outcome(False, "constrained", "ServerUnreachable")] * 3, embedded)
    assert down.line.startswith("every task failed with an error (ServerUnreachable: why)")
    assert "rune doctor" in down.line and down.recommended is None


def test_a_task_runs_in_the_scratch_directory_it_is_given(
    tmp_path: Path, ollama: FakeOllama
) -> None:
    """A benchmark keeps the workspace's path fixed (the model sees it in its prompt): the
    directory is emptied first, the task runs in it, and it is gone afterwards."""
    fixed = tmp_path / "bench" / "task"
    (fixed / "project").mkdir(parents=True)
    (fixed / "project" / "left_over.py").write_text("LEFT = 'from a run before'\n")
    ollama.script(native_fixer, native_fixer)
    task = TASKS[0]
    with OllamaChatTransport(ollama.url) as transport:
        outcome = run_task(
            task, transport, "coder", OllamaBackend("test", ollama.url),
            approves=approves_in_scratch, scratch=fixed,
        )  # fmt: skip
    assert outcome.fixed
    system = str(ollama.bodies()[0]["messages"][0]["content"])
    assert f"Workspace (relative paths start here): {fixed / 'project'}" in system
    assert "left_over.py" not in system and "from a run before" not in system
    assert not fixed.exists()
