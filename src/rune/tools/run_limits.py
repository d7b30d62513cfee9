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

``RLIMIT_AS`` caps each process, not the run: 64 processes of 2 GiB each could still take
128 GiB, and what they write to the run's tmpfs directories is memory too. So where Rune finds
a memory cgroup it may write (v2 with ``memory`` delegated, or a v1 ``memory`` hierarchy), the
launcher also joins a new child cgroup whose limit is the run's total (:attr:`Limits.total_memory`,
swap included where the kernel counts it): past it the kernel's OOM killer ends a process of
the run, never one of the user's, and the cgroup's ``oom_kill`` count says so.
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
    #: the memory of the whole run (its processes and its tmpfs files), where a memory cgroup
    #: can hold it (:func:`process_limit_report` says where)
    total_memory: int


def _size(n: int) -> str:
    return f"{n // GIB} GiB" if n % GIB == 0 else f"{n // MIB} MiB"


#: for what runs without approval
CHECK = Limits(memory=2 * GIB, processes=64, file_size=64 * MIB, total_memory=2 * GIB)
#: for an approved command or a configured MCP server
COMMAND = Limits(memory=16 * GIB, processes=1024, file_size=8 * GIB, total_memory=16 * GIB)
#: for ripgrep, which Rune runs uncontained for ``search``: it writes no file, and a cloned
#: repository's ``.gitignore`` linked to ``/dev/zero`` must not take the host's memory
#: (processes 0: no process limit; rg's threads are few)
RIPGREP = Limits(memory=2 * GIB, processes=0, file_size=0, total_memory=2 * GIB)

#: argv: MEMORY PROCESSES FILE_SIZE N CGROUP_DIR... (N of them) -- COMMAND...; PROCESSES is 0
#: when a pids cgroup among them counts the processes (no RLIMIT_NPROC then)
SOURCE = r"""
import os, resource, sys

memory, processes, file_size, count = (int(a) for a in sys.argv[1:5])
cgroups, argv = sys.argv[5 : 5 + count], sys.argv[6 + count :]
for cgroup in cgroups:
    with open(os.path.join(cgroup, "cgroup.procs"), "w") as handle:
        handle.write(str(os.getpid()))
if processes and os.getuid() != 0:
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


def launcher(limits: Limits, cgroup: RunCgroup | None, argv: list[str]) -> list[str]:
    """``argv`` started under ``limits`` (in ``cgroup``'s directories when given)."""
    dirs = [] if cgroup is None else cgroup.paths
    processes = 0 if cgroup is not None and cgroup.counts_processes else limits.processes
    numbers = (limits.memory, processes, limits.file_size, len(dirs))
    head = [sys.executable, "-I", "-S", "-c", SOURCE, *map(str, numbers)]
    return [*head, *map(str, dirs), "--", *argv]


# --- the run's cgroups ------------------------------------------------------------------------


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


def cgroup_parent(controller: str) -> Path | None:
    """A cgroup directory Rune may create a child under that ``controller`` (``"pids"`` or
    ``"memory"``) limits, or None."""
    mounts = _mounts()
    for controllers, path in _own_cgroups():
        relative = path.lstrip("/")
        if controllers == "":
            for point, kind, _ in mounts:
                here = Path(point) / relative
                if kind == "cgroup2" and _has_delegated(here, controller):
                    return here
        elif controller in controllers.split(","):
            for point, kind, options in mounts:
                here = Path(point) / relative
                if kind == "cgroup" and controller in options.split(",") and _writable(here):
                    return here
    return None


def _writable(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


def _has_delegated(path: Path, controller: str) -> bool:
    try:
        controllers = (path / "cgroup.subtree_control").read_text().split()
    except OSError:
        return False
    return controller in controllers and _writable(path)


_counter = itertools.count()


class RunCgroup:
    """The child cgroups of one contained run, removed on leaving the ``with`` block: one
    under ``pids`` with ``pids.max`` and one under ``memory`` with the run's total, either
    missing where Rune may not make it (one directory serves both under cgroup v2)."""

    def __init__(self, pids: Path | None, memory: Path | None, limits: Limits) -> None:
        self.paths: list[Path] = []
        self._pids: Path | None = None
        self._memory: Path | None = None
        name = f"rune-{os.getpid()}-{next(_counter)}"
        try:
            if pids is not None:
                self._pids = self._make(pids / name)
                (self._pids / "pids.max").write_text(str(limits.processes))
            if memory is not None:
                self._memory = self._pids if memory == pids else self._make(memory / name)
                assert self._memory is not None
                self._limit_memory(self._memory, limits.total_memory)
        except OSError:
            self.remove()
            raise

    @property
    def counts_processes(self) -> bool:
        return self._pids is not None

    @property
    def holds_memory(self) -> bool:
        return self._memory is not None

    def _make(self, path: Path) -> Path:
        path.mkdir()
        self.paths.append(path)
        return path

    @staticmethod
    def _limit_memory(path: Path, total: int) -> None:
        if (path / "memory.max").exists():  # cgroup v2
            (path / "memory.max").write_text(str(total))
            with contextlib.suppress(OSError):
                (path / "memory.swap.max").write_text("0")
            return
        (path / "memory.limit_in_bytes").write_text(str(total))
        # memory and swap together, where the kernel counts swap (never below the first)
        with contextlib.suppress(OSError):
            (path / "memory.memsw.limit_in_bytes").write_text(str(total))

    def processes_hit(self) -> bool:
        """Whether a fork was refused because of ``pids.max``."""
        return self._pids is not None and _count(self._pids / "pids.events", "max") > 0

    def memory_hit(self) -> bool:
        """Whether the kernel killed a process of the run for the total memory limit."""
        if self._memory is None:
            return False
        v2 = (self._memory / "memory.events").exists()
        counts = self._memory / ("memory.events" if v2 else "memory.oom_control")
        return _count(counts, "oom_kill") > 0

    def remove(self) -> None:
        for path in self.paths:
            _remove(path)

    def __enter__(self) -> RunCgroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def _count(path: Path, key: str) -> int:
    """The number after ``key`` in a flat-keyed cgroup file (0 when missing)."""
    try:
        for line in path.read_text().splitlines():
            name, _, count = line.partition(" ")
            if name == key and count.strip().isdigit():
                return int(count)
    except OSError:
        pass
    return 0


def _remove(path: Path) -> None:
    # The run's PID namespace is gone with bubblewrap, but its last tasks may take a moment to
    # leave the cgroup; kill what is left, then remove it.
    for _ in range(50):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            _kill_left(path)
            time.sleep(0.02)


def _kill_left(path: Path) -> None:
    with contextlib.suppress(OSError):
        for pid in (path / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                os.kill(int(pid), signal.SIGKILL)


def _sweep(parent: Path) -> None:
    """Remove the empty cgroups a Rune that was killed mid-run left behind."""
    with contextlib.suppress(OSError):
        for entry in parent.iterdir():
            owner = entry.name.split("-")
            stale = len(owner) == 3 and owner[0] == "rune" and owner[1].isdigit()
            if stale and not Path(f"/proc/{owner[1]}").exists():
                with contextlib.suppress(OSError):
                    entry.rmdir()


def open_cgroup(limits: Limits) -> RunCgroup | None:
    """Fresh cgroups for one run, or None where Rune may make neither."""
    pids, memory = cgroup_parent("pids"), cgroup_parent("memory")
    for parent in {p for p in (pids, memory) if p is not None}:
        _sweep(parent)
    for tried in dict.fromkeys(((pids, memory), (pids, None), (None, memory))):
        if tried == (None, None):
            continue
        try:
            return RunCgroup(*tried, limits=limits)
        except OSError:
            continue
    return None


def process_limit_report() -> str:
    """How the process and total memory limits are enforced here (for ``rune doctor``)."""
    memory = (
        "total memory limit by a memory cgroup"
        if cgroup_parent("memory") is not None
        else "no total memory limit (no memory cgroup Rune may write)"
    )
    if cgroup_parent("pids") is not None:
        processes = "process limit by a pids cgroup"
    elif os.getuid() == 0:
        processes = "no process limit (root, and no pids cgroup Rune may write)"
    else:
        processes = "process limit by RLIMIT_NPROC"
    return f"{processes}; {memory}"


# --- what was hit --------------------------------------------------------------------------------

#: what a process prints or how it ends when it hits each limit
_MEMORY_SIGNS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")
_FORK_SIGNS = ("Resource temporarily unavailable", "fork: retry", "can't fork")
_FILE_SIGNS = ("File too large", "File size limit exceeded")


def limits_hit(
    limits: Limits,
    output: str,
    exit_code: int | None,
    cgroup: RunCgroup | None = None,
) -> list[str]:
    """Which limits a finished run seems to have hit, each as a short phrase: from its output
    and exit code, and from what its ``cgroup`` counted."""
    hit = []
    if cgroup is not None and cgroup.memory_hit():
        hit.append(f"memory ({_size(limits.total_memory)} for the whole run)")
    elif any(s in output for s in _MEMORY_SIGNS):
        hit.append(f"memory ({limits.memory // GIB} GiB address space)")
    if (cgroup is not None and cgroup.processes_hit()) or any(s in output for s in _FORK_SIGNS):
        hit.append(f"processes ({limits.processes})")
    if exit_code == 128 + signal.SIGXFSZ or any(s in output for s in _FILE_SIGNS):
        hit.append(f"file size ({_size(limits.file_size)})")
    return hit
