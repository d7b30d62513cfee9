"""What a command contained by bubblewrap can see, reach and change.

The mount namespace is built in this order (bwrap applies its options in sequence):

1. the whole host read-only (``--ro-bind / /``), a fresh ``/dev`` and ``/proc``, a new PID,
   IPC and network namespace (no network, not even the host's loopback; abstract UNIX
   sockets are per network namespace, so the host's are out of reach too);
2. a private ``TMPDIR`` (a tmpfs of :data:`TMP_SIZE`) and a capped ``/dev/shm``;
3. the host's socket directories hidden under empty read-only tmpfs: ``/run`` (and so
   ``/var/run``), ``$XDG_RUNTIME_DIR``, ``/tmp/.X11-unix`` and the other X11/ICE dirs, tmux's
   and ssh-agent's directories in ``/tmp``; socket files at the top of ``/tmp`` are masked;
4. the workspace, writable;
5. inside it, found at any depth (:func:`scan_workspace`): every ``.git`` below the top
   read-only as a whole (nested repositories, vendored or submodule checkouts); in the top
   ``.git`` only what a commit needs stays writable (``objects``, ``refs``, ``logs``, the
   index and the other files at its top), while ``config``, ``config.worktree``,
   ``commondir``, ``hooks``, ``info``, ``objects/info``, ``modules`` and ``worktrees`` are
   read-only; every other protected name (rc files, IDE and agent config) read-only;
6. masked: every credential store of the read-deny list (:data:`rune.tools.names.CREDENTIALS`)
   in the home directory and in the workspace, Rune's own configuration and data, and the
   host's password hashes and SSH host keys: a directory becomes an empty read-only tmpfs, a
   file ``/dev/null``; stores the user let Rune read (``sandbox.allow_credentials``) are bound
   back read-only;
7. a seccomp filter (:mod:`rune.tools.seccomp`) refuses ``socket(AF_UNIX, ...)`` (so no
   ``connect`` to a host socket wherever its file lies) and io_uring.

The environment is scrubbed (:func:`scrubbed_environment`). A protected name that does not
exist cannot be masked without creating it on the real disk, so the workspace is scanned again
after the command: new protected paths are reported, and git control entries created in the
top ``.git`` (``commondir``, ``config.worktree``, ``hooks``, ``modules``, ``worktrees``,
``objects/info/alternates``) are removed, since git would obey them outside the sandbox.
"""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rune.tools.names import CREDENTIALS, RUNE_OWN
from rune.tools.sandbox import SandboxPolicy, within

#: the size of the private TMPDIR
TMP_SIZE = 512 * 1024 * 1024
#: the size of /dev/shm
SHM_SIZE = 64 * 1024 * 1024
#: the private, writable scratch directory of a contained command (its TMPDIR)
SCRATCH_DIR = "/var/tmp"
#: how much of the workspace the scan may look at, and for how long
SCAN_DIRS = 50_000
SCAN_SECONDS = 3.0
#: how far below home credential stores are looked for (~/.local/share/fish/fish_history)
HOME_SCAN_DEPTH = 4
HOME_SCAN_DIRS = 3000
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

#: host files that hold secrets whatever the user's home
SYSTEM_SECRETS = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-")
SSH_HOST_KEYS = "/etc/ssh"

# --- the environment ---------------------------------------------------------------------------

#: a variable whose name holds one of these words is removed
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
#: these are removed too: they point at host services (agents, buses, displays, daemons)
HOST_SERVICE_VARIABLES = frozenset(
    {
        "SSH_AUTH_SOCK",
        "SSH_AGENT_PID",
        "GPG_AGENT_INFO",
        "DBUS_SESSION_BUS_ADDRESS",
        "DBUS_SYSTEM_BUS_ADDRESS",
        "DOCKER_HOST",
        "CONTAINER_HOST",
        "XDG_RUNTIME_DIR",
        "DISPLAY",
        "WAYLAND_DISPLAY",
        "XAUTHORITY",
        "SESSION_MANAGER",
        "PULSE_SERVER",
        "KRB5CCNAME",
        "TMUX",
        "TMUX_PANE",
        "STY",
        "KITTY_LISTEN_ON",
        "NVIM",
        "NVIM_LISTEN_ADDRESS",
        "MYSQL_PWD",
        "SSH_ASKPASS",
        "GIT_ASKPASS",
        "SUDO_ASKPASS",
        "VSCODE_IPC_HOOK_CLI",
        "VSCODE_GIT_IPC_HANDLE",
    }
)
#: ... as are these families: Rune's own settings, cloud SDKs, proxies (there is no network)
SECRET_PREFIXES = ("RUNE_", "AWS_", "AZURE_", "GOOGLE_", "GCLOUD_", "CLOUDSDK_", "VAULT_")
SECRET_SUFFIXES = ("_PROXY",)
#: kept although a word above is in their name: they hold no secret
ENVIRONMENT_ALLOW_LIST = frozenset(
    {
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_AUTHOR_DATE",
        "TOKENIZERS_PARALLELISM",
        "KEYTIMEOUT",
    }
)


def scrubbed_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without what a contained command must not see (the names are matched
    upper-cased)."""
    kept: dict[str, str] = {}
    for name, value in environ.items():
        upper = name.upper()
        if upper not in ENVIRONMENT_ALLOW_LIST and (
            upper in HOST_SERVICE_VARIABLES
            or any(word in upper for word in SECRET_WORDS)
            or upper.startswith(SECRET_PREFIXES)
            or upper.endswith(SECRET_SUFFIXES)
        ):
            continue
        kept[name] = value
    kept["TMPDIR"] = SCRATCH_DIR
    return kept


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
        for entry in entries:
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


#: not walked when looking for credential stores in home: big, and none of them holds one
HOME_SCAN_SKIPPED = frozenset(
    {".cache", "node_modules", ".git", ".venv", "venv", ".npm", ".cargo/registry"}
)


def home_secrets(home: Path, workspace: Path, policy: SandboxPolicy) -> Scan:
    """Credential stores and Rune's own files below ``home`` (the workspace has its own scan,
    :func:`scan_workspace`): every store the lists name at a fixed place, then a breadth-first
    walk down to :data:`HOME_SCAN_DEPTH` levels for names that may lie anywhere (histories)."""
    found = Scan()
    candidates = [home / name for name in CREDENTIALS.names]
    for seq in (*CREDENTIALS.sequences, *RUNE_OWN.sequences):
        # (an entry ending in "*" names every channel: .config/google-chrome-beta)
        candidates += sorted(home.glob(seq)) if seq.endswith("*") else [home / seq]
    seen: set[Path] = set()

    def take(path: Path) -> None:
        if path in seen or path == workspace:
            return
        seen.add(path)
        if policy.credential_hit(path, reading=True) is not None:
            found.secrets.append(path)
        else:
            found.allowed.append(path)

    for path in candidates:
        if os.path.lexists(path):
            take(path)
    queue: collections.deque[tuple[Path, int]] = collections.deque([(home, 1)])
    visited = 0
    while queue and visited < HOME_SCAN_DIRS:
        here, depth = queue.popleft()
        visited += 1
        try:
            with os.scandir(here) as scan:
                entries = list(scan)
        except OSError:
            continue
        for entry in entries:
            path = Path(entry.path)
            if path == workspace or path in seen:
                continue
            relative = path.relative_to(home)
            if CREDENTIALS.match(relative) is not None or RUNE_OWN.match(relative) is not None:
                take(path)
                continue
            if entry.name in HOME_SCAN_SKIPPED or relative.as_posix() in HOME_SCAN_SKIPPED:
                continue
            with contextlib.suppress(OSError):
                if depth < HOME_SCAN_DEPTH and entry.is_dir(follow_symlinks=False):
                    queue.append((path, depth + 1))
    found.complete = not queue
    return found


def _host_socket_places(workspace: Path) -> list[Path]:
    """Directories (and /tmp socket files) through which host services are reached."""
    uid = os.getuid()
    places = [Path("/run"), Path("/var/run")]
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        places.append(Path(runtime))
    tmp = Path("/tmp")
    places += [tmp / name for name in (".X11-unix", ".ICE-unix", ".XIM-unix", ".font-unix")]
    places.append(tmp / f"tmux-{uid}")
    agent = os.environ.get("SSH_AUTH_SOCK")
    if agent:
        places.append(Path(agent))
    with contextlib.suppress(OSError), os.scandir(tmp) as scan:
        for entry in scan:
            with contextlib.suppress(OSError):
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISSOCK(mode) or (entry.name.startswith("ssh-") and entry.is_dir()):
                    places.append(Path(entry.path))
    return places


def _system_secrets() -> list[Path]:
    places = [Path(p) for p in SYSTEM_SECRETS]
    with contextlib.suppress(OSError), os.scandir(SSH_HOST_KEYS) as scan:
        places += [
            Path(e.path) for e in scan if e.name.startswith("ssh_host_") and e.name.endswith("_key")
        ]
    return places


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


def _cover(path: Path) -> list[str]:
    """Options that hide ``path``: an empty tmpfs over a directory (made read-only later, by
    :func:`_seal`), ``/dev/null`` over anything else."""
    if _is_dir(path):
        return ["--tmpfs", str(path)]
    return ["--ro-bind", "/dev/null", str(path)]


def _seal(path: Path) -> list[str]:
    return ["--remount-ro", str(path)] if _is_dir(path) else []


def plan_mounts(policy: SandboxPolicy, workspace: Path) -> Plan:
    """The bwrap options after the base mounts (see the module docstring), for ``workspace``."""
    mounts = ["--size", str(SHM_SIZE), "--tmpfs", "/dev/shm"]
    mounts += ["--size", str(TMP_SIZE), "--tmpfs", SCRATCH_DIR]

    def usable(path: Path) -> Path | None:
        real = _real(path)
        # Never over the workspace, or a directory that holds it: that would hide it.
        if real is None or real == Path("/") or within(workspace, (real,)):
            return None
        return real

    hidden: dict[Path, None] = {}
    for place in _host_socket_places(workspace):
        real = usable(place)
        if real is not None and not within(real, list(hidden)):
            hidden[real] = None
    for place in hidden:
        mounts += _cover(place) + _seal(place)

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

    home = policy.home or Path(os.path.expanduser("~"))
    at_home = home_secrets(home, workspace, policy)
    masks: dict[Path, None] = {}
    for path in [*at_home.secrets, *scan.secrets, *policy.protected_paths, *_system_secrets()]:
        real = usable(path)
        if real is not None and not within(real, [*hidden, *masks]):
            masks[real] = None
    for path in masks:
        mounts += _cover(path)
    for path in policy.allow_credentials:
        real = _real(path)
        if real is not None and within(real, list(masks)) and real not in masks:
            mounts += ["--ro-bind", str(real), str(real)]
    for path in masks:
        mounts += _seal(path)
    mounts += ["--remount-ro", "/dev"]
    before = _identities([*scan.protected, *scan.secrets])
    return Plan(mounts, before, watch_git, scan.complete, dropped)


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


def describe(seccomp: bool) -> str:
    """The one line an approval says about a contained command."""
    sockets = (
        "no UNIX socket to host services (seccomp)"
        if seccomp
        else "host service sockets hidden (no seccomp here, so only their directories)"
    )
    return (
        f"Contained (bubblewrap): no network, {sockets}; credential stores, ~/.ssh, ~/.gnupg and "
        "Rune's files hidden, secret-looking environment variables removed; writes only in the "
        f"workspace and a {TMP_SIZE // (1024 * 1024)} MiB TMPDIR; every .git read-only except "
        "what a commit needs, protected files read-only."
    )
