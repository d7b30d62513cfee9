"""Small real bugs a model fixes (or not) through Rune: one task of the suite, run and checked.

The task suite (``bench/tasks.py``, 16 bugs in ``bench/tasks/``) and ``rune check-model`` (a
few of them, shipped in the wheel as ``model_check_tasks.json``) run a task with this one piece
of code: the project is written to a throw-away directory, the operator ``rune run`` would
build (:func:`rune.app.build_operator`) is sent the task, approvals are answered by a rule
instead of a person, and the task's check runs in a fresh interpreter on what is left.

:func:`verdict` reads the outcomes of a check: whether the model works with Rune, with which
protocol, and what to change when it does not.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rune import events as ev
from rune.app import FILE_EDIT_TOOLS, BackendChoice, build_operator, watched_transport
from rune.messages import PendingApproval
from rune.settings.config import load
from rune.transport.base import Transport

if TYPE_CHECKING:
    from rune.operator import RuneOperator
    from rune.tools.builtin import BuiltinTool

CHECK_TIMEOUT_S = 20
#: approvals answered in one run at most (a model asking for the same change again and again)
APPROVAL_ROUNDS = 8
#: the tasks ``rune check-model`` runs, copied from ``bench/tasks/`` (a test keeps them equal)
BUILTIN_TASKS = "model_check_tasks.json"
NATIVE_SOURCES = frozenset({"ollama-native", "openai-native"})
#: how a run ends when the server, not the model, failed (rune.errors: the transport's errors)
SERVER_FAILURES = frozenset(
    {
        "TransportError",
        "ServerUnreachable",
        "TransportTimeout",
        "ModelNotFound",
        "ServerError",
        "ProtocolError",
    }
)


@dataclass(frozen=True)
class Task:
    """One bug: what the user types, the project's files, and the check (Python code that
    exits 0 when the bug is fixed)."""

    name: str
    request: str
    check: str
    files: Mapping[str, str]

    @classmethod
    def from_dir(cls, path: Path) -> Task:
        """A task of ``bench/tasks/``: ``task.md``, ``check.py``, ``workspace/``."""
        workspace = path / "workspace"
        files = {
            p.relative_to(workspace).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(workspace.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts
        }
        return cls(
            path.name,
            (path / "task.md").read_text(encoding="utf-8").strip(),
            (path / "check.py").read_text(encoding="utf-8"),
            files,
        )

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "request": self.request,
            "check": self.check,
            "files": dict(self.files),
        }

    def write(self, workspace: Path) -> None:
        for name, text in self.files.items():
            target = workspace / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")


def builtin_tasks() -> list[Task]:
    """The tasks shipped with Rune for ``rune check-model``."""
    text = resources.files("rune.app").joinpath(BUILTIN_TASKS).read_text("utf-8")
    return [Task(**entry) for entry in json.loads(text)]


def tasks_json(tasks: Sequence[Task]) -> str:
    """The shipped file's exact text for ``tasks`` (how it is written from ``bench/tasks/``)."""
    return json.dumps([t.to_json() for t in tasks], indent=1, ensure_ascii=False) + "\n"


def check(task: Task, workspace: Path) -> bool:
    """The task's check in a fresh interpreter (the model's code never runs in this one)."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", task.check],
            cwd=workspace,
            capture_output=True,
            timeout=CHECK_TIMEOUT_S,
            env={"PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin"},
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def approves_in_scratch(pending: PendingApproval) -> bool:
    """The approval rule of ``rune check-model``: a file change inside the throw-away
    workspace, or a command bubblewrap contains; nothing sensitive, no read outside the
    workspace, nothing else."""
    if pending.sensitive is not None or pending.grant is not None:
        return False
    return pending.name in FILE_EDIT_TOOLS or pending.contained is True


@dataclass
class TaskOutcome:
    task: str
    fixed: bool
    steps: int
    budget: int
    seconds: float
    #: ``answered``, or how the run stopped (``IterationLimit``, ``ServerError``, ...)
    ended: str
    #: the protocol that ran (``native``, ``text-fallback``, ``constrained``)
    protocol: str
    #: ``name:status`` of each tool call, in order
    tools: list[str] = field(default_factory=list)
    #: how many tool calls came from each source (``ollama-native``, ``text-fallback``, ...)
    sources: dict[str, int] = field(default_factory=dict)
    replies: list[str] = field(default_factory=list)
    error: str | None = None
    #: how the run ended for the CLI (``done`` is exit 0): :attr:`OperatorResponse.outcome`
    outcome: str = ""
    #: the conversation the model saw (without the system context), for reading a run back
    messages: list[dict[str, Any]] = field(default_factory=list)

    def model_calls(self) -> dict[str, int]:
        """:attr:`sources` without the calls Rune made itself (source ``rune``)."""
        return {source: n for source, n in self.sources.items() if source != "rune"}


@dataclass(frozen=True)
class Runnable:
    """Any task :func:`run_task` can run: a name, what the user types, and how to lay out its
    workspace (the benchmark's suites plant a bug in a library's sdist this way)."""

    name: str
    request: str
    write: Callable[[Path], None]


def run_task(
    task: Task | Runnable,
    transport: Transport,
    model: str,
    choice: BackendChoice,
    *,
    approves: Callable[[PendingApproval], bool],
    flags: Mapping[str, object] | None = None,
    on_event: ev.EventSink = ev.ignore,
    tools: Iterable[BuiltinTool] | None = None,
    prepare: Callable[[RuneOperator], None] | None = None,
    judge: Callable[[Path], bool] | None = None,
    without_assists: frozenset[str] = frozenset(),
    scratch: Path | None = None,
) -> TaskOutcome:
    """Run ``task`` through Rune in a new temp directory (or in ``scratch``, emptied first and
    removed after: a path the model sees in its prompt, so a benchmark that keeps it fixed runs
    the same at temperature 0 every time) and check it. ``flags`` are settings
    over the user's (``protocol``, ``max_iterations``...); the workspace is the temp directory
    and it is the only place Rune may write. ``without_assists`` names small-model help to
    leave out (:mod:`rune.assists`). ``prepare`` sees the operator before the run; ``judge``
    says whether the workspace is fixed afterwards (default: the task's check)."""
    with _scratch_dir(task.name, scratch) as where:
        workspace = where / "project"
        workspace.mkdir()
        task.write(workspace)
        settings = load(
            {**(flags or {}), "workspace": str(workspace), "sandbox.write_roots": []}
        ).settings
        sources: Counter[str] = Counter()
        names: list[str] = []

        def note(event: ev.LoopEvent) -> None:
            if isinstance(event, ev.ToolStarted):
                sources[event.request.source] += 1
            elif isinstance(event, ev.ToolFinished):
                names.append(f"{event.event.name}:{event.event.status}")
            on_event(event)

        watched = watched_transport(transport, note)
        operator = build_operator(
            settings,
            choice,
            watched,
            model,
            on_event=note,
            tools=tools,
            without_assists=without_assists,
        )
        if prepare is not None:
            prepare(operator)
        started = time.perf_counter()
        response = operator.send(task.request)
        rounds = 0
        # every model turn of every budget may ask once
        limit = max(APPROVAL_ROUNDS, settings.max_iterations * settings.max_budgets)
        while response.pending is not None and rounds < limit:
            rounds += 1
            if approves(response.pending):
                response = operator.approve()
            else:
                response = operator.reject("not approved in this check")
        seconds = time.perf_counter() - started
        ended = "answered" if response.success else (response.error_kind or "paused")
        replies = [str(m.get("content")) for m in response.messages if m.get("role") == "assistant"]
        if judge is None:
            assert isinstance(task, Task), "a Runnable needs a judge"
            fixed = check(task, workspace)
        else:
            fixed = judge(workspace)
        return TaskOutcome(
            task.name,
            fixed,
            response.iterations_used,
            response.iteration_budget,
            seconds,
            ended,
            response.protocol,
            names,
            dict(sources),
            replies,
            None if response.success else response.error,
            response.outcome,
            [dict(m) for m in response.messages],
        )


@contextlib.contextmanager
def _scratch_dir(name: str, fixed: Path | None) -> Iterator[Path]:
    if fixed is None:
        with tempfile.TemporaryDirectory(prefix=f"rune-task-{name}-") as scratch:
            yield Path(scratch)
        return
    shutil.rmtree(fixed, ignore_errors=True)
    fixed.mkdir(parents=True)
    try:
        yield fixed
    finally:
        shutil.rmtree(fixed, ignore_errors=True)


# --- the verdict ----------------------------------------------------------------------------


@dataclass(frozen=True)
class AutoChoice:
    """The protocol ``--protocol auto`` runs for this backend and model, and why."""

    protocol: str
    why: str


def auto_choice(choice: BackendChoice, model: str, takes_tools: bool) -> AutoChoice:
    """What ``auto`` picks (:func:`rune.app.protocol_for`, then the runtime's rule)."""
    if choice.kind == "embedded":
        return AutoChoice(
            "constrained", "Rune runs this model itself, and small models write calls as prose"
        )
    if takes_tools:
        return AutoChoice("native", f"the server says {model} takes tools")
    return AutoChoice("text", f"the server says {model} has no tool calling")


@dataclass(frozen=True)
class Verdict:
    #: every task fixed
    works: bool
    #: one line for the user
    line: str
    #: the protocol to use with this model (None: none of Rune's helps)
    recommended: str | None


def _protocol_flag(ran: str) -> str:
    return "text" if ran == "text-fallback" else ran


def verdict(outcomes: Sequence[TaskOutcome], auto: AutoChoice) -> Verdict:
    """What the outcomes say about the model: whether it works with Rune, and if not, what
    to try (a protocol, or a larger model)."""
    total, fixed = len(outcomes), sum(o.fixed for o in outcomes)
    ran = Counter(o.protocol for o in outcomes).most_common(1)[0][0] if outcomes else "native"
    flag = _protocol_flag(ran)
    calls: Counter[str] = Counter()
    for outcome in outcomes:
        calls.update(outcome.model_calls())
    native = sum(n for source, n in calls.items() if source in NATIVE_SOURCES)
    as_text = calls.get("text-fallback", 0)
    errors = [o for o in outcomes if o.ended in SERVER_FAILURES]
    score = f"{fixed}/{total} fixed"
    auto_note = (
        f"auto picks {auto.protocol} too ({auto.why})"
        if auto.protocol == flag
        else f"auto would pick {auto.protocol} ({auto.why}): pass --protocol {flag} or set "
        f'protocol = "{flag}" in config.toml'
    )
    if ran == "native" and as_text > native:
        # Rune reads such calls, but a small model that writes them as prose gets them slightly
        # wrong often enough to fail most tasks (bench/README.md): constrained removes that.
        return Verdict(
            fixed == total,
            f"tool calls came back as prose ({as_text} of {as_text + native} calls were read "
            f"from the text, {score}): use --protocol constrained",
            "constrained",
        )
    if total and fixed == total:
        return Verdict(
            True, f"works with Rune: {score} with the {flag} protocol; {auto_note}", flag
        )
    if errors and len(errors) == total:
        first = errors[0]
        return Verdict(
            False,
            f"every task failed with an error ({first.ended}: {first.error}); "
            "check the server (`rune doctor`)",
            None,
        )
    if ran == "native" and not calls:
        return Verdict(
            False,
            f"the model answered in prose and called no tool ({score}): use --protocol constrained",
            "constrained",
        )
    if ran != "constrained":
        return Verdict(
            False, f"{score} with the {flag} protocol: try --protocol constrained", "constrained"
        )
    weak = "too weak for Rune's tasks" if fixed == 0 else "unreliable with Rune"
    return Verdict(
        False,
        f"{score} even with the constrained protocol: this model is {weak}; "
        "try a larger one (qwen2.5-coder:1.5b runs on two cores)",
        "constrained" if fixed else None,
    )
