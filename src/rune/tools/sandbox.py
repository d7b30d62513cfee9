"""The sandbox policy and path validation: the only place that decides where Rune may go.

``validate_write_path`` is the single choke point for every write (prepare, apply and
re-validation of write_file, edit_file, format_code); ``validate_read_path`` is the one for
every read (read_file, list_dir, search, format_code's configuration, project instructions).
Containment is decided on resolved paths by components, never by string prefix; blocked
locations, credential stores and protected names are checked on both the lexical and the
resolved path, case-folded. Odd spellings (URIs, backslashes, drive letters, huge or deep
paths) are refused first (:mod:`rune.tools.pathsyntax`).
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from rune.errors import SandboxDenied
from rune.tools.names import (
    CREDENTIALS,
    HOME_PROTECTED,
    PROTECTED,
    RUNE_OWN,
    SENSITIVE,
    first_match,
    fold,
)
from rune.tools.pathsyntax import check_path_syntax

# Names that are dangerous at any depth, existing or not (the lists live in rune.tools.names).
_NEVER_WRITTEN = (*PROTECTED, CREDENTIALS, RUNE_OWN)
PROTECTED_NAMES: frozenset[str] = frozenset().union(*(n.names for n in _NEVER_WRITTEN))
#: the name earlier versions used for :data:`PROTECTED_NAMES`
PROTECTED_FILE_NAMES = PROTECTED_NAMES
PROTECTED_SEQUENCES: tuple[tuple[str, ...], ...] = tuple(
    tuple(seq.split("/")) for names in _NEVER_WRITTEN for seq in names.sequences
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
    are). Credential stores (:data:`rune.tools.names.CREDENTIALS`) and Rune's own config and
    data (``protected_paths``) are neither read nor written in every policy, except the stores
    the user lists in ``allow_credentials``, which may be read (a store or a path inside one;
    never written). When ``protected_names`` is on, protected names are never written, at any
    depth, existing or not, and neither is anything under ``home`` in
    :data:`rune.tools.names.HOME_PROTECTED` (``~/bin``).

    ``ask_read_roots`` may be read once the user approves: a read there (that no other rule
    refuses) raises :class:`ReadNeedsApproval`, and :meth:`granting` gives the policy that
    reads the approved tree too.
    """

    read_roots: Sequence[Path]
    write_roots: Sequence[Path]
    blocked: Sequence[Path] = ()
    ask_read_roots: Sequence[Path] = ()
    protected_names: bool = True
    protected_paths: Sequence[Path] = field(default_factory=_rune_own_dirs)
    home: Path | None = None
    allow_credentials: Sequence[Path] = ()
    #: what a contained run (a command, a check, an MCP server) may read besides the system,
    #: the workspace and its interpreter (``sandbox.contained_reads``; rune.tools.containment)
    contained_reads: Sequence[Path] = ()
    _blocked_folded: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _protected_folded: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _home_protected: tuple[Path, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "read_roots", tuple(_canonical_root(p) for p in self.read_roots))
        object.__setattr__(self, "write_roots", tuple(_canonical_root(p) for p in self.write_roots))
        asked = tuple(_canonical_root(p) for p in self.ask_read_roots)
        object.__setattr__(self, "ask_read_roots", asked)
        blocked = _lexical_and_resolved([*ALWAYS_BLOCKED, *self.blocked])
        object.__setattr__(self, "blocked", blocked)
        object.__setattr__(self, "_blocked_folded", tuple(_fold(str(p)) for p in blocked))
        protected = _lexical_and_resolved(self.protected_paths)
        object.__setattr__(self, "protected_paths", protected)
        object.__setattr__(self, "_protected_folded", tuple(_fold(str(p)) for p in protected))
        home = None if self.home is None else _canonical_root(self.home)
        object.__setattr__(self, "home", home)
        at_home = [home / name for name in HOME_PROTECTED] if home is not None else []
        object.__setattr__(self, "_home_protected", _lexical_and_resolved(at_home))
        allowed = _lexical_and_resolved(self.allow_credentials)
        object.__setattr__(self, "allow_credentials", allowed)
        object.__setattr__(self, "contained_reads", tuple(Path(p) for p in self.contained_reads))

    @classmethod
    def default(cls, home: str | os.PathLike[str] | None = None) -> SandboxPolicy:
        """Rune's original policy (docs/sandbox.md): write home (+ /mnt/workdrive), read also
        /tmp."""
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
            home=home_dir,
        )

    @classmethod
    def workspace_only(cls, workspace: str | os.PathLike[str]) -> SandboxPolicy:
        """Read and write one directory, nothing else."""
        root = Path(workspace)
        return cls(read_roots=[root], write_roots=[root], blocked=[])

    def granting(self, tree: str | os.PathLike[str]) -> SandboxPolicy:
        """This policy, reading ``tree`` too (the user approved it): it must lie in an
        ``ask_read_roots`` root. Every other rule still holds inside it (credential stores
        and blocked locations stay refused)."""
        granted = _canonical_root(tree)
        if not within(granted, self.ask_read_roots):
            raise SandboxDenied(f"Access denied: {granted} is not a place Rune may ask to read.")
        if within(granted, self.read_roots):
            return self
        return replace(self, read_roots=(*self.read_roots, granted))

    def describe_write_roots(self) -> list[str]:
        return [str(p) for p in self.write_roots]

    def describe_read_roots(self) -> list[str]:
        return [str(p) for p in self.read_roots]

    def describe_ask_read_roots(self) -> list[str]:
        return [str(p) for p in self.ask_read_roots]

    def blocked_hit(self, *candidates: str | os.PathLike[str]) -> str | None:
        """The blocked location any candidate path lies in (case-folded), or None."""
        return _prefix_hit(candidates, self.blocked, self._blocked_folded)

    def credential_hit(
        self, *candidates: str | os.PathLike[str], reading: bool = True
    ) -> str | None:
        """Why any candidate path is refused as a credential store (or Rune's own), or None:
        a clause such as ``holds credentials (/home/u/.aws)``.

        When ``reading``, ``allow_credentials`` lifts the refusal for a candidate inside an
        allowed path that is the store itself or inside it (allowing ``~`` does not open
        ``~/.aws``). Rune's own configuration, key and sessions are never lifted.
        """
        for candidate in candidates:
            path = Path(candidate)
            own: str | Path | None = _prefix_hit(
                [path], self.protected_paths, self._protected_folded
            )
            own = own if own is not None else RUNE_OWN.match(path)
            if own is not None:
                return f"{RUNE_OWN.what} ({own})"
            store = CREDENTIALS.match(path)
            if store is not None and not (reading and self._allowed(path, store)):
                return f"{CREDENTIALS.what} ({store})"
        return None

    def _allowed(self, path: Path, store: Path) -> bool:
        folded_path = Path(_fold(str(path)))
        folded_store = Path(_fold(str(store)))
        for allowed in self.allow_credentials:
            folded = Path(_fold(str(allowed)))
            if folded_path.is_relative_to(folded) and folded.is_relative_to(folded_store):
                return True
        return False

    def protected_hit(self, *candidates: str | os.PathLike[str]) -> str | None:
        """Why writing any candidate path is refused as protected, or None."""
        hit = _prefix_hit(candidates, self.protected_paths, self._protected_folded)
        if hit is not None:
            return f"{hit} holds Rune's own configuration or sessions"
        if not self.protected_names:
            return None
        folded = tuple(_fold(str(p)) for p in self._home_protected)
        hit = _prefix_hit(candidates, self._home_protected, folded)
        if hit is not None:
            return f"{hit} is on PATH in common shell profiles"
        for candidate in candidates:
            reason = protected_reason(Path(candidate))
            if reason is not None:
                return reason
        return None


_fold = fold


class ReadNeedsApproval(SandboxDenied):
    """A read outside the roots read freely, in an ``ask_read_roots`` root: allowed once the
    user approves ``tree`` (the message says so to a model that cannot be asked for it)."""

    def __init__(self, path: Path, tree: Path, free: Sequence[Path]) -> None:
        super().__init__(
            f"Access denied: {path} is outside the directories Rune reads freely "
            f"({[str(r) for r in free]}); reading it needs the user's approval."
        )
        self.path = path
        self.tree = tree


def grant_tree(resolved: Path, ask_roots: Sequence[Path]) -> Path:
    """What approving a read of ``resolved`` lets the session read: the directory read (or
    the file's directory), or the file alone, this once, when that directory is an ask root
    itself (a file in home or /tmp must not open all of it)."""
    if resolved.is_dir():
        return resolved
    return resolved if resolved.parent in ask_roots else resolved.parent


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
    found = first_match(PROTECTED, path)
    if found is None:
        return None
    names, hit = found
    return f"{hit} {names.what}"


def sensitive_reason(path: Path, workspace: Path) -> str | None:
    """Why a change to ``path`` must always be asked for, even under ``--yes``, or None.

    Outside the workspace, every change is; inside it, a sensitive name below the workspace
    (:data:`rune.tools.names.SENSITIVE`) is.
    """
    if not within(path, (workspace,)):
        return f"{path} is outside the workspace {workspace}"
    found = first_match(SENSITIVE, path.relative_to(workspace))
    if found is None:
        return None
    names, hit = found
    return f"{hit} {names.what}"


def _validate(
    path: str | os.PathLike[str],
    policy: SandboxPolicy | None,
    workspace: str | os.PathLike[str] | None,
    *,
    write: bool,
    file_target: bool,
) -> Path:
    policy = policy if policy is not None else SandboxPolicy.default()
    raw = os.fspath(path)
    _check_characters(raw)
    check_path_syntax(raw, file_target=file_target)
    absolute = _absolute(raw, workspace)
    lexical = os.path.normpath(absolute)
    resolved = resolve_strict(absolute)
    roots = policy.write_roots if write else policy.read_roots
    label = "write" if write else "read"
    inside = within(resolved, roots)
    askable = not inside and not write and within(resolved, policy.ask_read_roots)
    if not inside and not askable:
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
    # Credential stores are never written, even those the user lets Rune read.
    secret = policy.credential_hit(lexical, resolved, reading=not write)
    if secret is not None:
        raise SandboxDenied(
            f"Access denied: {lexical} {secret}; Rune never reads or writes it for the model. "
            "Work without it, or ask the user for what you need."
        )
    reason = policy.protected_hit(lexical, resolved) if write else None
    if reason is not None:
        raise SandboxDenied(
            f"Access denied: {lexical} is protected ({reason}); Rune never writes it. "
            "Ask the user to change it by hand if it must change."
        )
    if askable:
        # Asked last: what every policy refuses is refused, never put to the user.
        raise ReadNeedsApproval(resolved, grant_tree(resolved, policy.ask_read_roots), roots)
    return resolved


def validate_write_path(
    path: str | os.PathLike[str],
    policy: SandboxPolicy | None = None,
    workspace: str | os.PathLike[str] | None = None,
) -> Path:
    """Return the resolved path if ``policy`` allows writing it, else raise SandboxDenied."""
    return _validate(path, policy, workspace, write=True, file_target=True)


def validate_read_path(
    path: str | os.PathLike[str],
    policy: SandboxPolicy | None = None,
    workspace: str | os.PathLike[str] | None = None,
    *,
    file_target: bool = False,
) -> Path:
    """Return the resolved path if ``policy`` allows reading it, else raise SandboxDenied.

    ``file_target``: the path must name a file (read_file), so a trailing ``/`` is refused.
    """
    return _validate(path, policy, workspace, write=False, file_target=file_target)
