"""What the CLI and the TUI show alike: a tool request in one line, a coloured diff, the
outcome of a tool call, the line a sensitive approval carries, and the decision a person makes.

Everything a model wrote goes through :func:`rune.text.visible` (escape sequences shown, never
run) and into a ``rich`` ``Text``, never a markup string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rich.text import Text

from rune.grants import Grant
from rune.messages import OperatorResponse, PendingApproval, ToolEvent
from rune.text import NO_OUTPUT, plural, visible

MAX_ARGUMENT_CHARS = 60
#: a diff longer than this is shown cut: its head and tail, with the count of hidden lines
DIFF_HEAD_LINES = 80
DIFF_TAIL_LINES = 20
#: what a command printed, on its tool line: the first and the last lines
OUTPUT_HEAD_LINES = 8
OUTPUT_TAIL_LINES = 4
#: tools whose output is shown (others say how many lines they produced)
SHOWN_OUTPUT_TOOLS = frozenset({"run_command"})
#: tools whose first line of output is their verdict ("the tests pass (Ran 2 tests …)"),
#: shown on their tool line, as a failure's reason is
VERDICT_TOOLS = frozenset({"run_tests"})


def describe_request(name: str, arguments: object) -> str:
    """``read_file path='calc.py'``: long values (file contents) are cut short; control and
    invisible characters are escaped."""
    if not isinstance(arguments, dict):
        return visible(name, keep="")
    parts = []
    for key, value in arguments.items():
        shown = _clipped(_short_repr(value), MAX_ARGUMENT_CHARS)
        parts.append(f"{visible(key, keep='')}={visible(shown, keep='')}")
    return " ".join([visible(name, keep=""), *parts])


def _short_repr(value: object) -> str:
    # Only the head is shown: never build the repr of a megabyte of content (or of an integer
    # too long for repr) to cut it to 60 characters.
    if isinstance(value, str) and len(value) > MAX_ARGUMENT_CHARS:
        value = value[:MAX_ARGUMENT_CHARS]
    try:
        return repr(value)
    except ValueError:
        return f"<{type(value).__name__}>"


def cut_lines(lines: list[str], head: int, tail: int) -> tuple[list[str], int, list[str]]:
    """The first ``head`` and the last ``tail`` lines, and how many lie between them."""
    if len(lines) <= head + tail + 1:
        return lines, 0, []
    return lines[:head], len(lines) - head - tail, lines[-tail:] if tail else []


def diff_text(preview: str, *, cut: bool = False, hint: str = "") -> Text:
    """A unified diff coloured line by line the way git does; with ``cut``, a long one shows
    its head and tail with the count of hidden lines (and ``hint``: how to see them)."""
    lines = visible(preview).splitlines(keepends=True)
    if cut:
        head, hidden, tail = cut_lines(lines, DIFF_HEAD_LINES, DIFF_TAIL_LINES)
        if hidden:
            note = f"… {hidden:,} more lines of this diff not shown{hint} …\n"
            text = _coloured(head)
            text.append(note, style="bold yellow")
            text.append_text(_coloured(tail))
            return text
    return _coloured(lines)


def _coloured(lines: list[str]) -> Text:
    text = Text()
    for line in lines:
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        elif line.startswith("@@"):
            style = "cyan"
        else:
            style = ""
        text.append(line, style=style)
    return text


def is_command(pending: PendingApproval) -> bool:
    """Commands say whether they run contained; file edits leave ``contained`` unset."""
    return pending.contained is not None


def sensitive_note(reason: str) -> str:
    """The line an approval of a sensitive change carries."""
    return f"  sensitive: {reason}; asked even under --yes"


def command_output(event: ToolEvent) -> str | None:
    """What a command printed, ending in its status line (``[exit code 1]``), when it ran
    (whether it passed or failed); None for any other tool, or a command that did not run."""
    if event.name not in SHOWN_OUTPUT_TOOLS:
        return None
    text = (event.output if event.ok else event.error) or ""
    status = _last_line(text)
    return text if status.startswith("[") and status.endswith("]") else None


def _last_line(text: str) -> str:
    return text.rstrip().rpartition("\n")[2]


def change_made(event: ToolEvent) -> str | None:
    """What an applied file change did, from the diff it was approved with: ``wrote calc.py
    (+3 −1)``, ``created notes.txt (+2)``; None for any other call."""
    if not event.ok or not event.preview or event.name in SHOWN_OUTPUT_TOOLS:
        return None
    before = after = None
    added = removed = 0
    for line in event.preview.splitlines():
        if line.startswith("--- ") and before is None:
            before = line[4:]
        elif line.startswith("+++ ") and after is None:
            after = line[4:]
        elif line.startswith("+") and not line.startswith("+++ "):
            added += 1
        elif line.startswith("-") and not line.startswith("--- "):
            removed += 1
    if before is None or after is None:
        return None
    if after == "/dev/null":
        return f"deleted {visible(before.removeprefix('a/'), keep='')} (−{removed})"
    path = visible(after.removeprefix("b/"), keep="")
    if before == "/dev/null":
        return f"created {path} (+{added})"
    return f"wrote {path} (+{added} −{removed})"


def tool_outcome(event: ToolEvent) -> str:
    """The short tail of a tool line: what it changed, produced, or why it did not."""
    changed = change_made(event)
    if changed is not None:
        return changed
    ran = command_output(event)
    if event.ok or ran is not None:
        output = ran if ran is not None else event.output or ""
        warning = next((ln for ln in output.splitlines() if ln.startswith("WARNING:")), None)
        if ran is not None:
            # The command's own lines, without the status line Rune adds ("[exit code 0]").
            printed = ran.rstrip().rpartition("\n")[0]
            lines = 0 if printed.strip() in ("", NO_OUTPUT) else printed.count("\n") + 1
            printed_lines = f"{plural(lines, 'line')} of output" if lines else "no output"
            outcome = f"{printed_lines}, {_last_line(ran)[1:-1]}"
        elif event.name in VERDICT_TOOLS and output.strip():
            outcome = visible(output.strip().splitlines()[0], keep="")
        else:
            outcome = plural(output.count("\n") + 1 if output else 0, "line")
        return outcome if warning is None else f"{outcome}; {visible(warning, keep='')}"
    said = (event.error or event.status).splitlines() or [event.status]
    # A command that failed while it ran (stopped, timed out) ends with its status in brackets,
    # after whatever it printed: that status is the outcome, with the exception a Python
    # traceback ended on (a check's "AssertionError: ..."), which says why.
    if len(said) > 1 and said[-1].startswith("[") and said[-1].endswith("]"):
        status = said[-1][1:-1]
        raised = next((ln for ln in reversed(said[:-1]) if _EXCEPTION_LINE.match(ln)), None)
        if raised is not None:
            status = f"{status}: {_clipped(raised.strip(), MAX_EXCEPTION_CHARS)}"
        return visible(status, keep="")
    return visible(said[0] or event.status, keep="")


#: the last line of a Python traceback: ``AssertionError: add(2, 3) == 6``, ``ValueError``
_EXCEPTION_LINE = re.compile(r"[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b(?::|$)")
MAX_EXCEPTION_CHARS = 120


def _clipped(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the last one "…" when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def outcome_text(response: OperatorResponse, next_step: str = "") -> tuple[str, str]:
    """The last line of a run, the same in the CLI and the TUI, and its kind (``done``,
    ``warning``, ``error``). ``next_step`` ends the line of a run that did not finish."""
    budget = response.budget_label
    then = f"; {next_step}" if next_step else ""
    match response.outcome:
        case "done" if response.changed:
            return f"✓ done ({budget})", "done"
        case "done":
            # A fix task that changed nothing must not read as fixed.
            return f"✓ answered, no file changed ({budget})", "done"
        case "incomplete":
            why = visible(response.incomplete or "")
            return f"! answered, but not finished: {why} ({budget}){then}", "warning"
        case _:
            kind, error = visible(response.error_kind or ""), visible(response.error or "")
            return f"✗ {kind}: {error} ({budget})", "error"


def output_excerpt(output: str, *, hint: str = "") -> list[str]:
    """What a command printed, as the lines to show: the first and the last ones, with the
    count of those between (and ``hint``: how to see them all)."""
    lines = visible(output, keep="\t\n").rstrip("\n").split("\n") if output else []
    head, hidden, tail = cut_lines(lines, OUTPUT_HEAD_LINES, OUTPUT_TAIL_LINES)
    if not hidden:
        return head
    return [*head, f"… {hidden:,} more lines{hint} …", *tail]


def elapsed(seconds: float) -> str:
    """``4.2 s``, ``1 m 05 s``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} m {rest:02d} s"


@dataclass(frozen=True)
class Decision:
    approve: bool
    reason: str = ""
    #: approved, and what it covers allowed for the rest of the session
    grant: Grant | None = None
