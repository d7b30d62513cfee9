"""What runs without approval sees only what it needs (issue #23, items 1-4).

Each attack was reproduced on the code before (bubblewrap and the seccomp filter active): the
host was bound read-only and secrets hidden by name, so a check printed a credential store 5
levels below home, every store of a home with more than 3,000 directories, a store outside
home and secrets in variables whose names missed the word list; ``socket(AF_VSOCK)``
succeeded; a check touched 3 GiB, forked hundreds of processes and wrote a 100 MiB file.
Now home is private and empty, nothing outside the system directories, the workspace and the
interpreter is there, the environment is an allow-list, only IP and netlink sockets can be
made, and a check runs under limits it reports. Real bwrap, real processes; home is a temp
directory. The last section attacks the new layout itself.
"""

from __future__ import annotations

import ast
import itertools
import os
import platform
import random
import shlex
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from rune.errors import ToolError
from rune.tools.executor import SandboxPolicy, ToolExecutor

pytestmark = pytest.mark.bwrap
SECRET = "SECRET-3f9a"


def plant(path: Path, text: str = SECRET) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{text}:{path.name}\n")
    return path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    (home / "proj").mkdir(parents=True)
    (home / "proj" / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    monkeypatch.setenv("HOME", str(home))
    return home


def executor(home: Path) -> ToolExecutor:
    """The ``rune`` command's policy: read home and /tmp, write the workspace."""
    ws = home / "proj"
    policy = SandboxPolicy(read_roots=[home, Path("/tmp"), ws], write_roots=[ws], home=home)
    return ToolExecutor(policy, ws)


def check(home: Path, code: str) -> str:
    """The report of a ``run_python`` check, passed or failed."""
    try:
        return executor(home).run("run_python", {"code": code})
    except ToolError as err:
        return str(err)


def command(home: Path, line: str) -> str:
    """The report of an approved ``run_command``, whatever its exit code."""
    ex = executor(home)
    try:
        return ex.apply(ex.prepare("run_command", {"command": line}))
    except ToolError as err:
        return str(err)


#: prints every file below each directory of ``ROOTS`` (a Python list literal put in its place)
WALK = (
    "import os\n"
    "for top in ROOTS:\n"
    "  for d, _, fs in os.walk(top):\n"
    "    for f in fs:\n"
    "      try: print(open(os.path.join(d, f), errors='replace').read(200))\n"
    "      except OSError as e: print(type(e).__name__)\n"
    "assert 1"
)


#: prints each of ``paths`` (a Python list literal), or the error reading it
READ = (
    "for p in {paths!r}:\n"
    "  try: print(p, open(p).read())\n"
    "  except OSError as e: print(p, type(e).__name__)\n"
    "assert 1"
)


def walk(*roots: str) -> str:
    return WALK.replace("ROOTS", repr(list(roots)))


# --- reads --------------------------------------------------------------------------------------


def test_a_credential_store_deep_below_home_is_not_there(home: Path) -> None:
    plant(home / "backup/2023/laptop/home/.ssh/id_ed25519")
    plant(home / "work/clients/acme/infra/.aws/credentials")
    out = check(home, walk(str(home)))
    assert SECRET not in out, out
    assert "[exit code 0]" in out
    out = command(home, f"cat {home}/backup/2023/laptop/home/.ssh/id_ed25519")
    assert SECRET not in out and "No such file or directory" in out
    listed = command(home, f"ls -A {home}")
    assert listed.split("\n")[0] == "proj", listed  # home holds the workspace, nothing else


def test_a_10000_directory_home_and_a_store_outside_home(home: Path, tmp_path: Path) -> None:
    rng = random.Random(23)
    dirs = []
    for n in range(10_000):
        parent = rng.choice(dirs) if dirs and rng.random() < 0.7 else home
        path = parent / f"d{n}"
        path.mkdir()
        dirs.append(path)
    deep = plant(rng.choice(dirs[-2000:]) / ".aws" / "credentials")
    plant(home / "snap/firefox/common/.mozilla/firefox/p.default/logins.json")
    plant(home / ".local/share/fish/fish_history")
    # Standing for a WSL drive (/mnt/c/Users/NAME): a directory outside home that is not the
    # workspace.
    outside = plant(tmp_path / "mnt-c/Users/ada/.aws/credentials")
    plant(tmp_path / "mnt-c/Users/ada/.ssh/id_rsa")
    out = check(home, walk(str(home), str(tmp_path / "mnt-c"), "/proc/self/root" + str(home)))
    assert SECRET not in out, out
    direct = f"print(open({str(deep)!r}).read())\nprint(open({str(outside)!r}).read())\nassert 1"
    out = check(home, direct)
    assert SECRET not in out and "FileNotFoundError" in out, out


def test_the_environment_is_an_allow_list(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    leaks = {
        "GITHUB_PAT": "ghp_SECRET1",
        "DATABASE_URL": "postgres://app:SECRET2@db/app",
        "PIP_INDEX_URL": "https://__token__:SECRET3@pypi.example/simple",
        "CI_JOB_JWT": "eyJSECRET4",
        "GIT_CONFIG_KEY_0": "http.extraHeader",
        "GIT_CONFIG_VALUE_0": "Authorization: Bearer SECRET5",
        "SENTRY_DSN": "https://SECRET6@sentry.example/1",
        "PYTHONSTARTUP": str(plant(home / ".pythonrc", "print('SECRET7')")),
        "XDG_CONFIG_HOME": str(home / ".config-SECRET8"),
    }
    for name, value in leaks.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("PYTHONHASHSEED", "7")
    code = "import os\nprint(dict(os.environ))\nprint(open('/proc/1/environ').read())\nassert 1"
    out = check(home, code)
    assert "SECRET" not in out and "PYTHONSTARTUP" not in out, out
    assert "'LANG': 'C.UTF-8'" in out and "'PYTHONHASHSEED': '7'" in out
    assert f"'HOME': '{home}'" in out
    out = command(home, "env; cat /proc/1/environ | tr '\\0' '\\n'")
    assert "SECRET" not in out and "LANG=C.UTF-8" in out, out


@pytest.mark.seccomp
def test_only_ip_sockets_can_be_made_and_netlink_only_by_a_command(home: Path) -> None:
    families = {"UNIX": 1, "INET": 2, "INET6": 10, "NETLINK": 16, "PACKET": 17, "BLUETOOTH": 31}
    families |= {"TIPC": 30, "VSOCK": 40, "ALG": 38, "CAN": 29, "XDP": 44}
    code = (
        "import socket\n"
        f"for name, f in {families!r}.items():\n"
        "  try: socket.socket(f, socket.SOCK_DGRAM if f != 16 else socket.SOCK_RAW); r = 'ok'\n"
        "  except OSError as e: r = e.errno\n"
        "  print(name, r)\n"
        "assert 1"
    )
    (home / "proj" / "families.py").write_text(code)
    for out, netlink in ((check(home, code), "97"), (command(home, "python3 families.py"), "ok")):
        got = dict(line.split() for line in out.splitlines() if line.split()[0] in families)
        assert got.pop("INET") == "ok" and got.pop("INET6") == "ok", out
        assert got.pop("NETLINK") == netlink, out
        assert set(got.values()) == {"97"}, out  # EAFNOSUPPORT for every other family
    vsock = f"{sys.executable} -c 'import socket; socket.socket(40, socket.SOCK_STREAM)'"
    assert "Address family not supported" in command(home, vsock)


# --- limits ---------------------------------------------------------------------------------


def test_a_check_that_touches_3_gib_hits_the_memory_limit(home: Path) -> None:
    with pytest.raises(ToolError) as failed:
        executor(home).run("run_python", {"code": "b = bytearray(3 * 1024**3)\nassert b"})
    assert "MemoryError" in str(failed.value)
    assert "it hit the sandbox's limit on memory (2 GiB address space)" in str(failed.value)


def hits_limit(home: Path, code: str, limit: str, unenforced: str) -> None:
    """The check ``code`` fails, and its report names ``limit``; a skip where ``rune doctor``'s
    report says ``unenforced`` (no cgroup, or root without one)."""
    from rune.tools.run_limits import process_limit_report

    if unenforced in process_limit_report():
        pytest.skip(f"{unenforced} can be enforced here: {process_limit_report()}")
    with pytest.raises(ToolError) as failed:
        executor(home).run("run_python", {"code": code})
    assert f"it hit the sandbox's limit on {limit}" in str(failed.value), failed.value


def test_a_check_that_forks_300_processes_hits_the_process_limit(home: Path) -> None:
    code = (
        "import os, time\n"
        "for _ in range(300):\n"
        "  if os.fork() == 0:\n"
        "    time.sleep(3); os._exit(0)\n"
        "assert 1"
    )
    hits_limit(home, code, "processes (64)", "no process limit")


def test_checks_processes_together_hit_the_total_memory_limit(home: Path) -> None:
    """Three processes of 900 MiB each stay under the 2 GiB a process may map, and together
    over what the whole check may use: the kernel ends one of them, not the machine."""
    code = (
        "import os, time\n"
        "kids = []\n"
        "for _ in range(3):\n"
        "  pid = os.fork()\n"
        "  if pid == 0:\n"
        "    block = b'x' * (900 * 1024**2)\n"
        "    time.sleep(2); os._exit(0)\n"
        "  kids.append(pid)\n"
        "ends = [os.waitpid(pid, 0)[1] for pid in kids]\n"
        "assert ends == [0, 0, 0], ends"
    )
    hits_limit(home, code, "memory (2 GiB for the whole run)", "no total memory limit")


def test_a_check_that_writes_100_mib_hits_the_file_size_limit(home: Path) -> None:
    code = "open('/tmp/big', 'wb').write(b'x' * 100 * 1024**2)\nassert 1"
    with pytest.raises(ToolError) as failed:
        executor(home).run("run_python", {"code": code})
    assert "File too large" in str(failed.value)
    assert "it hit the sandbox's limit on file size (64 MiB)" in str(failed.value)


def test_an_approved_command_runs_under_the_looser_limits(home: Path) -> None:
    out = command(home, "ulimit -v; ulimit -f; ulimit -c")
    kib = 16 * 1024 * 1024
    assert out.split("\n")[:3] == [str(kib), str(8 * 1024 * 1024), "0"], out


# --- the new layout, attacked --------------------------------------------------------------


def test_symlinks_in_the_workspace_lead_nowhere(home: Path, tmp_path: Path) -> None:
    ws = home / "proj"
    key = plant(home / "plans/diary.txt")
    outside = plant(tmp_path / "elsewhere/token.txt")
    (ws / "key").symlink_to(key)
    (ws / "out").symlink_to(outside.parent)
    (ws / "up").symlink_to(home)
    (ws / "root").symlink_to("/proc/self/root")
    code = walk("out", "up", f"root{home}") + "\nprint(open('key').read())"
    out = check(home, code)
    assert SECRET not in out, out


def test_proc_shows_only_the_sandbox(home: Path) -> None:
    code = (
        "import os\n"
        "pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
        "print(len(pids), open('/proc/1/cmdline').read()[:40])\n"
        "print(os.listdir('/'))\n"
        "assert 1"
    )
    out = check(home, code)
    count = int(out.split()[0])
    assert count < 6, out  # bwrap's init, the check and nothing of the host
    for gone in ("'home'", "'mnt'", "'media'", "'srv'", "'run'", "'sys'"):
        if not str(home).startswith(f"/{gone[1:-1]}/"):
            assert gone not in out, out


def test_the_hosts_tmp_is_not_there(home: Path) -> None:
    ticket = plant(Path("/tmp") / f"krb5cc_rune_test_{uuid.uuid4().hex}")
    try:
        out = check(home, f"print(open({str(ticket)!r}).read())\nassert 1")
    finally:
        ticket.unlink()
    assert SECRET not in out and "FileNotFoundError" in out, out


def test_a_forged_pyvenv_cfg_cannot_bind_a_secret_directory(home: Path) -> None:
    """The project's .venv is the model's: its ``home =`` may name any directory. Only a
    Python installation is bound, and home or a directory above it only in its Python parts."""
    ws = home / "proj"
    plant(home / "plans/diary.txt")
    (home / "plans/bin").mkdir()
    (home / "lib").mkdir()
    # home looks like a --prefix install (its lib/python3.X holds a standard library)
    (home / "lib" / Path(os.__file__).parent.name).symlink_to(Path(os.__file__).parent)
    venv = ws / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin/python").symlink_to(os.path.realpath(sys.executable))
    for forged in (home / "plans/bin", home / "bin"):
        (venv / "pyvenv.cfg").write_text(f"home = {forged}\n")
        out = check(home, walk(str(home)))
        assert SECRET not in out and "[exit code 0]" in out, out


def test_a_venv_that_is_a_symlink_to_home_binds_nothing_of_it(home: Path) -> None:
    ws = home / "proj"
    plant(home / "plans/diary.txt")
    (home / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (home / "bin").mkdir()
    (home / "bin/python").symlink_to(os.path.realpath(sys.executable))
    (ws / ".venv").symlink_to(home)
    out = check(home, walk(str(home)))
    assert SECRET not in out, out


def test_an_environment_elsewhere_shows_a_check_only_its_python_layout(
    home: Path, tmp_path: Path
) -> None:
    """A venv made in place in another project (``python -m venv .``) holds that project's
    files beside ``bin`` and ``lib``; a cloned repository's ``.venv`` may be a link to it. A
    check runs with its packages and sees nothing else of that directory."""
    other = tmp_path / "work/client-app"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True)
    plant(other / ".env")
    plant(other / "notes/plan.txt")
    packages = next((other / "lib").glob("python3*/site-packages"))
    (packages / "helper.py").write_text("VALUE = 42\n")
    (home / "proj/.venv").symlink_to(other)
    code = walk(str(other)) + "\nimport helper, sys\nassert helper.VALUE == 42, sys.path"
    out = check(home, code)
    assert SECRET not in out and "[exit code 0]" in out, out


def test_the_repairs_trials_see_the_same_layout(home: Path, tmp_path: Path) -> None:
    from rune.tools import checks

    plant(home / "backup/2023/laptop/home/.ssh/id_ed25519")
    plant(tmp_path / "mnt-c/Users/ada/.aws/credentials")
    ex = executor(home)
    calc = home / "proj" / "calc.py"
    code = walk(str(home), str(tmp_path / "mnt-c")) + "\nimport calc\nassert calc.add(2, 3) == 5"
    trial = checks.try_with(ex._ctx, {"code": code}, {calc: b"def add(a, b): return 5\n"})
    assert trial.passed and SECRET not in trial.report, trial.report


def test_a_project_file_cannot_add_contained_reads(tmp_path: Path) -> None:
    from rune.settings.config import load

    ws = tmp_path / "ws"
    (ws / ".rune").mkdir(parents=True)
    (ws / ".rune/config.toml").write_text('[sandbox]\ncontained_reads = ["~"]\n')
    user_file = tmp_path / "user.toml"
    user_file.write_text("")
    loaded = load({"workspace": str(ws)}, env={}, user_file=user_file)
    assert loaded.settings.sandbox_contained_reads == ()
    assert any("contained_reads" in note for note in loaded.refused)


def test_the_users_contained_reads_are_bound_read_only(home: Path, tmp_path: Path) -> None:
    cache = tmp_path / "pip-cache"
    plant(cache / "wheel.txt", "CACHED")
    ws = home / "proj"
    policy = SandboxPolicy(
        read_roots=[home, ws], write_roots=[ws], home=home, contained_reads=[cache]
    )
    ex = ToolExecutor(policy, ws)
    with pytest.raises(ToolError) as failed:  # touch fails, so the command does
        ex.apply(
            ex.prepare("run_command", {"command": f"cat {cache}/wheel.txt; touch {cache}/new"})
        )
    out = str(failed.value)
    assert "CACHED" in out and "Read-only file system" in out, out
    assert str(cache) in ex.prepare("run_command", {"command": "true"}).preview


def test_a_pytest_run_in_a_project_still_works(home: Path) -> None:
    ws = home / "proj"
    (ws / "test_calc.py").write_text(
        "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    pytest = f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {sys.executable} -m pytest -q -p no:cacheprovider"
    out = command(home, f"{pytest} test_calc.py")
    assert "1 passed" in out, out


#: run in a child process: join a new session keyring (so the test's key never reaches the
#: session that started the suite), add a key holding SECRET, then run a check that reads it
KEYRING_PROBE = """
import ctypes, platform, sys
from pathlib import Path
from rune.errors import ToolError
from rune.tools.executor import SandboxPolicy, ToolExecutor

arm = platform.machine().lower() in ("aarch64", "arm64")
ADD_KEY, KEYCTL = (217, 219) if arm else (248, 250)
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
assert libc.syscall(KEYCTL, 1, None) > 0  # KEYCTL_JOIN_SESSION_KEYRING, anonymous
payload = sys.argv[3].encode()
key = libc.syscall(ADD_KEY, b"user", b"rune-probe", payload, len(payload), -3)
assert key > 0, ctypes.get_errno()
home, ws = Path(sys.argv[1]), Path(sys.argv[2])
policy = SandboxPolicy(read_roots=[home, ws], write_roots=[ws], home=home)
code = (
    "import ctypes\\n"
    "libc = ctypes.CDLL(None, use_errno=True)\\n"
    "buf = ctypes.create_string_buffer(200)\\n"
    f"n = libc.syscall({KEYCTL}, 11, {key}, buf, 200)\\n"
    "print('read', n, ctypes.get_errno(), buf.raw[:max(n, 0)])\\n"
    "assert 1"
)
try:
    print(ToolExecutor(policy, ws).run("run_python", {"code": code}))
except ToolError as err:
    print(err)
"""


#: a check that tries what a kernel exploit starts with (CVE-2024-1086 reached nf_tables so):
#: namespaces of its own, clone3 (whose flags a filter cannot read), netfilter's netlink
NAMESPACE_PROBE = (
    "import ctypes, socket, subprocess, threading\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "for name, flags in [('user', 0x10000000), ('user+net', 0x50000000), ('mount', 0x20000)]:\n"
    "  print('unshare', name, libc.unshare(flags), ctypes.get_errno())\n"
    "NEWUSER_SIGCHLD = 0x10000000 | 17\n"
    "print('clone user', libc.syscall(56, NEWUSER_SIGCHLD, 0, 0, 0, 0), ctypes.get_errno())\n"
    "print('clone3', libc.syscall(435, 0, 0), ctypes.get_errno())\n"
    "for protocol in (12, 0):\n"
    "  try: socket.socket(16, 3, protocol).close(); print('netlink', protocol, 'ok')\n"
    "  except OSError as e: print('netlink', protocol, e.errno)\n"
    "for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):\n"
    "  try: [end.close() for end in socket.socketpair(1, kind)]; print('pair', kind, 'ok')\n"
    "  except OSError as e: print('pair', kind, e.errno)\n"
    "print('localhost', socket.getaddrinfo('localhost', 80, flags=socket.AI_ADDRCONFIG)[0][4])\n"
    "t = threading.Thread(target=print, args=('thread ok',)); t.start(); t.join()\n"
    "print('child', subprocess.run(['true']).returncode)\n"
    "assert 1"
)


@pytest.mark.seccomp
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the probe uses x86-64's numbers")
@pytest.mark.parametrize("how", ["check", "command"])
def test_a_contained_run_makes_no_namespace_and_reaches_no_netfilter_nor_a_socket_path(
    home: Path, how: str
) -> None:
    if how == "check":
        out = check(home, NAMESPACE_PROBE)
    else:
        (home / "proj" / "probe.py").write_text(NAMESPACE_PROBE)
        out = command(home, f"{sys.executable} probe.py")
    # A check gets no netlink at all: the kernel's replies queued on a socket are memory no
    # cgroup counts (326 routing sockets held 2.6 GiB of the host's). An approved command
    # keeps the routing protocol, which some programs cannot do without.
    routing = "netlink 0 97" if how == "check" else "netlink 0 ok"
    assert out.splitlines()[:12] == [
        "unshare user -1 1",  # EPERM, as for a process without the right
        "unshare user+net -1 1",
        "unshare mount -1 1",
        "clone user -1 1",
        "clone3 -1 38",  # ENOSYS: threads and children fall back to clone
        "netlink 12 93" if how == "command" else "netlink 12 97",  # netfilter: never
        routing,
        # a datagram pair can send to any socket path it sees: only stream pairs are made
        "pair 2 93",
        "pair 1 ok",
        "localhost ('127.0.0.1', 80)",  # getaddrinfo does without netlink
        "thread ok",
        "child 0",
    ], out


@pytest.mark.seccomp
def test_the_kernel_keyring_of_the_session_is_out_of_reach(home: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", KEYRING_PROBE, str(home), str(home / "proj"), SECRET],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout, done.stdout
    assert "read -1 38" in done.stdout, done.stdout  # ENOSYS: as on a kernel without keys


def test_an_environments_index_configuration_is_masked(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A venv outside the workspace is bound whole; the pip.conf pip reads from it (an index
    URL with a token) is not."""
    venv = tmp_path / "venvs" / "app"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    plant(venv / "pip.conf", f"[global]\nindex-url = https://u:{SECRET}@pypi.example/simple")
    monkeypatch.setenv("PATH", f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}")
    code = READ.format(paths=[str(venv / "pip.conf")]) + "\nimport sys\nprint(sys.prefix)"
    out = check(home, code)
    assert str(venv) in out and SECRET not in out and "[exit code 0]" in out, out


def test_the_secrets_of_etc_read_empty_to_a_command_and_are_not_there_for_a_check(
    home: Path,
) -> None:
    from rune.tools.containment import EMPTY_FOR_CHECKS, SYSTEM_SECRETS

    present = [p for p in SYSTEM_SECRETS if os.path.isfile(p)]
    if not present:
        pytest.skip("none of the /etc secret files exists on this machine")
    out = command(home, f"{sys.executable} -c {shlex.quote(READ.format(paths=present))}")
    assert all(f"{p} PermissionError" in out for p in present), out
    out = check(home, READ.format(paths=present))
    for path in present:
        # not there at all: /etc is an allow-list, /usr/local/etc empty
        gone = path.startswith(("/etc/", *(f"{d}/" for d in EMPTY_FOR_CHECKS)))
        hidden = "FileNotFoundError" if gone else "PermissionError"
        assert f"{path} {hidden}" in out, out


def test_a_check_sees_only_what_programs_need_of_etc(home: Path) -> None:
    """Deny by default in /etc too: a check (which nobody approved) sees the dynamic linker's
    cache, the time zone, certificates and the like; not the host's accounts, its name, its
    machine id or any configuration a name list of secrets would have to know about. Its
    passwd, group and hosts are made for it: the user it runs as resolves, localhost too. An
    approved command sees the rest of /etc as before."""
    from rune.tools.check_etc import CHECK_ETC

    private = [p for p in ("/etc/hostname", "/etc/machine-id", "/etc/fstab") if os.path.isfile(p)]
    probe = (
        "import os, pwd, grp, socket\n"
        "print(sorted(os.listdir('/etc')))\n"
        "print(pwd.getpwuid(os.getuid()).pw_dir, grp.getgrgid(os.getgid()).gr_gid)\n"
        "print(len(pwd.getpwall()), socket.gethostbyname('localhost'))\n"
        + READ.format(paths=private)
    )
    out = check(home, probe)
    lines = out.splitlines()
    seen = ast.literal_eval(lines[0])
    made = {"passwd", "group", "hosts"}
    assert made <= set(seen), seen
    assert all(
        name in made or any(Path(name).match(p.split("/")[0]) for p in CHECK_ETC) for name in seen
    ), seen
    assert "ld.so.cache" in seen or not os.path.exists("/etc/ld.so.cache"), seen
    assert lines[1] == f"{home} {os.getgid()}", out
    accounts = 2 if os.getuid() == 0 else 3
    assert lines[2] == f"{accounts} 127.0.0.1", out
    assert all(f"{p} FileNotFoundError" in out for p in private), out
    if private:
        out = command(home, f"{sys.executable} -c {shlex.quote(READ.format(paths=private))}")
        assert all(f"{p} FileNotFoundError" not in out for p in private), out


def test_what_a_check_keeps_of_etc_is_chosen_by_exact_patterns(tmp_path: Path) -> None:
    """``python*`` also matched python-gitlab's system-wide config (a private token); a kept
    link that leads out of the system directories (NixOS: /etc/static/...) is bound as what
    it points to, or the check would see a broken link."""
    from rune.tools.check_etc import CHECK_ETC, _points_into
    from rune.tools.containment import SYSTEM_DIRS

    def kept(name: str) -> bool:
        return any(Path(name).match(pattern) for pattern in CHECK_ETC)

    assert kept("python3") and kept("python3.11") and kept("ld.so.cache")
    assert not kept("python-gitlab.cfg") and not kept("python2.7") and not kept("passwd")
    into_usr = tmp_path / "localtime"
    into_usr.symlink_to("/usr/share/zoneinfo/UTC")
    elsewhere = tmp_path / "hosts"
    elsewhere.symlink_to(tmp_path / "static-hosts")
    whole = [d for d in SYSTEM_DIRS if d not in ("/etc", "/opt")]  # as a check has them
    assert _points_into(into_usr, whole) and not _points_into(elsewhere, whole)
    into_etc = tmp_path / "static"
    into_etc.symlink_to("/etc/static/hosts")
    assert not _points_into(into_etc, whole)


def test_what_a_check_keeps_of_opt_is_what_the_linker_loads_libraries_from(
    tmp_path: Path,
) -> None:
    """/opt holds toolkits, and also package mirrors, licences and an application's keys: a
    check keeps the directories ld.so's configuration names a library directory in (reached
    through a link too), and the links at its top as links; nothing else. The configuration
    is read as ldconfig reads it, and a hostile one neither hangs nor escapes."""
    from rune.tools.check_opt import library_dirs, opt_entries

    tmp = tmp_path.resolve()
    opt = tmp / "opt"
    for name in ("cuda-13/lib64", "rocm-6.0/lib", "mirror", "app/etc"):
        (opt / name).mkdir(parents=True)
    (opt / "licence").write_text("")
    (opt / "rocm").symlink_to(opt / "rocm-6.0")
    (opt / "old").symlink_to(tmp / "gone")
    conf = tmp / "ld.so.conf"
    conf_d = tmp / "ld.so.conf.d"
    conf_d.mkdir()
    # the first include again under another spelling, and two patterns on one line
    conf.write_text(f"include ld.so.conf.d/*.conf {tmp}/extra.conf\ninclude ./ld.so.conf\n")
    (conf_d / "a.conf").write_text(f"{opt}/cuda-13/lib64\n# {opt}/mirror\nlib\nhwcap 0 x\n")
    (tmp / "extra.conf").write_text(f"{opt}/rocm/lib\n{opt}/licence\n{opt}/nothere/lib\n")
    os.mkfifo(conf_d / "b.conf")  # read, it would block for good
    libraries = library_dirs(conf)
    assert libraries == [
        f"{opt}/cuda-13/lib64",
        f"{opt}/rocm/lib",
        f"{opt}/licence",
        f"{opt}/nothere/lib",
    ]
    links, kept = opt_entries(opt, libraries)
    # a link within /opt is made relative: built under bubblewrap's setup root, an absolute
    # one would lead out of the new /opt, and an interpreter bound through it has no parent
    assert links == ((opt / "old", str(tmp / "gone")), (opt / "rocm", "rocm-6.0"))
    assert kept == (opt / "cuda-13", opt / "rocm-6.0")


def test_the_narrowed_directories_come_before_a_home_that_lies_in_them() -> None:
    """OpenShift's images put home under /opt (``/opt/app-root/src``): an empty /opt made
    after the private home would cover it, and the kept entry that holds it would show the
    real one."""
    from rune.tools.containment import plan_mounts

    if not os.path.isdir("/opt") or os.path.islink("/opt"):
        pytest.skip("this machine has no /opt directory to narrow")
    home = Path("/opt/app-root/src")
    ws = Path("/nonexistent-workspace")
    mounts = plan_mounts(SandboxPolicy.default(home=home), ws, without_approval=True).mounts
    pairs = list(itertools.pairwise(mounts))
    assert pairs.index(("--tmpfs", "/opt")) < pairs.index(("--tmpfs", str(home)))
    approved = plan_mounts(SandboxPolicy.default(home=home), ws).mounts
    assert ("--tmpfs", "/opt") not in list(itertools.pairwise(approved))


def test_a_check_sees_of_opt_and_usr_local_etc_only_what_programs_use(home: Path) -> None:
    """Deny by default in /opt: an approved command sees all of it, a check only the links at
    its top and the directories ld.so's configuration names; /usr/local/etc (npm's tokens)
    is empty to a check."""
    probe = (
        "import os\n"
        "for d in ('/opt', '/usr/local/etc'):\n"
        "    print(sorted(os.listdir(d)) if os.path.isdir(d) else None)\n"
        "assert False\n"
    )
    on_host = sorted(os.listdir("/opt")) if os.path.isdir("/opt") else None
    local_etc = sorted(os.listdir("/usr/local/etc")) if os.path.isdir("/usr/local/etc") else None
    conf_text = "".join(
        Path(f).read_text(errors="replace")
        for f in ["/etc/ld.so.conf", *Path("/etc/ld.so.conf.d").glob("*.conf")]
        if os.path.isfile(f)
    )
    expected = [
        name
        for name in on_host or []
        if os.path.islink(f"/opt/{name}") or f"/opt/{name}/" in conf_text
    ]
    lines = check(home, probe).splitlines()
    seen_opt, seen_local_etc = (ast.literal_eval(line) for line in lines[1:3])
    assert seen_opt == (None if on_host is None else expected)
    assert seen_local_etc == (None if local_etc is None else [])
    out = command(home, f"{sys.executable} -c {shlex.quote(probe)}")
    assert f"{on_host}\n{local_etc}\n" in out, out


def test_the_project_cannot_choose_what_a_check_sees_of_opt(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first version kept the /opt entries that commands on PATH lead into: an activated
    ``.venv/bin``, or ``.`` on PATH, let the project's files name any entry of /opt. What a
    check keeps is read from ld.so's configuration alone."""
    hidden = [
        entry
        for entry in (sorted(Path("/opt").iterdir()) if os.path.isdir("/opt") else [])
        if entry.is_dir() and not entry.is_symlink()
    ]
    shown = check(home, "import os\nprint(sorted(os.listdir('/opt')))\nassert False\n")
    hidden = [entry for entry in hidden if entry.name not in shown]
    if not hidden:
        pytest.skip("this machine's /opt has no directory a check leaves out")
    ws = home / "proj"
    (ws / ".venv" / "bin").mkdir(parents=True)
    (ws / ".venv" / "bin" / "leak").symlink_to(hidden[0] / "anything")
    (ws / "leak").symlink_to(hidden[0])
    monkeypatch.setenv(
        "PATH", f"{ws / '.venv' / 'bin'}{os.pathsep}.{os.pathsep}{os.environ['PATH']}"
    )
    monkeypatch.chdir(ws)
    out = check(home, f"import os\nprint(os.path.exists({str(hidden[0])!r}))\nassert False\n")
    assert out.splitlines()[1] == "False", out


def test_a_check_cannot_raise_its_own_limits(home: Path) -> None:
    code = (
        "import resource as r\n"
        "for n in ('AS', 'NPROC', 'FSIZE', 'CORE'):\n"
        "  try: r.setrlimit(getattr(r, 'RLIMIT_' + n), (-1, -1)); print(n, 'raised')\n"
        "  except (ValueError, OSError): print(n, 'refused')\n"
        "assert 1"
    )
    out = check(home, code)
    assert out.count("refused") == 4 and "raised" not in out, out


def test_a_check_in_a_workspace_too_big_to_scan_is_refused(home: Path) -> None:
    """Credential stores below where the scan stopped would not be masked: fail closed."""
    from rune.tools.containment import SCAN_DIRS

    big = home / "proj" / "many"
    big.mkdir()
    for n in range(SCAN_DIRS + 1):
        os.mkdir(big / str(n))
    plant(big / str(SCAN_DIRS) / ".aws" / "credentials")
    with pytest.raises(ToolError, match="more than 50000 directories") as refused:
        executor(home).run("run_python", {"code": walk(str(big)) + "\nassert 1"})
    assert SECRET not in str(refused.value)


#: writes each sysctl of ``/proc/sys`` back with the value it holds (no change if it works)
SYSCTL_WRITE = (
    "for p in ('/proc/sys/kernel/core_pattern', '/proc/sys/kernel/hostname'):\n"
    "  try:\n"
    "    v = open(p).read()\n"
    "    with open(p, 'w') as f: f.write(v)\n"
    "    print('WROTE', p)\n"
    "  except OSError as e: print('refused', p, e.strerror)\n"
    "assert 1"
)


def test_the_kernels_settings_are_read_only(home: Path) -> None:
    """Run as root (a VM, a CI runner), a contained process is uid 0 without capabilities, and
    uid 0 may write the 0644 files of ``/proc/sys``: ``kernel.core_pattern`` names a program
    the kernel runs as root, outside every namespace, at the next crash on the host. The
    sandbox's /proc/sys is read-only for every user (here the value is written back as it was,
    so the attack changes nothing where it is not stopped)."""
    out = check(home, SYSCTL_WRITE)
    assert "WROTE" not in out and out.count("refused") == 2, out
    out = command(home, f"{sys.executable} -c {shlex.quote(SYSCTL_WRITE)}")
    assert "WROTE" not in out and out.count("refused") == 2, out


def test_a_venv_python_that_names_a_secret_binds_nothing_of_it(home: Path) -> None:
    """The project's ``.venv/bin/python`` is the model's (an approved write, a cloned
    repository): a text file whose ``#!`` names a credential store, or a link to a file in
    home, bound that file into the sandbox as "the interpreter" for an approved command, and
    an executable link as ``python3`` into an unapproved check. Only a program (an ELF
    executable) is bound as an interpreter."""
    ws = home / "proj"
    key = plant(home / ".ssh/id_rsa")
    diary = plant(home / "plans/diary.txt")
    token = plant(home / "tools/token")
    token.chmod(0o755)  # executable, and no "#!": the check's PATH search takes it
    (ws / ".venv/bin").mkdir(parents=True)
    python = ws / ".venv/bin/python"
    python.write_text(f"#!{key}\n")
    assert SECRET not in command(home, f"cat {key}")
    python.unlink()
    python.symlink_to(diary)
    assert SECRET not in command(home, f"cat {diary}")
    (ws / ".venv/bin/python3").symlink_to(token)
    assert SECRET not in check(home, READ.format(paths=[str(token)]))


def _only_root_reads(top: str) -> list[str]:
    """Regular files below ``top`` that only their owner may read, owned by root."""
    found = []
    for d, _, files in os.walk(top):
        for name in files:
            path = os.path.join(d, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and info.st_uid == 0 and not info.st_mode & 0o044:
                found.append(path)
    return found


def test_a_check_run_as_root_reads_nothing_of_etc_only_root_may(home: Path) -> None:
    """Run as root, the contained process is uid 0: it owns every root file of ``/etc``
    and reads what only root may (old password hashes, database passwords), which no user's
    run could, though read_file refuses all of ``/etc``. Those files read empty."""
    if os.geteuid() != 0:
        pytest.skip("only a run as root reads what only root may")
    present = [p for p in _only_root_reads("/etc") if os.path.getsize(p) > 0][:20]
    if not present:
        pytest.skip("no non-empty file of /etc here is readable by root alone")
    out = check(home, READ.format(paths=present))
    for path in present:
        # masked (empty, unreadable) where a check sees its directory, else not there at all
        hidden = ("PermissionError", "FileNotFoundError", "\n")
        assert any(f"{path} {how}" in out for how in hidden), out
