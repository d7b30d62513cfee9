"""Building the operator a run drives: the sandboxed tools, the generation options and the
tool protocol, from the settings and the chosen backend."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from rune import events as ev
from rune.app.backend import DEMO_MODEL_MAX_OUTPUT_TOKENS, BackendChoice
from rune.app.policy import sandbox_policy
from rune.settings.config import Settings
from rune.tools.builtin import BUILTIN_TOOLS, BuiltinTool
from rune.tools.executor import ToolExecutor
from rune.tools.spec import AutoCheck, Executor
from rune.tools.testing import RUN_TESTS, auto_check, find_test_files
from rune.transport.base import Transport

if TYPE_CHECKING:
    from rune.operator import RuneOperator
    from rune.runtime.assist import Assist
    from rune.sessions.store import Session
    from rune.tools.mcp.client import McpManager
    from rune.tools.mcp.executor import CombinedExecutor


def build_operator(
    settings: Settings,
    choice: BackendChoice,
    transport: Transport,
    model: str,
    *,
    session: Session | None = None,
    on_event: ev.EventSink | None = None,
    tools: Iterable[BuiltinTool] | None = None,
    mcp: McpManager | None = None,
    can_ask: bool = False,
    without_assists: frozenset[str] = frozenset(),
) -> RuneOperator:
    """The operator ``rune run`` drives for ``settings`` on ``transport``: the sandboxed
    tools, the generation options, the tool protocol and the small-model help (also used by
    ``bench/tasks.py``, which shares one model server between tasks). ``tools`` replaces the
    built-in tool set and ``without_assists`` names assists to leave out (the benchmark's
    ablations); ``mcp`` (an ``McpManager``, :func:`mcp_servers`) adds its servers' tools;
    ``can_ask``: see :func:`open_rune`."""
    from rune.operator import RuneOperator
    from rune.sessions.changes import ChangeLog

    # Each applied file change is recorded in the session, for `rune undo`.
    changes = ChangeLog(session) if session is not None else None
    policy = sandbox_policy(settings)
    builtin = ToolExecutor(
        policy,
        settings.workspace,
        tools=BUILTIN_TOOLS if tools is None else tools,
        changes=changes,
        ask_reads=can_ask,
    )
    assists = assists_for(settings, builtin, without=without_assists)
    executor: ToolExecutor | CombinedExecutor = builtin
    if mcp is not None:
        from rune.tools.mcp.executor import CombinedExecutor, McpExecutor

        executor = CombinedExecutor(builtin, McpExecutor(mcp))
    return RuneOperator(
        transport,
        executor,
        model=model,
        max_iterations=settings.max_iterations,
        session=session,
        max_context=settings.max_context,
        think=settings.think,
        options=_generation_options(settings, choice),
        on_event=on_event,
        protocol=protocol_for(settings, choice),
        assists=assists,
        max_budgets=settings.max_budgets,
    )


def _generation_options(settings: Settings, choice: BackendChoice) -> dict[str, object] | None:
    """Ollama-style options: the settings, over the catalogue model's own defaults (and its
    banned tokens, which only the embedded llama.cpp, the catalogue's one backend, reads)."""
    options: dict[str, object] = dict(choice.catalog.options) if choice.catalog else {}
    if choice.catalog and choice.catalog.banned_tokens:
        # llama-server's spelling: [token id, false] is never sampled
        options["logit_bias"] = [[token, False] for token in choice.catalog.banned_tokens]
    if choice.demo_model:
        options.setdefault("num_predict", DEMO_MODEL_MAX_OUTPUT_TOKENS)
    if settings.max_output_tokens is not None:
        options["num_predict"] = settings.max_output_tokens
    if settings.temperature is not None:
        options["temperature"] = settings.temperature
    if settings.seed is not None:
        options["seed"] = settings.seed
    return options or None


def assists_for(
    settings: Settings, executor: ToolExecutor, *, without: frozenset[str] = frozenset()
) -> list[Assist]:
    """The small-model help the loop runs (:mod:`rune.assists`): every assist but those named
    in ``without``; the tests a request names when ``auto_tests`` is on and the executor can
    run tests, the sampled repair, which tries changes with the built-in ``executor`` (an MCP
    server's tools are never tried), and the reminder when nothing changed."""
    from rune.assists import standard_assists

    auto_checks = None
    if settings.auto_tests and offers_tests(executor):
        workspace, policy = executor.workspace, executor.policy

        def auto_checks(request: str) -> AutoCheck | None:
            return auto_check(request, workspace, policy)

    return standard_assists(
        auto_checks=auto_checks,
        trials=executor,
        without=without,
        unchanged=True,
        reask=True,
        ends_on_proof=True,
    )


def offers_tests(executor: Executor) -> bool:
    """Whether ``executor`` offers ``run_tests`` here (the workspace has tests, and they can
    run contained)."""
    return any(spec.name == RUN_TESTS.spec.name for spec in executor.specs())


def tests_left_unrun(settings: Settings, executor: Executor, workspace: Path) -> str | None:
    """Why the workspace's tests will not check the model's changes, when it has tests and
    Rune would run them (``auto_tests``) but cannot here: tests run contained or not at all,
    and a run without them ends on the model's word. None when they run, or there are none."""
    if not settings.auto_tests or offers_tests(executor):
        return None
    if not find_test_files(workspace, sandbox_policy(settings)):
        return None
    from rune.app.policy import commands_contained

    contained, how = commands_contained()
    why = (
        "the sandbox policy keeps checks from reading the system and the interpreter"
        if contained
        else how
    )
    return (
        f"the workspace has tests, but Rune cannot run them contained here ({why}), so no "
        "change will be checked by them; `rune doctor` says what to install"
    )


def protocol_for(settings: Settings, choice: BackendChoice) -> str:
    """The tool protocol to run: the setting, and for ``auto`` this rule: the embedded backend
    (small models Rune runs itself, which write native calls as prose) gets the constrained
    protocol; a server gets the runtime's rule (docs/protocols.md: native calls when its model
    has tools, else the text protocol), which the runtime applies after discovery."""
    if settings.protocol != "auto":
        return settings.protocol
    return "constrained" if choice.kind == "embedded" else "auto"
