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
import re
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from rune.tools.runtime_dirs import regular_head

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
    whole tree, which a contained run does not see (:mod:`rune.tools.runtime_dirs`), so a
    pyenv shim stands for the interpreter pyenv would pick in the workspace
    (:func:`pyenv_choice`)."""
    path = project_environment(environ, workspace)["PATH"]
    for name in ("python3", "python"):
        for directory in path.split(os.pathsep):
            found = shutil.which(name, path=directory) if directory else None
            if found is None:
                continue
            if not _is_script(Path(found)):
                return found
            chosen = pyenv_choice(Path(found), environ, workspace)
            if chosen is not None:
                return str(chosen)
    return sys.executable


def _is_script(path: Path) -> bool:
    """Whether ``path`` is no program to run as it is: a script, or no regular file (a FIFO
    would block the read)."""
    head = regular_head(path, 2)
    return head is None or head == b"#!"


#: what a pyenv version name looks like (``3.11.7``, ``pypy3.10-7.3.15``, ``3.12``): never a
#: path, since a cloned repository's ``.python-version`` must not pick a program elsewhere
_VERSION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


def pyenv_choice(shim: Path, environ: Mapping[str, str], workspace: Path) -> Path | None:
    """The interpreter the pyenv shim ``shim`` would run in ``workspace``, read the way pyenv
    reads it (``PYENV_VERSION``, else the nearest ``.python-version`` up from the workspace,
    else pyenv's global ``version`` file), without running pyenv; None when the shim is no
    pyenv's or the choice is ``system`` (the next ``python3`` on ``PATH`` is that)."""
    if shim.parent.name != "shims":
        return None
    root = shim.parent.parent
    versions = root / "versions"
    if not versions.is_dir():
        return None
    for name in _pyenv_versions(environ, workspace, root):
        if name == "system":
            return None
        found = _installed(versions, name)
        if found is None:
            continue
        program = found / "bin" / shim.name
        if not _is_script(program) and program.resolve().is_relative_to(versions.resolve()):
            return program
    return None


def _pyenv_versions(environ: Mapping[str, str], workspace: Path, root: Path) -> list[str]:
    if environ.get("PYENV_VERSION"):
        return _version_names(environ["PYENV_VERSION"].replace(":", " "))
    for directory in (workspace, *workspace.parents):
        head = regular_head(directory / ".python-version", 4096)
        if head is not None:
            return _version_names(head.decode("utf-8", "replace"))
    head = regular_head(root / "version", 4096)
    return _version_names(head.decode("utf-8", "replace")) if head is not None else ["system"]


def _version_names(text: str) -> list[str]:
    words = (line.split("#", 1)[0].split() for line in text.splitlines())
    return [w for line in words for w in line if _VERSION_NAME.fullmatch(w)]


def _installed(versions: Path, name: str) -> Path | None:
    """``versions/NAME``, or for a prefix (``3.11``) the latest installed version it starts."""
    exact = versions / name
    if exact.is_dir():
        return exact
    try:
        candidates = [p for p in versions.iterdir() if p.name.startswith(f"{name}.")]
    except OSError:
        return None
    numbered = [p for p in candidates if re.fullmatch(r"[0-9.]+", p.name[len(name) + 1 :])]
    if not numbered:
        return None
    return max(numbered, key=lambda p: [int(n) for n in p.name.split(".") if n.isdigit()])


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):
        return a == b
