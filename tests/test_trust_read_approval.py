"""Reads outside the workspace ask, in the `rune` command (issue #23).

Before, `read_file`, `list_dir` and `search` read all of home and /tmp without a word: a prompt
injection in the workspace could have the model read another client's project, a backup, a
ticket cache. Now the `rune` command reads the workspace (and Python's standard library and
site-packages) freely; anywhere else in home or /tmp is asked, once per directory tree for the
session, even under --yes; with no terminal it is refused with a message the model reads.
Credential stores are never asked for: they stay refused, inside a granted tree too.
"""

from __future__ import annotations

import json
import os
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from tests.fakes.cli import call, final, journals, rune
from tests.test_cli_progress import terminal

from rune import LocalToolRuntime, ScriptedTransport
from rune.app import auto_approves, sandbox_policy
from rune.errors import ApprovalMismatch, InvalidPendingState, SandboxDenied
from rune.operator.blocks import project_block
from rune.pause.seal import sign
from rune.pause.state import VERSION_FIELD, approval_of, unseal
from rune.settings.config import Settings
from rune.tools.executor import SandboxPolicy, ToolExecutor
from rune.tools.spec import NeedsApproval

KEY = b"k" * 32


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    (home / "proj").mkdir(parents=True)
    (home / "proj" / "main.py").write_text("print('mine')\n")
    (home / "other" / "sub").mkdir(parents=True)
    (home / "other" / "notes.txt").write_text("OTHER-CLIENT-NOTES\n")
    (home / "other" / "sub" / "deep.txt").write_text("OTHER-DEEP\n")
    (home / "third").mkdir()
    (home / "third" / "x.txt").write_text("THIRD-X\n")
    (home / "top.txt").write_text("TOP-OF-HOME\n")
    backup = home / "backup" / "2023" / "laptop" / "home"
    (backup / ".ssh").mkdir(parents=True)
    (backup / ".ssh" / "id_ed25519").write_text("SECRET-deep-ssh\n")
    (backup / "readme.txt").write_text("an old laptop\n")
    monkeypatch.setenv("HOME", str(home))
    return home


def executor(home: Path, *, ask: bool = True) -> ToolExecutor:
    policy = sandbox_policy(Settings(workspace=home / "proj"))
    return ToolExecutor(policy, home / "proj", ask_reads=ask)


def asked(ex: ToolExecutor, name: str, **arguments: Any) -> NeedsApproval:
    with pytest.raises(NeedsApproval) as caught:
        ex.run(name, arguments)
    return caught.value


# --- the executor: what is asked, what a grant opens ---------------------------------------


def test_read_list_and_search_outside_the_workspace_ask(home: Path) -> None:
    ex = executor(home)
    for name, arguments in [
        ("read_file", {"path": str(home / "other" / "notes.txt")}),
        ("list_dir", {"path": str(home / "other")}),
        ("search", {"pattern": "OTHER", "path": str(home / "other")}),
    ]:
        needed = asked(ex, name, **arguments)
        assert "OTHER-" not in str(needed)
        change = needed.change
        assert change.grant == str(home / "other")
        assert change.sensitive is not None and "outside the workspace" in change.sensitive
        assert "everything under" in change.preview and "rest of this session" in change.preview
        # --yes and --yes --yes never answer it.
        assert not auto_approves("all", approval_of(change))
    # The workspace is read without asking.
    assert "mine" in ex.run("read_file", {"path": "main.py"})


def test_a_grant_covers_its_tree_for_the_session_and_nothing_else(home: Path) -> None:
    ex = executor(home)
    needed = asked(ex, "read_file", path=str(home / "other" / "notes.txt"))
    assert "OTHER-CLIENT-NOTES" in ex.apply(needed.change)
    assert ex.read_grants() == (str(home / "other"),)
    # Once per tree: the rest of it is read without asking again.
    assert "OTHER-DEEP" in ex.run("read_file", {"path": str(home / "other" / "sub" / "deep.txt")})
    assert "deep.txt" in ex.run("search", {"pattern": "OTHER", "path": str(home / "other")})
    # Another tree asks.
    asked(ex, "read_file", path=str(home / "third" / "x.txt"))


def test_a_file_directly_in_home_is_granted_alone_and_only_once(home: Path) -> None:
    ex = executor(home)
    needed = asked(ex, "read_file", path="~/top.txt")
    assert needed.change.grant == str(home / "top.txt")
    assert "this once" in needed.change.preview
    assert "TOP-OF-HOME" in ex.apply(needed.change)
    assert ex.read_grants() == ()
    asked(ex, "read_file", path="~/top.txt")
    asked(ex, "list_dir", path="~")


def test_with_no_terminal_the_model_reads_why_and_nothing_is_read(home: Path) -> None:
    ex = executor(home, ask=False)
    for name, arguments in [
        ("read_file", {"path": str(home / "other" / "notes.txt")}),
        ("list_dir", {"path": "~"}),
        ("search", {"pattern": "OTHER", "path": "~"}),
    ]:
        with pytest.raises(SandboxDenied) as caught:
            ex.run(name, arguments)
        message = str(caught.value)
        assert "needs the user's approval" in message and "not at a terminal" in message
        assert "OTHER-" not in message


def test_the_interpreters_library_is_read_without_asking(home: Path) -> None:
    ex = executor(home, ask=False)
    stdlib = Path(sysconfig.get_path("stdlib")) / "json" / "__init__.py"
    assert "JSON" in ex.run("read_file", {"path": str(stdlib)})
    site = Path(pytest.__file__)  # in site-packages
    assert "pytest" in ex.run("read_file", {"path": str(site)})


def test_the_library_default_keeps_the_design_documents_policy(home: Path) -> None:
    ex = ToolExecutor(SandboxPolicy.default(home=home), home / "proj")
    assert "OTHER-CLIENT-NOTES" in ex.run("read_file", {"path": "~/other/notes.txt"})


# --- attacks on the grant --------------------------------------------------------------------


def test_dot_dot_out_of_the_workspace_asks(home: Path) -> None:
    ex = executor(home)
    needed = asked(ex, "read_file", path="../other/notes.txt")
    assert needed.change.grant == str(home / "other")
    (home / "proj" / "sub").mkdir()
    assert asked(ex, "list_dir", path="sub/../../third").change.grant == str(home / "third")


def test_a_symlink_from_the_workspace_to_outside_asks_for_where_it_leads(home: Path) -> None:
    (home / "proj" / "link").symlink_to(home / "other")
    (home / "proj" / "file_link").symlink_to(home / "third" / "x.txt")
    ex = executor(home)
    assert asked(ex, "read_file", path="link/notes.txt").change.grant == str(home / "other")
    assert asked(ex, "read_file", path="file_link").change.grant == str(home / "third")
    assert asked(ex, "list_dir", path="link").change.grant == str(home / "other")


def test_a_grant_never_opens_a_credential_store_inside_it(home: Path) -> None:
    ex = executor(home)
    backup = home / "backup"
    needed = asked(ex, "list_dir", path=str(backup))
    ex.apply(needed.change)
    deep = backup / "2023" / "laptop" / "home"
    assert "old laptop" in ex.run("read_file", {"path": str(deep / "readme.txt")})
    for spelled in (".ssh/id_ed25519", ".SSH/id_ed25519", ".ssh/../.ssh/id_ed25519"):
        with pytest.raises(SandboxDenied, match="holds credentials"):
            ex.run("read_file", {"path": str(deep / spelled)})
    with pytest.raises(SandboxDenied, match="holds credentials"):
        ex.run("list_dir", {"path": str(deep / ".ssh")})
    found = ex.run("search", {"pattern": "SECRET", "path": str(backup)})
    assert "SECRET-deep" not in found and found.startswith("no matches")


def test_a_credential_store_outside_is_refused_not_asked(home: Path) -> None:
    stores = {
        "snap/chromium/common/chromium/Default/Login Data": "SECRET-snap-chromium",
        ".config/google-chrome-beta/Default/Cookies": "SECRET-chrome-beta",
        ".claude/.credentials.json": "SECRET-claude",
        ".codex/auth.json": "SECRET-codex",
        ".config/github-copilot/apps.json": "SECRET-copilot",
        ".gemini/oauth_creds.json": "SECRET-gemini",
        ".cache/huggingface/token": "SECRET-hf",
        ".config/sops/age/keys.txt": "SECRET-age",
    }
    for rel, text in stores.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text)
    ex = executor(home)
    for rel in stores:
        with pytest.raises(SandboxDenied, match="holds credentials") as caught:
            ex.run("read_file", {"path": str(home / rel)})
        assert not isinstance(caught.value, NeedsApproval)


def test_a_granted_tree_swapped_for_a_symlink_reads_nothing_new(home: Path) -> None:
    ex = executor(home)
    ex.apply(asked(ex, "read_file", path="~/other/notes.txt").change)
    other = home / "other"
    other.rename(home / "other-was")
    other.symlink_to(home / "third")
    needed = asked(ex, "read_file", path="~/other/x.txt")
    assert needed.change.grant == str(home / "third")


def test_names_differing_in_case_are_different_trees(home: Path) -> None:
    (home / "OTHER").mkdir()
    (home / "OTHER" / "x.txt").write_text("UPPER\n")
    ex = executor(home)
    ex.apply(asked(ex, "read_file", path="~/other/notes.txt").change)
    asked(ex, "read_file", path="~/OTHER/x.txt")


def test_a_change_whose_grant_does_not_match_its_read_is_refused(home: Path) -> None:
    ex = executor(home)
    needed = asked(ex, "read_file", path="~/third/x.txt")
    forged = type(needed.change)(
        **{**needed.change.to_json(), "grant": str(home / "other")}  # not where it reads
    )
    with pytest.raises(SandboxDenied, match="not under"):
        ex.apply(forged)
    wide = type(needed.change)(**{**needed.change.to_json(), "grant": str(home)})
    with pytest.raises(SandboxDenied, match="not under"):
        ex.apply(wide)
    assert ex.read_grants() == ()


def test_a_grant_outside_the_asked_places_is_never_taken(home: Path) -> None:
    ex = executor(home)
    ex.restore_read_grants(["/etc", "/", "/proc/self", str(home / "missing")])
    assert ex.read_grants() == ()
    # A tree is kept as it resolves.
    ex.restore_read_grants([str(home / "proj" / ".." / "other")])
    assert ex.read_grants() == (str(home / "other"),)
    with pytest.raises(SandboxDenied):
        ex.run("read_file", {"path": "/etc/hostname"})
    with pytest.raises(SandboxDenied):
        ex.policy.granting("/etc")


# --- the loop: a read pauses like a change; grants are sealed with the pause -----------------


def tools(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "content": "",
        "tool_calls": [{"function": {"name": n, "arguments": a}} for n, a in calls],
    }


def loop(home: Path, turns: list[dict[str, Any]]) -> LocalToolRuntime:
    return LocalToolRuntime(ScriptedTransport(turns), executor(home), model="m", seal_key=KEY)


def test_the_loop_pauses_on_a_read_and_goes_on_once_approved(home: Path) -> None:
    turns = [
        tools(("read_file", {"path": "~/other/notes.txt"})),
        tools(("read_file", {"path": "~/other/sub/deep.txt"})),
        {"content": "done"},
    ]
    runtime = loop(home, turns)
    paused = runtime.run([{"role": "user", "content": "look"}])
    assert paused.pending is not None and paused.pending.name == "read_file"
    assert paused.pending.sensitive is not None
    assert paused.pending.grant == str(home / "other")
    done = runtime.approve(paused.pending_state or {})
    assert done.success and done.incomplete is None, done.error
    results = [str(m["content"]) for m in done.messages if m.get("role") == "tool"]
    assert "OTHER-CLIENT-NOTES" in results[0] and "OTHER-DEEP" in results[1]


def test_a_refused_read_is_read_by_the_model_and_leaves_nothing_unfinished(home: Path) -> None:
    turns = [tools(("read_file", {"path": "~/other/notes.txt"})), {"content": "ok"}]
    runtime = loop(home, turns)
    paused = runtime.run([{"role": "user", "content": "look"}])
    done = runtime.reject(paused.pending_state or {}, "not that project")
    assert done.success and done.incomplete is None
    assert any("not that project" in str(m.get("content")) for m in done.messages)
    assert "OTHER-CLIENT-NOTES" not in json.dumps(list(done.messages))


def test_a_grant_survives_a_pause_resumed_by_another_process(home: Path) -> None:
    turns = [
        tools(("read_file", {"path": "~/other/notes.txt"})),
        tools(("write_file", {"path": "out.txt", "content": "x\n"})),
        tools(("read_file", {"path": "~/other/sub/deep.txt"})),
        {"content": "done"},
    ]
    first = loop(home, turns)
    paused = first.run([{"role": "user", "content": "look"}])
    paused = first.approve(paused.pending_state or {})
    assert paused.pending is not None and paused.pending.name == "write_file"
    saved = json.loads(json.dumps(paused.pending_state))
    assert saved["grants"] == [str(home / "other")]
    # Another process: a new executor knows no grant until it resumes the sealed state.
    second = loop(home, turns[2:])
    done = second.approve(saved)
    assert done.success and done.pending is None, done.error
    assert "OTHER-DEEP" in str(done.messages[-2]["content"])


def test_grants_added_to_a_paused_state_break_its_seal(home: Path) -> None:
    turns = [tools(("write_file", {"path": "out.txt", "content": "x\n"})), {"content": "ok"}]
    paused = loop(home, turns).run([{"role": "user", "content": "w"}])
    state = paused.pending_state or {}
    state["grants"] = [str(home)]
    with pytest.raises(ApprovalMismatch):
        unseal(state, lambda: KEY)
    done = loop(home, turns[1:]).approve(state)
    assert not done.success and done.error_kind == "ApprovalMismatch"


def test_a_version_2_state_still_loads_and_an_unknown_version_says_so(home: Path) -> None:
    turns = [tools(("write_file", {"path": "out.txt", "content": "x\n"})), {"content": "ok"}]
    paused = loop(home, turns).run([{"role": "user", "content": "w"}])
    state = paused.pending_state or {}
    old = {k: v for k, v in state.items() if k not in ("grants", "seal")}
    old[VERSION_FIELD] = 2
    old["seal"] = sign(old, KEY)
    done = loop(home, turns[1:]).approve(old)
    assert done.success, done.error
    assert (home / "proj" / "out.txt").read_text() == "x\n"
    future = {**old, VERSION_FIELD: 9}
    future["seal"] = sign(future, KEY)
    with pytest.raises(InvalidPendingState, match="version 9"):
        unseal(future, lambda: KEY)


# --- the rune command -----------------------------------------------------------------------


def test_rune_run_with_no_terminal_refuses_and_goes_on(home: Path) -> None:
    script = [
        call("read_file", path="~/other/notes.txt"),
        call("list_dir", path="/tmp"),
        final("fine"),
    ]
    args = ["run", "--backend", "scripted", "--workspace", str(home / "proj"), "--yes", "--yes"]
    done = rune(home, *args, "look", script=script)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Approval needed" not in done.stdout
    seen = journals()
    assert "OTHER-CLIENT-NOTES" not in seen
    assert seen.count("not at a terminal") >= 2


def test_rune_run_at_a_terminal_asks_once_per_tree_even_under_yes(home: Path) -> None:
    script = [
        call("read_file", path="~/other/notes.txt"),
        call("read_file", path="~/other/sub/deep.txt"),
        final("fine"),
    ]
    path = home.parent / "script-term.json"
    path.write_text(json.dumps(script))
    args = ["run", "--backend", "scripted", "--workspace", str(home / "proj"), "--yes", "--yes"]
    term = terminal(home, *args, "look", env={"RUNE_SCRIPT": str(path)})
    try:
        term.expect("Approval needed: read_file reads .*outside the workspace")
        term.expect("rest of this session")
        term.expect("asked even under --yes")
        term.expect("approve\\?")
        term.send("a\n")
        assert term.wait() == 0, term.output
    finally:
        term.close()
    assert term.output.count("Approval needed") == 1, term.output
    seen = journals()
    assert "OTHER-CLIENT-NOTES" in seen and "OTHER-DEEP" in seen


def test_rune_run_reads_the_standard_library_without_asking(home: Path) -> None:
    stdlib = Path(sysconfig.get_path("stdlib")) / "json" / "__init__.py"
    script = [call("read_file", path=str(stdlib)), final("fine")]
    args = ["run", "--backend", "scripted", "--workspace", str(home / "proj")]
    done = rune(home, *args, "look", script=script)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "JSON (JavaScript Object Notation)" in journals()


def test_a_ticket_cache_in_tmp_is_refused_inside_the_workspace_too(home: Path) -> None:
    ex = executor(home)
    cache = Path(os.environ.get("TMPDIR", "/tmp")) / f"krb5cc_{os.getuid()}_rune_test"
    for where in (cache, home / "proj" / "krb5cc_1000"):
        where.write_text("SECRET-ticket")
        try:
            with pytest.raises(SandboxDenied, match="holds credentials"):
                ex.run("read_file", {"path": str(where)})
        finally:
            where.unlink()


def test_a_symlink_inside_a_granted_tree_to_another_tree_asks_again(home: Path) -> None:
    (home / "other" / "escape").symlink_to(home / "third")
    ex = executor(home)
    ex.apply(asked(ex, "read_file", path="~/other/notes.txt").change)
    needed = asked(ex, "read_file", path="~/other/escape/x.txt")
    assert needed.change.grant == str(home / "third")
    listed = ex.run("list_dir", {"path": "~/other"})
    assert "escape" in listed and "THIRD" not in listed


def test_project_instructions_linked_from_outside_are_not_read_into_the_prompt(
    home: Path,
) -> None:
    (home / "proj" / "AGENTS.md").symlink_to(home / "other" / "notes.txt")
    found = project_block(home / "proj", sandbox_policy(Settings(workspace=home / "proj")))
    assert found.block is None
    assert any("AGENTS.md was not read" in w for w in found.warnings)
