"""``rune doctor``: each check says what it found, in one line, and, when wrong, what to do.

The slow probes (the model server, bubblewrap, the MCP servers) run at the same time, with a
spinner on a terminal; the embedded backend is judged from what is installed and pulled, never
started (loading a model takes seconds). The long lists of the sandbox policy are behind
``--verbose``.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.text import Text

from rune.cli.consoles import console as new_console
from rune.cli.exits import EXIT_FAILED, EXIT_OK
from rune.errors import RuneError
from rune.settings.config import LoadedConfig, Settings

PROTOCOL_NOTES = {
    "native": "native tool calls (the model has tools)",
    "text": "text protocol (the model has no native tools; Rune parses calls from its text)",
    "constrained": "constrained: each reply is one JSON object the server's grammar checks",
    "blocks": "blocks: code changes as code blocks under a file's path, parsed by Rune",
}


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    found: str
    fix: str = ""


def run_checks(loaded: LoadedConfig, *, verbose: bool = False) -> list[Check]:
    settings = loaded.settings
    config = Check(
        "config",
        not loaded.refused,
        ", ".join(str(f) for f in loaded.files) or "no config files (defaults)",
        "; ".join(loaded.refused),
    )
    probes: list[Callable[[], list[Check]]] = [
        lambda: backend_checks(settings),
        lambda: [containment_check(), environment_check()],
    ]
    if loaded.mcp_servers:
        probes.append(lambda: mcp_server_checks(loaded))
    # Each probe waits on something else (a server, a sandbox, a subprocess): together, the
    # doctor takes as long as the slowest, not the sum.
    with ThreadPoolExecutor(max_workers=len(probes)) as pool:
        found = [pool.submit(probe) for probe in probes]
        backend, contained, *mcp = (future.result() for future in found)
    return [
        config,
        *backend,
        embedded_check(settings, backend),
        *sandbox_checks(settings, verbose=verbose),
        *(check for checks in mcp for check in checks),
        *contained,
    ]


def backend_checks(settings: Settings) -> list[Check]:
    """The server Rune would use, the protocol, the model and its context window."""
    from rune.app import choose_backend, no_backend_help

    try:
        choice = choose_backend(settings)
    except RuneError as err:
        return [Check("server", False, str(err).splitlines()[0], no_backend_help())]
    if choice.kind == "embedded":
        return embedded_backend_checks(settings, choice)
    from rune.app import capabilities, open_transport

    with ExitStack() as stack:
        try:
            transport, model = open_transport(choice, settings, stack)
            caps = capabilities(transport, model)
        except RuneError as err:
            fix = f"check that the server runs at {choice.label}; `rune models` lists what it has"
            return [Check("server", False, f"{choice.label}: {err.kind}: {err}", fix)]
    return [
        Check("server", True, f"{choice.label} ({choice.reason})"),
        *model_checks(settings, choice, model, caps.tools, caps.thinking, caps.context_length),
    ]


def embedded_backend_checks(settings: Settings, choice: Any) -> list[Check]:
    """The embedded backend, judged without loading the model."""
    from rune.app import DEMO_MODEL_NOTICE, EMBEDDED_CONTEXT

    path = choice.model_path
    name = path.stem if path is not None else "?"
    checks = [
        Check(
            "server",
            path is not None and path.is_file(),
            f"embedded llama.cpp, started with each task ({choice.reason})",
            "" if path is not None and path.is_file() else f"model file not found: {path}",
        )
    ]
    window = choice.catalog.context if choice.catalog else EMBEDDED_CONTEXT
    window = min(window, settings.max_context or window)
    checks += model_checks(settings, choice, name, False, False, window)
    if choice.demo_model:
        checks.append(Check("demo model", False, name, DEMO_MODEL_NOTICE))
    return checks


def model_checks(
    settings: Settings,
    choice: Any,
    model: str,
    tools: bool,
    thinking: bool,
    window: int | None,
) -> list[Check]:
    from rune.app import DEFAULT_WINDOW, RECOMMENDED_MODEL, protocol_for

    protocol = protocol_for(settings, choice)
    if protocol == "auto":
        protocol = "native" if tools else "text"
    usable = tools or protocol == "constrained"
    small = window is not None and window < 4096
    capped = f" (capped at {settings.max_context})" if settings.max_context else ""
    return [
        Check("protocol", True, PROTOCOL_NOTES[protocol]),
        Check(
            "model",
            usable,
            f"{model}: tools {'yes' if tools else 'no'}, thinking {'yes' if thinking else 'no'}",
            ""
            if usable
            else (
                "this model has no native tool calling; Rune uses its text protocol, which "
                f"small models follow poorly. Use a tool-capable model such as "
                f"{RECOMMENDED_MODEL} under Ollama."
            ),
        ),
        Check(
            "context",
            not small,
            (f"{window} tokens" if window else f"not said; Rune assumes {DEFAULT_WINDOW}") + capped,
            "a window under 4096 tokens fills after a few file reads; raise num_ctx in the model "
            "or use a larger model"
            if small
            else "",
        ),
    ]


def embedded_check(settings: Settings, backend: list[Check]) -> Check:
    """One verdict on the embedded backend: installed or not, and what it would run."""
    from rune.app import PULL_HINT
    from rune.distribution import embedded_install_hint, embedded_installed
    from rune.models.catalog import pulled_models

    server_ok = any(check.name == "server" and check.ok for check in backend)
    if not embedded_installed():
        # Needed only when there is no server: not a failure where one answers.
        return Check(
            "embedded",
            server_ok,
            "not installed (it runs models without a server)",
            "" if server_ok else f"{embedded_install_hint()}, then {PULL_HINT}",
        )
    pulled = pulled_models()
    if pulled:
        return Check("embedded", True, f"installed; runs {pulled[0].name} when no server answers")
    return Check(
        "embedded",
        server_ok,
        "installed, no model pulled",
        "" if server_ok else PULL_HINT,
    )


def sandbox_checks(settings: Settings, *, verbose: bool) -> list[Check]:
    from pathlib import Path

    from rune.app import policy_report, sandbox_policy, workspace_unwritable

    policy = sandbox_policy(settings)
    report = policy_report(settings)
    lists = [what for what, _ in report if what != "approval"]
    more = "" if verbose else "; `rune doctor --verbose` lists the paths and names it guards"
    checks = [
        Check(
            "sandbox",
            True,
            f"write: {', '.join(policy.describe_write_roots())}; "
            f"read: {', '.join(policy.describe_read_roots())}{more}",
        )
    ]
    unwritable = workspace_unwritable(Path(settings.workspace))
    if unwritable is not None:
        checks.append(Check("workspace", False, unwritable))
    # The effective policy, in full: what docs/sandbox.md's reference promises, as configured.
    # The approval mode is short and always shown; the name lists only on request.
    shown = [(what, detail) for what, detail in report if verbose or what not in lists]
    return checks + [Check(f"sandbox, {what}", True, detail) for what, detail in shown]


def containment_check() -> Check:
    from rune.app import commands_contained

    contained, how = commands_contained()
    return Check(
        "containment",
        contained,
        f"commands run contained: {how}" if contained else f"commands uncontained: {how}",
        ""
        if contained
        else "install bubblewrap (e.g. `apt install bubblewrap`) so commands run without "
        "network and with a read-only system",
    )


def environment_check() -> Check:
    from rune.app import contained_environment_report

    return Check("environment", True, contained_environment_report())


def mcp_server_checks(loaded: LoadedConfig) -> list[Check]:
    from rune.app import mcp_servers

    with mcp_servers(loaded.mcp_servers, loaded.settings) as manager:
        return mcp_checks(manager)


def mcp_checks(manager: Any) -> list[Check]:
    """One check per MCP server of ``manager`` (an ``McpManager``, started): its state, where
    it runs, its tools and how many ask first."""
    from rune.text import plural

    checks = []
    for status in manager.statuses():
        name = f"mcp {status.name}"
        if status.state != "ready":
            checks.append(Check(name, False, f"{status.state}: {status.error}", MCP_FIX))
            continue
        asking = [t.name for t in status.tools if t.asks]
        tools = f"{plural(len(status.tools), 'tool')}, {len(asking)} ask first" + (
            f" ({', '.join(asking)})" if asking else ""
        )
        checks.append(
            Check(name, True, f"ready in {status.startup:.1f} s; {status.where()}; {tools}")
        )
    return checks


MCP_FIX = "check its command or url in your user config; `rune mcp` lists every server"


def run_doctor(loaded: LoadedConfig, console: Console, *, verbose: bool = False) -> int:
    spinner = new_console(stderr=True)
    waiting = (
        spinner.status("checking the server, the sandbox and containment…")
        if spinner.is_terminal
        else nullcontext()
    )
    with waiting:
        checks = run_checks(loaded, verbose=verbose)
    for check in checks:
        mark = Text("ok  ", style="green") if check.ok else Text("!!  ", style="bold red")
        console.print(mark + Text(f"{check.name}: {check.found}"), soft_wrap=True)
        if check.fix:
            console.print(Text(f"    → {check.fix}", style="yellow"), soft_wrap=True)
    return EXIT_OK if all(c.ok for c in checks) else EXIT_FAILED
