"""The parts of a contained run's layout and limits that need no sandbox: which directories an
interpreter needs (found without running it), the launcher that sets the limits, what a run's
output says about the limit it hit, the sweep of cgroups a killed Rune left, and the seccomp
filter's decisions on x86-64 and AArch64 (run by a small classic-BPF interpreter, so both
machines are checked wherever the suite runs)."""

from __future__ import annotations

import errno
import os
import platform
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from rune.tools.run_limits import CHECK, COMMAND, RunCgroup, _sweep, launcher, limits_hit
from rune.tools.runtime_dirs import runtime_dirs
from rune.tools.seccomp import filter_program


def install(prefix: Path) -> Path:
    """A stand-in Python installation: a standard library and a ``bin/python3.11`` (an
    executable that starts as an ELF file does: only a program is bound as an interpreter)."""
    (prefix / "lib/python3.11").mkdir(parents=True)
    (prefix / "lib/python3.11/os.py").write_text("")
    (prefix / "lib/libpython3.11.so.1.0").write_text("")
    (prefix / "bin").mkdir()
    binary = prefix / "bin/python3.11"
    binary.write_bytes(b"\x7fELF")
    binary.chmod(0o755)
    (prefix / "share").mkdir()
    return binary


def venv(path: Path, base: Path) -> Path:
    (path / "bin").mkdir(parents=True)
    (path / "pyvenv.cfg").write_text(f"home = {base.parent}\nversion = 3.11.7\n")
    (path / "bin/python").symlink_to(base)
    return path / "bin/python"


def test_a_venv_and_its_pyenv_base_come_only_in_their_python_parts(tmp_path: Path) -> None:
    home = tmp_path / "home"
    prefix = home / ".pyenv/versions/3.11.7"
    base = install(prefix)
    (prefix / "bin/python3").symlink_to("python3.11")
    (prefix / "secrets.txt").write_text("not Python's\n")
    python = venv(tmp_path / "ws/.venv", prefix / "bin/python3")
    (tmp_path / "ws/.venv/notes.txt").write_text("not the environment's\n")
    assert runtime_dirs(python, home) == [
        tmp_path / "ws/.venv/bin",
        tmp_path / "ws/.venv/pyvenv.cfg",
        prefix / "lib/libpython3.11.so.1.0",
        prefix / "lib/python3.11",
        base,
        prefix / "bin/python3",  # a hop on the way, bound (to its target) at its own path
    ]


def test_a_conda_environment_comes_in_the_parts_its_packages_use(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = home / "miniconda3/envs/app"
    binary = install(env)
    (env / "conda-meta").mkdir()
    (env / "etc/jupyter").mkdir(parents=True)
    parts = ["bin", "lib", "share", "conda-meta"]
    assert runtime_dirs(binary, home) == [env / part for part in parts]


def test_an_environments_links_are_bound_only_where_they_stay_inside_it(tmp_path: Path) -> None:
    """``lib64 -> lib`` (as ``python -m venv`` makes it) is kept, at its own path; a link the
    model put in the project's ``.venv`` that leads out of it (to a secret directory) is not
    followed."""
    home = tmp_path / "home"
    base = install(tmp_path / "opt/py")
    python = venv(tmp_path / "ws/.venv", base)
    (tmp_path / "ws/.venv/lib").mkdir()
    (tmp_path / "ws/.venv/lib64").symlink_to("lib")
    (home / ".aws").mkdir(parents=True)
    (tmp_path / "ws/.venv/include").symlink_to(home / ".aws")
    (tmp_path / "ws/.venv/share").symlink_to(tmp_path / "ws/.venv")
    found = runtime_dirs(python, home)
    assert found[:3] == [tmp_path / "ws/.venv" / part for part in ("bin", "lib", "pyvenv.cfg")]
    assert tmp_path / "ws/.venv/lib64" in found  # a link, bound (to lib) at its own path
    assert not any(path.is_relative_to(home) for path in found), found
    assert tmp_path / "ws/.venv" not in found and tmp_path / "ws/.venv/share" not in found


def test_a_shared_prefix_gives_only_its_python_parts(tmp_path: Path) -> None:
    for n, where in enumerate((".local", "")):
        home = tmp_path / str(n) / "home"
        prefix = home / where if where else home
        binary = install(prefix)
        assert runtime_dirs(binary, home) == [
            prefix / "lib/libpython3.11.so.1.0",
            prefix / "lib/python3.11",
            binary,
        ], prefix


def test_a_forged_pyvenv_home_that_is_no_installation_is_not_bound(tmp_path: Path) -> None:
    home = tmp_path / "home"
    base = install(tmp_path / "opt/py")
    python = venv(tmp_path / "ws/.venv", base)
    (home / ".aws/bin").mkdir(parents=True)
    (tmp_path / "ws/.venv/pyvenv.cfg").write_text(f"home = {home / '.aws/bin'}\n")
    parts = [tmp_path / "opt/py/lib/libpython3.11.so.1.0", tmp_path / "opt/py/lib/python3.11"]
    own = [tmp_path / "ws/.venv/bin", tmp_path / "ws/.venv/pyvenv.cfg"]
    assert runtime_dirs(python, home) == [*own, *parts, base]


def test_the_launcher_sets_every_limit_and_runs_the_command() -> None:
    probe = (
        "import resource as r; print(*(r.getrlimit(getattr(r, 'RLIMIT_' + n))[0] "
        "for n in ('AS', 'FSIZE', 'CORE')))"
    )
    done = subprocess.run(
        launcher(CHECK, None, [sys.executable, "-c", probe]),
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == [str(CHECK.memory), str(CHECK.file_size), "0"]
    missing = subprocess.run(
        launcher(COMMAND, None, ["/nonexistent/program"]), capture_output=True, text=True
    )
    assert missing.returncode == 127 and "cannot start /nonexistent/program" in missing.stderr


def test_the_limit_a_run_hit_is_named() -> None:
    assert limits_hit(CHECK, "MemoryError\n", 1) == ["memory (2 GiB address space)"]
    assert limits_hit(CHECK, "BlockingIOError: [Errno 11] Resource temporarily unavailable", 1) == [
        "processes (64)"
    ]
    assert limits_hit(CHECK, "", 128 + 25) == ["file size (64 MiB)"]
    assert limits_hit(COMMAND, "OSError: [Errno 27] File too large", 1) == ["file size (8 GiB)"]
    assert limits_hit(CHECK, "AssertionError\n", 1) == []


def v1_cgroups(tmp_path: Path) -> tuple[Path, Path]:
    """Two stand-in cgroup v1 hierarchies (plain directories: the kernel's files are made by
    hand, as the kernel would show them)."""
    pids, memory = tmp_path / "pids", tmp_path / "memory"
    pids.mkdir()
    memory.mkdir()
    return pids, memory


def as_the_kernel_removes(cgroup: RunCgroup) -> None:
    """Empty the stand-in directories, as removing a real cgroup takes its files with it."""
    for path in cgroup.paths:
        for entry in path.iterdir():
            entry.unlink()


def test_a_run_cgroup_sets_the_process_and_total_memory_limits(tmp_path: Path) -> None:
    pids, memory = v1_cgroups(tmp_path)
    with RunCgroup(pids, memory, CHECK) as cgroup:
        made_pids, made_memory = cgroup.paths
        assert made_pids.parent == pids and made_memory.parent == memory
        assert (made_pids / "pids.max").read_text() == "64"
        assert (made_memory / "memory.limit_in_bytes").read_text() == str(2 * 1024**3)
        assert cgroup.counts_processes and cgroup.holds_memory
        # the launcher joins both, and leaves the process count to the cgroup
        argv = launcher(CHECK, cgroup, ["true"])
        tail = argv[argv.index("-c") + 2 :]
        dirs = [str(made_pids), str(made_memory)]
        assert tail == [str(CHECK.memory), "0", str(CHECK.file_size), "2", *dirs, "--", "true"]
        as_the_kernel_removes(cgroup)
    assert not made_pids.exists() and not made_memory.exists()


def test_under_cgroup_v2_one_directory_holds_both_limits(tmp_path: Path) -> None:
    parent = tmp_path / "unified"
    parent.mkdir()
    with RunCgroup(parent, parent, COMMAND) as cgroup:
        (made,) = cgroup.paths
        (made / "memory.max").write_text("max")  # the kernel's file, before Rune writes it
        # written again as Rune would on a real v2 hierarchy
        RunCgroup._limit_memory(made, COMMAND.total_memory)
        assert (made / "memory.max").read_text() == str(16 * 1024**3)
        assert (made / "memory.swap.max").read_text() == "0"
        as_the_kernel_removes(cgroup)
    assert not made.exists()


def test_what_the_cgroups_counted_names_the_limit(tmp_path: Path) -> None:
    pids, memory = v1_cgroups(tmp_path)
    with RunCgroup(pids, memory, CHECK) as cgroup:
        made_pids, made_memory = cgroup.paths
        (made_pids / "pids.events").write_text("max 0\n")
        oom_control = "oom_kill_disable 0\nunder_oom 0\noom_kill {}\n"
        (made_memory / "memory.oom_control").write_text(oom_control.format(0))
        assert limits_hit(CHECK, "", 1, cgroup) == []
        (made_pids / "pids.events").write_text("max 3\n")
        (made_memory / "memory.oom_control").write_text(oom_control.format(2))
        # an OOM kill leaves no MemoryError to read: the count is what tells
        assert limits_hit(CHECK, "Killed\n", 137, cgroup) == [
            "memory (2 GiB for the whole run)",
            "processes (64)",
        ]
        as_the_kernel_removes(cgroup)


def test_the_sweep_removes_only_the_cgroups_of_a_dead_rune(tmp_path: Path) -> None:
    dead = tmp_path / "rune-999999999-0"
    alive = tmp_path / f"rune-{os.getpid()}-0"
    other = tmp_path / "user.slice"
    for path in (dead, alive, other):
        path.mkdir()
    _sweep(tmp_path)
    assert not dead.exists() and alive.exists() and other.exists()


# --- the seccomp filter, run by a classic-BPF interpreter for each architecture --------------


def run_filter(program: bytes, arch: int, nr: int, *args: int) -> int:
    """What the kernel would return for a system call: the filter run on its seccomp_data."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, *args, *(0,) * (6 - len(args)))
    insns = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            acc = struct.unpack_from("=I", data, k)[0]
        elif code == 0x54:  # BPF_ALU | BPF_AND, constant operand
            acc &= k
        elif code in (0x15, 0x35, 0x45):  # BPF_JEQ / BPF_JGE / BPF_JSET, constant operand
            taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += jt if taken else jf
        elif code == 0x06:  # BPF_RET
            return k
        else:
            raise AssertionError(f"unexpected opcode {code:#x}")
        pc += 1


ALLOW, KILL = 0x7FFF0000, 0x80000000
ERRNO = 0x00050000


@dataclass(frozen=True)
class Machine:
    """The numbers the filter names on one machine."""

    arch: int
    socket: int
    keyctl: int
    read: int
    unshare: int
    clone: int
    socketpair: int


MACHINES = {
    "x86_64": Machine(0xC000003E, 41, keyctl=250, read=0, unshare=272, clone=56, socketpair=53),
    "aarch64": Machine(0xC00000B7, 198, keyctl=219, read=63, unshare=97, clone=220, socketpair=199),
}


@pytest.fixture(params=sorted(MACHINES))
def machine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Machine:
    monkeypatch.setattr(platform, "machine", lambda: request.param)
    return MACHINES[request.param]


def test_the_filter_refuses_new_namespaces_clone3_and_netlink_but_routing(
    machine: Machine,
) -> None:
    program, arch = filter_program(netlink=True), machine.arch
    assert program is not None
    eperm = ERRNO | errno.EPERM
    namespaces = {
        "user": 0x10000000,
        "mount": 0x00020000,
        "net": 0x40000000,
        "pid": 0x20000000,
        "ipc": 0x08000000,
        "uts": 0x04000000,
        "cgroup": 0x02000000,
        "time": 0x00000080,
    }
    for name, flag in namespaces.items():
        assert run_filter(program, arch, machine.unshare, flag) == eperm, name
        assert run_filter(program, arch, machine.clone, flag | 17) == eperm, name
    # a thread and a child (glibc's flags), and unshare of what is not a namespace, go on
    thread = (
        0x3D0F00  # CLONE_VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|SETTLS|PARENT_SETTID|CHILD_CLEARTID
    )
    for flags in (thread, 0x01200011, 0x400):  # the last: unshare(CLONE_FILES)
        assert run_filter(program, arch, machine.clone, flags) == ALLOW
        assert run_filter(program, arch, machine.unshare, flags) == ALLOW
    assert run_filter(program, arch, 435) == ERRNO | errno.ENOSYS  # clone3
    assert run_filter(program, arch, machine.socket, 16, 3, 0) == ALLOW  # NETLINK_ROUTE
    for protocol in (12, 9, 15, 6):  # netfilter, audit, uevents, xfrm
        refused = ERRNO | errno.EPROTONOSUPPORT
        assert run_filter(program, arch, machine.socket, 16, 3, protocol) == refused, protocol
    assert run_filter(program, arch, machine.socket, 2, 1, 6) == ALLOW  # TCP over IPv4
    checks = filter_program()  # a check's: no netlink at all
    assert checks is not None
    for protocol in (0, 12):
        refused = ERRNO | errno.EAFNOSUPPORT
        assert run_filter(checks, arch, machine.socket, 16, 3, protocol) == refused, protocol
    assert run_filter(checks, arch, machine.socket, 2, 1, 6) == ALLOW


def test_only_stream_socket_pairs_are_made(machine: Machine) -> None:
    """A datagram end of a pair can send to any socket path the run sees; a stream or
    seqpacket end cannot."""
    for program in (filter_program(), filter_program(netlink=True)):
        assert program is not None
        for kind in (1, 5, 1 | 0x800 | 0x80000):  # stream, seqpacket, with NONBLOCK|CLOEXEC
            assert run_filter(program, machine.arch, machine.socketpair, 1, kind) == ALLOW
        for kind in (2, 3, 2 | 0x80000, 10):  # datagram, raw (a datagram), packet
            refused = ERRNO | errno.EPROTONOSUPPORT
            assert run_filter(program, machine.arch, machine.socketpair, 1, kind) == refused


def test_the_filter_allows_only_ip_and_netlink_sockets_on_each_machine(machine: Machine) -> None:
    program, arch = filter_program(netlink=True), machine.arch
    socket_nr, keyctl, read_nr = machine.socket, machine.keyctl, machine.read
    assert program is not None
    for family in (2, 10, 16):  # AF_INET, AF_INET6, AF_NETLINK
        assert run_filter(program, arch, socket_nr, family) == ALLOW
    for family in (1, 17, 29, 30, 31, 38, 40, 44, 0, 0xFFFFFFFF):
        assert run_filter(program, arch, socket_nr, family) == ERRNO | errno.EAFNOSUPPORT
    for refused in (425, 426, 427, keyctl):
        assert run_filter(program, arch, refused) == ERRNO | errno.ENOSYS
    assert run_filter(program, arch, read_nr) == ALLOW
    assert run_filter(program, 0x40000003, socket_nr, 2) == KILL  # another ABI (i386)


def test_an_entry_point_script_brings_its_interpreter(tmp_path: Path) -> None:
    home = tmp_path / "home"
    prefix = home / ".local/share/uv/python/cpython-3.11"
    base = install(prefix)
    tool = home / ".local/share/uv/tools/srv"
    python = venv(tool, base)
    script = tool / "bin/mcp-srv"
    script.write_text(f"#!{python}\nfrom srv import main\nmain()\n")
    assert runtime_dirs(script, home) == [
        tool / "bin",
        tool / "pyvenv.cfg",
        prefix / "lib/libpython3.11.so.1.0",
        prefix / "lib/python3.11",
        base,
    ]


@pytest.mark.parametrize("name", ["python", "python3"])
def test_a_fifo_named_as_the_interpreter_does_not_hang_rune(tmp_path: Path, name: str) -> None:
    """An approved command may leave a FIFO as the project's ``.venv/bin/python``: reading it
    to see what it is blocked Rune for good (every later ``run_command`` preview hung)."""
    import threading

    fifo = tmp_path / "ws/.venv/bin" / name
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    fifo.chmod(0o755)
    found: list[list[Path]] = []
    worker = threading.Thread(target=lambda: found.append(runtime_dirs(fifo, tmp_path)))
    worker.daemon = True
    worker.start()
    worker.join(10)
    if worker.is_alive():
        os.close(os.open(fifo, os.O_RDWR))  # a writer: the blocked open returns
        worker.join(5)
        pytest.fail("runtime_dirs blocked opening a FIFO")
    assert found == [[]]


def test_an_environments_parts_that_are_links_out_of_it_are_not_followed(tmp_path: Path) -> None:
    """The model may make every part of the project's ``.venv`` a link: its ``pyvenv.cfg`` to a
    credentials file, its ``bin`` to a directory of keys. None of what they lead to is bound."""
    home = tmp_path / "home"
    base = install(tmp_path / "opt/py")
    secret = home / ".aws/credentials"
    secret.parent.mkdir(parents=True)
    secret.write_text(f"home = {base.parent}\n")  # read as the venv's pyvenv.cfg
    ws_venv = tmp_path / "ws/.venv"
    (ws_venv / "lib").mkdir(parents=True)
    (ws_venv / "pyvenv.cfg").symlink_to(secret)
    (ws_venv / "bin").symlink_to(home / ".aws")
    (home / ".aws/python").symlink_to(base)
    found = runtime_dirs(ws_venv / "bin/python", home)
    assert ws_venv / "lib" in found
    assert not any(path.is_relative_to(home) for path in found), found
