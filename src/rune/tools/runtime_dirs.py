"""Which directories a program needs to run inside a contained run's layout.

A contained run sees no home directory and binds back only what it needs
(:mod:`rune.tools.containment`). A Python interpreter needs more than its binary: its
standard library, its shared library, and, for a virtual environment, the environment and
the installation it was made from, which often lie under home (pyenv, conda, uv, a venv next
to the project). They are found statically, never by running the interpreter outside the
sandbox: a project's ``.venv`` is the model's to change (a ``.pth`` file runs code at start).

Deny by default here too: of an environment (a virtual environment, ``pyvenv.cfg``, or a
conda environment, ``conda-meta``) only the parts its interpreter and packages use
(:data:`ENVIRONMENT_PARTS`: ``bin``, ``lib``, ``pyvenv.cfg``, ...), never what else its
directory holds (a venv made in place in a project, ``python -m venv .``, sits among that
project's files), and never home, a directory holding it, ``~/.local`` or another directory
under home that other programs share (:data:`SHARED_UNDER_HOME`). Of any other installation
(a pyenv or uv Python, a ``--prefix`` install into a shared directory) only the Python parts
are bound: ``lib/pythonX.Y``, ``lib/libpython*``, ``include/pythonX.Y`` and the interpreter
binary itself.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

#: directories under home that are shared by many programs: never bound as an environment
SHARED_UNDER_HOME = (".local", ".local/share", ".local/lib", ".config", ".cache", "bin")
#: what of an environment its interpreter and packages use: the programs and entry points, the
#: packages (``lib``, and ``lib64``, a link to it where the platform's libraries go there), C
#: headers, packages' data files, the venv's configuration, conda's record of what it holds and
#: its certificates; the rest of the directory is not bound
ENVIRONMENT_PARTS = ("bin", "lib", "lib64", "include", "share", "pyvenv.cfg", "conda-meta", "ssl")
#: the longest chain of symlinks followed from an executable
MAX_LINKS = 16


def _real(path: Path) -> Path | None:
    try:
        return Path(os.path.realpath(path, strict=True))
    except OSError:
        return None


def _link_chain(executable: Path) -> list[Path]:
    """``executable`` and every path its symlinks pass through, each absolute
    (``.venv/bin/python -> python3 -> /opt/py/bin/python3.11``)."""
    chain = [executable]
    current = executable
    for _ in range(MAX_LINKS):
        try:
            target = os.readlink(current)
        except OSError:
            break
        current = Path(os.path.normpath(current.parent / target))
        chain.append(current)
    return chain


def _pyvenv_home(venv: Path) -> Path | None:
    """The ``home =`` directory of ``venv/pyvenv.cfg`` (the base interpreter's ``bin``)."""
    try:
        text = (venv / "pyvenv.cfg").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines()[:50]:
        key, sep, value = line.partition("=")
        if sep and key.strip().lower() == "home" and value.strip():
            return Path(value.strip())
    return None


def _is_installation(prefix: Path) -> bool:
    """Whether ``prefix`` holds a Python installation (a venv, or a standard library)."""
    if (prefix / "pyvenv.cfg").is_file():
        return True
    try:
        return any((lib / "os.py").is_file() for lib in (prefix / "lib").glob("python3*"))
    except OSError:
        return False


def dedicated(path: Path, home: Path) -> bool:
    """Whether ``path`` may be bound as an environment (:func:`_environment_parts`): not
    ``/``, not home or a directory above it, not one of the directories under home that other
    programs share (:data:`SHARED_UNDER_HOME`)."""
    if path == Path("/") or home.is_relative_to(path):
        return False
    return not any(path == home / shared for shared in SHARED_UNDER_HOME)


def _environment(prefix: Path, home: Path) -> bool:
    """Whether ``prefix`` is an environment of its own, bound in its environment's parts."""
    own = (prefix / "pyvenv.cfg").is_file() or (prefix / "conda-meta").is_dir()
    return own and dedicated(prefix, home)


def _environment_parts(prefix: Path) -> tuple[list[Path], list[Path]]:
    """The :data:`ENVIRONMENT_PARTS` of the environment ``prefix`` (a real path) that are there:
    the entries themselves, and the links among them that lead to another place in it
    (``lib64 -> lib``), bound at their own path. A link that leads out of the environment is
    not followed: the project's ``.venv`` is the model's, and it may point anywhere."""
    entries: list[Path] = []
    links: list[Path] = []
    for name in ENVIRONMENT_PARTS:
        part = prefix / name
        if not os.path.islink(part):
            if os.path.exists(part):
                entries.append(part)
            continue
        target = _real(part)
        if target is not None and target != prefix and target.is_relative_to(prefix):
            links.append(part)
    return entries, links


def _python_parts(prefix: Path) -> list[Path]:
    """The Python-specific parts of an installation that is not an environment of its own."""
    try:
        found = [
            *(prefix / "lib").glob("python3*"),
            *(prefix / "lib").glob("libpython3*"),
            *(prefix / "include").glob("python3*"),
        ]
    except OSError:
        return []
    return sorted(p for p in found if os.path.lexists(p))


def regular_head(path: Path, size: int) -> bytes | None:
    """The first ``size`` bytes of ``path`` when it is a regular file, else None: opened
    without blocking, since a FIFO left as a project's ``.venv/bin/python`` would block
    Rune for good."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, size) if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _is_program(path: Path) -> bool:
    """Whether ``path`` is an executable program (an ELF file), which alone is bound outside
    an installation: the file an executable names may be anything the user can read."""
    return regular_head(path, 4) == b"\x7fELF" and os.access(path, os.X_OK)


def _shebang(path: Path) -> Path | None:
    """The interpreter a script names with an absolute ``#!`` path (``#!/usr/bin/env X``
    names ``env``, which is a system program)."""
    line = (regular_head(path, 4096) or b"").split(b"\n", 1)[0]
    if not line.startswith(b"#!"):
        return None
    words = line[2:].decode("utf-8", "replace").split()
    return Path(words[0]) if words and words[0].startswith("/") else None


def runtime_dirs(
    executable: Path, home: Path, *, script: bool = True, any_file: bool = False
) -> list[Path]:
    """What ``executable`` (a path, as the run will name it) needs bound to start: the virtual
    environment any hop of its symlinks lies in and that environment's base installation, and
    the installation its real file belongs to, with the real file itself. Of an environment
    only its :data:`ENVIRONMENT_PARTS`; of another installation only its Python parts.
    Existing paths, real (resolved), except links that come as named, for a bind of their
    target at their own path: an environment's links inside it (``lib64 -> lib``), and last
    the symlinks on the way to the real file that lie outside all of those (``bin/python3`` ->
    ``python3.11`` in a pyenv version, of which only the real binary is bound). A real file
    outside those installations is bound only when it is a program (:func:`_is_program`), or
    with ``any_file`` (a file the user's own configuration names); else nothing more is (the
    run then cannot start it). For a ``script`` (an entry point in a venv's ``bin``) the same
    for the interpreter its ``#!`` names, which must be a program."""
    found: list[Path] = []
    inner_links: list[Path] = []
    prefixes: list[Path] = []
    chain = _link_chain(executable)
    for hop in chain:
        venv = hop.parent.parent
        if (venv / "pyvenv.cfg").is_file():
            prefixes.append(venv)
            base = _pyvenv_home(venv)
            if base is not None:
                prefixes.append(base.parent)
    real = _real(executable)
    if real is not None:
        prefixes.append(real.parent.parent)
    for prefix in prefixes:
        real_prefix = _real(prefix)
        if real_prefix is None or not _is_installation(real_prefix):
            continue
        if _environment(real_prefix, home):
            entries, links = _environment_parts(real_prefix)
            found += entries
            inner_links += links
        else:
            found += _python_parts(real_prefix)
    found = [*_unique_real(found), *inner_links]
    if real is not None and not any(real.is_relative_to(d) for d in found):
        if not (any_file or _is_program(real)):
            # The project's .venv is the model's: its python may name any file (a link, a
            # "#!" line), and binding that file would show it to the run.
            return found
        found.append(real)
    hops = [hop for hop in chain[:-1] if not any(hop.is_relative_to(d) for d in found)]
    found += [hop for hop in hops if _real(hop) == real]
    interpreter = _shebang(real) if script and real is not None else None
    if interpreter is not None:
        found += [p for p in runtime_dirs(interpreter, home, script=False) if p not in found]
    return found


def _unique_real(paths: Iterable[Path]) -> list[Path]:
    seen: dict[Path, None] = {}
    for path in paths:
        real = _real(path)
        if real is not None:
            seen.setdefault(real, None)
    return list(seen)
