"""The sandbox policy: roots, blocklist, protected names, denial texts, path resolution."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from platformdirs import user_config_dir

import rune.tools.executor as executor_module
import rune.tools.sandbox as sandbox_module
from rune.errors import SandboxDenied
from rune.tools.executor import SandboxPolicy, validate_read_path, validate_write_path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def test_names_are_importable_from_both_places() -> None:
    for name in ("SandboxPolicy", "validate_write_path", "validate_read_path"):
        assert getattr(executor_module, name) is getattr(sandbox_module, name)


def test_design_denial_text_names_the_allowed_directories(home: Path) -> None:
    policy = SandboxPolicy.default(home=home)
    with pytest.raises(SandboxDenied) as caught:
        validate_write_path("/etc/nope.txt", policy, home)
    roots = [str(home.resolve())] + (["/mnt/workdrive"] if Path("/mnt/workdrive").is_dir() else [])
    assert str(caught.value) == (
        f"Access denied: /etc/nope.txt is outside allowed write directories: {roots}. "
        "Write inside one of those directories instead."
    )


def test_default_policy_reads_tmp_but_does_not_write_it(home: Path, tmp_path: Path) -> None:
    policy = SandboxPolicy.default(home=home)
    assert validate_read_path("/tmp", policy, home) == Path("/tmp").resolve()
    with pytest.raises(SandboxDenied, match="outside allowed write directories"):
        validate_write_path("/tmp/scratch.txt", policy, home)
    assert validate_write_path("notes.txt", policy, home) == home.resolve() / "notes.txt"


@pytest.mark.parametrize("blocked", [".ssh/id_rsa", ".gnupg/pubring.kbx", ".SSH/config"])
def test_secret_dirs_in_home_are_neither_read_nor_written(home: Path, blocked: str) -> None:
    (home / ".ssh").mkdir()
    (home / ".gnupg").mkdir()
    policy = SandboxPolicy.default(home=home)
    with pytest.raises(SandboxDenied):
        validate_write_path(home / blocked, policy, home)
    if not blocked.startswith(".SSH"):
        with pytest.raises(SandboxDenied, match="blocked location"):
            validate_read_path(home / blocked, policy, home)


@pytest.mark.parametrize(
    "system", ["/etc/passwd", "/var/log/x", "/proc/self/environ", "/sys/kernel", "/dev/zero"]
)
def test_system_locations_are_blocked_even_for_reading(home: Path, system: str) -> None:
    with pytest.raises(SandboxDenied):
        validate_read_path(system, SandboxPolicy.default(home=home), home)


def test_proc_sys_dev_are_blocked_in_every_policy(tmp_path: Path) -> None:
    policy = SandboxPolicy(read_roots=["/"], write_roots=[tmp_path], blocked=[])
    assert validate_read_path("/usr", policy, tmp_path) == Path("/usr").resolve()
    for path in ("/proc/self/status", "/sys/class", "/dev/null"):
        with pytest.raises(SandboxDenied, match="blocked location"):
            validate_read_path(path, policy, tmp_path)


PROTECTED = [
    ".bashrc",
    "deep/er/.zshrc",
    ".PROFILE",
    "proj/.git/hooks/pre-commit",
    "proj/.GIT/Hooks/post-checkout",
    "proj/.git/config",
    "proj/sub/.git",
    ".gitconfig",
    ".gitmodules",
    "lib/python3.11/site-packages/evil.pth",
    "lib/EVIL.PTH",
    "sitecustomize.py",
    "usercustomize.py",
    ".config/autostart/x.desktop",
    ".config/systemd/user/x.service",
    ".local/bin/ls",
    ".vscode/settings.json",
    "a/.idea/workspace.xml",
    "my.code-workspace",
    ".cursor/mcp.json",
    ".claude/settings.json",
    ".mcp.json",
    ".envrc",
    # Everything inside .git: commondir and alternates redirect git as surely as hooks do.
    "proj/.git/commondir",
    "proj/.git/objects/info/alternates",
    "proj/.git/objects/ab/cd",
    "proj/.git/modules/sub/config",
    ".hg/hgrc",
]


@pytest.mark.parametrize("name", PROTECTED)
def test_protected_names_at_any_depth_existing_or_not(tmp_path: Path, name: str) -> None:
    policy = SandboxPolicy.workspace_only(tmp_path)
    with pytest.raises(SandboxDenied, match="is protected"):
        validate_write_path(name, policy, tmp_path)
    existing = tmp_path / name
    existing.parent.mkdir(parents=True, exist_ok=True)
    existing.write_text("x")
    with pytest.raises(SandboxDenied, match="is protected"):
        validate_write_path(name, policy, tmp_path)
    # Reading a protected file is fine; protection is about what runs or is trusted later.
    assert validate_read_path(name, policy, tmp_path) == existing


@pytest.mark.parametrize(
    "name", ["proj/.github/workflows/ci.yml", "bashrc", "config", "git/objects", "history.txt"]
)
def test_similar_but_harmless_names_are_writable(tmp_path: Path, name: str) -> None:
    policy = SandboxPolicy.workspace_only(tmp_path)
    assert validate_write_path(name, policy, tmp_path) == tmp_path / name


def test_protected_names_can_be_switched_off(tmp_path: Path) -> None:
    policy = SandboxPolicy(read_roots=[tmp_path], write_roots=[tmp_path], protected_names=False)
    assert validate_write_path(".bashrc", policy, tmp_path) == tmp_path / ".bashrc"


def test_runes_own_config_dir_is_protected_by_default(tmp_path: Path) -> None:
    config_dir = Path(user_config_dir("rune"))
    policy = SandboxPolicy(read_roots=["/"], write_roots=[config_dir.parent, tmp_path])
    with pytest.raises(SandboxDenied, match="Rune's own configuration"):
        validate_write_path(config_dir / "config.toml", policy, tmp_path)
    elsewhere = tmp_path / "cfg"
    custom = SandboxPolicy(
        read_roots=[tmp_path], write_roots=[tmp_path], protected_paths=[elsewhere]
    )
    with pytest.raises(SandboxDenied, match="Rune's own configuration"):
        validate_write_path("CFG/settings.toml", custom, tmp_path)


def test_runes_session_journals_are_protected_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A forged journal would be replayed by `rune resume`: the model must never write one.
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("RUNE_DATA_DIR", str(home / "custom-data"))
    policy = SandboxPolicy.default(home=home)
    for target in (
        home / ".local/share/rune/sessions/29991231-000000-abcdef/journal.jsonl",
        home / "custom-data/sessions/x/journal.jsonl",
    ):
        with pytest.raises(SandboxDenied, match="Rune's own configuration or sessions"):
            validate_write_path(target, policy)
    assert validate_write_path(home / "project/journal.jsonl", policy).name == "journal.jsonl"


def test_workspace_only_policy_is_one_directory(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    policy = SandboxPolicy.workspace_only(ws)
    assert policy.read_roots == policy.write_roots == (ws.resolve(),)
    with pytest.raises(SandboxDenied, match="outside allowed read directories"):
        validate_read_path(tmp_path / "other.txt", policy, ws)


def test_relative_paths_resolve_against_the_workspace_not_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, elsewhere = tmp_path / "ws", tmp_path / "elsewhere"
    ws.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    policy = SandboxPolicy(read_roots=[tmp_path], write_roots=[tmp_path])
    assert validate_write_path("a.txt", policy, ws) == ws / "a.txt"


def test_symlinks_resolve_to_their_target_and_roots_are_canonical(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    alias = tmp_path / "alias"
    alias.symlink_to(real)
    policy = SandboxPolicy.workspace_only(alias)
    assert policy.write_roots == (real,)
    assert validate_write_path(alias / "x.txt", policy, alias) == real / "x.txt"


@pytest.mark.parametrize(
    "bad", ["", "a\x00b", "a\nb", "a\x1b[31mb", "a\u202eb", "a\u200bb", "a\u2028b", "a\ud800b"]
)
def test_control_and_invisible_characters_are_refused(tmp_path: Path, bad: str) -> None:
    policy = SandboxPolicy.workspace_only(tmp_path)
    for validate in (validate_write_path, validate_read_path):
        with pytest.raises(SandboxDenied):
            validate(bad, policy, tmp_path)


def test_unreadable_component_denies_instead_of_guessing(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    policy = SandboxPolicy.workspace_only(tmp_path)
    with pytest.raises(SandboxDenied, match="cannot resolve"):
        validate_write_path("loop/x", policy, tmp_path)
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(SandboxDenied):
        validate_write_path("file/child", policy, tmp_path)


def test_denied_paths_create_nothing(tmp_path: Path) -> None:
    policy = SandboxPolicy.workspace_only(tmp_path / "ws")
    (tmp_path / "ws").mkdir()
    before = sorted(os.listdir(tmp_path))
    for path in ("../x", "new/../../y", ".bashrc", "/etc/z"):
        with pytest.raises(SandboxDenied):
            validate_write_path(path, policy, tmp_path / "ws")
    assert sorted(os.listdir(tmp_path)) == before
    assert os.listdir(tmp_path / "ws") == []
