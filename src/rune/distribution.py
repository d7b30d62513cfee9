"""How Rune is installed: its distribution name, the install hint, and the version it reports.

The import package and the command are ``rune``; the distribution is ``rune-agent``, because
``rune`` on PyPI is another project (a secrets manager). Every hint Rune prints names the
distribution through :data:`EMBEDDED_INSTALL_HINT`, so it is spelled in one place.

Standard library only, and nothing is spawned at import: ``rune --help`` imports this module's
package, and only ``rune --version`` asks git for the commit.
"""

from __future__ import annotations

from pathlib import Path

from rune import __version__

DISTRIBUTION = "rune-agent"
#: how to add the in-process llama.cpp backend (the ``embedded`` extra) to a Rune installed as
#: the README's Install section says; inside a virtualenv, ``pip install`` takes the same
#: argument. Until a release is on PyPI, the clone form is the one that works.
EMBEDDED_INSTALL_HINT = (
    f"pipx install --force '{DISTRIBUTION}[embedded]'"
    " (in a clone of Rune: pipx install --force '.[embedded]')"
)
GIT_TIMEOUT_S = 5.0
#: the module the ``embedded`` extra installs (llama.cpp, in-process)
EMBEDDED_MODULE = "xllamacpp"


def embedded_installed() -> bool:
    """Whether the ``embedded`` extra is installed (located, never imported: it is heavy)."""
    import importlib.util

    try:
        return importlib.util.find_spec(EMBEDDED_MODULE) is not None
    except (ImportError, ValueError):
        return False


def checkout_root() -> Path | None:
    """The git checkout this ``rune`` package is imported from (``<root>/src/rune``), if any.

    An installed wheel lives in ``site-packages``, which is never a checkout's ``src``.
    """
    package = Path(__file__).resolve().parent
    root = package.parent.parent
    if package.parent.name != "src" or not (root / "pyproject.toml").is_file():
        return None
    return root if (root / ".git").exists() else None


def source_commit(root: Path) -> str | None:
    """``abc1234`` or ``abc1234, modified`` (tracked files differ from it); None without git."""
    import os
    import subprocess

    # A GIT_DIR or GIT_WORK_TREE inherited from a hook would point git at another repository.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}

    def git(*args: str) -> subprocess.CompletedProcess[str] | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(root), *args],
                capture_output=True,
                text=True,
                env=env,
                timeout=GIT_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done if done.returncode == 0 else None

    head = git("rev-parse", "--short", "HEAD")
    if head is None or not head.stdout.strip():
        return None
    status = git("status", "--porcelain", "--untracked-files=no")
    modified = status is not None and bool(status.stdout.strip())
    return head.stdout.strip() + (", modified" if modified else "")


def version_line() -> str:
    """What ``rune --version`` prints: ``rune 0.1.0``, plus the commit in a git checkout."""
    root = checkout_root()
    commit = source_commit(root) if root is not None else None
    return f"rune {__version__}" + (f" (commit {commit})" if commit else "")
