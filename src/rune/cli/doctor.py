"""``rune doctor``: each check says what it found and, when wrong, what to do about it."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.text import Text

from rune.cli.exits import EXIT_FAILED, EXIT_OK
from rune.config import LoadedConfig
from rune.errors import RuneError

PROTOCOL_NOTES = {
    "native": "native tool calls (the model has tools)",
    "text": "text protocol (the model has no native tools; Rune parses calls from its text)",
    "constrained": "constrained: each reply is one JSON object the server's grammar checks",
}


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    found: str
    fix: str = ""


def run_checks(loaded: LoadedConfig) -> list[Check]:
    from rune.app import (
        DEFAULT_WINDOW,
        DEMO_MODEL_NOTICE,
        NO_BACKEND_HELP,
        RECOMMENDED_MODEL,
        capabilities,
        choose_backend,
        commands_contained,
        contained_environment_report,
        mcp_servers,
        open_transport,
        policy_report,
        protocol_for,
        sandbox_policy,
    )
    from rune.catalog import DEFAULT_MODEL, pulled_models

    settings = loaded.settings
    checks = [
        Check(
            "config",
            not loaded.refused,
            ", ".join(str(f) for f in loaded.files) or "no config files (defaults)",
            "; ".join(loaded.refused),
        )
    ]
    try:
        choice = choose_backend(settings)
    except RuneError as err:
        checks.append(Check("server", False, str(err).splitlines()[0], NO_BACKEND_HELP))
        choice = None
    if choice is not None:
        with ExitStack() as stack:
            try:
                transport, model = open_transport(choice, settings, stack)
                caps = capabilities(transport, model)
            except RuneError as err:
                fix = (
                    f"check that the server runs at {choice.label}; `rune models` lists what it has"
                )
                checks.append(Check("server", False, f"{choice.label}: {err.kind}: {err}", fix))
            else:
                checks.append(Check("server", True, f"{choice.label} ({choice.reason})"))
                protocol = protocol_for(settings, choice)
                if protocol == "auto":
                    protocol = "native" if caps.tools else "text"
                checks.append(Check("protocol", True, PROTOCOL_NOTES[protocol]))
                checks.append(
                    Check(
                        "model",
                        caps.tools or protocol == "constrained",
                        f"{model}: tools {'yes' if caps.tools else 'no'}, "
                        f"thinking {'yes' if caps.thinking else 'no'}",
                        ""
                        if caps.tools or protocol == "constrained"
                        else (
                            "this model has no native tool calling; Rune uses its text "
                            f"protocol, which small models follow poorly. Use a tool-capable "
                            f"model such as {RECOMMENDED_MODEL} under Ollama."
                        ),
                    )
                )
                window = caps.context_length
                small = window is not None and window < 4096
                checks.append(
                    Check(
                        "context",
                        not small,
                        (
                            f"{window} tokens"
                            if window
                            else f"the server does not say; Rune assumes {DEFAULT_WINDOW} tokens "
                            "(set max_context if you know it) and cuts tool output to fit"
                        )
                        + (f" (capped at {settings.max_context})" if settings.max_context else ""),
                        "a window under 4096 tokens fills after a few file reads; raise "
                        "num_ctx in the model or use a larger model"
                        if small
                        else "",
                    )
                )
        if choice.demo_model:
            checks.append(Check("demo model", False, str(choice.model_path), DEMO_MODEL_NOTICE))
    pulled = pulled_models()
    checks.append(
        Check(
            "embedded",
            bool(pulled),
            f"without a server Rune runs {pulled[0].name} itself ({pulled[0].path})"
            if pulled
            else "no model pulled for the embedded backend",
            "" if pulled else f"`rune pull {DEFAULT_MODEL}` (about 1.1 GB, once)",
        )
    )
    policy = sandbox_policy(settings)
    checks.append(
        Check(
            "sandbox",
            True,
            f"write: {', '.join(policy.describe_write_roots())}; "
            f"read: {', '.join(policy.describe_read_roots())}",
        )
    )
    # The effective policy, in full: what the README's sandbox section promises, as configured.
    checks += [Check(f"sandbox, {what}", True, detail) for what, detail in policy_report(settings)]
    if loaded.mcp_servers:
        with mcp_servers(loaded.mcp_servers, settings) as manager:
            checks += mcp_checks(manager)
    contained, how = commands_contained()
    checks.append(
        Check(
            "containment",
            contained,
            f"commands run contained: {how}" if contained else f"commands uncontained: {how}",
            ""
            if contained
            else "install bubblewrap (e.g. `apt install bubblewrap`) so "
            "commands run without network and with a read-only system",
        )
    )
    checks.append(Check("environment", True, contained_environment_report()))
    return checks


def mcp_checks(manager: Any) -> list[Check]:
    """One check per MCP server of ``manager`` (an ``McpManager``, started): its state, where
    it runs, its tools and how many ask first."""
    checks = []
    for status in manager.statuses():
        name = f"mcp {status.name}"
        if status.state != "ready":
            checks.append(Check(name, False, f"{status.state}: {status.error}", MCP_FIX))
            continue
        asking = [t.name for t in status.tools if t.asks]
        tools = f"{len(status.tools)} tools, {len(asking)} ask first" + (
            f" ({', '.join(asking)})" if asking else ""
        )
        checks.append(
            Check(name, True, f"ready in {status.startup:.1f} s; {status.where()}; {tools}")
        )
    return checks


MCP_FIX = "check its command or url in your user config; `rune mcp` lists every server"


def run_doctor(loaded: LoadedConfig, console: Console) -> int:
    checks = run_checks(loaded)
    for check in checks:
        mark = Text("ok  ", style="green") if check.ok else Text("!!  ", style="bold red")
        console.print(mark + Text(f"{check.name}: {check.found}"), soft_wrap=True)
        if check.fix:
            console.print(Text(f"    → {check.fix}", style="yellow"), soft_wrap=True)
    return EXIT_OK if all(c.ok for c in checks) else EXIT_FAILED
