"""The interpreter a model's command runs with: the project's, never Rune's.

Rune runs from a virtual environment of its own (a ``pipx``/``uv tool`` install, or a clone's
``.venv``). A user who activated it, or a launcher that put it first on ``PATH``, would make
every ``python3 -m pytest`` the model runs use Rune's interpreter and packages, not the
project's ("No module named pytest", or the wrong versions). So the environment of a command,
a check or a test run loses Rune's environment (its ``bin`` on ``PATH``, ``VIRTUAL_ENV``
naming it), and the project's own ``.venv`` comes first when the workspace has one.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

#: where a project keeps its virtual environment, relative to the workspace
PROJECT_VENV = ".venv"


def rune_environment() -> Path | None:
    """The virtual environment Rune itself runs from, if it runs from one."""
    if sys.prefix == sys.base_prefix:
        return None
    return Path(sys.prefix)


def project_venv(workspace: Path) -> Path | None:
    """The workspace's own virtual environment, when it has one with a Python in it."""
    venv = workspace / PROJECT_VENV
    return venv if (venv / "bin" / "python").is_file() else None


def project_environment(
    environ: Mapping[str, str], workspace: Path, *, own: Path | None = None
) -> dict[str, str]:
    """``environ`` with ``PATH`` and ``VIRTUAL_ENV`` set for the project: Rune's environment
    (``own``, by default :func:`rune_environment`) taken out, the project's ``.venv`` put
    first when there is one. Everything else is left as it is."""
    own = rune_environment() if own is None else own
    env = dict(environ)
    entries = [e for e in env.get("PATH", os.defpath).split(os.pathsep) if e]
    if own is not None:
        entries = [e for e in entries if not _same(Path(e), own / "bin")]
        if "VIRTUAL_ENV" in env and _same(Path(env["VIRTUAL_ENV"]), own):
            del env["VIRTUAL_ENV"]
    venv = project_venv(workspace)
    if venv is not None:
        bin_dir = str(venv / "bin")
        entries = [bin_dir, *(e for e in entries if not _same(Path(e), venv / "bin"))]
        env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = os.pathsep.join(entries)
    return env


def project_python(environ: Mapping[str, str], workspace: Path) -> str:
    """The Python a check in the workspace runs with: the project's ``.venv``, else the first
    on the project's ``PATH`` that is a program, not a script (never Rune's own, unless there
    is no other). A version manager's shim (pyenv, asdf) is a script that needs the manager's
    whole tree, which a contained run does not see (:mod:`rune.tools.runtime_dirs`)."""
    path = project_environment(environ, workspace)["PATH"]
    for name in ("python3", "python"):
        for directory in path.split(os.pathsep):
            found = shutil.which(name, path=directory) if directory else None
            if found is not None and not _is_script(Path(found)):
                return found
    return sys.executable


def _is_script(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(2) == b"#!"
    except OSError:
        return True


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):
        return a == b
