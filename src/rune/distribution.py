"""How Rune is installed: its distribution name, the install hint, and the version it reports.

The import package and the command are ``rune``; the distribution is ``rune-agent``, because
``rune`` on PyPI is another project (a secrets manager). Every hint Rune prints names the
distribution through :func:`extra_install_hint`, so it is spelled in one place.

Standard library only, and nothing is spawned at import: ``rune --help`` imports this module's
package, and only ``rune --version`` asks git for the commit.
"""

from __future__ import annotations

from pathlib import Path

from rune import __version__

DISTRIBUTION = "rune-agent"
#: what each extra installs, when the installed metadata cannot say (pyproject.toml declares it)
_EXTRA_PACKAGES = {"acp": "agent-client-protocol", "mcp": "mcp", "embedded": "xllamacpp"}
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


def _extra_requirements(extra: str) -> list[str]:
    """The requirements ``extra`` adds, as the installed metadata declares them."""
    from importlib import metadata

    try:
        declared = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        declared = []
    marker = f"extra == '{extra}'"
    found = [r.split(";")[0].strip() for r in declared if r.replace('"', "'").endswith(marker)]
    return found or [_EXTRA_PACKAGES.get(extra, f"{DISTRIBUTION}[{extra}]")]


def installer(prefix: Path | None = None) -> str:
    """How the running Rune was installed: ``pipx``, ``uv`` (``uv tool install``) or ``pip``
    (a virtualenv or the system's), read from the environment it runs in."""
    import sys

    where = Path(sys.prefix if prefix is None else prefix)
    parts = where.parts
    if (where / "pipx_metadata.json").is_file() or "pipx" in parts:
        return "pipx"
    if (where / "uv-receipt.toml").is_file() or ("uv" in parts and "tools" in parts):
        return "uv"
    return "pip"


def extra_install_hint(extra: str, prefix: Path | None = None) -> str:
    """One line that adds the optional ``extra`` (``embedded``, ``acp``, ``mcp``) to this
    Rune, the way that works for how it was installed: pipx and uv tool keep their own
    environments, where ``pip install`` does not reach; a clone's (or any) virtualenv takes
    ``pip install``. Never a PyPI install of Rune itself when Rune came from elsewhere."""
    import shlex
    import sys

    packages = " ".join(shlex.quote(r) for r in _extra_requirements(extra))
    where = Path(sys.prefix if prefix is None else prefix)
    match installer(where):
        case "pipx":
            return f"pipx inject {DISTRIBUTION} {packages}"
        case "uv":
            source = shlex.quote(_uv_source(where))
            return f"uv tool install --force --with {packages} {source}"
        case _:
            python = where / "bin" / "python" if prefix is not None else Path(sys.executable)
            return f"{shlex.quote(str(python))} -m pip install {packages}"


def embedded_install_hint(prefix: Path | None = None) -> str:
    """How to add the in-process llama.cpp backend (the ``embedded`` extra) to this Rune."""
    return extra_install_hint("embedded", prefix)


def _uv_source(prefix: Path) -> str:
    """What ``uv tool install`` installed Rune from, as its receipt recorded it: a clone's
    directory, a wheel's path, or the distribution's name (PyPI)."""
    import tomllib

    try:
        receipt = tomllib.loads((prefix / "uv-receipt.toml").read_text(encoding="utf-8"))
        requirements = receipt["tool"]["requirements"]
    except (OSError, ValueError, KeyError, TypeError):
        return DISTRIBUTION
    for requirement in requirements if isinstance(requirements, list) else ():
        if isinstance(requirement, dict) and requirement.get("name") == DISTRIBUTION:
            for key in ("directory", "editable", "path", "git", "url"):
                if isinstance(requirement.get(key), str):
                    return str(requirement[key])
    return DISTRIBUTION


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
