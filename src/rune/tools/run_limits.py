"""Resource limits of a contained run: memory, processes, file size, no core files.

A check (``run_python``, the repair's trials) runs without approval, so it gets the strongest
limits (:data:`CHECK`); an approved command or an MCP server the user configured gets looser
ones (:data:`COMMAND`), since real builds and language runtimes need more (V8 and the JVM
reserve gigabytes of address space they never touch).

The limits are set by a small launcher (``python -I -S -c SOURCE``) that becomes bubblewrap:
the rlimits of a process are inherited by everything it starts, and setting them in the
child before ``exec`` needs no ``preexec_fn`` (unsafe with threads). ``RLIMIT_NPROC`` counts
every task of the user, not of the run, and does not bind root at all; so where Rune finds a
pids cgroup it may write (cgroup v2 with the ``pids`` controller delegated, or a v1 ``pids``
hierarchy), the launcher moves itself into a new child cgroup whose ``pids.max`` is the limit,
and ``pids.events`` then says whether the limit was hit. Otherwise ``RLIMIT_NPROC`` is set to
the tasks the user runs now plus the limit (and root has no process limit; ``rune doctor``
says which applies).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

MIB = 1024 * 1024
GIB = 1024 * MIB


@dataclass(frozen=True, slots=True)
class Limits:
    #: address space of each process, bytes
    memory: int
    #: processes (and threads) of the whole run
    processes: int
    #: the largest file a process may write, bytes
    file_size: int

    def describe(self) -> str:
        return (
            f"{self.memory // GIB} GiB address space per process, {self.processes} processes, "
            f"files up to {_size(self.file_size)}, no core files"
        )


def _size(n: int) -> str:
    return f"{n // GIB} GiB" if n % GIB == 0 else f"{n // MIB} MiB"


#: for what runs without approval
CHECK = Limits(memory=2 * GIB, processes=64, file_size=64 * MIB)
#: for an approved command or a configured MCP server
COMMAND = Limits(memory=16 * GIB, processes=1024, file_size=8 * GIB)

#: argv: MEMORY PROCESSES FILE_SIZE CGROUP_DIR ("" for none) -- COMMAND...
SOURCE = r"""
import os, resource, sys

memory, processes, file_size = (int(a) for a in sys.argv[1:4])
cgroup, argv = sys.argv[4], sys.argv[6:]
if cgroup:
    with open(os.path.join(cgroup, "cgroup.procs"), "w") as handle:
        handle.write(str(os.getpid()))
elif os.getuid() != 0:
    uid, tasks = os.getuid(), 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat("/proc/" + name).st_uid == uid:
                    tasks += len(os.listdir("/proc/" + name + "/task"))
            except OSError:
                pass
    resource.setrlimit(resource.RLIMIT_NPROC, (tasks + processes,) * 2)
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
try:
    os.execv(argv[0], argv)
except OSError as err:
    sys.stderr.write(f"rune: cannot start {argv[0]}: {err.strerror}\n")
sys.exit(127)
"""


def launcher(limits: Limits, cgroup: Path | None, argv: list[str]) -> list[str]:
    """``argv`` started under ``limits`` (in ``cgroup`` when given)."""
    numbers = (limits.memory, limits.processes, limits.file_size)
    head = [sys.executable, "-I", "-S", "-c", SOURCE, *map(str, numbers)]
    return [*head, str(cgroup or ""), "--", *argv]


# --- a pids cgroup ----------------------------------------------------------------------------


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, file system type, super options) of every cgroup mount."""
    found = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo", encoding="utf-8") as handle:
        for line in handle:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) > 4 and len(tail) > 2 and tail[0] in ("cgroup", "cgroup2"):
                point = fields[4].replace("\\040", " ")
                found.append((point, tail[0], tail[2]))
    return found


def _own_cgroups() -> list[tuple[str, str]]:
    """(controllers, path) of each line of ``/proc/self/cgroup``."""
    found = []
    with contextlib.suppress(OSError), open("/proc/self/cgroup", encoding="utf-8") as handle:
        for line in handle:
            parts = line.rstrip("\n").split(":", 2)
            if len(parts) == 3:
                found.append((parts[1], parts[2]))
    return found


def pids_cgroup_parent() -> Path | None:
    """A cgroup directory Rune may create a child with ``pids.max`` in, or None."""
    mounts = _mounts()
    for controllers, path in _own_cgroups():
        relative = path.lstrip("/")
        if controllers == "":
            for point, kind, _ in mounts:
                here = Path(point) / relative
                if kind == "cgroup2" and _has_pids_delegated(here):
                    return here
        elif "pids" in controllers.split(","):
            for point, kind, options in mounts:
                here = Path(point) / relative
                if kind == "cgroup" and "pids" in options.split(",") and _writable(here):
                    return here
    return None


def _writable(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


def _has_pids_delegated(path: Path) -> bool:
    try:
        controllers = (path / "cgroup.subtree_control").read_text().split()
    except OSError:
        return False
    return "pids" in controllers and _writable(path)


_counter = itertools.count()


class PidsCgroup:
    """A child cgroup with ``pids.max``, removed on leaving the ``with`` block."""

    def __init__(self, parent: Path, processes: int) -> None:
        self.path = parent / f"rune-{os.getpid()}-{next(_counter)}"
        self.path.mkdir()
        try:
            (self.path / "pids.max").write_text(str(processes))
        except OSError:
            self.remove()
            raise

    def hit(self) -> bool:
        """Whether a fork was refused because of ``pids.max``."""
        try:
            for line in (self.path / "pids.events").read_text().splitlines():
                name, _, count = line.partition(" ")
                if name == "max" and count.strip() not in ("", "0"):
                    return True
        except OSError:
            pass
        return False

    def remove(self) -> None:
        # The run's PID namespace is gone with bubblewrap, but its last tasks may take a
        # moment to leave the cgroup; kill what is left, then remove it.
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                self._kill_left()
                time.sleep(0.02)

    def _kill_left(self) -> None:
        with contextlib.suppress(OSError):
            for pid in (self.path / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    os.kill(int(pid), signal.SIGKILL)

    def __enter__(self) -> PidsCgroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def _sweep(parent: Path) -> None:
    """Remove the empty cgroups a Rune that was killed mid-run left behind."""
    with contextlib.suppress(OSError):
        for entry in parent.iterdir():
            owner = entry.name.split("-")
            stale = len(owner) == 3 and owner[0] == "rune" and owner[1].isdigit()
            if stale and not Path(f"/proc/{owner[1]}").exists():
                with contextlib.suppress(OSError):
                    entry.rmdir()


def open_cgroup(limits: Limits) -> PidsCgroup | None:
    """A fresh pids cgroup for one run, or None where Rune may not make one."""
    parent = pids_cgroup_parent()
    if parent is None:
        return None
    _sweep(parent)
    try:
        return PidsCgroup(parent, limits.processes)
    except OSError:
        return None


def process_limit_report() -> str:
    """How the process limit is enforced here (for ``rune doctor``)."""
    if pids_cgroup_parent() is not None:
        return "process limit by a pids cgroup"
    if os.getuid() == 0:
        return "no process limit (root, and no pids cgroup Rune may write)"
    return "process limit by RLIMIT_NPROC"


# --- what was hit --------------------------------------------------------------------------------

#: what a process prints or how it ends when it hits each limit
_MEMORY_SIGNS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")
_FORK_SIGNS = ("Resource temporarily unavailable", "fork: retry", "can't fork")
_FILE_SIGNS = ("File too large", "File size limit exceeded")


def limits_hit(limits: Limits, output: str, exit_code: int | None, cgroup_hit: bool) -> list[str]:
    """Which limits a finished run seems to have hit, each as a short phrase."""
    hit = []
    if any(s in output for s in _MEMORY_SIGNS):
        hit.append(f"memory ({limits.memory // GIB} GiB address space)")
    if cgroup_hit or any(s in output for s in _FORK_SIGNS):
        hit.append(f"processes ({limits.processes})")
    if exit_code == 128 + signal.SIGXFSZ or any(s in output for s in _FILE_SIGNS):
        hit.append(f"file size ({_size(limits.file_size)})")
    return hit
