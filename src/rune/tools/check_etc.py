"""What a check (a run nobody approved: ``run_python``, the project's tests, a repair's trials)
sees of ``/etc``: an empty directory, with back in it only what programs read there and none
of it private.

An approved command sees all of ``/etc`` but the secrets :mod:`rune.tools.containment` masks
by name; a name list always misses the next tool's store, so a check gets an allow-list
instead (:data:`CHECK_ETC`). The accounts database and ``hosts`` are made for it
(:func:`made_files`): ``pwd.getpwuid(os.getuid())``, ``getpass.getuser()`` without ``USER``
and ``localhost`` work, and the host's other accounts and host names are not there.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = ["CHECK_ETC", "etc_mounts"]

#: the entries of /etc a check sees, as :meth:`pathlib.Path.glob` patterns: the dynamic
#: linker's cache and configuration, the time zone, Debian's command links and its Python's
#: ``sitecustomize``, the resolver's and services' tables, MIME types, the distribution's
#: name, certificates and TLS configuration (their private keys stay masked), fonts, terminfo
CHECK_ETC = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "timezone",
    "alternatives",
    "python3",
    "python3.[0-9]*",
    "host.conf",
    "nsswitch.conf",
    "gai.conf",
    "protocols",
    "services",
    "mime.types",
    "os-release",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "pki/tls",
    "pki/ca-trust",
    "crypto-policies",
    "fonts",
    "terminfo",
)
# localhost is IPv4 only: a test's server on 127.0.0.1 and its client of "localhost" agree
_HOSTS = "127.0.0.1\tlocalhost\n::1\tip6-localhost ip6-loopback\n"
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")


def etc_mounts(home: Path, whole: Sequence[str]) -> tuple[list[str], list[Path]]:
    """The bwrap options that make a check's ``/etc`` (after the host's is bound whole), and
    the kept entries bound as directories or files (a secret inside one is still masked, at
    its path here when the entry is a link bound as what it leads to). A kept link into
    ``whole`` (the directories bound whole) stays a link."""
    mounts = ["--tmpfs", "/etc"]
    bound: list[Path] = []
    for entry in _entries(CHECK_ETC):
        with contextlib.suppress(OSError):
            if os.path.islink(entry) and _points_into(entry, whole):
                mounts += ["--symlink", os.readlink(entry), str(entry)]
                continue
            # NixOS: every entry links to /etc/static/..., which is not there any more
            mounts += ["--ro-bind", str(entry), str(entry)]
            bound.append(entry)
    for name, path in made_files(home).items():
        mounts += ["--ro-bind", str(path), f"/etc/{name}"]
    return mounts, bound


def made_files(home: Path) -> dict[str, Path]:
    """``passwd``, ``group`` and ``hosts`` for a check: root, the user Rune runs as (its home
    the private one) and ``nobody``; localhost only."""
    uid, gid = os.getuid(), os.getgid()
    user, group = _account_names(uid, gid)
    users = ["root:x:0:0:root:" + (str(home) if uid == 0 else "/root") + ":/bin/sh"]
    groups = ["root:x:0:"]
    if uid != 0:
        users.append(f"{user}:x:{uid}:{gid}:{user}:{home}:/bin/sh")
    if gid != 0:
        groups.append(f"{group}:x:{gid}:")
    users.append("nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin")
    groups.append("nogroup:x:65534:")
    contents = {
        "passwd": "\n".join(users) + "\n",
        "group": "\n".join(groups) + "\n",
        "hosts": _HOSTS,
    }
    return {name: _written(name, text) for name, text in contents.items()}


def _entries(patterns: Sequence[str]) -> list[Path]:
    found: dict[Path, None] = {}
    for pattern in patterns:
        with contextlib.suppress(OSError, ValueError):
            found.update(dict.fromkeys(sorted(Path("/etc").glob(pattern))))
    return list(found)


def _points_into(link: Path, whole: Sequence[str]) -> bool:
    real = os.path.realpath(link)
    return any(real == top or real.startswith(top + "/") for top in whole)


def _account_names(uid: int, gid: int) -> tuple[str, str]:
    """The host's names for ``uid`` and ``gid`` when they are plain, else ``user``."""
    user = group = "user"
    with contextlib.suppress(ImportError, KeyError, OSError):
        import pwd

        user = pwd.getpwuid(uid).pw_name
    with contextlib.suppress(ImportError, KeyError, OSError):
        import grp

        group = grp.getgrgid(gid).gr_name
    plain = _PLAIN_NAME.fullmatch
    return (user if plain(user) else "user"), (group if plain(group) else "user")


_scratch: Path | None = None


def _written(name: str, text: str) -> Path:
    """A read-only copy of ``text`` in a private directory of this process, made once (and
    again if a cleaner of the host's /tmp removed it)."""
    global _scratch
    if _scratch is None or not _scratch.is_dir():
        _scratch = Path(tempfile.mkdtemp(prefix="rune-etc-"))
        atexit.register(shutil.rmtree, _scratch, ignore_errors=True)
    digest = hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
    path = _scratch / f"{name}-{digest}"
    if not path.is_file():
        fd, part = tempfile.mkstemp(dir=_scratch)
        with os.fdopen(fd, "w") as file:
            file.write(text)
        os.chmod(part, 0o444)
        os.replace(part, path)
    return path
