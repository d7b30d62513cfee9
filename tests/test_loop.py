"""Loop semantics of LocalToolRuntime, one test per claim of docs/loop.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from rune import (
    LocalToolRuntime,
    OperatorResponse,
    SandboxPolicy,
    ScriptedTransport,
    ToolExecutor,
)
from rune import events as ev
from rune.errors import ConfigError, ServerUnreachable, ToolError
from rune.runtime.local_tool_runtime import breaker_message
from rune.tools.spec import PreparedChange, ToolSpec

BROKEN = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"


def call(name: str, call_id: str | None = None, **arguments: Any) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name, "arguments": arguments}
    entry: dict[str, Any] = {"function": function}
    if call_id is not None:
        entry["id"] = call_id
    return entry


def tools(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"content": "", "tool_calls": list(calls)}


def text(content: str) -> dict[str, Any]:
    return {"content": content}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "calc.py").write_text(BROKEN)
    return tmp_path


def runtime(
    project: Path, turns: Sequence[Any], *, max_iterations: int = 8, **kw: Any
) -> tuple[LocalToolRuntime, ScriptedTransport]:
    transport = ScriptedTransport(turns, **kw)
    executor = ToolExecutor(SandboxPolicy.workspace_only(project), project)
    return LocalToolRuntime(
        transport, executor, model="m", max_iterations=max_iterations
    ), transport


USER = [{"role": "user", "content": "fix calc.py"}]


# --- construction ----------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, 9, -1, 100, True, 2.0, "8", None])
def test_max_iterations_outside_1_to_8_is_refused_at_construction(bad: Any) -> None:
    with pytest.raises(ConfigError, match="max_iterations"):
        LocalToolRuntime(ScriptedTransport([]), ToolExecutor(), model="m", max_iterations=bad)


@pytest.mark.parametrize("good", [1, 8])
def test_max_iterations_bounds_are_accepted(good: int) -> None:
    rt = LocalToolRuntime(ScriptedTransport([]), ToolExecutor(), model="m", max_iterations=good)
    assert rt.max_iterations == good


# --- iterations and stop conditions ----------------------------------------------------------


def test_one_chat_call_is_one_iteration_and_text_ends_the_run(project: Path) -> None:
    rt, transport = runtime(
        project,
        [
            tools(call("read_file", path="calc.py")),
            tools(call("read_file", path="calc.py", offset=2)),
            text("add subtracts instead of adding."),
        ],
    )
    resp = rt.run(USER)
    assert resp.success and resp.error is None
    assert resp.text == "add subtracts instead of adding."
    assert resp.iterations_used == len(transport.requests) == 3
    assert resp.iteration_budget == 8
    assert [e.status for e in resp.events] == ["done", "done"]
    assert "return a - b" in (resp.events[0].output or "")


def test_iteration_limit_is_a_typed_failure_with_events_kept(project: Path) -> None:
    endless = [tools(call("read_file", path="calc.py", offset=n)) for n in range(1, 10)]
    rt, transport = runtime(project, endless, max_iterations=3)
    resp = rt.run(USER)
    assert not resp.success
    assert resp.error_kind == "IterationLimit"
    assert "iteration limit" in (resp.error or "")
    assert resp.iterations_used == 3 == len(transport.requests)
    assert len(resp.events) == 3


def test_transport_failure_is_typed_and_keeps_events(project: Path) -> None:
    rt, _ = runtime(
        project,
        [tools(call("read_file", path="calc.py")), ServerUnreachable("no Ollama at http://x")],
    )
    resp = rt.run(USER)
    assert not resp.success
    assert resp.error_kind == "ServerUnreachable"
    assert resp.error == "no Ollama at http://x"
    assert resp.iterations_used == 2
    assert [e.name for e in resp.events] == ["read_file"]


class _DownTransport(ScriptedTransport):
    def supports_tools(self, model: str) -> bool:
        raise ServerUnreachable("no Ollama at http://127.0.0.1:1")


def test_failure_before_the_loop_reports_zero_iterations(project: Path) -> None:
    executor = ToolExecutor(SandboxPolicy.workspace_only(project), project)
    rt = LocalToolRuntime(_DownTransport([]), executor, model="m", max_iterations=5)
    resp = rt.run(USER)
    assert (resp.success, resp.error_kind) == (False, "ServerUnreachable")
    assert (resp.iterations_used, resp.iteration_budget) == (0, 5)


def test_iteration_events_stream_step_numbers(project: Path) -> None:
    seen: list[ev.LoopEvent] = []
    transport = ScriptedTransport([tools(call("read_file", path="calc.py")), text("ok")])
    executor = ToolExecutor(SandboxPolicy.workspace_only(project), project)
    rt = LocalToolRuntime(transport, executor, model="m", max_iterations=4, on_event=seen.append)
    rt.run(USER)
    steps = [(e.iteration, e.budget) for e in seen if isinstance(e, ev.IterationStarted)]
    assert steps == [(1, 4), (2, 4)]
    finished = [e.event.name for e in seen if isinstance(e, ev.ToolFinished)]
    assert finished == ["read_file"]
    assert any(isinstance(e, ev.TextDelta) and e.text == "ok" for e in seen)


# --- several calls, dedup --------------------------------------------------------------------


class CountingExecutor:
    """An Executor at the seam: counts how often each tool really runs."""

    def __init__(self, fail: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.runs: list[tuple[str, dict[str, Any]]] = []
        self.fail = fail

    def specs(self) -> Sequence[ToolSpec]:
        params = {"type": "object", "properties": {"x": {"type": "integer"}}}
        return [ToolSpec("probe", "test probe", params), ToolSpec("other", "other", params)]

    def is_mutating(self, name: str) -> bool:
        return False

    def run(self, name: str, arguments: Mapping[str, Any]) -> str:
        self.runs.append((name, dict(arguments)))
        if name in self.fail:
            raise ToolError(f"{name} broke")
        return f"{name}:{json.dumps(dict(arguments), sort_keys=True)}"

    def prepare(self, name: str, arguments: Mapping[str, Any]) -> PreparedChange:
        raise AssertionError("not mutating")

    def apply(self, change: PreparedChange) -> str:
        raise AssertionError("not mutating")


def test_calls_run_in_order_and_identical_ones_run_once(project: Path) -> None:
    executor = CountingExecutor()
    transport = ScriptedTransport(
        [
            tools(
                {"id": "c1", "function": {"name": "probe", "arguments": {"x": 1}}},
                {"id": "c2", "function": {"name": "other", "arguments": {"x": 1}}},
                # same name and arguments, different key order and id: a duplicate
                {"id": "c3", "function": {"name": "probe", "arguments": {"x": 1}}},
                {"id": "c4", "function": {"name": "probe", "arguments": {"x": 2}}},
            ),
            text("done"),
        ]
    )
    resp = LocalToolRuntime(transport, executor, model="m").run(USER)
    assert resp.success
    assert executor.runs == [("probe", {"x": 1}), ("other", {"x": 1}), ("probe", {"x": 2})]
    results = [m for m in transport.requests[1].messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == ["c1", "c2", "c3", "c4"]
    assert results[0]["content"] == results[2]["content"] == 'probe:{"x": 1}'
    assert all(m["tool_name"] for m in results)


def test_dedup_uses_canonical_json_of_arguments(project: Path) -> None:
    executor = CountingExecutor()
    params = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    executor.specs = lambda: [ToolSpec("probe", "p", params)]  # type: ignore[method-assign]
    transport = ScriptedTransport(
        [
            tools(
                {"function": {"name": "probe", "arguments": {"a": 1, "b": 2}}},
                {"function": {"name": "probe", "arguments": {"b": 2, "a": 1}}},
            ),
            text("done"),
        ]
    )
    LocalToolRuntime(transport, executor, model="m").run(USER)
    assert len(executor.runs) == 1


# --- read-only vs mutating, approve and reject -----------------------------------------------


def test_read_only_tools_dispatch_without_pausing(project: Path) -> None:
    rt, _ = runtime(project, [tools(call("read_file", path="calc.py")), text("read it")])
    resp = rt.run(USER)
    assert resp.success and resp.pending is None and resp.pending_state is None


def test_mutating_tool_is_prepared_and_pauses_without_touching_disk(project: Path) -> None:
    rt, _ = runtime(project, [tools(call("write_file", path="calc.py", content=FIXED))])
    resp = rt.run(USER)
    assert not resp.success and resp.error is None
    assert resp.pending is not None and resp.pending.name == "write_file"
    assert "-    return a - b" in resp.pending.preview
    assert "+    return a + b" in resp.pending.preview
    assert (project / "calc.py").read_text() == BROKEN
    assert resp.events[-1].status == "pending_approval"
    assert (resp.iterations_used, resp.iteration_budget) == (1, 8)


def test_approve_applies_after_revalidation_and_continues(project: Path) -> None:
    rt, transport = runtime(
        project,
        [tools(call("write_file", "w1", path="calc.py", content=FIXED)), text("fixed")],
    )
    paused = rt.run(USER)
    resp = rt.approve(paused.pending_state)  # type: ignore[arg-type]
    assert resp.success and resp.text == "fixed"
    assert (project / "calc.py").read_text() == FIXED
    assert [e.status for e in resp.events] == ["done"]
    tool_msg = transport.requests[1].messages[-1]
    assert tool_msg["role"] == "tool" and tool_msg["tool_call_id"] == "w1"
    assert resp.iterations_used == 2


def test_reject_feeds_the_reason_back_and_continues(project: Path) -> None:
    rt, transport = runtime(
        project,
        [tools(call("write_file", path="calc.py", content=FIXED + "# oops\n")), text("understood")],
    )
    paused = rt.run(USER)
    resp = rt.reject(paused.pending_state, reason="keep the signature")  # type: ignore[arg-type]
    assert resp.success and resp.text == "understood"
    assert (project / "calc.py").read_text() == BROKEN
    assert transport.requests[1].messages[-1]["content"] == (
        "rejected by the operator: keep the signature"
    )
    assert resp.events[-1].status == "rejected"


def test_calls_after_a_pending_one_continue_after_approval(project: Path) -> None:
    rt, transport = runtime(
        project,
        [
            tools(
                call("write_file", path="calc.py", content=FIXED),
                call("read_file", path="calc.py"),
            ),
            text("verified"),
        ],
    )
    paused = rt.run(USER)
    assert [e.name for e in paused.events] == ["write_file"]
    resp = rt.approve(paused.pending_state)  # type: ignore[arg-type]
    assert resp.success
    assert [e.name for e in resp.events] == ["write_file", "read_file"]
    assert "return a + b" in (resp.events[1].output or "")
    assert len(transport.requests) == 2


# --- executor errors -------------------------------------------------------------------------


def test_executor_errors_go_back_to_the_model_as_tool_messages(project: Path) -> None:
    rt, transport = runtime(
        project, [tools(call("read_file", path="missing.py")), text("no such file")]
    )
    resp = rt.run(USER)
    assert resp.success
    assert resp.events[0].status == "failed"
    tool_msg = transport.requests[1].messages[-1]
    assert tool_msg["role"] == "tool" and tool_msg["content"].startswith("Error: ")
    assert "does not exist" in tool_msg["content"]


class ExplodingExecutor(CountingExecutor):
    def run(self, name: str, arguments: Mapping[str, Any]) -> str:
        raise RuntimeError("disk on fire")


def test_unexpected_executor_exceptions_never_escape_run(project: Path) -> None:
    transport = ScriptedTransport([tools(call("probe", x=1)), text("ok")])
    resp = LocalToolRuntime(transport, ExplodingExecutor(), model="m").run(USER)
    assert resp.success
    assert "disk on fire" in transport.requests[1].messages[-1]["content"]


def test_unknown_tool_is_answered_with_the_valid_names(project: Path) -> None:
    rt, transport = runtime(project, [tools(call("delete_everything")), text("sorry")])
    resp = rt.run(USER)
    assert resp.success
    assert "read_file" in transport.requests[1].messages[-1]["content"]
    assert "write_file" in transport.requests[1].messages[-1]["content"]


def test_sandbox_denial_names_the_allowed_directories(project: Path) -> None:
    outside = project.parent / "elsewhere.txt"
    rt, transport = runtime(
        project, [tools(call("write_file", path=str(outside), content="x")), text("ok")]
    )
    resp = rt.run(USER)
    assert resp.events[0].status == "denied"
    assert f"['{project}']" in transport.requests[1].messages[-1]["content"]
    assert not outside.exists()


# --- pending state ---------------------------------------------------------------------------


def test_pending_state_is_plain_json_and_a_fresh_copy_each_time(project: Path) -> None:
    rt, _ = runtime(project, [tools(call("write_file", path="calc.py", content=FIXED))])
    paused = rt.run(USER)
    state = paused.pending_state
    assert state is not None
    assert json.loads(json.dumps(state)) == state
    state["queue"].clear()
    assert paused.pending_state["queue"]  # type: ignore[index]


def test_approve_in_a_new_process_finishes_the_job(project: Path, tmp_path: Path) -> None:
    rt, _ = runtime(project, [tools(call("write_file", path="calc.py", content=FIXED))])
    paused = rt.run(USER)
    state_file = tmp_path / "state.json"
    state_file.write_text(json.dumps(paused.pending_state))
    script = textwrap.dedent(
        f"""
        import json, sys
        from rune import LocalToolRuntime, SandboxPolicy, ScriptedTransport, ToolExecutor
        state = json.loads(open({str(state_file)!r}).read())
        executor = ToolExecutor(SandboxPolicy.workspace_only({str(project)!r}), {str(project)!r})
        transport = ScriptedTransport([{{"content": "fixed in a new process"}}])
        resp = LocalToolRuntime(transport, executor, model="m").approve(state)
        print(json.dumps({{"success": resp.success, "text": resp.text,
                          "used": resp.iterations_used}}))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    result = json.loads(out.stdout)
    assert result == {"success": True, "text": "fixed in a new process", "used": 2}
    assert (project / "calc.py").read_text() == FIXED


@pytest.mark.parametrize(
    "tamper",
    [
        lambda s: s["queue"][0]["arguments"].__setitem__("content", "import os\n"),
        lambda s: s["queue"][0]["arguments"].__setitem__("path", "other.py"),
        lambda s: s["queue"][0].__setitem__("name", "edit_file"),
        lambda s: s["change"].__setitem__("preview", "(nothing to see)"),
    ],
    ids=["content", "path", "tool", "preview"],
)
def test_a_state_altered_after_prepare_is_refused(project: Path, tamper: Any) -> None:
    rt, _ = runtime(project, [tools(call("write_file", path="calc.py", content=FIXED))])
    state = rt.run(USER).pending_state
    assert state is not None
    tamper(state)
    resp = rt.approve(state)
    assert not resp.success
    assert resp.error_kind == "ApprovalMismatch"
    assert resp.iterations_used == 0
    assert (project / "calc.py").read_text() == BROKEN
    assert not (project / "other.py").exists()


def test_swapped_content_with_a_recomputed_plain_hash_seal_is_refused(project: Path) -> None:
    # The attack on the old seal (a plain SHA-256 of request and change): swap the content and
    # its digest, keep the old preview, recompute the hash. It must not write the new content.
    import hashlib

    from rune.messages import canonical_json

    rt, _ = runtime(project, [tools(call("write_file", path="calc.py", content=FIXED))])
    state = rt.run(USER).pending_state
    assert state is not None
    evil = "import os\n"
    state["queue"][0]["arguments"]["content"] = evil
    state["change"]["arguments"]["content"] = evil
    state["change"]["fingerprint"]["new_sha256"] = hashlib.sha256(evil.encode()).hexdigest()
    payload = canonical_json({"request": state["queue"][0], "change": state["change"]})
    state["seal"] = hashlib.sha256(payload.encode()).hexdigest()
    resp = rt.approve(state)
    assert resp.error_kind == "ApprovalMismatch"
    assert (project / "calc.py").read_text() == BROKEN


def test_a_file_changed_between_prepare_and_approve_is_not_overwritten(project: Path) -> None:
    rt, transport = runtime(
        project, [tools(call("write_file", path="calc.py", content=FIXED)), text("ok")]
    )
    state = rt.run(USER).pending_state
    (project / "calc.py").write_text("# edited by the user meanwhile\n")
    resp = rt.approve(state)  # type: ignore[arg-type]
    assert resp.events[-1].status == "failed"
    assert "changed since" in (resp.events[-1].error or "")
    assert (project / "calc.py").read_text() == "# edited by the user meanwhile\n"
    assert transport.requests[1].messages[-1]["content"].startswith("Error: ")


@pytest.mark.parametrize(
    "state", [{}, {"rune_pending_state": 1}, {"rune_pending_state": 99}, "nope", None]
)
def test_invalid_pending_state_is_a_typed_failure(project: Path, state: Any) -> None:
    rt, _ = runtime(project, [])
    for resp in (rt.approve(state), rt.reject(state)):
        assert not resp.success
        assert resp.error_kind == "InvalidPendingState"
        assert resp.iterations_used == 0


# --- circuit breaker -------------------------------------------------------------------------


def test_breaker_trips_on_the_second_identical_failure(project: Path) -> None:
    rt, transport = runtime(
        project,
        [tools(call("read_file", path="nope.py")) for _ in range(8)],
    )
    resp = rt.run(USER)
    assert not resp.success
    assert resp.error == breaker_message("read_file", 2)
    assert resp.error == (
        "tool read_file failed 2 consecutive times with identical arguments — "
        "stopping before the iteration budget burns"
    )
    assert resp.error_kind == "CircuitBreaker"
    assert resp.iterations_used == 2 == len(transport.requests)
    assert [e.status for e in resp.events] == ["failed", "failed"]


def test_breaker_resets_on_success(project: Path) -> None:
    rt, _ = runtime(
        project,
        [
            tools(call("read_file", path="nope.py")),
            tools(call("read_file", path="calc.py")),
            tools(call("read_file", path="nope.py")),
            text("gave up on nope.py"),
        ],
    )
    resp = rt.run(USER)
    assert resp.success and resp.iterations_used == 4


def test_different_arguments_have_their_own_streak(project: Path) -> None:
    rt, _ = runtime(
        project,
        [
            tools(call("read_file", path="a.py")),
            tools(call("read_file", path="b.py")),
            tools(call("read_file", path="c.py")),
            text("none of them exist"),
        ],
    )
    resp = rt.run(USER)
    assert resp.success and [e.status for e in resp.events] == ["failed"] * 3


def test_a_read_made_again_right_after_itself_fails_and_its_second_repeat_stops_the_run(
    project: Path,
) -> None:
    """The 1.5B read the same two lines of a module six times in a row, to the end of its
    budget: each read worked, so the breaker never counted one."""
    read = call("read_file", path="calc.py", offset=1, limit=2)
    rt, transport = runtime(project, [tools(read) for _ in range(8)])
    resp = rt.run(USER)
    assert [e.status for e in resp.events] == ["done", "failed", "failed"]
    assert resp.events[1].error is not None and "your last call again" in resp.events[1].error
    assert resp.error == breaker_message("read_file", 2) and resp.error_kind == "CircuitBreaker"
    assert len(transport.requests) == 3


def test_a_read_made_again_after_another_call_or_with_another_result_is_a_read(
    project: Path,
) -> None:
    (project / "other.py").write_text("X = 1\n")
    read = call("read_file", path="calc.py")
    rt, _ = runtime(
        project,
        [
            tools(read),
            tools(call("read_file", path="other.py")),
            tools(read),
            tools(call("write_file", path="calc.py", content=FIXED)),
            tools(read),
            text("done"),
        ],
    )
    resp = rt.run(USER)
    while resp.pending is not None:
        resp = rt.approve(resp.pending_state)
    assert resp.success and [e.status for e in resp.events] == ["done"] * 5


def test_breaker_covers_denied_mutations_in_the_approval_branch(project: Path) -> None:
    denied = call("write_file", path="/etc/nope.txt", content="x")
    rt, _ = runtime(project, [tools(denied), tools(denied), text("never reached")])
    resp = rt.run(USER)
    assert resp.error == breaker_message("write_file", 2)
    assert [e.status for e in resp.events] == ["denied", "denied"]
    assert resp.pending is None


def test_breaker_covers_failures_of_execution_after_approval(project: Path) -> None:
    write = call("write_file", path="calc.py", content=FIXED)
    rt, _ = runtime(project, [tools(write), tools(write), text("never reached")])
    first = rt.run(USER)
    (project / "calc.py").write_text("# changed 1\n")
    second = rt.approve(first.pending_state)  # type: ignore[arg-type]
    assert second.pending is not None  # the model asked again; it was prepared again
    (project / "calc.py").write_text("# changed 2\n")
    final = rt.approve(second.pending_state)  # type: ignore[arg-type]
    assert not final.success
    assert final.error == breaker_message("write_file", 2)
    assert (project / "calc.py").read_text() == "# changed 2\n"


# --- budget fields everywhere ----------------------------------------------------------------


def _budget(resp: OperatorResponse) -> tuple[int, int]:
    return resp.iterations_used, resp.iteration_budget


def test_budget_fields_on_success_pause_and_failure(project: Path) -> None:
    rt, _ = runtime(project, [text("hi")], max_iterations=6)
    assert _budget(rt.run(USER)) == (1, 6)
    rt, _ = runtime(
        project, [tools(call("write_file", path="x.py", content="1"))], max_iterations=6
    )
    assert _budget(rt.run(USER)) == (1, 6)
    rt, _ = runtime(project, [ServerUnreachable("down")], max_iterations=6)
    assert _budget(rt.run(USER)) == (1, 6)
    assert rt.run(USER).budget_label == "step 1/6"


# --- protocol choice -------------------------------------------------------------------------


def test_native_models_get_tool_schemas_and_fallback_models_get_the_prompt(
    project: Path,
) -> None:
    rt, native = runtime(project, [text("hi")])
    rt.run(USER)
    sent = [t["function"]["name"] for t in native.requests[0].tools or []]
    assert sent == [spec.name for spec in rt.executor.specs()]
    assert {"read_file", "write_file"} <= set(sent)
    assert native.requests[0].messages == USER

    rt, plain = runtime(project, [text("hi")], tools=False)
    resp = rt.run(USER)
    assert plain.requests[0].tools is None
    first = plain.requests[0].messages[0]
    assert first["role"] == "system" and "<tool_call>" in first["content"]
    assert resp.protocol == "text-fallback"


def test_think_is_sent_only_to_thinking_models(project: Path) -> None:
    executor = ToolExecutor(SandboxPolicy.workspace_only(project), project)
    for thinking, expected in ((True, True), (False, None)):
        transport = ScriptedTransport([text("hi")], thinking=thinking)
        LocalToolRuntime(transport, executor, model="m", think=True).run(USER)
        assert transport.requests[0].think is expected


def test_thinking_is_kept_in_the_history_sent_back(project: Path) -> None:
    rt, transport = runtime(
        project,
        [
            {
                "content": "",
                "thinking": "look first",
                "tool_calls": [call("read_file", path="calc.py")],
            },
            text("done"),
        ],
    )
    resp = rt.run(USER)
    assistant = transport.requests[1].messages[1]
    assert assistant["thinking"] == "look first"
    assert resp.thinking == "look first"


def test_caller_messages_are_not_mutated(project: Path) -> None:
    messages = [{"role": "user", "content": "fix"}]
    snapshot = json.dumps(messages)
    rt, _ = runtime(project, [tools(call("read_file", path="calc.py")), text("ok")], tools=False)
    rt.run(messages)
    assert json.dumps(messages) == snapshot


def test_workspace_relative_paths_never_follow_the_process_cwd(
    project: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path_factory.mktemp("cwd")
    monkeypatch.chdir(elsewhere)
    rt, _ = runtime(project, [tools(call("write_file", path="new.py", content="x = 1\n"))])
    paused = rt.run(USER)
    rt2, _ = runtime(project, [text("ok")])
    rt2.approve(paused.pending_state)  # type: ignore[arg-type]
    assert (project / "new.py").read_text() == "x = 1\n"
    assert not (elsewhere / "new.py").exists()
    assert os.getcwd() == str(elsewhere)


def test_a_server_refusing_tools_switches_the_run_to_the_text_fallback(project: Path) -> None:
    from rune.errors import ToolsUnsupported

    rt, transport = runtime(
        project,
        [
            ToolsUnsupported("registry.ollama.ai/library/gemma3:latest does not support tools"),
            text('<tool_call>{"name": "read_file", "arguments": {"path": "calc.py"}}</tool_call>'),
            text("it subtracts"),
        ],
    )
    resp = rt.run(USER)
    assert resp.success and resp.text == "it subtracts"
    assert resp.protocol == "text-fallback"
    assert resp.iterations_used == 2 and len(transport.requests) == 3
    assert transport.requests[0].tools and transport.requests[1].tools is None
    assert "<tool_call>" in transport.requests[1].messages[0]["content"]
    assert resp.events[0].source == "text-fallback" and resp.events[0].ok
    assert any("does not support tools" in w for w in resp.warnings)


# --- a conversation saved mid-turn -----------------------------------------------------------


def test_unanswered_calls_of_the_last_assistant_message_run_before_the_model(
    project: Path,
) -> None:
    saved = [
        *USER,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [call("read_file", "r1", path="calc.py")],
        },
    ]
    rt, transport = runtime(project, [text("it subtracts")])
    resp = rt.run(saved)
    assert resp.success and resp.iterations_used == 1
    assert [(e.name, e.iteration) for e in resp.events] == [("read_file", 0)]
    sent = transport.requests[0].messages
    assert sent[-1]["role"] == "tool" and sent[-1]["tool_call_id"] == "r1"
    assert "return a - b" in sent[-1]["content"]


def test_only_the_calls_without_a_result_run_again(project: Path) -> None:
    saved = [
        *USER,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [call("read_file", "r1", path="calc.py"), call("list_dir", "r2")],
        },
        {"role": "tool", "tool_name": "read_file", "tool_call_id": "r1", "content": "(read)"},
    ]
    rt, transport = runtime(project, [text("ok")])
    resp = rt.run(saved)
    assert [e.name for e in resp.events] == ["list_dir"]
    assert [m.get("tool_call_id") for m in transport.requests[0].messages[-2:]] == ["r1", "r2"]


def test_an_unanswered_mutating_call_pauses_before_any_model_call(project: Path) -> None:
    saved = [
        *USER,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [call("write_file", path="calc.py", content=FIXED)],
        },
    ]
    rt, transport = runtime(project, [text("fixed")])
    paused = rt.run(saved)
    assert paused.pending is not None and paused.iterations_used == 0
    assert transport.requests == []
    assert rt.approve(paused.pending_state).success  # type: ignore[arg-type]
    assert (project / "calc.py").read_text() == FIXED


def test_a_finished_conversation_just_goes_on_to_the_model(project: Path) -> None:
    saved = [
        *USER,
        {"role": "assistant", "content": "I fixed it."},
        {"role": "user", "content": "thanks"},
    ]
    rt, transport = runtime(project, [text("you're welcome")])
    resp = rt.run(saved)
    assert resp.success and resp.events == () and len(transport.requests) == 1


@pytest.mark.parametrize(
    "bad_call",
    [
        {"function": "read_file"},
        {"function": {"name": ["read_file"], "arguments": {"path": "calc.py"}}},
        {"function": {"name": "read_file", "arguments": "{not json"}},
        {"function": {"name": "write_file", "arguments": "[1, 2]"}},
    ],
    ids=["function-not-object", "name-not-string", "arguments-not-json", "mutating-not-object"],
)
def test_malformed_native_calls_are_answered_as_tool_errors(
    project: Path, bad_call: dict[str, Any]
) -> None:
    rt, transport = runtime(project, [tools(bad_call), text("sorry"), text("still sorry")])
    resp = rt.run(USER)
    # A failed *change* is followed by one reminder before an answer is taken.
    function = bad_call["function"]
    mutating = isinstance(function, dict) and function.get("name") == "write_file"
    assert resp.success and resp.text == ("still sorry" if mutating else "sorry")
    assert [e.status for e in resp.events] == ["failed"]
    assert resp.pending is None
    assert transport.requests[1].messages[-1]["content"].startswith("Error: ")
    assert (project / "calc.py").read_text() == BROKEN


def test_a_malformed_call_is_started_before_it_fails(project: Path) -> None:
    seen: list[Any] = []
    executor = ToolExecutor(SandboxPolicy.workspace_only(project), project)
    bad = {"function": {"name": "read_file", "arguments": "{not json"}}
    transport = ScriptedTransport([tools(bad), text("sorry")])
    rt = LocalToolRuntime(transport, executor, model="m", on_event=seen.append)
    assert rt.run(USER).success
    tool_events = [e for e in seen if isinstance(e, ev.ToolStarted | ev.ToolFinished)]
    assert [type(e) for e in tool_events] == [ev.ToolStarted, ev.ToolFinished]
    started, finished = tool_events
    assert started.request.name == finished.event.name == "read_file"
    assert finished.event.status == "failed"


def test_an_answer_right_after_a_failed_change_is_sent_back_once(project: Path) -> None:
    drop_mul = "def add(a, b):\n    return a + b\n"
    rt, transport = runtime(
        project,
        [
            tools(call("edit_file", path="calc.py", old_text="nope", new_text="x")),
            text("Done, add() is fixed."),
            tools(call("edit_file", path="calc.py", old_text="a - b", new_text="a + b")),
            text("Fixed."),
        ],
    )
    paused = rt.run(USER)
    assert paused.paused and paused.iterations_used == 3
    reminder = transport.requests[2].messages[-1]
    assert reminder["role"] == "user"
    assert reminder["content"].startswith("Your last change was not made: old_text matches 0")
    resp = rt.approve(paused.pending_state)  # type: ignore[arg-type]
    assert resp.success and resp.text == "Fixed."
    assert (project / "calc.py").read_text() == FIXED
    # Once per run: a second answer after another failed change is taken as it is.
    rt, transport = runtime(
        project,
        [
            tools(call("write_file", path="calc.py", content=drop_mul + "def (")),
            text("done"),
            tools(call("write_file", path="calc.py", content="def (")),
            text("I could not fix it."),
        ],
    )
    resp = rt.run(USER)
    assert resp.success and resp.text == "I could not fix it."
    assert [e.status for e in resp.events] == ["failed", "failed"]
    assert len(transport.requests) == 4


def test_a_rejected_change_is_not_sent_back(project: Path) -> None:
    rt, transport = runtime(
        project, [tools(call("write_file", path="calc.py", content=FIXED)), text("ok")]
    )
    paused = rt.run(USER)
    resp = rt.reject(paused.pending_state, reason="no")  # type: ignore[arg-type]
    assert resp.success and resp.text == "ok" and len(transport.requests) == 2
