"""One pause value, one serialisation path: the field table of ``rune.pause.state``, the
typed pause a response carries, and the seal over the same bytes main's Rune sealed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from rune import PendingState
from rune.errors import InvalidPendingState
from rune.messages import ToolEvent, ToolRequest
from rune.pause.seal import sign
from rune.pause.state import FIELDS, LOOP_FIELDS, LoopState, unseal, whole_form
from rune.runtime.local_tool_runtime import LocalToolRuntime
from rune.sessions.journal import read_journal
from rune.sessions.records import Paused, read
from rune.tools.executor import ToolExecutor
from rune.tools.sandbox import SandboxPolicy
from rune.tools.spec import PreparedChange
from rune.transport.scripted import ScriptedTransport

FIXTURE = Path(__file__).parent / "fixtures" / "main_journal"
KEY = b"k" * 32


def main_states() -> list[dict[str, object]]:
    """The pending states main's Rune journaled in the fixture, whole, as it sealed them."""
    messages: list[dict[str, object]] = []
    events: list[dict[str, object]] = []
    states = []
    for record in read_journal(FIXTURE / "journal.jsonl").records:
        body = read(record)
        if record.kind in ("user", "message"):
            messages.append(dict(record.data["message"]))
        elif record.kind == "tool_event":
            events.append(dict(record.data["event"]))
        elif isinstance(body, Paused):
            states.append(whole_form(body.state, body.shared, messages, events))
    return states


def test_every_field_has_one_line_in_the_table() -> None:
    pause = {f.name for f in dataclasses.fields(PendingState)} - {"seal", "source"}
    assert {f.name for f in FIELDS} == pause
    loop = {f.name for f in dataclasses.fields(LoopState) if f.init}
    assert {f.name for f in LOOP_FIELDS} == loop


def test_the_table_writes_what_mains_hand_written_lists_wrote() -> None:
    # The seal covers the same bytes: the states main's Rune journaled (written before the
    # assists had a namespace), read into fields and written by the table, are the JSON main's
    # four hand-written lists wrote for them (pending_states.json, made with main's code when
    # the assists landed); and the states as journaled still unseal.
    key = (FIXTURE / "approval.key").read_bytes()
    expected = json.loads((FIXTURE / "pending_states.json").read_text())
    states = main_states()
    assert len(states) == len(expected) == 2
    for state, written_by_main in zip(states, expected, strict=True):
        read_back = PendingState.from_json(state)
        assert dataclasses.replace(read_back, source=None).to_json() == written_by_main
        assert unseal(state, lambda: key) == read_back
        resealed = dataclasses.replace(read_back, source=None).sealed(KEY)
        assert resealed.seal == sign(written_by_main, KEY)


def test_a_loop_state_goes_to_json_and_back_unchanged() -> None:
    request = ToolRequest("write_file", {"path": "a.txt", "content": "x"}, "c1", "ollama-native")
    loop = LoopState(
        messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}],
        protocol="native",
        iterations_used=3,
        queue=[request],
        batch_done={"sig": (False, "boom")},
        streak_signature="sig",
        streak_count=1,
        events=[ToolEvent("read_file", {"path": "a.txt"}, "done", "ollama-native", output="x")],
        earlier=[ToolEvent("run_python", {"code": "assert 0"}, "failed", "rune", error="no")],
        thinking="hm",
        warnings=["w"],
        evicted=["files block"],
        turn_calls=2,
        opening=0,
        assists={"nudge": {"nudged": True}, "repair": {"repairs": 1}},
    )
    change = PreparedChange("write_file", {"path": "a.txt", "content": "x"}, "write a.txt", "+x")
    state = PendingState.of(loop, model="m", iteration_budget=8, change=change, grants=("/g",))
    sealed = state.sealed(KEY)
    travelled = json.loads(json.dumps(sealed.to_json()))
    back = unseal(travelled, lambda: KEY)
    assert back == sealed
    again = back.loop_state()
    for f in LOOP_FIELDS:
        assert getattr(again, f.name) == getattr(loop, f.name), f.name
    assert again.announced == len(loop.messages)


@pytest.mark.parametrize("field", ["messages", "queue", "streak", "change", "seal"])
def test_a_state_without_a_required_field_is_refused_as_damaged(field: str) -> None:
    [state, _] = main_states()
    del state[field]
    with pytest.raises(InvalidPendingState, match="damaged"):
        PendingState.from_json(state)


def test_a_paused_response_carries_the_sealed_state_itself(tmp_path: Path) -> None:
    tools = ToolExecutor(SandboxPolicy.workspace_only(tmp_path), tmp_path)
    change = {"path": "a.txt", "content": "x\n"}
    turns = [
        {"tool_calls": [{"function": {"name": "write_file", "arguments": change}}]},
        {
            "tool_calls": [
                {"function": {"name": "write_file", "arguments": {**change, "path": "b"}}}
            ]
        },
    ]
    runtime = LocalToolRuntime(ScriptedTransport(turns), tools, model="m", seal_key=KEY)
    paused = runtime.run([{"role": "user", "content": "write a.txt"}])
    assert isinstance(paused.pause, PendingState) and paused.paused
    assert paused.pause.request.arguments == change
    # plain JSON for a library caller: a fresh dict on every access, its seal intact
    first = paused.pending_state
    assert first is not None and first == paused.pending_state
    first["messages"].clear()
    assert paused.pending_state is not None and paused.pending_state["messages"]
    assert unseal(paused.pending_state, lambda: KEY) == paused.pause
    # the typed pause goes on as it is, in this process
    applied = runtime.approve(paused.pause)
    assert (tmp_path / "a.txt").read_text() == "x\n"
    assert applied.paused and applied.pause is not None
