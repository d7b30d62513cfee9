"""The functions a task names, written afresh from their docstrings, shown to a model that will
not change anything.

On the algorithm suite the 1.5B answered a request to fix ``edit_distance`` (and ``quicksort``)
without a change; sent back once (:mod:`rune.assists.unchanged`), it gave Rune's reminder back
as its answer, and the run ended with the bug in place. Shown the signature and the docstring
alone, the same model writes most textbook functions right (:mod:`rune.assists.rewrite`). So
the next answer of that kind goes back with the functions the request names in the Python files
it names, and those of the same file they call (the bug of ``quicksort`` was in its
``partition``), each written afresh from the file with its body left out, where that differs
from what the file holds and returns a value where the file's function does (the 1.5B's
``quicksort`` written afresh lost its ``return items``, and the model took it). Where Rune runs
the project's tests and they fail, a rewrite is shown only when it passes them. The model
decides: it sends a rewrite as its own change (which the user approves as any other) and
checks it, or says why none is needed. At most :data:`MAX_OFFERED` functions, once a run.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from rune.assists.rewrite import TOOL, contract_for, write_afresh
from rune.assists.tests import failed_test_run
from rune.calls import tool_request
from rune.pause.state import LoopState
from rune.runtime.assist import Loop
from rune.text import fenced, for_display
from rune.tools.python_code import code_of
from rune.tools.spec import Trials

__all__ = ["MAX_OFFERED", "OFFER_OPENING", "named_functions", "offered_rewrites"]

#: the most functions written afresh for one offer (10-30 s a function on 2 cores)
MAX_OFFERED = 3
#: how an offer starts: no answer of the model's own would (an answer that repeats it is none)
OFFER_OPENING = "You answered again without changing a file."

_PYTHON_PATH = re.compile(r"[\w./-]+\.py\b")


def named_functions(request: str, read: Callable[[str], bytes | None]) -> list[tuple[str, str]]:
    """``(path, name)`` of the top-level functions ``request`` names (as a word) in the Python
    files it names (``read(path)``: the file's content, None when it is none of the workspace),
    then those of the same file they call, at most :data:`MAX_OFFERED`."""
    named: list[tuple[str, str]] = []
    called: list[tuple[str, str]] = []
    for path in dict.fromkeys(_PYTHON_PATH.findall(request)):
        content = read(path)
        try:
            tree = ast.parse(content.decode("utf-8", "replace")) if content else None
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            tree = None
        if tree is None:
            continue
        functions = {
            node.name: node
            for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        for name, node in functions.items():
            if not re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", request):
                continue
            named.append((path, name))
            called.extend(
                (path, callee)
                for callee in dict.fromkeys(
                    sub.func.id
                    for sub in ast.walk(node)
                    if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name)
                )
                if callee in functions and callee != name
            )
    return list(dict.fromkeys([*named, *called]))[:MAX_OFFERED]


def offered_rewrites(
    loop: Loop, state: LoopState, trials: Trials, request: str, *, by: str
) -> tuple[str, dict[str, str]] | None:
    """The message that shows the rewrites worth offering, and ``{path::name: code_of(rewrite)}``
    of each; None when none is (no function named, each rewrite the same as the file, or, where
    the project's tests fail, none that passes them)."""
    tests = failed_test_run(state.events)
    shown: list[str] = []
    offered: dict[str, str] = {}
    for path, name in named_functions(request, trials.content_before_changes):
        content = trials.content_before_changes(path)
        source = content.decode("utf-8", "replace") if content else ""
        contract = contract_for(source, name)
        if contract is None:
            continue
        like = tool_request(TOOL, {"path": path, "name": name, "code": contract})
        code = write_afresh(loop, state, like, name, contract, path=path, by=by)
        written = code_of(code, name) if code is not None else None
        if code is None or written is None or written == code_of(source, name):
            continue
        if _gives_results(source, name) and not _gives_results(code, name):
            continue  # the file's function returns (or yields) a value and the rewrite never
        arguments = {"path": path, "name": name, "code": code}
        if loop.refusal(state, tool_request(TOOL, arguments)) is not None:
            continue
        if tests is not None:
            trial = trials.try_change(TOOL, arguments, tests.name, tests.arguments)
            if trial is None or not trial.passed:
                continue
        shown.append(f"{for_display(path)}\n{fenced(code.rstrip(), 'python')}")
        offered[f"{path}::{name}"] = written
    if not shown:
        return None
    passing = " It passes the project's tests." if tests is not None else ""
    one = len(shown) == 1
    text = (
        f"{OFFER_OPENING} Rune asked for {'this function' if one else 'these functions'} "
        "written afresh from the docstring, from the file with the body left out; "
        f"{'it differs' if one else 'each differs'} from what the file holds.{passing}\n\n"
        + "\n\n".join(shown)
        + "\n\nIf one does what its docstring says where the file does not, send it with "
        "replace_function, then check it. Otherwise answer and say why no change is needed."
    )
    return text, offered


def _gives_results(source: str, name: str) -> bool:
    """Whether the top-level function ``name`` of ``source`` returns or yields a value."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return any(
                isinstance(sub, ast.Yield | ast.YieldFrom)
                or (isinstance(sub, ast.Return) and sub.value is not None)
                for sub in ast.walk(node)
            )
    return False
