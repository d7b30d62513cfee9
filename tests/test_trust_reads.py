"""What the model may read: credential stores never, through any tool, whatever the project
says; format_code never lets ruff read configuration from outside the workspace.

Each store below was read with no approval before (issue #12): one turn of read_file and
search(path="~") returned them all.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.fakes.cli import call, calls, final, journals, rune

from rune.app import sandbox_policy
from rune.errors import SandboxDenied, ToolError
from rune.settings.config import Settings, load
from rune.tools.executor import SandboxPolicy, ToolExecutor, validate_read_path
from rune.tools.formatting import find_ruff
from rune.tools.spec import NeedsApproval

# path under home -> a line no tool may ever show the model
STORES = {
    ".aws/credentials": "aws_secret_access_key = SECRET-aws",
    ".aws/config": "[default]\nregion = SECRET-region",
    ".config/gcloud/application_default_credentials.json": '{"key": "SECRET-gcloud"}',
    ".azure/msal_token_cache.json": '{"key": "SECRET-azure"}',
    ".kube/config": "token: SECRET-kube",
    ".docker/config.json": '{"auths": "SECRET-docker"}',
    ".netrc": "machine x login u password SECRET-netrc",
    ".git-credentials": "https://u:SECRET-gitcred@example.com",
    ".config/gh/hosts.yml": "oauth_token: SECRET-gh",
    ".npmrc": "//registry.npmjs.org/:_authToken=SECRET-npm",
    ".pypirc": "password = SECRET-pypi",
    ".local/share/keyrings/login.keyring": "SECRET-keyring",
    ".mozilla/firefox/abc.default/logins.json": '{"key": "SECRET-firefox"}',
    ".config/google-chrome/Default/Login Data": "SECRET-chrome",
    ".bash_history": "export TOKEN=SECRET-bash-history",
    ".zsh_history": ": 1:0;curl -H SECRET-zsh-history",
    ".local/share/fish/fish_history": "- cmd: SECRET-fish",
    ".python_history": "SECRET-python-history",
    ".password-store/bank.gpg": "SECRET-pass",
    ".config/rune/config.toml": 'api_key = "SECRET-rune-key"',
    ".local/share/rune/sessions/20990101-000000-abcdef/journal.jsonl": '{"k": "SECRET-journal"}',
    ".ssh/id_ed25519": "SECRET-ssh",
    ".gnupg/private-keys-v1.d/x.key": "SECRET-gpg",
}
STORE_DIRS = [
    ".aws",
    ".config/gcloud",
    ".azure",
    ".kube",
    ".config/gh",
    ".local/share/keyrings",
    ".mozilla/firefox",
    ".config/google-chrome",
    ".password-store",
    ".config/rune",
    ".local/share/rune/sessions",
]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    for rel, text in STORES.items():
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    (home / "proj").mkdir()
    (home / "proj" / "notes.txt").write_text("an ordinary file\n")
    return home


def policies(home: Path) -> dict[str, SandboxPolicy]:
    workspace = home / "proj"
    return {
        "library default": SandboxPolicy.default(home=home),
        "rune command": sandbox_policy(Settings(workspace=workspace)),
        "workspace only, home as a root": SandboxPolicy(read_roots=[home], write_roots=[home]),
    }


@pytest.mark.parametrize(
    "which", ["library default", "rune command", "workspace only, home as a root"]
)
def test_no_credential_store_is_read_listed_or_searched(
    home: Path, monkeypatch: pytest.MonkeyPatch, which: str
) -> None:
    monkeypatch.setenv("HOME", str(home))
    ex = ToolExecutor(policies(home)[which], home / "proj")
    for rel in STORES:
        with pytest.raises(SandboxDenied) as caught:
            ex.run("read_file", {"path": str(home / rel)})
        assert "SECRET-" not in str(caught.value)
        if not rel.startswith((".ssh", ".gnupg")):  # those two are blocked outright
            assert "credentials" in str(caught.value) or "Rune's own" in str(caught.value)
    for rel in STORE_DIRS:
        with pytest.raises(SandboxDenied):
            ex.run("list_dir", {"path": str(home / rel)})
    # The rune command asks before it searches home: the user saying yes opens no store.
    found = approved(ex, "search", {"pattern": "SECRET", "path": "~"})
    assert "SECRET-" not in found
    assert found.startswith("no matches")
    # Skipped silently: not counted as unreadable, not named.
    assert "skipped" not in found
    assert "ordinary" in ex.run("search", {"pattern": "ordinary", "path": "~"})


def approved(ex: ToolExecutor, name: str, arguments: dict[str, str]) -> str:
    """The call's output, approved by the user when it asks."""
    try:
        return ex.run(name, arguments)
    except NeedsApproval as needed:
        return ex.apply(needed.change)


def test_a_symlink_in_the_workspace_to_a_store_is_refused(home: Path) -> None:
    (home / "proj" / "creds").symlink_to(home / ".aws" / "credentials")
    (home / "proj" / "awsdir").symlink_to(home / ".aws")
    ex = ToolExecutor(SandboxPolicy.default(home=home), home / "proj")
    with pytest.raises(SandboxDenied, match="holds credentials"):
        ex.run("read_file", {"path": "creds"})
    with pytest.raises(SandboxDenied, match="holds credentials"):
        ex.run("list_dir", {"path": "awsdir"})


def test_credential_names_are_matched_in_any_case(home: Path) -> None:
    policy = SandboxPolicy(read_roots=[home], write_roots=[home])
    for spelled in (".AWS/credentials", ".Config/GH/hosts.yml", ".NETRC"):
        with pytest.raises(SandboxDenied, match="holds credentials"):
            validate_read_path(home / spelled, policy, home)


def test_the_users_own_config_may_allow_one_store_for_reading_only(home: Path) -> None:
    allowed = SandboxPolicy(
        read_roots=[home], write_roots=[home], allow_credentials=[home / ".aws" / "config"]
    )
    ex = ToolExecutor(allowed, home / "proj")
    assert "SECRET-region" in ex.run("read_file", {"path": str(home / ".aws/config")})
    with pytest.raises(SandboxDenied, match="holds credentials"):
        ex.run("read_file", {"path": str(home / ".aws/credentials")})
    with pytest.raises(SandboxDenied):
        ex.prepare("write_file", {"path": str(home / ".aws/config"), "content": "x"})
    # Allowing a directory that merely contains stores opens none of them.
    broad = SandboxPolicy(read_roots=[home], write_roots=[home], allow_credentials=[home])
    with pytest.raises(SandboxDenied, match="holds credentials"):
        ToolExecutor(broad, home).run("read_file", {"path": str(home / ".netrc")})
    # Rune's own config and sessions are never opened to the model.
    own = SandboxPolicy(
        read_roots=[home], write_roots=[home], allow_credentials=[home / ".config/rune"]
    )
    with pytest.raises(SandboxDenied):
        ToolExecutor(own, home).run("read_file", {"path": str(home / ".config/rune/config.toml")})


def test_a_project_file_cannot_allow_a_store(home: Path, tmp_path: Path) -> None:
    project = home / "proj"
    (project / ".rune").mkdir()
    (project / ".rune" / "config.toml").write_text(
        f'[sandbox]\nallow_credentials = ["{home / ".aws"}"]\n'
    )
    loaded = load({"workspace": str(project)}, env={}, user_file=tmp_path / "none.toml")
    assert loaded.settings.sandbox_allow_credentials == ()
    assert len(loaded.refused) == 1 and "'sandbox.allow_credentials'" in loaded.refused[0]
    user = tmp_path / "user.toml"
    user.write_text(f'[sandbox]\nallow_credentials = ["{home / ".aws"}"]\n')
    mine = load({"workspace": str(project)}, env={}, user_file=user)
    assert mine.settings.sandbox_allow_credentials == (home / ".aws",)


# --- through the rune command --------------------------------------------------------------


ATTACK = [
    calls(
        ("read_file", {"path": "~/.aws/credentials"}),
        ("read_file", {"path": "~/.config/rune/config.toml"}),
        ("search", {"pattern": "SECRET", "path": "~"}),
        ("list_dir", {"path": "~/.config/gh"}),
    ),
    final("nothing found"),
]


def test_rune_run_never_shows_the_model_a_secret(home: Path) -> None:
    project = home / "proj"
    (project / ".rune").mkdir()
    (project / ".rune" / "config.toml").write_text(
        f'[sandbox]\nallow_credentials = ["{home / ".aws"}"]\n'
    )
    done = rune(
        home, "run", "--backend", "scripted", "--workspace", str(project), "look", script=ATTACK
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ignored 'sandbox.allow_credentials'" in done.stderr
    assert "holds credentials" in done.stdout
    assert "SECRET-" not in journals()


def test_rune_run_reads_a_store_the_user_allowed_by_flag(home: Path) -> None:
    script = [call("read_file", path="~/.aws/config"), final()]
    args = ["run", "--backend", "scripted", "--workspace", str(home / "proj")]
    allow = ["--allow-credential", str(home / ".aws" / "config"), "look"]
    # Outside the workspace, an allowed store is asked for like any file: with no terminal,
    # refused.
    done = rune(home, *args, *allow, script=script)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "needs the user's approval" in journals() and "SECRET-region" not in journals()
    # Read freely once the user's own config makes its directory a read root too.
    roots = {"RUNE_SANDBOX_READ_ROOTS": str(home / ".aws")}
    done = rune(home, *args, *allow, script=script, env=roots)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SECRET-region" in journals()


# --- format_code and ruff's configuration --------------------------------------------------

needs_ruff = pytest.mark.skipif(find_ruff() is None, reason="ruff is not installed")
LONG = "x = [1111111111, 2222222222, 3333333333, 4444444444, 5555555555, 666666666]\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "home" / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "m.py").write_text(LONG)
    return ws


def formatted(ws: Path, policy: SandboxPolicy | None = None) -> str:
    ex = ToolExecutor(policy or SandboxPolicy.workspace_only(ws), ws)
    return ex.prepare("format_code", {"path": "pkg/m.py"}).preview


@needs_ruff
@pytest.mark.parametrize("where", ["~/.ssh/config", "../secret.cfg", "{outside}"])
def test_a_ruff_extend_outside_the_workspace_is_refused_without_showing_it(
    ws: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    home = ws.parent
    monkeypatch.setenv("HOME", str(home))
    for secret in (home / ".ssh" / "config", home / "secret.cfg"):
        secret.parent.mkdir(exist_ok=True)
        secret.write_text("Host SECRET-ssh-line\n")
    extend = where.format(outside=home / "secret.cfg")
    (ws / "ruff.toml").write_text(f'extend = "{extend}"\n')
    policy = SandboxPolicy.default(home=home)
    with pytest.raises(ToolError) as caught:
        formatted(ws, policy)
    assert "SECRET" not in str(caught.value)
    assert "outside the workspace" in str(caught.value)


@needs_ruff
def test_ruff_config_above_the_workspace_or_the_users_is_not_used(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws.parent / "ruff.toml").write_text("line-length = 20\n")
    user_ruff = ws.parent / "xdg" / "ruff"
    user_ruff.mkdir(parents=True)
    (user_ruff / "ruff.toml").write_text("line-length = 20\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(ws.parent / "xdg"))
    with pytest.raises(ToolError, match="nothing to change"):
        formatted(ws)  # the default line length keeps the line as it is


@needs_ruff
def test_the_workspaces_own_ruff_config_and_its_extends_still_apply(ws: Path) -> None:
    (ws / "base.toml").write_text("line-length = 20\n")
    (ws / "pyproject.toml").write_text('[tool.ruff]\nextend = "base.toml"\n')
    assert "+    1111111111," in formatted(ws)
    (ws / "pkg" / "ruff.toml").write_text("line-length = 200\n")  # the nearest one wins
    with pytest.raises(ToolError, match="nothing to change"):
        formatted(ws)


@needs_ruff
def test_a_ruff_extend_through_a_symlink_to_a_store_is_refused(ws: Path) -> None:
    home = ws.parent
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text("key = 'SECRET-aws'\n")
    (ws / "inner.toml").symlink_to(home / ".aws" / "credentials")
    (ws / "ruff.toml").write_text('extend = "inner.toml"\n')
    with pytest.raises(ToolError) as caught:
        formatted(ws, SandboxPolicy.default(home=home))
    assert "SECRET-" not in str(caught.value)
