"""What a contained run (a command, a check, an MCP server) can see, reach and change.

Deny by default: nothing of the host is there unless it is bound back. bubblewrap builds the
mount namespace in this order (it applies its options in sequence):

1. the system directories read-only (:data:`SYSTEM_DIRS`: ``/usr``, ``/bin``, ``/lib*``,
   ``/etc``, ``/opt``; a merged-/usr symlink stays a symlink), a fresh ``/dev`` and ``/proc``
   (its ``/proc/sys`` read-only: :data:`PROC_READ_ONLY`); for a check, which nobody approved,
   ``/etc`` and ``/opt`` hold only what programs use there (:mod:`rune.tools.check_etc`,
   :mod:`rune.tools.check_opt`), and ``/usr/local/etc`` is empty,
   new PID, IPC and network namespaces (no network, not even the host's loopback);
2. a private ``/tmp`` (a tmpfs of :data:`TMP_SIZE`, also the ``TMPDIR``; ``/var/tmp`` points
   there), a capped ``/dev/shm``, and a private, empty home directory (a tmpfs of
   :data:`HOME_SIZE`). ``/mnt``, ``/media``, ``/srv``, ``/run`` (so ``/run/user``), ``/var``,
   ``/home`` and every other top-level directory do not exist;
3. bound back read-only: what the run's programs need (:mod:`rune.tools.runtime_dirs`: the
   interpreter, its virtual environment and base installation, wherever they lie), the
   directories and files of the user's own ``sandbox.contained_reads``, and the credential
   stores the user let Rune read (``sandbox.allow_credentials``);
4. the workspace, writable for an approved command, read-only for a check;
5. inside it, found at any depth (:func:`scan_workspace`): every ``.git`` below the top
   read-only as a whole (nested repositories, vendored or submodule checkouts); in the top
   ``.git`` only what a commit needs stays writable (``objects``, ``refs``, ``logs``, the
   index and the other files at its top), while ``config``, ``config.worktree``,
   ``commondir``, ``hooks``, ``info``, ``objects/info``, ``modules`` and ``worktrees`` are
   read-only; every other protected name (rc files, IDE and agent config) read-only;
6. masked inside what is bound: every credential store of the read-deny list in the
   workspace, Rune's own configuration and data, what of ``/etc`` holds secrets
   (:data:`SYSTEM_SECRETS`, the SSH host keys; run as root, also what of ``/etc`` and
   ``/opt`` only root may read), and index configuration at the top of an
   interpreter's installation (:data:`PREFIX_SECRETS`): a directory becomes an empty
   read-only tmpfs, a file ``/dev/null``;
7. a seccomp filter (:mod:`rune.tools.seccomp`) lets ``socket`` create only IP and netlink
   sockets (no UNIX socket to a host service, no vsock to a hypervisor) and refuses io_uring;
8. resource limits (:mod:`rune.tools.run_limits`).

No scan of home decides what is hidden: what is not bound does not exist. The environment is
an allow-list (:func:`contained_environment`). A protected name that does not exist cannot be
masked without creating it on the real disk, so the workspace is scanned again after a
writable run: new protected paths are reported, and git control entries created in the top
``.git`` (``commondir``, ``config.worktree``, ``hooks``, ``modules``, ``worktrees``,
``objects/info/alternates``) are removed, since git would obey them outside the sandbox.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import shutil
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rune.tools.check_etc import etc_mounts
from rune.tools.check_opt import opt_mounts
from rune.tools.sandbox import SandboxPolicy, within

#: the size of the private /tmp (the TMPDIR)
TMP_SIZE = 512 * 1024 * 1024
#: the size of the private home directory
HOME_SIZE = 64 * 1024 * 1024
#: the size of /dev/shm
SHM_SIZE = 64 * 1024 * 1024
#: the private, writable scratch directory of a contained run (its TMPDIR)
SCRATCH_DIR = "/tmp"
#: the host directories every contained run sees, read-only (when they exist)
SYSTEM_DIRS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
)
#: how much of the workspace the scan may look at, and for how long
SCAN_DIRS = 50_000
SCAN_SECONDS = 3.0
MAX_BINDS = 2048

#: in the top-level .git: read-only when present (git obeys them; a commit writes none of them)
TOP_GIT_READ_ONLY = (
    "config",
    "config.worktree",
    "commondir",
    "hooks",
    "info",
    "objects/info",
    "modules",
    "worktrees",
)
#: ...and removed after the command when it created them
TOP_GIT_REMOVED_IF_CREATED = (
    "config",
    "config.worktree",
    "commondir",
    "hooks",
    "modules",
    "worktrees",
    "objects/info/alternates",
    "objects/info/http-alternates",
)

#: what a check (a run nobody approved) sees empty: the configuration of software built by
#: hand (npm keeps its tokens there; what a check runs reads /etc)
EMPTY_FOR_CHECKS = ("/usr/local/etc",)
#: what of /etc holds secrets (password hashes, private keys, cluster and VPN credentials,
#: package indexes with tokens, variables set for every login); no program a run starts needs it
SYSTEM_SECRETS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssl/private",
    "/etc/pki/tls/private",
    "/etc/NetworkManager/system-connections",
    "/etc/wireguard",
    "/etc/openvpn",
    "/etc/ipsec.secrets",
    "/etc/ppp",
    "/etc/krb5.keytab",
    "/etc/letsencrypt",
    "/etc/kubernetes",
    "/etc/rancher",
    "/etc/docker",
    "/etc/pip.conf",
    "/etc/xdg/pip",
    "/etc/apt/auth.conf",
    "/etc/apt/auth.conf.d",
    "/etc/npmrc",
    "/usr/local/etc/npmrc",
    "/etc/environment",
)
#: at the top of an interpreter's installation or environment: configuration that may hold
#: an index URL with a token (pip reads ``$VIRTUAL_ENV/pip.conf``, conda its ``.condarc``)
PREFIX_SECRETS = ("pip.conf", ".condarc", "condarc", ".netrc", ".pypirc")
SSH_HOST_KEYS = "/etc/ssh"
#: run as root, what of these only root may read is hidden too (:func:`_only_root_may_read`)
ROOT_ONLY_SCANNED = ("/etc", "/opt")
ROOT_ONLY_ENTRIES = 50_000

# --- the environment ---------------------------------------------------------------------------

#: the variables a contained run keeps; every other one is dropped
ENVIRONMENT_KEPT = frozenset(
    {
        "PATH",
        "LANG",
        "LANGUAGE",
        "TERM",
        "COLORTERM",
        "NO_COLOR",
        "FORCE_COLOR",
        "COLUMNS",
        "LINES",
        "TZ",
        "USER",
        "LOGNAME",
        "SHELL",
        "VIRTUAL_ENV",
        "SOURCE_DATE_EPOCH",
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
    }
)
#: ... and these families
ENVIRONMENT_KEPT_PREFIXES = ("LC_", "PYTHON")
#: dropped although a family above holds them: Python runs this file at every start
ENVIRONMENT_DROPPED = frozenset({"PYTHONSTARTUP"})
#: a kept name holding one of these words is dropped all the same (``PYTHON_API_TOKEN``)
SECRET_WORDS = (
    "KEY",
    "SECRET",
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "PRIVATE",
)


def contained_environment(environ: Mapping[str, str], home: Path) -> dict[str, str]:
    """The environment of a contained run: the allow-list of :data:`ENVIRONMENT_KEPT` and
    :data:`ENVIRONMENT_KEPT_PREFIXES` taken from ``environ``, ``HOME`` set to ``home`` (the
    private one) and ``TMPDIR`` to the private scratch directory."""
    kept: dict[str, str] = {}
    for name, value in environ.items():
        upper = name.upper()
        if name != upper or upper in ENVIRONMENT_DROPPED:
            continue
        if upper in ENVIRONMENT_KEPT or (
            upper.startswith(ENVIRONMENT_KEPT_PREFIXES)
            and not any(word in upper for word in SECRET_WORDS)
        ):
            kept[name] = value
    kept["HOME"] = str(home)
    kept["TMPDIR"] = SCRATCH_DIR
    return kept


def environment_report() -> str:
    """The allow-list in one line (for ``rune doctor``)."""
    names = sorted(ENVIRONMENT_KEPT - {"PATH"})
    return (
        f"contained runs keep PATH, HOME (private), TMPDIR, {', '.join(names)}, LC_*, PYTHON* "
        f"(not {', '.join(sorted(ENVIRONMENT_DROPPED))}); all else is dropped"
    )


# --- scanning ------------------------------------------------------------------------------------


@dataclass
class Scan:
    """What :func:`scan_workspace` found below the workspace."""

    #: existing paths a command must not change (re-bound read-only)
    protected: list[Path] = field(default_factory=list)
    #: existing credential stores (masked)
    secrets: list[Path] = field(default_factory=list)
    #: stores the user allowed Rune to read (bound back read-only over their mask)
    allowed: list[Path] = field(default_factory=list)
    complete: bool = True


def scan_workspace(workspace: Path, policy: SandboxPolicy) -> Scan:
    """Every protected name and credential store below ``workspace``, at any depth, breadth
    first (no recursion), within :data:`SCAN_DIRS` directories and :data:`SCAN_SECONDS`."""
    found = Scan()
    top_git = workspace / ".git"
    queue: collections.deque[Path] = collections.deque([workspace])
    visited = 0
    deadline = time.monotonic() + SCAN_SECONDS
    while queue:
        if visited >= SCAN_DIRS or time.monotonic() > deadline:
            found.complete = False
            break
        here = queue.popleft()
        visited += 1
        try:
            with os.scandir(here) as scan:
                entries = list(scan)
        except OSError:
            continue
        for n, entry in enumerate(entries):
            # One directory may hold a hundred thousand entries: the deadline holds in it too.
            if n % 256 == 255 and time.monotonic() > deadline:
                found.complete = False
                return found
            path = Path(entry.path)
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if path == top_git and is_dir:
                found.protected += [path / name for name in TOP_GIT_READ_ONLY]
            elif policy.credential_hit(path, reading=True) is not None:
                found.secrets.append(path)
            elif policy.credential_hit(path, reading=False) is not None:
                found.allowed.append(path)  # the user's config lets Rune read it
                found.protected.append(path)
            elif policy.protected_hit(path) is not None:
                found.protected.append(path)  # a nested .git as a whole, .vscode, .envrc...
            elif is_dir:
                queue.append(path)
    return found


def _system_secrets() -> list[Path]:
    places = [Path(p) for p in SYSTEM_SECRETS]
    with contextlib.suppress(OSError), os.scandir(SSH_HOST_KEYS) as scan:
        places += [
            Path(e.path) for e in scan if e.name.startswith("ssh_host_") and e.name.endswith("_key")
        ]
    if os.geteuid() == 0:
        places += _only_root_may_read()
    return places


@functools.cache
def _only_root_may_read() -> tuple[Path, ...]:
    """What of :data:`ROOT_ONLY_SCANNED` only root may read: files owned by root that others
    may not read, directories owned by root that others may not enter. Run as root, a
    contained process is uid 0 without capabilities, yet the owner of all of them (old
    password hashes, database passwords), which no user's run could read; at most
    :data:`ROOT_ONLY_ENTRIES` entries are looked at, once a process (30 ms for 4,000
    entries: every contained run would pay it)."""
    found: list[Path] = []
    seen = 0
    for top in ROOT_ONLY_SCANNED:
        for here, dirs, files in os.walk(top):
            kept = []
            for name in [*dirs, *files]:
                seen += 1
                path = os.path.join(here, name)
                try:
                    info = os.lstat(path)
                except OSError:
                    continue
                if info.st_uid != 0 or stat.S_ISLNK(info.st_mode):
                    continue
                if stat.S_ISDIR(info.st_mode):
                    if info.st_mode & stat.S_IXOTH:
                        kept.append(name)
                    else:
                        found.append(Path(path))
                elif not info.st_mode & stat.S_IROTH:
                    found.append(Path(path))
            dirs[:] = [d for d in dirs if d in kept]
            if seen > ROOT_ONLY_ENTRIES:
                return tuple(found)
    return tuple(found)


# --- the plan -------------------------------------------------------------------------------------


@dataclass
class Plan:
    """The mounts a command gets, and what to look at after it ran."""

    mounts: list[str]
    #: protected paths and stores found before the command, with their (device, inode)
    before: dict[Path, tuple[int, int]]
    watch_git: list[Path]
    complete: bool
    dropped_binds: int = 0
    #: the private home directory
    home: Path = Path("/")
    #: what was bound back read-only beyond the system and the workspace
    reads: list[Path] = field(default_factory=list)


def _real(path: Path) -> Path | None:
    try:
        return Path(os.path.realpath(path, strict=True))
    except OSError:
        return None


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _top_entries(directory: Path) -> list[Path]:
    with contextlib.suppress(OSError), os.scandir(directory) as scan:
        return [Path(entry.path) for entry in scan]
    return []


def _cover(path: Path) -> list[str]:
    """Options that hide ``path``: an empty tmpfs over a directory (made read-only later, by
    :func:`_seal`), ``/dev/null`` over anything else."""
    if _is_dir(path):
        return ["--tmpfs", str(path)]
    return ["--ro-bind", "/dev/null", str(path)]


def _seal(path: Path) -> list[str]:
    return ["--remount-ro", str(path)] if _is_dir(path) else []


def _system_mounts() -> list[str]:
    """The system directories, read-only; a symlink (merged /usr) stays a symlink."""
    mounts: list[str] = []
    for name in SYSTEM_DIRS:
        with contextlib.suppress(OSError):
            if os.path.islink(name):
                mounts += ["--symlink", os.readlink(name), name]
            elif os.path.isdir(name):
                mounts += ["--ro-bind", name, name]
    return mounts


#: the parts of the fresh ``/proc`` that change the whole machine, bound read-only over it: run
#: as root, a contained process is uid 0 without capabilities, and uid 0 may write the 0644
#: files of ``/proc/sys`` (``kernel.core_pattern`` names a program the kernel runs as root,
#: outside every namespace, at the next crash anywhere on the host)
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger")


def base_mounts() -> list[str]:
    """What every contained run sees of the host, and the fresh ``/dev`` and ``/proc`` (after
    the binds, or a bound ``/dev`` would cover the fresh one), with :data:`PROC_READ_ONLY`
    read-only."""
    mounts = [*_system_mounts(), "--dev", "/dev", "--proc", "/proc"]
    for path in PROC_READ_ONLY:
        if os.path.lexists(path):
            mounts += ["--ro-bind", path, path]
    return mounts


def plan_mounts(
    policy: SandboxPolicy,
    workspace: Path,
    *,
    needs: Sequence[Path] = (),
    without_approval: bool = False,
) -> Plan:
    """The bwrap options after :func:`base_mounts` (see the module docstring) for a run in
    ``workspace`` whose programs need ``needs`` (bound read-only). A run ``without_approval``
    (a check) sees only what programs use of /etc and /opt (:mod:`rune.tools.check_etc`,
    :mod:`rune.tools.check_opt`), and an empty /usr/local/etc."""
    home = policy.home or Path(os.path.expanduser("~"))
    # What a check sees of /etc and /opt: first, or their empty directories would cover a
    # home that lies in them.
    views: dict[str, Callable[[], tuple[list[str], list[Path]]]] = {
        "/etc": lambda: etc_mounts(home, whole),
        "/opt": opt_mounts,
    }
    narrowed = [d for d in views if without_approval and _is_dir(Path(d))]
    whole = [d for d in SYSTEM_DIRS if d not in narrowed]
    system = [Path(d) for d in whole]
    mounts: list[str] = []
    copies: list[Path] = []  # kept links bound as what they lead to
    for directory in narrowed:
        made, kept = views[directory]()
        mounts += made
        copies += [path for path in kept if os.path.islink(path)]
        system += kept
    mounts += ["--size", str(SHM_SIZE), "--tmpfs", "/dev/shm"]
    mounts += [
        "--size",
        str(TMP_SIZE),
        "--tmpfs",
        SCRATCH_DIR,
        "--symlink",
        SCRATCH_DIR,
        "/var/tmp",
    ]
    if home != Path("/"):
        mounts += ["--size", str(HOME_SIZE), "--tmpfs", str(home)]
    bound: dict[Path, None] = dict.fromkeys(system)
    reads: list[Path] = []
    for path in [*needs, *policy.contained_reads, *policy.allow_credentials]:
        # A symlink among the needs is a hop on the way to an interpreter: its target is bound
        # at its own path (rune.tools.runtime_dirs.runtime_dirs); anything else by its real path.
        real = path if os.path.islink(path) and path in needs else _real(path)
        if real is not None and real != Path("/") and not within(real, list(bound)):
            bound[real] = None
            reads.append(real)
            mounts += ["--ro-bind", str(real), str(real)]
    bound[workspace] = None
    prefix_secrets = [
        entry
        for need in needs
        if _is_dir(need)
        for entry in _top_entries(need)
        if entry.name in PREFIX_SECRETS or policy.credential_hit(entry, reading=True) is not None
    ]

    writable = within(workspace, policy.write_roots) and workspace.is_dir()
    # Secrets in the workspace are hidden whether or not it is writable: a read-only check
    # (run_python) runs without approval and must not read what read_file refuses.
    scan = scan_workspace(workspace, policy) if workspace.is_dir() else Scan()
    top_git = workspace / ".git"
    if writable:
        mounts += ["--bind", str(workspace), str(workspace)]
        if _is_dir(top_git):
            # A mount point cannot be renamed or removed: the command cannot move the
            # repository's .git aside (with its read-only parts) and put a new one in its place.
            mounts += ["--bind", str(top_git), str(top_git)]
    elif workspace.is_dir():
        mounts += ["--ro-bind", str(workspace), str(workspace)]
    binds: dict[Path, None] = {}
    for path in scan.protected:
        real = _real(path) if os.path.lexists(path) else None
        if real is not None and within(real, (workspace,)):
            binds[real] = None
    dropped = max(0, len(binds) - MAX_BINDS)
    for path in list(binds)[:MAX_BINDS]:
        mounts += ["--ro-bind", str(path), str(path)]
    watch_git = (
        [top_git / n for n in TOP_GIT_REMOVED_IF_CREATED if not os.path.lexists(top_git / n)]
        if writable and _is_dir(top_git)
        else []
    )

    masks: dict[Path, None] = {}
    unneeded = [Path(p) for p in EMPTY_FOR_CHECKS] if without_approval else []
    for path in [
        *unneeded,
        *scan.secrets,
        *prefix_secrets,
        *policy.protected_paths,
        *_system_secrets(),
    ]:
        # in a link bound as what it leads to, a secret is where the run sees it
        real = path if within(path, copies) and os.path.lexists(path) else _real(path)
        # Only inside what is bound (elsewhere it does not exist), and never over the
        # workspace or a directory that holds it: that would hide it.
        if (
            real is not None
            and within(real, list(bound))
            and not within(workspace, (real,))
            and not within(real, list(masks))
        ):
            masks[real] = None
    for path in masks:
        mounts += _cover(path)
    for path in policy.allow_credentials:
        real = _real(path)
        if real is not None and within(real, list(masks)) and real not in masks:
            mounts += ["--ro-bind", str(real), str(real)]
    for path in masks:
        mounts += _seal(path)
    for directory in narrowed:
        mounts += ["--remount-ro", directory]
    mounts += ["--remount-ro", "/dev"]
    before = _identities([*scan.protected, *scan.secrets])
    return Plan(mounts, before, watch_git, scan.complete, dropped, home, reads)


def _identities(paths: list[Path]) -> dict[Path, tuple[int, int]]:
    found: dict[Path, tuple[int, int]] = {}
    for path in paths:
        with contextlib.suppress(OSError):
            info = os.lstat(path)
            found[path] = (info.st_dev, info.st_ino)
    return found


def _remove_created(workspace: Path, path: Path) -> None:
    """Remove ``path`` (one of :data:`TOP_GIT_REMOVED_IF_CREATED` in the top ``.git``) through
    directory handles opened without following symlinks: a command may have swapped ``.git``
    or a directory in it for a symlink, and this must never delete anything elsewhere."""
    parts = path.relative_to(workspace).parts
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(workspace, flags)
    try:
        for part in parts[:-1]:
            inner = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = inner
        name = parts[-1]
        if stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
            shutil.rmtree(name, dir_fd=fd)
        else:
            os.unlink(name, dir_fd=fd)
    finally:
        os.close(fd)


def after_run(plan: Plan, policy: SandboxPolicy, workspace: Path) -> list[str]:
    """What the command did that the mounts could not stop: warnings for the model and user."""
    notes: list[str] = []
    removed = []
    for path in plan.watch_git:
        if not os.path.lexists(path):
            continue
        try:
            _remove_created(workspace, path)
            removed.append(str(path))
        except OSError:
            notes.append(f"WARNING: the command created {path}, which git obeys; remove it.")
    if removed:
        notes.append(
            f"WARNING: the command created git control file(s) {', '.join(removed)}; Rune "
            "removed them, since git would obey them outside the sandbox."
        )
    if within(workspace, policy.write_roots) and workspace.is_dir():
        now = scan_workspace(workspace, policy)
        gone = {Path(r) for r in removed}
        created = sorted(
            str(path)
            for path, identity in _identities([*now.protected, *now.secrets]).items()
            if plan.before.get(path) != identity and path not in gone
        )
        if created:
            notes.append(
                f"WARNING: the command created (or replaced) protected path(s) "
                f"{', '.join(created)}. The sandbox cannot stop a command creating a protected "
                "file that did not exist; review them."
            )
    if not plan.complete:
        notes.append(
            f"WARNING: the workspace has more than {SCAN_DIRS} directories (or took over "
            f"{SCAN_SECONDS:g} s to scan); protected names deeper than the scan reached were "
            "not made read-only."
        )
    if plan.dropped_binds:
        notes.append(
            f"WARNING: {plan.dropped_binds} protected path(s) beyond the first {MAX_BINDS} were "
            "not made read-only."
        )
    return notes


def summary(seccomp: bool, complete: bool = True) -> str:
    """How a contained command runs, in the few words an approval has room for; what it sees
    and its limits, in full, are in docs/sandbox.md ("Commands")."""
    said = (
        "Contained (bubblewrap): no network, writes only in the workspace, home and secrets hidden"
    )
    if not seccomp:
        said += "; NO seccomp filter here: UNIX sockets it can see are reachable"
    if not complete:
        said += (
            f"; WARNING: past {SCAN_DIRS} directories, credential stores and protected names "
            "are NOT hidden or read-only"
        )
    return said
