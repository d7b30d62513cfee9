"""The CLI's consoles: standard output and standard error, that never read a string as
markup (Rune styles its own text with ``rich.text.Text``), and a reader going away
(``| head``) ending in exit status 141.

``rich`` handles a broken pipe itself (it points stdout at /dev/null and exits 1); here it is
a ``BrokenPipeError`` instead, which :func:`rune.cli.main` turns into 141 like every other
write to a closed pipe.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console


class PipeConsole(Console):
    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError("the reader of the output went away")


def console(**options: Any) -> Console:
    # markup=False: a plain string is printed as it is, so `[mcp.servers.NAME]` in a hint, or
    # a path or a server's error with brackets, is never eaten as markup. Rune's own styles go
    # in rich Text objects.
    return PipeConsole(highlight=False, soft_wrap=True, markup=False, **options)


out = console()
err = console(stderr=True)
