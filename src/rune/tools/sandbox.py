"""The sandbox policy and path validation: the only place that decides where Rune may write.

``validate_write_path`` is the single choke point for every write (prepare, apply and
re-validation of write_file, edit_file, format_code). Containment is decided on resolved
paths by components, never by string prefix; the blocklist is checked on both the lexical
and the resolved path, case-folded.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rune.errors import SandboxDenied

# Names that are dangerous to write at any depth, existing or not (sandbox-security.md P5).
# Compared case-folded against each path component / the final name.
PROTECTED_FILE_NAMES: frozenset[str] = frozenset(
    {
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".bash_logout",
        ".bash_aliases",
        ".profile",
        ".zshrc",
        ".zprofile",
        ".zshenv",
        ".zlogin",
        ".zlogout",
        ".cshrc",
        ".tcshrc",
        ".kshrc",
        ".inputrc",
        ".gitconfig",
        ".gitmodules",
        ".git-credentials",
        ".ripgreprc",
        ".npmrc",
        ".pypirc",
        ".netrc",
        ".mcp.json",
        ".envrc",
        ".pam_environment",
        ".xprofile",
        ".xsession",
        ".xinitrc",
        ".vimrc",
        ".exrc",
        ".nvimrc",
        "sitecustomize.py",
        "usercustomize.py",
        # A ".git" file redirects git to another directory, hooks included.
        ".git",
    }
)
PROTECTED_SUFFIXES: tuple[str, ...] = (".pth", ".code-workspace")
# Directories whose contents are protected wherever they appear.
PROTECTED_DIR_NAMES: frozenset[str] = frozenset(
    {
        ".vscode",
        ".idea",
        ".cursor",
        ".claude",
        ".codex",
        ".rune",
        ".continue",
        ".aider",
        ".ssh",
        ".gnupg",
        ".ipython",
    }
)
# Inside a git directory (including submodules' .git/modules/<name>/), these run or steer git.
GIT_CONTROL_NAMES: frozenset[str] = frozenset({"hooks", "config", "info"})
# Multi-component tails protected at any depth: (.git, hooks) covers .git/hooks/anything.
PROTECTED_SEQUENCES: tuple[tuple[str, ...], ...] = (
    (".config", "autostart"),
    (".config", "systemd"),
    (".config", "fish"),
    (".config", "git"),
    (".config", "nvim"),
    (".config", "rune"),
    (".config", "environment.d"),
    (".local", "bin"),
    (".docker", "config.json"),
    (".kube", "config"),
    (".aws", "config"),
    (".aws", "credentials"),
)

# Control, format (bidi overrides, zero-width), line/paragraph separators and lone surrogates:
# characters that make a path display differently from what the kernel sees.
_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})

# Kernel views with magic links (/proc/self/root, /proc/self/fd/N) and devices: blocked in every
# policy, whatever its roots, because resolving them says little about what opening them does.
ALWAYS_BLOCKED: tuple[Path, ...] = (Path("/proc"), Path("/sys"), Path("/dev"))


def _canonical_root(path: str | os.PathLike[str]) -> Path:
    return Path(os.path.realpath(os.path.expanduser(os.fspath(path))))


def _rune_own_dirs() -> tuple[Path, ...]:
    from rune.paths import own_dirs

    return own_dirs()


def _lexical_and_resolved(paths: Iterable[str | os.PathLike[str]]) -> tuple[Path, ...]:
    lexical = [Path(os.path.normpath(os.path.expanduser(os.fspath(p)))) for p in paths]
    resolved = [_canonical_root(p) for p in paths]
    return tuple(dict.fromkeys([*lexical, *resolved]))


@dataclass(frozen=True)
class SandboxPolicy:
    """Where reads and writes may go. Roots are canonicalized once, at construction.

    ``blocked`` paths are neither read nor written (``/proc``, ``/sys`` and ``/dev`` always
    are); ``protected_paths`` (Rune's own config and data by default) and, when
    ``protected_names`` is on, the names in this module are never written, at any depth,
    existing or not.
    """

    read_roots: Sequence[Path]
    write_roots: Sequence[Path]
    blocked: Sequence[Path] = ()
    protected_names: bool = True
    protected_paths: Sequence[Path] = field(default_factory=_rune_own_dirs)
    _blocked_folded: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _protected_folded: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "read_roots", tuple(_canonical_root(p) for p in self.read_roots))
        object.__setattr__(self, "write_roots", tuple(_canonical_root(p) for p in self.write_roots))
        blocked = _lexical_and_resolved([*ALWAYS_BLOCKED, *self.blocked])
        object.__setattr__(self, "blocked", blocked)
        object.__setattr__(self, "_blocked_folded", tuple(_fold(str(p)) for p in blocked))
        protected = _lexical_and_resolved(self.protected_paths)
        object.__setattr__(self, "protected_paths", protected)
        object.__setattr__(self, "_protected_folded", tuple(_fold(str(p)) for p in protected))

    @classmethod
    def default(cls, home: str | os.PathLike[str] | None = None) -> SandboxPolicy:
        """The design document's policy: write home (+ /mnt/workdrive), read also /tmp."""
        home_dir = Path(home) if home is not None else Path.home()
        workdrive = Path("/mnt/workdrive")
        extra = [workdrive] if workdrive.is_dir() else []
        return cls(
            read_roots=[home_dir, *extra, Path("/tmp")],
            write_roots=[home_dir, *extra],
            blocked=[
                Path("/etc"),
                Path("/var"),
                home_dir / ".ssh",
                home_dir / ".gnupg",
            ],
        )

    @classmethod
    def workspace_only(cls, workspace: str | os.PathLike[str]) -> SandboxPolicy:
        """Read and write one directory, nothing else."""
        root = Path(workspace)
        return cls(read_roots=[root], write_roots=[root], blocked=[])

    def describe_write_roots(self) -> list[str]:
        return [str(p) for p in self.write_roots]

    def describe_read_roots(self) -> list[str]:
        return [str(p) for p in self.read_roots]

    def blocked_hit(self, *candidates: str | os.PathLike[str]) -> str | None:
        """The blocked location any candidate path lies in (case-folded), or None."""
        return _prefix_hit(candidates, self.blocked, self._blocked_folded)

    def protected_hit(self, *candidates: str | os.PathLike[str]) -> str | None:
        """Why writing any candidate path is refused as protected, or None."""
        hit = _prefix_hit(candidates, self.protected_paths, self._protected_folded)
        if hit is not None:
            return f"{hit} holds Rune's own configuration or sessions"
        if not self.protected_names:
            return None
        for candidate in candidates:
            reason = protected_reason(Path(candidate))
            if reason is not None:
                return reason
        return None


def _fold(text: str) -> str:
    return unicodedata.normalize("NFC", text).casefold()


def _check_characters(raw: str | bytes) -> None:
    if not isinstance(raw, str):
        raise SandboxDenied("Access denied: a path must be text.")
    if not raw:
        raise SandboxDenied("Access denied: empty path.")
    for ch in raw:
        if unicodedata.category(ch) in _FORBIDDEN_CATEGORIES:
            raise SandboxDenied(
                f"Access denied: the path {raw!r} contains the control or invisible character "
                f"U+{ord(ch):04X}; use a plain path."
            )


def _absolute(raw: str, workspace: str | os.PathLike[str] | None) -> str:
    if raw == "~" or raw.startswith("~/"):
        raw = os.path.expanduser(raw)
    if not os.path.isabs(raw):
        base = os.fspath(workspace) if workspace is not None else os.getcwd()
        raw = os.path.join(os.path.realpath(base), raw)
    # POSIX keeps a leading "//" through normpath; the kernel treats it as "/".
    while raw.startswith("//"):
        raw = raw[1:]
    return raw


def resolve_strict(absolute: str) -> Path:
    """Resolve every symlink; only a missing tail is tolerated, any other error denies."""
    head, tail = absolute, []
    while True:
        try:
            real = os.path.realpath(head, strict=True)
            break
        except FileNotFoundError:
            parent, name = os.path.split(head)
            if parent == head:
                raise SandboxDenied(f"Access denied: cannot resolve {absolute}.") from None
            if os.path.lexists(head):
                # A dangling symlink: following it would write wherever it points.
                raise SandboxDenied(
                    f"Access denied: {absolute} goes through a dangling symlink ({head})."
                ) from None
            tail.append(name)
            head = parent
        except OSError as err:
            raise SandboxDenied(
                f"Access denied: cannot resolve {absolute}: {err.strerror or err}."
            ) from None
    tail.reverse()
    if any(part in ("..", ".") for part in tail):
        raise SandboxDenied(
            f"Access denied: {absolute} walks '..' through a directory that does not exist."
        )
    return Path(real, *tail)


def within(path: Path, roots: Iterable[Path]) -> bool:
    """Containment by path components (never by string prefix): ``path`` is a root or below."""
    return any(path.is_relative_to(root) for root in roots)


def _prefix_hit(
    candidates: Iterable[str | os.PathLike[str]], paths: Sequence[Path], folded: Sequence[str]
) -> str | None:
    """The first of ``paths`` that contains a candidate, compared by components, case-folded."""
    for candidate in candidates:
        parts = Path(_fold(os.fspath(candidate))).parts
        for path, path_folded in zip(paths, folded, strict=True):
            prefix = Path(path_folded).parts
            if parts[: len(prefix)] == prefix:
                return str(path)
    return None


def protected_reason(path: Path) -> str | None:
    """Why ``path`` is a protected name (at any depth, existing or not), or None."""
    parts = [_fold(p) for p in path.parts]
    name = parts[-1] if parts else ""
    if name in PROTECTED_FILE_NAMES:
        return f"{path.name} is a shell, git or interpreter start-up file"
    if name.endswith(PROTECTED_SUFFIXES):
        return f"{path.name} is loaded automatically by Python or an IDE"
    for part in parts[:-1]:
        if part in PROTECTED_DIR_NAMES:
            return f"{part} holds IDE or agent configuration"
    if name in PROTECTED_DIR_NAMES:
        return f"{name} holds IDE or agent configuration"
    if ".git" in parts[:-1]:
        inside = parts[parts.index(".git") + 1 :]
        hit = next((part for part in inside if part in GIT_CONTROL_NAMES), None)
        if hit is not None:
            return f".git/…/{hit} is executed or trusted by git"
    for seq in PROTECTED_SEQUENCES:
        n = len(seq)
        for i in range(len(parts) - n + 1):
            if tuple(parts[i : i + n]) == seq:
                return f"{'/'.join(seq)} is executed or trusted by other programs"
    return None


def _validate(
    path: str | os.PathLike[str],
    policy: SandboxPolicy | None,
    workspace: str | os.PathLike[str] | None,
    *,
    write: bool,
) -> Path:
    policy = policy if policy is not None else SandboxPolicy.default()
    raw = os.fspath(path)
    _check_characters(raw)
    absolute = _absolute(raw, workspace)
    lexical = os.path.normpath(absolute)
    resolved = resolve_strict(absolute)
    roots = policy.write_roots if write else policy.read_roots
    label = "write" if write else "read"
    if not within(resolved, roots):
        verb = "Write" if write else "Read"
        raise SandboxDenied(
            f"Access denied: {lexical} is outside allowed {label} directories: "
            f"{[str(r) for r in roots]}. {verb} inside one of those directories instead."
        )
    hit = policy.blocked_hit(lexical, resolved)
    if hit is not None:
        raise SandboxDenied(
            f"Access denied: {lexical} is inside the blocked location {hit}; Rune never "
            f"{'writes' if write else 'reads'} there. Allowed {label} directories: "
            f"{[str(r) for r in roots]}."
        )
    reason = policy.protected_hit(lexical, resolved) if write else None
    if reason is not None:
        raise SandboxDenied(
            f"Access denied: {lexical} is protected ({reason}); Rune never writes it. "
            "Ask the user to change it by hand if it must change."
        )
    return resolved


def validate_write_path(
    path: str | os.PathLike[str],
    policy: SandboxPolicy | None = None,
    workspace: str | os.PathLike[str] | None = None,
) -> Path:
    """Return the resolved path if ``policy`` allows writing it, else raise SandboxDenied."""
    return _validate(path, policy, workspace, write=True)


def validate_read_path(
    path: str | os.PathLike[str],
    policy: SandboxPolicy | None = None,
    workspace: str | os.PathLike[str] | None = None,
) -> Path:
    """Return the resolved path if ``policy`` allows reading it, else raise SandboxDenied."""
    return _validate(path, policy, workspace, write=False)
