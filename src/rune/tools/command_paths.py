"""Which test files a shell command may change: the guard behind "the tests are right".

When a task says the tests are right, a file change to a test is refused
(:meth:`rune.tools.testing.PlannedTests.refusal`), and so is a command that could change one:
``rm tests/test_x.py``, ``git checkout tests``, ``sed -i … test_x.py``, ``cat > test_x.py``,
``python -c "open('test_x.py', 'w')"``, ``rm -rf .``. A shell command cannot be read for its
effects, so this is deny by default: a command that names a test file, a directory holding
one (``.`` included) or a glob that reaches one may run only when it is one plain command (no
pipe, redirection, substitution or glob) that runs the tests or reads files. A command that
names no test stays as it was: approved by the user, contained by bubblewrap.

What it cannot see: a script written earlier that changes the tests when run
(``sh cleanup.sh``), or a path built at run time. Approval and the containment's read-only
binds stay the guards there.
"""

from __future__ import annotations

import fnmatch
import glob
import itertools
import os
import re
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path

from rune.grants import plain_command_argv

_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
#: programs that read files and change none (with no redirection: the command is plain)
READERS = frozenset(
    {"cat", "head", "tail", "less", "more", "grep", "egrep", "fgrep", "rg", "wc", "diff", "ls",
     "nl", "stat", "file", "tree"}
)  # fmt: skip
#: programs that run tests and change no test file
TEST_RUNNERS = frozenset({"pytest", "py.test"})
_TEST_MODULES = frozenset({"pytest", "unittest"})
_GLOB = re.compile(r"[*?\[]")
#: the paths one glob is expanded to, at most
MAX_GLOBBED = 1000


def tests_named(
    command: str, workspace: Path, is_test: Callable[[str], bool], tests: Sequence[str]
) -> list[str]:
    """The words of ``command`` that reach a test file: a test path (``is_test`` judges a
    workspace-relative path), a directory holding one of ``tests`` (the workspace's test
    files, relative), a glob matching either, or a word that holds a test file's name (inline
    code: ``python -c "os.remove('tests/test_x.py')"``)."""
    names = {Path(test).name for test in tests}
    reached = []
    for word in _words(command):
        if _reaches_tests(word, workspace, is_test, tests) or any(n in word for n in names):
            reached.append(word)
    return reached


def runs_or_reads(command: str) -> bool:
    """Whether ``command`` is one plain command that runs tests (``pytest``, ``python -m
    pytest``, ``python -m unittest``, ``python test_x.py``) or reads files (``cat``, ``grep``)."""
    argv = plain_command_argv(command)
    if argv is None:
        return False
    program = argv[0].rpartition("/")[2]
    if program in READERS or program in TEST_RUNNERS:
        return True
    if not _PYTHON.match(program) or len(argv) < 2:
        return False
    if argv[1] == "-m":
        return len(argv) > 2 and argv[2] in _TEST_MODULES
    return not argv[1].startswith("-")


def _words(command: str) -> list[str]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|<>()")
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote: the words as whitespace splits them
        return command.split()


def _reaches_tests(
    word: str, workspace: Path, is_test: Callable[[str], bool], tests: Sequence[str]
) -> bool:
    """Whether the path ``word`` names (or a path its glob matches) is a test file, holds one,
    or holds the whole workspace (``..``, ``/``)."""
    word = word.split("=", 1)[1] if word.startswith("-") and "=" in word else word
    if not word or word.startswith("-"):
        return False
    root = os.path.realpath(workspace)
    expanded = os.path.expanduser(word)
    pattern = os.path.normpath(os.path.join(root, expanded))  # an absolute one stays itself
    if _GLOB.search(word):
        if not pattern.startswith(root + os.sep):
            # outside the workspace: whether it matches the workspace or a directory above it
            above = [root, *map(str, Path(root).parents)]
            return any(fnmatch.fnmatchcase(path, pattern) for path in above)
        # bounded: a glob the model wrote must not walk a large tree for it
        paths = list(itertools.islice(glob.iglob(pattern), MAX_GLOBBED))
    else:
        paths = [pattern]
    for path in paths:
        real = os.path.realpath(path)
        if real == root or root.startswith(real.rstrip(os.sep) + os.sep):
            return True  # the workspace itself, or a directory holding it
        if not real.startswith(root + os.sep):
            continue
        relative = Path(real).relative_to(root).as_posix()
        if is_test(relative) or any(test.startswith(relative + "/") for test in tests):
            return True
    return False
