"""search: a regular expression over the text files below a path, run by ripgrep.

ripgrep (``rg``, from the ``ripgrep`` package Rune depends on) matches in linear time (its
regex engine has no backtracking, so ``(\\w+)+!`` cannot hang it), walks the tree without
recursion on depth, honours ``.gitignore`` (also outside a git repository), skips binary files
and never follows a symlink. Rune gives it one time budget for the whole call and kills it when
the budget is spent or enough matches came back. It runs with ``--no-config`` (no
``RIPGREP_CONFIG_PATH``, so a ``--pre`` command cannot be slipped in), never enters ``.git``,
``.hg`` or ``.svn``, and is told to skip every credential store of the read-deny list; each
file it reports is checked again against the sandbox (credential stores and blocked locations
are dropped without a word, hard-linked and special files are skipped and counted).

Without ``rg`` the tool fails with a clear error: there is no slow fallback.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rune.errors import ToolError, ToolInputError
from rune.tools.base import Args, BuiltinTool, ToolContext, object_schema, string_arg
from rune.tools.display import for_display, is_binary
from rune.tools.names import CREDENTIALS, RUNE_OWN
from rune.tools.run_limits import RIPGREP, launcher
from rune.tools.sandbox import validate_read_path, within
from rune.tools.spec import ToolSpec

MAX_MATCHES = 100
MAX_LINE_CHARS = 300
#: seconds for the whole call: ripgrep is killed when they are spent
TIME_BUDGET = 10.0
SKIPPED_DIRS = (".git", ".hg", ".svn")
#: a JSON line from rg longer than this (one enormous matching line) is not parsed
MAX_RECORD_BYTES = 1024 * 1024
_HEAD_BYTES = 4096


@dataclass
class _Tally:
    finished: bool = False
    binary: int = 0
    unreadable: int = 0
    linked: int = 0
    matches: list[str] = field(default_factory=list)
    stopped: str = ""


@dataclass(frozen=True)
class _Overlong:
    """A record of rg's too long to parse: only its head was kept."""

    head: bytes


def find_rg() -> str | None:
    """The ``rg`` Rune's own environment installed (beside the interpreter), else one on PATH."""
    for directory in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        candidate = directory / "rg"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("rg")


def _exclusions(ctx: ToolContext, top: Path) -> list[str]:
    """``--iglob`` arguments that keep rg out of version-control dirs and credential stores."""
    globs = [f"!{name}" for name in SKIPPED_DIRS]
    for names in (CREDENTIALS, RUNE_OWN):
        globs += [f"!{name}" for name in sorted(names.names)]
        globs += [f"!**/{seq}" for seq in names.sequences]
        globs += [f"!{prefix}*" for prefix in names.prefixes]
        globs += [f"!*{suffix}" for suffix in names.suffixes]
        globs += [f"!.*{suffix}" for suffix in names.dot_suffixes]
    for place in (*ctx.policy.blocked, *ctx.policy.protected_paths):
        if place != top and within(place, (top,)):
            globs.append("!/" + place.relative_to(top).as_posix())
    return [arg for glob in globs for arg in ("--iglob", glob)]


def _argv(rg: str, ctx: ToolContext, pattern: str, top: Path, glob: str | None) -> list[str]:
    argv = [
        rg,
        "--json",
        "--no-config",
        "--hidden",
        "--no-require-git",
        "--no-follow",
        "--sort",
        "path",
        "--regexp",
        pattern,
    ]
    if glob:
        argv += ["--glob", glob]
    return [*argv, *_exclusions(ctx, top), "--", str(top)]


def _records(
    proc: subprocess.Popen[bytes], deadline: float, errors: bytearray
) -> Iterator[dict[str, Any] | _Overlong]:
    """rg's JSON records as they come, until it closes its output or ``deadline`` passes
    (then TimeoutError). A record over MAX_RECORD_BYTES comes as an :class:`_Overlong`. What
    rg says on stderr is read at the same time (a full pipe would stall it) into ``errors``,
    up to 64 KiB."""
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.fileno(), proc.stderr.fileno()
    pending: list[bytes] = []
    size = 0
    overlong = False
    with selectors.DefaultSelector() as selector:
        selector.register(out, selectors.EVENT_READ)
        selector.register(err, selectors.EVENT_READ)
        open_fds = 2
        while open_fds:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            for key, _ in selector.select(timeout=min(left, 0.5)):
                data = os.read(key.fd, 1 << 16)
                if not data:
                    selector.unregister(key.fd)
                    open_fds -= 1
                elif key.fd == err:
                    errors += data[: max(0, (1 << 16) - len(errors))]
                else:
                    while data:
                        cut = data.find(b"\n")
                        piece, data = (data, b"") if cut < 0 else (data[:cut], data[cut + 1 :])
                        if not overlong:
                            pending.append(piece)
                            size += len(piece)
                            overlong = size > MAX_RECORD_BYTES
                        if cut < 0:
                            continue
                        line = b"".join(pending)
                        pending, size = [], 0
                        if overlong:
                            overlong = False
                            yield _Overlong(line[:_HEAD_BYTES])
                        elif line.strip():
                            try:
                                yield json.loads(line)
                            except ValueError:
                                continue


def _text_of(field: Any) -> str:
    """rg's ``{"text": ...}`` or ``{"bytes": base64}`` (a name or line that is not UTF-8)."""
    if not isinstance(field, dict):
        return ""
    if "text" in field:
        return str(field["text"])
    try:
        return os.fsdecode(base64.b64decode(str(field.get("bytes", ""))))
    except ValueError:
        return ""


_PATH_IN_HEAD = re.compile(rb'"path":\{"text":"((?:[^"\\]|\\.)*)"')


def _shown(ctx: ToolContext, path: Path) -> str:
    rel = path.relative_to(ctx.workspace) if path.is_relative_to(ctx.workspace) else path
    return for_display(str(rel), keep="")


class _Files:
    """Judges each file rg reports, once: may its lines be shown?"""

    def __init__(self, ctx: ToolContext, tally: _Tally) -> None:
        self.ctx = ctx
        self.tally = tally
        self.verdicts: dict[str, bool] = {}

    def allowed(self, name: str) -> bool:
        verdict = self.verdicts.get(name)
        if verdict is None:
            verdict = self.verdicts[name] = self._judge(Path(name))
        return verdict

    def _judge(self, path: Path) -> bool:
        policy = self.ctx.policy
        if policy.credential_hit(path) is not None or policy.blocked_hit(path) is not None:
            return False  # skipped without a word, as the walk always did
        if not within(path, policy.read_roots):
            return False
        try:
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
                self.tally.linked += 1
                return False
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                head = os.read(fd, 8192)
            finally:
                os.close(fd)
        except OSError:
            self.tally.unreadable += 1
            return False
        if is_binary(head):
            self.tally.binary += 1
            return False
        return True


def _take(record: dict[str, Any] | _Overlong, files: _Files, tally: _Tally) -> None:
    ctx = files.ctx
    if isinstance(record, _Overlong):
        found = _PATH_IN_HEAD.search(record.head)
        if found is None:
            return
        try:
            name = json.loads(b'"' + found.group(1) + b'"')
        except ValueError:
            return
        if files.allowed(name):
            tally.matches.append(
                f"{_shown(ctx, Path(name))}: [a matching line over "
                f"{MAX_RECORD_BYTES // 1024} KiB long; not shown]"
            )
        return
    kind, data = record.get("type"), record.get("data") or {}
    if kind == "summary":
        tally.finished = True
    elif kind == "end" and data.get("binary_offset") is not None:
        # A NUL past the first block: the lines shown before it stay (they are text).
        pass
    elif kind == "match":
        name = _text_of(data.get("path"))
        if not files.allowed(name):
            return
        line = _text_of(data.get("lines")).removesuffix("\n")
        shown_line = for_display(line[:MAX_LINE_CHARS], keep="\t")
        more = " [...]" if len(line) > MAX_LINE_CHARS else ""
        number = data.get("line_number")
        tally.matches.append(f"{_shown(ctx, Path(name))}:{number}: {shown_line}{more}")


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def _run_rg(ctx: ToolContext, argv: list[str], pattern: str) -> _Tally:
    tally = _Tally()
    files = _Files(ctx, tally)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIPGREP")}
    deadline = time.monotonic() + TIME_BUDGET
    errors = bytearray()
    try:
        proc = subprocess.Popen(
            launcher(RIPGREP, None, argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=ctx.workspace,
            start_new_session=True,
        )
    except OSError as err:
        raise ToolError(f"search could not start ripgrep: {err.strerror or err}.") from None
    try:
        for record in _records(proc, deadline, errors):
            _take(record, files, tally)
            if len(tally.matches) >= MAX_MATCHES:
                del tally.matches[MAX_MATCHES:]
                tally.stopped = (
                    f"[stopped at {MAX_MATCHES} matches; narrow the pattern, path or glob]"
                )
                break
    except TimeoutError:
        tally.stopped = (
            f"[stopped after {TIME_BUDGET:g} s: search budget reached; narrow the path or glob]"
        )
    finally:
        _kill(proc)
    if tally.stopped:
        return tally
    text = errors.decode("utf-8", "replace")
    if proc.returncode == 2 and not tally.finished:
        _input_problem(pattern, text)
    if proc.returncode not in (0, 1, 2) and not tally.finished:
        # killed, or out of memory (RLIMIT_AS): what it found so far is not the answer
        why = for_display(text.strip().splitlines()[-1][:300] if text.strip() else "")
        raise ToolError(
            f"search failed: ripgrep stopped (exit status {proc.returncode}"
            + (f": {why}" if why else "")
            + "); narrow the path or glob, or use list_dir and read_file"
        )
    tally.unreadable += sum(1 for line in text.splitlines() if line.strip())
    return tally


def _input_problem(pattern: str, errors: str) -> None:
    message = for_display(errors.strip()[:1000], keep="\n")
    if "regex" in errors.lower():
        raise ToolInputError(
            f"invalid regular expression {pattern!r}: {message}. search uses Rust regex syntax "
            "(like Python's re, without look-around or backreferences)."
        )
    if "glob" in errors.lower():
        raise ToolInputError(f"invalid glob: {message}")
    raise ToolError(f"search failed: {message}")


def search(ctx: ToolContext, args: Args) -> str:
    pattern = str(args["pattern"])
    if "\0" in pattern:
        raise ToolInputError("pattern contains a NUL byte; search looks for text.")
    glob = args.get("glob")
    if glob is not None and "\0" in str(glob):
        raise ToolInputError("glob contains a NUL byte.")
    top = validate_read_path(args.get("path", "."), ctx.policy, ctx.workspace)
    if not os.path.lexists(top):
        raise ToolError(f"{for_display(str(top))} does not exist.")
    rg = find_rg()
    if rg is None:
        raise ToolError(
            "search needs ripgrep (rg), which Rune installs with its dependencies (the "
            "`ripgrep` package); reinstall Rune, or put rg on PATH. Meanwhile use list_dir and "
            "read_file."
        )
    tally = _run_rg(ctx, _argv(rg, ctx, pattern, top, glob), pattern)
    notes = [tally.stopped] if tally.stopped else []
    skipped = [
        f"{n} {what}"
        for n, what in (
            (tally.binary, "binary"),
            (tally.unreadable, "unreadable"),
            (tally.linked, "hard-linked or special"),
        )
        if n
    ]
    if skipped:
        notes.append(f"[skipped files: {', '.join(skipped)}]")
    if not tally.matches:
        head = f"no matches for {pattern!r} under {_shown(ctx, top)}"
        return "\n".join([for_display(head), *notes])
    return "\n".join([*tally.matches, *notes])


SEARCH = BuiltinTool(
    ToolSpec(
        "search",
        "Search text files for a regular expression (Rust regex syntax, like Python re without "
        "look-around or backreferences). Returns path:line: text for each match. Files that "
        ".gitignore ignores, symlinks, .git, and binary files are skipped.",
        object_schema(
            {
                "pattern": string_arg("Regular expression to look for."),
                "path": string_arg("File or directory to search. Default: the workspace."),
                "glob": string_arg("Only files whose name or relative path matches, e.g. *.py"),
            },
            ["pattern"],
        ),
    ),
    run=search,
)
