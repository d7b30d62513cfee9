"""MCP servers against real servers: one written here with the SDK's server API
(tests/fakes/mcp_server.py) and the real ``mcp-server-time`` from PyPI, started as a user would
configure them. The loop, the operator and the CLI see their tools like built-in ones."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed: pip install -e '.[mcp]'")

from rune.errors import ConfigError, McpError, ToolError, ToolInputError
from rune.runtime.local_tool_runtime import LocalToolRuntime
from rune.settings.config import McpServerConfig, load
from rune.tools.commands import containment_report
from rune.tools.executor import ToolExecutor
from rune.tools.mcp.client import McpManager, result_text
from rune.tools.mcp.executor import CombinedExecutor, McpExecutor
from rune.tools.mcp.listing import MAX_TOOLS, accept_tools
from rune.tools.sandbox import SandboxPolicy
from rune.transport.scripted import ScriptedTransport

SERVER = Path(__file__).resolve().parent / "fakes" / "mcp_server.py"
CONTAINED = containment_report()[0]
needs_bwrap = pytest.mark.bwrap


def time_server() -> str | None:
    """``mcp-server-time`` as pip installs it (beside this Python, or on PATH)."""
    beside = Path(sys.executable).with_name("mcp-server-time")
    return str(beside) if beside.exists() else shutil.which("mcp-server-time")


def fake(name: str = "t", **options: Any) -> McpServerConfig:
    return McpServerConfig(name=name, command=sys.executable, args=[str(SERVER)], **options)


def policy(workspace: Path) -> SandboxPolicy:
    return SandboxPolicy(read_roots=[workspace], write_roots=[workspace], home=Path.home())


def manager_for(workspace: Path, *servers: McpServerConfig) -> McpManager:
    manager = McpManager(servers, workspace=workspace, policy=policy(workspace))
    manager.start()
    return manager


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-ws")


@pytest.fixture(scope="module")
def shared(workspace: Path) -> Iterator[McpManager]:
    """One started test server for the tests that leave it running (1 s per start)."""
    # The SDK takes about 1.5 s to return an error result on this 2-core machine (measured).
    manager = manager_for(workspace, fake(writable=True, call_timeout=4))
    yield manager
    manager.close()


def tools_of(manager: McpManager) -> dict[str, Any]:
    return {t.name: t for t in manager.tools()}


# --- listing -----------------------------------------------------------------------------


def test_tools_are_listed_as_server__tool_and_only_undeclared_ones_ask(shared: McpManager) -> None:
    (status,) = shared.statuses()
    assert status.state == "ready", status.error
    tools = tools_of(shared)
    assert set(tools) == {
        "t__lookup",
        "t__write_note",
        "t__fail",
        "t__hang",
        "t__crash",
        "t__probe",
        "t__noisy",
    }
    assert [n for n, t in tools.items() if t.asks] == ["t__write_note"]
    assert tools["t__lookup"].parameters["required"] == ["key"]
    noisy = tools["t__noisy"].description
    assert "\x1b" not in noisy and "\r" not in noisy and "\n" not in noisy
    assert "\\x1b[31mred" in noisy


def test_hostile_listings_are_left_out_with_one_line_each() -> None:
    def tool(name: Any, schema: Any = None, description: str = "d", read_only: Any = None) -> Any:
        return SimpleNamespace(
            name=name,
            input_schema={"type": "object", "properties": {}} if schema is None else schema,
            description=description,
            annotations=SimpleNamespace(read_only_hint=read_only),
        )

    deep: dict[str, Any] = {}
    inner = deep
    for _ in range(40):
        inner["x"] = {}
        inner = inner["x"]
    listed = [
        tool("ok", read_only=True),
        tool("ok.dot"),
        tool("ok_dot"),  # the same public name as ok.dot
        tool("bad name\x1b[2J"),
        tool("x" * 70),
        tool("huge", {"type": "object", "properties": {"a": {"description": "y" * 20000}}}),
        tool("deep", {"type": "object", "properties": {"a": deep}}),
        tool("required", {"type": "object", "properties": {}, "required": "abc"}),
        tool("array", {"type": "array"}),
        tool("truthy", read_only="yes"),
        tool(42),
    ]
    tools, warnings = accept_tools("s", listed, trusted_tools=["ok.dot"])
    assert [(t.name, t.asks) for t in tools] == [
        ("s__ok", False),
        ("s__ok_dot", False),
        ("s__truthy", True),
    ]
    assert len(warnings) == 8
    assert all("\x1b" not in w for w in warnings)
    (whole,), _ = accept_tools("s", [tool("w")], trusted=True)
    assert not whole.asks and whole.trusted
    many, notes = accept_tools("s", [tool(f"t{i}") for i in range(MAX_TOOLS + 5)])
    assert len(many) == MAX_TOOLS and len(notes) == 1


def test_results_become_text_and_other_content_a_note() -> None:
    from mcp.types import CallToolResult, ImageContent, TextContent

    result = CallToolResult(
        content=[
            TextContent(type="text", text="line \x1b[31mred"),
            ImageContent(type="image", data="aGk=", mime_type="image/png"),
        ]
    )
    text = result_text(result)
    assert text.splitlines()[0] == "line \\x1b[31mred"
    assert "[image content image/png, not shown]" in text
    assert "escaped" in text
    assert result_text(CallToolResult(content=[], structured_content={"a": 1})) == '{"a": 1}'


# --- calls and faults --------------------------------------------------------------------


def test_a_read_only_tool_runs_and_a_mutating_one_is_prepared_then_applied(
    shared: McpManager, workspace: Path
) -> None:
    executor = McpExecutor(shared)
    assert executor.run("t__lookup", {"key": "alpha"}) == "1"
    with pytest.raises(ToolError, match="needs approval"):
        executor.run("t__write_note", {"text": "x"})
    change = executor.prepare("t__write_note", {"text": "first"})
    assert not (workspace / "notes.txt").exists()
    assert "MCP call: write_note on server t" in change.preview
    assert '"text": "first"' in change.preview
    assert str(SERVER) in change.preview
    assert executor.apply(change) == "noted: first"
    assert (workspace / "notes.txt").read_text() == "first\n"


def test_an_approval_binds_to_the_servers_configuration(shared: McpManager) -> None:
    from rune.tools.spec import PreparedChange

    executor = McpExecutor(shared)
    change = executor.prepare("t__write_note", {"text": "never"})
    altered = PreparedChange.from_json({**change.to_json(), "fingerprint": {"config": "other"}})
    with pytest.raises(ToolError, match="configuration of MCP server t changed"):
        executor.apply(altered)


def test_bad_arguments_and_unknown_tools_are_tool_input_errors(shared: McpManager) -> None:
    executor = McpExecutor(shared)
    with pytest.raises(ToolInputError, match="missing required argument 'key'"):
        executor.run("t__lookup", {})
    with pytest.raises(ToolInputError, match="unknown tool"):
        executor.run("t__nope", {})


def test_an_error_result_and_a_hang_are_tool_errors_and_the_server_goes_on(
    shared: McpManager,
) -> None:
    executor = McpExecutor(shared)
    with pytest.raises(ToolError, match="t__fail returned an error") as failed:
        executor.run("t__fail", {"reason": "x"})
    assert not isinstance(failed.value, McpError)
    started = time.monotonic()
    with pytest.raises(McpError, match=r"did not answer t__hang within 4 s"):
        executor.run("t__hang", {"seconds": 30})
    assert time.monotonic() - started < 8
    assert executor.run("t__lookup", {"key": "beta"}) == "2"


def live_processes(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_a_crash_a_failed_start_and_the_real_time_server_stay_local(tmp_path: Path) -> None:
    command = time_server()
    if command is None:
        pytest.skip("mcp-server-time is not installed (the dev extra installs it)")
    marker = f"rune-test-{uuid.uuid4()}"
    manager = manager_for(
        tmp_path,
        McpServerConfig(name="t", command=sys.executable, args=[str(SERVER), marker]),
        McpServerConfig(name="time", command=command, args=["--local-timezone", "UTC"]),
        McpServerConfig(name="broken", command=str(tmp_path / "no-such-server")),
    )
    try:
        states = {s.name: s.state for s in manager.statuses()}
        assert states == {"t": "ready", "time": "ready", "broken": "failed"}
        broken = manager.status("broken")
        assert broken is not None and "\n" not in broken.error
        assert any(line.startswith("MCP server broken failed: ") for line in manager.problems())
        assert live_processes(marker)
        executor = McpExecutor(manager)
        with pytest.raises(McpError, match="stopped during the call to t__crash"):
            executor.run("t__crash", {})
        with pytest.raises(McpError, match="MCP server t is not running"):
            executor.run("t__lookup", {"key": "alpha"})
        with pytest.raises(McpError, match="MCP server broken is not running"):
            executor.run("broken__anything", {})
        now = json.loads(executor.run("time__get_current_time", {"timezone": "UTC"}))
        assert now["timezone"] == "UTC"
        assert not manager.tools() or all(t.server == "time" for t in manager.tools())
    finally:
        manager.close()
    assert live_processes(marker) == []


def test_closing_stops_every_server_even_mid_call(tmp_path: Path) -> None:
    marker = f"rune-test-{uuid.uuid4()}"
    manager = manager_for(
        tmp_path, McpServerConfig(name="t", command=sys.executable, args=[str(SERVER), marker])
    )
    tool = tools_of(manager)["t__hang"]
    caller = threading.Thread(target=lambda: _ignore(manager.call, tool, {"seconds": 60}))
    caller.start()
    time.sleep(0.3)
    assert live_processes(marker)
    manager.close()
    caller.join(10)
    assert not caller.is_alive()
    assert live_processes(marker) == []


def _ignore(call: Any, *args: Any) -> None:
    with contextlib.suppress(ToolError):
        call(*args)


# --- containment -------------------------------------------------------------------------


@needs_bwrap
def test_a_contained_server_has_no_network_no_secrets_and_writes_only_when_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNE_TEST_API_TOKEN", "s3cret")
    outside = tmp_path / "outside"
    outside.mkdir()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        manager = manager_for(
            workspace, fake(env={"GREETING": "hi"}), fake("net", network=True, writable=True)
        )
        try:
            executor = McpExecutor(manager)
            assert all(s.contained for s in manager.statuses())
            sealed = executor.run(
                "t__probe",
                {"variable": "RUNE_TEST_API_TOKEN", "port": port, "directory": str(workspace)},
            )
            assert sealed.splitlines() == [
                "env RUNE_TEST_API_TOKEN=None",
                "connect: refused (ConnectionRefusedError)",
                "write: refused (OSError)",
            ]
            assert executor.run("t__probe", {"variable": "GREETING"}) == "env GREETING='hi'"
            opened = executor.run(
                "net__probe", {"port": port, "directory": str(workspace)}
            ).splitlines()
            assert opened == ["connect: ok", "write: ok"]
            # Outside its cwd nothing of the host is there at all (deny by default).
            elsewhere = executor.run("net__probe", {"directory": str(outside)})
            assert elsewhere == "write: refused (FileNotFoundError)"
            status = manager.status("t")
            assert status is not None and "no network, writes nowhere" in status.where()
        finally:
            manager.close()
    assert not (outside / "probe.txt").exists()


@needs_bwrap
def test_a_contained_server_lives_in_its_own_cgroups_removed_with_it(tmp_path: Path) -> None:
    """Its processes count against one memory total for its whole life (and the pids limit),
    and closing it removes the cgroups and whatever it left running there."""
    from rune.tools.run_limits import COMMAND, cgroup_parent

    parent = cgroup_parent("memory")
    if parent is None:
        pytest.skip("no memory cgroup Rune may write here")

    def ours() -> set[Path]:
        return {d for d in parent.iterdir() if d.name.startswith(f"rune-{os.getpid()}-")}

    before = ours()  # the servers other tests of this module keep running
    manager = manager_for(tmp_path, fake())
    try:
        assert McpExecutor(manager).run("t__lookup", {"key": "a"})
        (held,) = ours() - before
        limit = held / ("memory.max" if (held / "memory.max").exists() else "memory.limit_in_bytes")
        assert int(limit.read_text()) == COMMAND.total_memory
        assert (held / "cgroup.procs").read_text().split()  # the server is in it
    finally:
        manager.close()
    assert ours() == before


def test_a_server_that_must_be_contained_does_not_start_uncontained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap to be found
    manager = manager_for(tmp_path, fake(contained=True))
    try:
        (status,) = manager.statuses()
        assert status.state == "failed"
        assert "must run contained" in status.error
    finally:
        manager.close()


# --- config --------------------------------------------------------------------------------


def test_servers_come_from_the_user_file_and_never_from_a_project_file(tmp_path: Path) -> None:
    user = tmp_path / "user.toml"
    user.write_text(
        '[mcp.servers.git]\ncommand = "mcp-server-git"\nargs = ["--repository", "."]\n'
        'trusted_tools = ["git_status"]\n'
    )
    project = tmp_path / "project"
    (project / ".rune").mkdir(parents=True)
    (project / ".rune" / "config.toml").write_text(
        'max_iterations = 3\n[mcp.servers.evil]\ncommand = "curl"\n'
        '[mcp.servers.git]\ncommand = "sh"\ntrusted = true\n'
    )
    loaded = load({"workspace": str(project)}, env={}, user_file=user)
    (server,) = loaded.mcp_servers
    assert (server.name, server.command, server.args, server.trusted) == (
        "git",
        "mcp-server-git",
        ("--repository", "."),
        False,
    )
    assert loaded.settings.max_iterations == 3
    assert any("may not add or change MCP servers" in line for line in loaded.refused)


@pytest.mark.parametrize(
    "table",
    [
        '[mcp.servers."a__b"]\ncommand = "x"\n',
        '[mcp.servers.a]\nargs = ["x"]\n',
        '[mcp.servers.a]\ncommand = "x"\nurl = "http://h/mcp"\n',
        '[mcp.servers.a]\nurl = "file:///etc/passwd"\n',
        '[mcp.servers.a]\ncommand = "x"\nshell = true\n',
        "[mcp]\nserver = 1\n",
    ],
)
def test_a_bad_server_table_is_a_config_error(tmp_path: Path, table: str) -> None:
    user = tmp_path / "user.toml"
    user.write_text(table)
    with pytest.raises(ConfigError, match=r"user file .*mcp"):
        load({"workspace": str(tmp_path)}, env={}, user_file=user)


# --- in the loop ---------------------------------------------------------------------------


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"function": {"name": name, "arguments": arguments}}]}


def combined(manager: McpManager, workspace: Path) -> CombinedExecutor:
    return CombinedExecutor(ToolExecutor(policy(workspace), workspace), McpExecutor(manager))


def test_the_loop_dedups_mcp_calls_and_its_breaker_counts_them(
    shared: McpManager, workspace: Path
) -> None:
    twice = {
        "tool_calls": [
            {"function": {"name": "t__lookup", "arguments": {"key": "alpha"}}},
            {"function": {"name": "t__lookup", "arguments": {"key": "alpha"}}},
        ]
    }
    transport = ScriptedTransport(
        [twice, call("t__fail", reason="r"), call("t__fail", reason="r"), {"content": "x"}]
    )
    runtime = LocalToolRuntime(
        transport, combined(shared, workspace), model="m", seal_key=b"k" * 32
    )
    response = runtime.run([{"role": "user", "content": "look"}])
    assert response.error_kind == "CircuitBreaker"
    assert [(e.name, e.status) for e in response.events] == [
        ("t__lookup", "done"),
        ("t__fail", "failed"),
        ("t__fail", "failed"),
    ]
    sent = [t["function"]["name"] for t in transport.requests[0].tools or ()]
    assert "read_file" in sent and "t__write_note" in sent
    answers = [m for m in response.messages if m.get("role") == "tool"]
    assert [m["content"] for m in answers[:2]] == ["1", "1"]


@pytest.mark.parametrize("protocol", ["constrained", "text"])
def test_mcp_tools_go_through_the_constrained_and_text_protocols(
    shared: McpManager, workspace: Path, protocol: str
) -> None:
    turn = json.dumps({"tool": "t__lookup", "arguments": {"key": "beta"}})
    if protocol == "text":
        turn = json.dumps({"name": "t__lookup", "arguments": {"key": "beta"}})
    answer = json.dumps({"answer": "beta is 2"}) if protocol == "constrained" else "beta is 2"
    transport = ScriptedTransport([{"content": turn}, {"content": answer}], tools=False)
    runtime = LocalToolRuntime(
        transport, combined(shared, workspace), model="m", protocol=protocol, seal_key=b"k" * 32
    )
    response = runtime.run([{"role": "user", "content": "what is beta"}])
    assert response.success, response.error
    assert response.text == "beta is 2"
    assert [(e.name, e.status, e.output) for e in response.events] == [("t__lookup", "done", "2")]
    if protocol == "constrained":
        schema = transport.requests[0].response_schema
        assert schema is not None
        forms = [
            f["properties"]["tool"]["enum"][0] for f in schema["anyOf"] if "tool" in f["properties"]
        ]
        assert "t__write_note" in forms


def test_a_paused_mcp_call_is_rejected_without_calling(shared: McpManager, workspace: Path) -> None:
    transport = ScriptedTransport([call("t__write_note", text="no"), {"content": "ok"}])
    runtime = LocalToolRuntime(
        transport, combined(shared, workspace), model="m", seal_key=b"k" * 32
    )
    paused = runtime.run([{"role": "user", "content": "note"}])
    assert paused.pending is not None and paused.pending.name == "t__write_note"
    assert f"runs: {shared.statuses()[0].where()}" in paused.pending.preview
    before = (workspace / "notes.txt").read_text() if (workspace / "notes.txt").exists() else ""
    done = runtime.reject(paused.pending_state, "not now")
    assert done.success
    after = (workspace / "notes.txt").read_text() if (workspace / "notes.txt").exists() else ""
    assert after == before


def test_yes_never_approves_an_mcp_call_and_yes_yes_does(shared: McpManager) -> None:
    from rune.app import auto_approves
    from rune.pause.state import approval_of

    change = McpExecutor(shared).prepare("t__write_note", {"text": "x"})
    pending = approval_of(change)
    assert not auto_approves("edits", pending)
    assert auto_approves("all", pending)


# --- end to end: the CLI, a pause, and approval from a new process --------------------------


def user_config(home: Path, extra: str = "") -> None:
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "rune" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        f"[mcp.servers.notes]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(SERVER))}]\nwritable = true\n{extra}"
    )


def test_the_cli_pauses_an_mcp_call_and_a_new_process_approves_it(tmp_path: Path) -> None:
    from tests.fakes.cli import call as cli_call
    from tests.fakes.cli import final, journals, rune

    home = tmp_path / "home"
    home.mkdir()
    user_config(home, '[mcp.servers.broken]\ncommand = "no-such-mcp-server"\n')
    script = [
        cli_call("notes__lookup", key="alpha"),
        cli_call("notes__write_note", text="alpha is 1"),
        final("noted"),
    ]
    first = rune(home, "run", "--backend", "scripted", "note alpha", script=script)
    assert first.returncode == 3, first.stdout + first.stderr
    (warning,) = [line for line in first.stderr.splitlines() if "broken" in line]
    assert warning.startswith("warning: MCP server broken failed: ")
    assert "MCP call: write_note on server notes" in first.stdout
    assert '"text": "alpha is 1"' in first.stdout
    assert not (home / "notes.txt").exists()
    second = rune(home, "resume", script=script, stdin="a\n")
    assert second.returncode == 0, second.stdout + second.stderr
    assert (home / "notes.txt").read_text() == "alpha is 1\n"
    assert "noted: alpha is 1" in journals()
    listing = rune(home, "mcp")
    assert listing.returncode == 1, listing.stdout + listing.stderr
    assert "notes__write_note" in listing.stdout and "asks first" in listing.stdout
    assert "notes__lookup" in listing.stdout and "runs at once" in listing.stdout
    assert "!!  mcp broken: failed: " in listing.stdout
    doctor = rune(home, "doctor", "--backend", "scripted")
    (notes,) = [line for line in doctor.stdout.splitlines() if "mcp notes" in line]
    assert notes.startswith("ok  mcp notes: ready in ")
    assert "7 tools, 1 ask first (notes__write_note)" in notes
    assert ("contained (bubblewrap" in notes) == CONTAINED


def test_through_a_fake_ollama_the_pause_survives_a_restart(tmp_path: Path) -> None:
    from tests.fakes.cli import rune
    from tests.fakes.ollama_server import FakeOllama, text_reply, tool_call, tool_reply

    home = tmp_path / "home"
    home.mkdir()
    user_config(home)
    with FakeOllama() as ollama:
        ollama.script(
            tool_reply(tool_call("notes__lookup", {"key": "beta"})),
            tool_reply(tool_call("notes__write_note", {"text": "beta is 2"})),
            text_reply("noted beta"),
        )
        env = {"OLLAMA_HOST": ollama.url}
        first = rune(home, "run", "--backend", "ollama", "--model", "qwen3", "note", env=env)
        assert first.returncode == 3, first.stdout + first.stderr
        tools = [t["function"]["name"] for t in ollama.bodies()[0]["tools"]]
        assert "notes__lookup" in tools and "notes__write_note" in tools
        second = rune(home, "resume", stdin="a\n", env=env)
        assert second.returncode == 0, second.stdout + second.stderr
        assert "noted beta" in second.stdout
    assert (home / "notes.txt").read_text() == "beta is 2\n"
    answered = [m for m in ollama.bodies()[-1]["messages"] if m.get("role") == "tool"]
    assert [m["content"] for m in answered] == ["2", "noted: beta is 2"]


# --- the TUI -------------------------------------------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_tui_shows_mcp_calls_like_built_in_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fakes.cli import call as cli_call
    from tests.fakes.cli import final
    from tests.test_tui import approval_shown, notes, until

    from rune.app import open_rune
    from rune.tui import RuneApp
    from rune.tui.widgets import ToolLine

    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            [
                cli_call("t__lookup", key="alpha"),
                cli_call("t__write_note", text="from the tui"),
                final("noted"),
            ]
        )
    )
    monkeypatch.setenv("RUNE_SCRIPT", str(script))
    user = tmp_path / "user.toml"
    user.write_text(
        f"[mcp.servers.t]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(SERVER))}]\nwritable = true\n"
        '[mcp.servers.gone]\ncommand = "no-such-mcp-server"\n'
    )
    loaded = load({"backend": "scripted", "workspace": str(workspace)}, env={}, user_file=user)
    with open_rune(loaded, title="mcp tui") as rune:
        app = RuneApp(rune, task="note alpha")
        async with app.run_test(size=(120, 40)) as pilot:
            await until(
                pilot,
                lambda: approval_shown(app) and bool(app.screen.query("#approval-diff")),
                "the approval's preview",
            )
            shown = str(app.screen.query_one("#approval-diff").render())
            assert "MCP call: write_note on server t" in shown
            await pilot.press("a")
            await until(pilot, lambda: "✓ done" in notes(app), "the end of the turn")
            lines = list(app.query(ToolLine))
            assert [line.status for line in lines] == ["done", "done"]
            assert "t__lookup" in str(lines[0].title)
            warnings = [str(w.render()) for w in app.query(".warning")]
            assert any("MCP server gone failed" in w for w in warnings)
    assert (workspace / "notes.txt").read_text() == "from the tui\n"


def test_a_streamable_http_server_by_url(tmp_path: Path) -> None:
    from tests.fakes.cli import closed_port

    port = closed_port()
    served = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port}/mcp"
        manager = manager_for(tmp_path, McpServerConfig(name="web", url=url))
        try:
            (status,) = manager.statuses()
            assert status.state == "ready", status.error
            assert status.contained is None and status.where() == f"remote at {url}"
            executor = McpExecutor(manager)
            assert executor.run("web__lookup", {"key": "alpha"}) == "1"
            change = executor.prepare("web__write_note", {"text": "over http"})
            assert f"server: {url}" in change.preview
        finally:
            manager.close()
    finally:
        served.terminate()
        served.wait(10)


def test_malformed_content_is_a_typed_tool_error_and_the_server_goes_on(tmp_path: Path) -> None:
    raw = SERVER.with_name("mcp_raw_server.py")
    manager = manager_for(
        tmp_path, McpServerConfig(name="raw", command=sys.executable, args=[str(raw)])
    )
    try:
        (status,) = manager.statuses()
        assert status.state == "ready", status.error
        executor = McpExecutor(manager)
        for _ in range(2):
            with pytest.raises(McpError, match="raw__garbled with something Rune cannot read"):
                executor.run("raw__garbled", {})
        assert manager.statuses()[0].state == "ready"
    finally:
        manager.close()
