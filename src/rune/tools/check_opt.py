"""What a check (a run nobody approved: ``run_python``, the project's tests, a repair's trials)
sees of ``/opt``: an empty directory, with back in it only the add-on software the system
itself uses there.

``/opt`` holds whatever was installed outside the package manager: toolkits, but also local
package mirrors, licence files and an application's own configuration. An approved command sees
all of it; a check sees the entries of ``/opt`` that

- the dynamic linker is configured to load libraries from (``ld.so.conf`` and what it
  includes: CUDA, ROCm, oneAPI), whole, since their libraries read data beside them;
- a command on the system's or the user's ``PATH`` is, or leads to (``/usr/bin/chrome`` ->
  ``/etc/alternatives`` -> ``/opt/google/chrome``);

and an interpreter installed under ``/opt`` is bound back as every run's interpreter is
(:mod:`rune.tools.runtime_dirs`).
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from rune.tools.check_etc import kept_mounts

__all__ = ["OPT", "opt_entries", "opt_mounts"]

OPT = Path("/opt")
#: where the system keeps its commands
SYSTEM_BIN_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
_LD_SO_CONF = Path("/etc/ld.so.conf")
#: how deep ``include`` lines of ld.so's configuration are followed, and how many files read
_MAX_INCLUDE_DEPTH = 4
_MAX_CONF_FILES = 256
#: the commands of one directory looked at
_MAX_COMMANDS = 20_000


def opt_mounts(whole: Sequence[str]) -> tuple[list[str], list[Path]]:
    """The bwrap options that make a check's ``/opt`` (after the host's is bound whole), and
    the kept entries bound as directories (a link into ``whole``, the directories bound
    whole, stays a link)."""
    mounts, bound = kept_mounts(_kept(os.environ.get("PATH", "")), whole)
    return ["--tmpfs", str(OPT), *mounts], bound


@functools.cache
def _kept(path_variable: str) -> tuple[Path, ...]:
    # once a process for each PATH: a check is run again after every change
    bin_dirs = [*SYSTEM_BIN_DIRS, *filter(None, path_variable.split(os.pathsep))]
    return tuple(opt_entries(OPT, _library_dirs(_LD_SO_CONF), bin_dirs))


def opt_entries(opt: Path, library_dirs: Iterable[str], bin_dirs: Iterable[str]) -> list[Path]:
    """The entries of ``opt`` that ``library_dirs`` (the linker's) lie in, and that
    ``bin_dirs`` are in or hold commands leading into; each as named and, for a link, what
    it leads to in ``opt`` too."""
    wanted: dict[Path, None] = {}
    for directory in library_dirs:
        wanted.update(dict.fromkeys(_tops(opt, directory)))
    for directory in dict.fromkeys(bin_dirs):
        wanted.update(dict.fromkeys(_tops(opt, directory)))
        for command in _links(directory):
            wanted.update(dict.fromkeys(_tops(opt, command)))
    return list(wanted)


def _tops(opt: Path, path: str) -> list[Path]:
    """The entry of ``opt`` that ``path`` lies in, as written and as resolved."""
    tops: list[Path] = []
    for candidate in (os.path.normpath(path), os.path.realpath(path)):
        with contextlib.suppress(ValueError):
            parts = Path(candidate).relative_to(opt).parts
            if parts and os.path.lexists(opt / parts[0]) and opt / parts[0] not in tops:
                tops.append(opt / parts[0])
    return tops


def _links(directory: str) -> list[str]:
    """The symbolic links among the commands of ``directory``."""
    links: list[str] = []
    with contextlib.suppress(OSError), os.scandir(directory) as scan:
        for n, entry in enumerate(scan):
            if n >= _MAX_COMMANDS:
                break
            if entry.is_symlink():
                links.append(entry.path)
    return links


def _library_dirs(conf: Path) -> list[str]:
    """The directories ld.so's configuration names, ``include`` lines followed."""
    dirs: list[str] = []
    read: set[str] = set()

    def parse(file: str, depth: int) -> None:
        if depth > _MAX_INCLUDE_DEPTH or file in read or len(read) >= _MAX_CONF_FILES:
            return
        read.add(file)
        try:
            text = Path(file).read_text(errors="replace")
        except OSError:
            return
        for raw in text.splitlines():
            line = raw.split("#", 1)[0].strip()
            if line.startswith("include ") or line.startswith("include\t"):
                pattern = line.split(None, 1)[1].strip()
                if not os.path.isabs(pattern):
                    pattern = os.path.join(os.path.dirname(file), pattern)
                for included in sorted(glob.glob(pattern)):
                    parse(included, depth + 1)
            elif line and not line.startswith("hwcap"):
                # separated by blanks, commas or colons; libc5's "DIR=TYPE" is a directory too
                words = line.replace(",", " ").replace(":", " ").split()
                dirs.extend(word.split("=", 1)[0] for word in words)

    parse(str(conf), 0)
    return dirs
