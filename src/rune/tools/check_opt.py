"""What a check (a run nobody approved: ``run_python``, the project's tests, a repair's trials)
sees of ``/opt``: an empty directory, with back in it only the toolkits the dynamic linker
loads libraries from.

``/opt`` holds whatever was installed outside the package manager: toolkits, but also local
package mirrors, licence files and an application's own configuration and keys. An approved
command sees all of it. A check sees, read-only:

- each entry of ``/opt`` that ld.so's configuration (``/etc/ld.so.conf`` and what it
  includes) names a library directory in (CUDA, ROCm, oneAPI), whole, since such libraries
  read data beside them; files the user can change (the workspace, home) name nothing here;
- each link at the top of ``/opt`` as a link (``/opt/rocm -> rocm-6.0.0``): a name, not
  content, so that a kept toolkit or an interpreter reached through one is found;
- an interpreter installed under ``/opt``, and its environment, as every run's interpreter is
  (:mod:`rune.tools.runtime_dirs`).

A command installed there (a JDK, Chrome) is not: a test that starts one runs as an approved
command.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
from pathlib import Path

from rune.tools.runtime_dirs import regular_head

__all__ = ["OPT", "opt_entries", "opt_mounts"]

OPT = Path("/opt")
LD_SO_CONF = Path("/etc/ld.so.conf")
#: how deep ``include`` lines of ld.so's configuration are followed, how many files are read,
#: and how much of each
_MAX_INCLUDE_DEPTH = 4
_MAX_CONF_FILES = 256
_MAX_CONF_BYTES = 64 * 1024


def opt_mounts() -> tuple[list[str], list[Path]]:
    """The bwrap options that make a check's ``/opt`` (after the host's is bound whole), and
    the entries bound back."""
    links, kept = _entries()
    mounts = ["--tmpfs", str(OPT)]
    for link, target in links:
        mounts += ["--symlink", target, str(link)]
    for entry in kept:
        mounts += ["--ro-bind", str(entry), str(entry)]
    return mounts, list(kept)


@functools.cache
def _entries() -> tuple[tuple[tuple[Path, str], ...], tuple[Path, ...]]:
    # once a process: a check runs again after every change, and ld.so's configuration
    # changes when a toolkit is installed, which a running agent need not follow
    return opt_entries(OPT, library_dirs(LD_SO_CONF))


def opt_entries(
    opt: Path, libraries: list[str]
) -> tuple[tuple[tuple[Path, str], ...], tuple[Path, ...]]:
    """The links at the top of ``opt`` with their targets, and its directories that the
    absolute directories ``libraries`` lie in (reached directly or through such a link)."""
    links: list[tuple[Path, str]] = []
    with contextlib.suppress(OSError), os.scandir(opt) as scan:
        for entry in sorted(scan, key=lambda e: e.name):
            with contextlib.suppress(OSError):
                if entry.is_symlink():
                    links.append((Path(entry.path), _link_target(opt, os.readlink(entry.path))))
    kept: dict[Path, None] = {}
    for directory in libraries:
        for path in (os.path.normpath(directory), _resolved(directory)):
            top = _top(opt, path)
            if top is not None and not top.is_symlink() and top.is_dir():
                kept[top] = None
    return tuple(links), tuple(kept)


def _link_target(opt: Path, target: str) -> str:
    """A link's ``target``, relative when it lies in ``opt``: bubblewrap builds the mounts
    under another root, where an absolute link leads out of the new ``/opt``, and a file
    bound through the link (an interpreter's ``/opt/python3/bin/python3``) has no parent."""
    path = os.path.normpath(target)
    if os.path.isabs(path) and Path(path).is_relative_to(opt) and Path(path) != opt:
        return os.path.relpath(path, opt)
    return target


def _resolved(path: str) -> str:
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return path


def _top(opt: Path, path: str) -> Path | None:
    """The entry of ``opt`` that ``path`` lies in."""
    try:
        parts = Path(path).relative_to(opt).parts
    except ValueError:
        return None
    return opt / parts[0] if parts else None


def library_dirs(conf: Path) -> list[str]:
    """The absolute directories ld.so's configuration ``conf`` names, its ``include`` lines
    followed (each file once, regular files only, the first :data:`_MAX_CONF_BYTES` of each),
    as glibc's ``ldconfig`` reads it: one directory a line."""
    dirs: list[str] = []
    read: set[str] = set()

    def parse(file: str, depth: int) -> None:
        real = _resolved(file)
        if depth > _MAX_INCLUDE_DEPTH or real in read or len(read) >= _MAX_CONF_FILES:
            return
        read.add(real)
        head = regular_head(Path(real), _MAX_CONF_BYTES)
        for raw in (head or b"").decode("utf-8", "replace").splitlines():
            line = raw.split("#", 1)[0].strip()
            words = line.split()
            if words[:1] == ["include"]:
                for pattern in words[1:]:
                    if not os.path.isabs(pattern):
                        pattern = os.path.join(os.path.dirname(file), pattern)
                    with contextlib.suppress(OSError, ValueError):
                        for included in sorted(glob.glob(pattern)):
                            parse(included, depth + 1)
            elif line.startswith("/") and "\0" not in line:
                dirs.append(line)

    parse(str(conf), 0)
    return dirs
