"""Path spellings that do not mean what they show, refused before anything is resolved.

A model (or a document it read) may write a path the way another system spells it: a URI, a
Windows path, a directory-looking file name. Taken literally on POSIX each becomes an odd file
name in the workspace (``file:/etc/passwd``, ``..\\..\\etc\\passwd``); a path thousands of
components deep becomes a tree that ordinary tools crash on. Each refusal says what to send.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from rune.errors import SandboxDenied

MAX_PATH_BYTES = 4096
MAX_COMPONENTS = 64
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:/")
_DRIVE = re.compile(r"^[A-Za-z]:")
_SHOWN_CHARS = 80


def _shown(raw: str) -> str:
    return repr(raw if len(raw) <= _SHOWN_CHARS else raw[: _SHOWN_CHARS - 1] + "…")


def check_path_syntax(raw: str, *, file_target: bool) -> None:
    """Raise SandboxDenied when ``raw`` is not a plain POSIX path Rune will take literally.

    ``file_target``: the path must name a file, so a trailing ``/`` is refused.
    """
    size = len(raw.encode("utf-8", "surrogateescape"))
    if size > MAX_PATH_BYTES:
        raise SandboxDenied(
            f"Access denied: the path {_shown(raw)} is {size} bytes long; Rune accepts paths "
            f"up to {MAX_PATH_BYTES} bytes. Send a shorter path."
        )
    if _DRIVE.match(raw):
        raise SandboxDenied(
            f"Access denied: {_shown(raw)} is a Windows drive path; Rune works with POSIX "
            "paths. Send an absolute path starting with '/' or a path relative to the workspace."
        )
    if _URI.match(raw):
        parts = urlsplit(raw)
        plain = unquote(parts.path) if parts.scheme.lower() == "file" and parts.path else None
        instead = f"the path itself, e.g. {plain!r}" if plain else "a file path, not a URL"
        raise SandboxDenied(
            f"Access denied: {_shown(raw)} is a URI ({parts.scheme}:), not a file path. "
            f"Send {instead}."
        )
    if "\\" in raw:
        raise SandboxDenied(
            f"Access denied: {_shown(raw)} contains a backslash; Rune works with POSIX paths. "
            f"Send it with '/' between directories, e.g. {_shown(raw.replace(chr(92), '/'))}."
        )
    components = [p for p in raw.split("/") if p not in ("", ".")]
    if len(components) > MAX_COMPONENTS:
        raise SandboxDenied(
            f"Access denied: the path {_shown(raw)} has {len(components)} components; Rune "
            f"accepts at most {MAX_COMPONENTS} (trees that deep break ordinary tools). Send a "
            "shallower path."
        )
    if file_target and raw.endswith("/") and raw.strip("/"):
        raise SandboxDenied(
            f"Access denied: {_shown(raw)} ends with '/', which names a directory, but this "
            f"needs a file. Send it without the trailing slash: {_shown(raw.rstrip('/'))}."
        )
