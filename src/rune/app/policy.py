"""Policy as pure functions of the settings: what ``--yes`` approves, the sandbox the ``rune``
command runs under, and how both read in ``rune doctor`` and ``rune config``."""

from __future__ import annotations

import os
from pathlib import Path

from rune.grants import FILE_EDIT_TOOLS
from rune.messages import PendingApproval
from rune.settings.config import ApprovalMode, Settings
from rune.tools.sandbox import SandboxPolicy


def auto_approves(mode: ApprovalMode, pending: PendingApproval) -> bool:
    """Whether the approval mode answers ``pending`` without asking a human.

    A sensitive change (outside the workspace, or a file that steers an agent or runs code)
    is always asked for, whatever the mode.
    """
    if pending.sensitive is not None:
        return False
    if mode == "all":
        return True
    return mode == "edits" and pending.name in FILE_EDIT_TOOLS


def sandbox_policy(settings: Settings) -> SandboxPolicy:
    """The policy the ``rune`` command uses: write only the workspace (plus the directories
    the user's own config or flags add); read the workspace, those directories and Python's
    standard library and site-packages freely, and the rest of home, /tmp (and /mnt/workdrive)
    once the user approves (``sandbox.workspace_only``: nothing outside is asked for).
    ``SandboxPolicy.default()``, which reads and writes all of home, stays the library's
    default."""
    workspace = Path(os.path.realpath(settings.workspace))
    extra_write = list(settings.sandbox_write_roots)
    extra_read = list(settings.sandbox_read_roots)
    allowed = list(settings.sandbox_allow_credentials)
    home = Path.home()
    contained = list(settings.sandbox_contained_reads)
    if settings.sandbox_workspace_only:
        return SandboxPolicy(
            read_roots=[workspace, *extra_write, *extra_read],
            write_roots=[workspace, *extra_write],
            home=home,
            allow_credentials=allowed,
            contained_reads=contained,
        )
    base = SandboxPolicy.default()
    return SandboxPolicy(
        read_roots=[workspace, *extra_write, *extra_read, *python_library_dirs(home)],
        write_roots=[workspace, *extra_write],
        blocked=base.blocked,
        ask_read_roots=base.read_roots,
        home=base.home,
        allow_credentials=allowed,
        contained_reads=contained,
    )


def python_library_dirs(home: Path) -> list[Path]:
    """Where Rune's interpreter keeps its standard library and site-packages (the user's
    too): a coding model reads them to see how a library works. One that would hold the whole
    home (an odd prefix) is left out."""
    import site
    import sysconfig

    names = ("stdlib", "platstdlib", "purelib", "platlib")
    found = [sysconfig.get_path(name) for name in names]
    found.append(site.getusersitepackages())
    home = home.resolve()
    dirs = [
        path
        for path in dict.fromkeys(Path(os.path.realpath(p)) for p in found if p)
        if path.is_dir() and not home.is_relative_to(path)
    ]
    # One inside another (a venv's site-packages in its lib) is said once.
    return [p for p in dirs if not any(p != o and p.is_relative_to(o) for o in dirs)]


def policy_report(settings: Settings) -> list[tuple[str, str]]:
    """The effective sandbox policy beyond its roots, as (what, details) lines."""
    from rune.tools.names import CREDENTIALS, HOME_PROTECTED, PROTECTED, RUNE_OWN, SENSITIVE

    policy = sandbox_policy(settings)
    allowed = ", ".join(str(p) for p in settings.sandbox_allow_credentials) or "none"
    yes = {
        "ask": "every change and command asks",
        "edits": "--yes: file changes inside the workspace that touch nothing protected or "
        "sensitive are approved; everything else asks",
        "all": "--yes --yes: file changes and commands are approved, except sensitive changes",
    }[settings.approval]
    asked = ", ".join(policy.describe_ask_read_roots()) or "nothing (only the roots above)"
    return [
        (
            "read after approval",
            f"{asked}: once per directory tree for the session, asked even under --yes; "
            "refused when Rune is not at a terminal",
        ),
        ("never read or written", ", ".join(str(p) for p in policy.blocked)),
        (
            "credentials (never read or written)",
            f"{', '.join(CREDENTIALS.entries())}; Rune's own config, key and sessions "
            f"({', '.join(RUNE_OWN.entries())} and where RUNE_DATA_DIR points); "
            f"readable by your config: {allowed}",
        ),
        (
            "protected (never written)",
            "; ".join(
                [f"{n.what}: {', '.join(n.entries())}" for n in PROTECTED]
                + [f"in home: {', '.join(HOME_PROTECTED)}"]
            ),
        ),
        (
            "sensitive (always asks, even under --yes)",
            "; ".join(f"{n.what}: {', '.join(n.entries())}" for n in SENSITIVE)
            + "; any change outside the workspace",
        ),
        ("approval", yes),
    ]


def workspace_unwritable(workspace: Path) -> str | None:
    """Why no change can be written in ``workspace`` (a read-only mount, no write permission),
    or None: said before the first turn, since every change the model makes would fail."""
    try:
        read_only = bool(os.statvfs(workspace).f_flag & os.ST_RDONLY)
    except OSError:
        return None
    if read_only:
        why = "is on a read-only file system"
    elif not os.access(workspace, os.W_OK):
        why = "is not writable by you"
    else:
        return None
    return (
        f"the workspace {workspace} {why}: Rune can read it and run checks, but no change "
        "can be written"
    )


def commands_contained() -> tuple[bool, str]:
    """Whether a shell command would run inside bubblewrap here, and what was found."""
    from rune.tools.commands import containment_report

    return containment_report()


def contained_environment_report() -> str:
    """The environment allow-list of contained runs, in one line."""
    from rune.tools.containment import environment_report

    return environment_report()
