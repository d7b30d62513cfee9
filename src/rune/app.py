"""The composition root: the only module that picks concrete classes.

It turns :class:`rune.config.Settings` into a running agent — a transport (choosing the
backend when none is configured), the sandboxed executor, a session, and the operator — and
owns their shutdown (an embedded server stops on exit, Ctrl-C or error). The CLI and the TUI
get a :class:`Rune` from :func:`open_rune` and never build clients themselves.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from rune import events as ev
from rune.catalog import DEFAULT_MODEL, CatalogModel, catalog_model_for, pulled_models
from rune.catalog import find as find_catalog_model
from rune.config import ApprovalMode, LoadedConfig, McpServerConfig, Settings
from rune.distribution import EMBEDDED_INSTALL_HINT, embedded_installed
from rune.errors import BackendUnavailable, ConfigError
from rune.grants import FILE_EDIT_TOOLS as FILE_EDIT_TOOLS  # for the edges
from rune.grants import Grant
from rune.messages import OperatorResponse, PendingApproval
from rune.paths import prompt_cache_dir
from rune.tool_executor import ToolExecutor
from rune.tools.builtin import BUILTIN_TOOLS
from rune.tools.sandbox import SandboxPolicy
from rune.tools.spec import AutoCheck
from rune.tools.testing import RUN_TESTS, auto_check
from rune.transport.base import DEFAULT_WINDOW as DEFAULT_WINDOW  # for `rune doctor`
from rune.transport.base import Capabilities, Transport
from rune.transport.repetition import RepetitionGuard
from rune.transport.watch import WatchedTransport

BackendKind = Literal["ollama", "openai", "embedded", "scripted"]
# Tools whose approval `--yes` may give: they change files and show a diff. Anything else
# (commands, tools added later) needs `--yes --yes`, so an unknown tool fails closed.
OLLAMA_PROBE_SECONDS = 1.0
#: the window the embedded server gives a GGUF file that is not in the catalogue
EMBEDDED_CONTEXT = 8192
# A 135M model left alone rambles for minutes on two cores; the demo caps each reply.
DEMO_MODEL_MAX_OUTPUT_TOKENS = 256
RECOMMENDED_MODEL = "qwen3"
PULL_HINT = f"`rune pull {DEFAULT_MODEL}` (about 1.1 GB, once)"
DEMO_MODEL_NOTICE = (
    "The built-in SmolLM2-135M model is a demonstration: it shows the loop working on a real "
    f"model but rarely fixes anything. For real work pull a coder: {PULL_HINT}, or use a "
    f"tool-capable model such as {RECOMMENDED_MODEL} under Ollama."
)


def no_backend_help(embedded: bool | None = None) -> str:
    """What to do when no server answers and no model is configured: what works with what is
    installed first (``embedded``: whether the embedded extra is; None: look)."""
    if embedded is None:
        embedded = embedded_installed()
    ollama = (
        f"  - start Ollama (https://ollama.com) and `ollama pull {RECOMMENDED_MODEL}`"
        " (or set OLLAMA_HOST);\n"
    )
    url = (
        "  - point Rune at an OpenAI-compatible server: --backend http://127.0.0.1:8080/v1"
        " (llama-server, vLLM, LM Studio);\n"
    )
    if embedded:
        first = [
            f"  - pull a small coding model Rune runs itself: {PULL_HINT};\n",
            ollama,
            url,
            "  - run a GGUF file in-process: --model path/to.gguf;\n",
        ]
    else:
        first = [
            ollama,
            url,
            f"  - or let Rune run a model itself: first {EMBEDDED_INSTALL_HINT},"
            f" then {PULL_HINT};\n",
        ]
    return (
        "No model server found and no model configured. Any one of these works:\n"
        + "".join(first)
        + "  - or watch the whole flow with no model at all, in a throw-away project of its"
        " own: rune demo --backend scripted."
    )


NO_BACKEND_HELP = no_backend_help(embedded=True)


def auto_approves(mode: ApprovalMode, pending: PendingApproval) -> bool:
    """Whether the approval mode answers ``pending`` without asking a human.

    A sensitive change (outside the workspace, or a file that steers an agent or runs code)
    is always asked for, whatever the mode.
    """
    if pending.sensitive is not None:
        return False
    if mode == "all":
        return True
    return mode == "edits" and pending.name in FILE_EDIT_TOOLS


def sandbox_policy(settings: Settings) -> SandboxPolicy:
    """The policy the ``rune`` command uses: write only the workspace (plus the directories
    the user's own config or flags add); read the workspace, those directories and Python's
    standard library and site-packages freely, and the rest of home, /tmp (and /mnt/workdrive)
    once the user approves (``sandbox.workspace_only``: nothing outside is asked for).
    ``SandboxPolicy.default()``, which reads and writes all of home, stays the library's
    default."""
    workspace = Path(os.path.realpath(settings.workspace))
    extra_write = list(settings.sandbox_write_roots)
    extra_read = list(settings.sandbox_read_roots)
    allowed = list(settings.sandbox_allow_credentials)
    home = Path.home()
    contained = list(settings.sandbox_contained_reads)
    if settings.sandbox_workspace_only:
        return SandboxPolicy(
            read_roots=[workspace, *extra_write, *extra_read],
            write_roots=[workspace, *extra_write],
            home=home,
            allow_credentials=allowed,
            contained_reads=contained,
        )
    base = SandboxPolicy.default()
    return SandboxPolicy(
        read_roots=[workspace, *extra_write, *extra_read, *python_library_dirs(home)],
        write_roots=[workspace, *extra_write],
        blocked=base.blocked,
        ask_read_roots=base.read_roots,
        home=base.home,
        allow_credentials=allowed,
        contained_reads=contained,
    )


def python_library_dirs(home: Path) -> list[Path]:
    """Where Rune's interpreter keeps its standard library and site-packages (the user's
    too): a coding model reads them to see how a library works. One that would hold the whole
    home (an odd prefix) is left out."""
    import site
    import sysconfig

    names = ("stdlib", "platstdlib", "purelib", "platlib")
    found = [sysconfig.get_path(name) for name in names]
    found.append(site.getusersitepackages())
    home = home.resolve()
    dirs = [
        path
        for path in dict.fromkeys(Path(os.path.realpath(p)) for p in found if p)
        if path.is_dir() and not home.is_relative_to(path)
    ]
    # One inside another (a venv's site-packages in its lib) is said once.
    return [p for p in dirs if not any(p != o and p.is_relative_to(o) for o in dirs)]


def policy_report(settings: Settings) -> list[tuple[str, str]]:
    """The effective sandbox policy beyond its roots, as (what, details) lines."""
    from rune.tools.names import CREDENTIALS, HOME_PROTECTED, PROTECTED, RUNE_OWN, SENSITIVE

    policy = sandbox_policy(settings)
    allowed = ", ".join(str(p) for p in settings.sandbox_allow_credentials) or "none"
    yes = {
        "ask": "every change and command asks",
        "edits": "--yes: file changes inside the workspace that touch nothing protected or "
        "sensitive are approved; everything else asks",
        "all": "--yes --yes: file changes and commands are approved, except sensitive changes",
    }[settings.approval]
    asked = ", ".join(policy.describe_ask_read_roots()) or "nothing (only the roots above)"
    return [
        (
            "read after approval",
            f"{asked}: once per directory tree for the session, asked even under --yes; "
            "refused when Rune is not at a terminal",
        ),
        ("never read or written", ", ".join(str(p) for p in policy.blocked)),
        (
            "credentials (never read or written)",
            f"{', '.join(CREDENTIALS.entries())}; Rune's own config, key and sessions "
            f"({', '.join(RUNE_OWN.entries())} and where RUNE_DATA_DIR points); "
            f"readable by your config: {allowed}",
        ),
        (
            "protected (never written)",
            "; ".join(
                [f"{n.what}: {', '.join(n.entries())}" for n in PROTECTED]
                + [f"in home: {', '.join(HOME_PROTECTED)}"]
            ),
        ),
        (
            "sensitive (always asks, even under --yes)",
            "; ".join(f"{n.what}: {', '.join(n.entries())}" for n in SENSITIVE)
            + "; any change outside the workspace",
        ),
        ("approval", yes),
    ]


@contextmanager
def mcp_servers(servers: tuple[McpServerConfig, ...], settings: Settings) -> Iterator[Any]:
    """The user's MCP servers, started (each ready or failed) and stopped on exit; None when
    there are none (the SDK is then never imported)."""
    if not servers:
        yield None
        return
    from rune.tools.mcp.client import McpManager

    with McpManager(
        servers, workspace=settings.workspace, policy=sandbox_policy(settings)
    ) as manager:
        yield manager


def commands_contained() -> tuple[bool, str]:
    """Whether a shell command would run inside bubblewrap here, and what was found."""
    from rune.tools.commands import containment_report

    return containment_report()


def contained_environment_report() -> str:
    """The environment allow-list of contained runs, in one line."""
    from rune.tools.containment import environment_report

    return environment_report()


# --- backend selection --------------------------------------------------------------------


@dataclass(frozen=True)
class BackendChoice:
    """Which server to talk to, and why it was chosen (shown by ``doctor`` and ``config``)."""

    kind: BackendKind
    reason: str
    url: str | None = None
    model_path: Path | None = None
    demo_model: bool = False
    #: the catalogue model the embedded backend runs, when it is one (its name and defaults)
    catalog: CatalogModel | None = None

    @property
    def label(self) -> str:
        """What a session records, and :func:`_settings_for_session` reads back."""
        if self.kind == "embedded":
            return f"embedded:{self.model_path}"
        if self.kind == "openai":
            return str(self.url)
        return self.kind


def ollama_host(settings: Settings) -> str:
    from rune.transport.ollama import resolve_host

    return resolve_host(settings.ollama_host)


def ollama_answers(host: str, timeout: float = OLLAMA_PROBE_SECONDS) -> bool:
    """Whether an Ollama server answers at ``host`` within ``timeout`` seconds."""
    import httpx

    try:
        reply = httpx.get(f"{host}/api/version", timeout=timeout, trust_env=False)
    except httpx.HTTPError:
        return False
    return reply.status_code == 200


def _demo_model_path() -> Path | None:
    try:
        from rune.embedded import demo_model_path
    except ImportError:
        return None
    return demo_model_path()


def _best_pulled() -> CatalogModel | None:
    pulled = pulled_models()
    return pulled[0] if pulled else None


def _embedded(path: Path, reason: str, *, demo: bool = False) -> BackendChoice:
    return BackendChoice(
        "embedded", reason, model_path=path, demo_model=demo, catalog=catalog_model_for(path)
    )


def _pulled(model: CatalogModel, reason: str) -> BackendChoice:
    return BackendChoice(
        "embedded",
        reason,
        model_path=model.path,
        demo_model=model.rank <= DEMO_RANK,
        catalog=model,
    )


def _not_pulled(model: CatalogModel) -> BackendUnavailable:
    return BackendUnavailable(
        f"{model.name} is not pulled yet: `rune pull {model.name}` "
        f"({model.size / 1e9:.1f} GB, once), or serve it with Ollama (`ollama serve`)"
    )


#: catalogue models ranked this low only show the loop working (SmolLM2)
DEMO_RANK = 10


def choose_backend(
    settings: Settings,
    *,
    probe: Callable[[str], bool] = ollama_answers,
    demo_model: Callable[[], Path | None] = _demo_model_path,
    best_pulled: Callable[[], CatalogModel | None] = _best_pulled,
) -> BackendChoice:
    """The backend that serves the model the user asked for, never another one.

    A configured backend is used as configured. Otherwise: a ``.gguf`` model runs embedded;
    Ollama is used when it answers; else a catalogue model runs embedded when it is pulled.
    Only when no model was named does Rune pick one itself (the best pulled catalogue model,
    else the SmolLM2 demo model), and it says so in ``reason``.
    """
    backend, model = settings.backend, settings.model
    gguf = Path(model).expanduser() if model and model.endswith(".gguf") else None
    named = find_catalog_model(model) if model else None
    if backend == "scripted":
        return BackendChoice("scripted", "configured")
    if backend == "ollama":
        return BackendChoice("ollama", "configured", url=ollama_host(settings))
    if backend is not None and backend != "embedded":
        return BackendChoice("openai", "configured", url=backend)
    path = gguf or (settings.embedded_model if not model else None)
    if path is not None:
        return _embedded(path, "configured model file")
    if backend == "embedded":
        if named is not None:
            if not named.is_pulled():
                raise _not_pulled(named)
            return _pulled(named, "configured")
        if model:
            raise BackendUnavailable(
                f"backend 'embedded' runs GGUF files and pulled models, not {model!r}: "
                f"pass --model path/to/model.gguf or a pulled model ({PULL_HINT})"
            )
        return _embedded_default(best_pulled, demo_model, "configured")
    host = ollama_host(settings)
    if probe(host):
        return BackendChoice("ollama", f"Ollama answered at {host}", url=host)
    if named is not None:
        if not named.is_pulled():
            raise _not_pulled(named)
        return _pulled(named, f"no Ollama at {host}; {named.name} runs embedded")
    if model:
        raise BackendUnavailable(
            f"No Ollama answered at {host}, and Rune cannot run {model!r} itself. Start "
            f"Ollama (`ollama serve`, then `ollama pull {model}`), pass --backend URL of an "
            f"OpenAI-compatible server that has it, or use a model Rune runs itself: "
            f"{PULL_HINT}, then --model {DEFAULT_MODEL}."
        )
    return _embedded_default(best_pulled, demo_model, f"no Ollama at {host}")


def _embedded_default(
    best_pulled: Callable[[], CatalogModel | None],
    demo_model: Callable[[], Path | None],
    why: str,
) -> BackendChoice:
    """No model named: the best pulled catalogue model, else the demo model; neither when the
    embedded backend that would run them is not installed."""
    if not embedded_installed():
        raise BackendUnavailable(
            f"{why[:1].upper()}{why[1:]}, and the embedded backend is not installed.\n"
            + no_backend_help(False)
        )
    pulled = best_pulled()
    if pulled is not None:
        return _pulled(pulled, f"{why}; no model named, so the best pulled one: {pulled.name}")
    found = demo_model()
    if found is not None:
        return _embedded(found, f"{why}; no model pulled, so the demo model", demo=True)
    raise BackendUnavailable(
        f"{why[:1].upper()}{why[1:]}, and no model is pulled.\n{no_backend_help(True)}"
    )


def open_transport(
    choice: BackendChoice, settings: Settings, stack: ExitStack, *, replayed: int = 0
) -> tuple[Transport, str]:
    """Start what ``choice`` needs (closed by ``stack``); return the transport and model name.

    ``replayed`` is how many model turns a resumed session already holds: the scripted
    backend skips that many, so it goes on where it stopped.
    """
    if choice.kind == "scripted":
        from rune.demo import SCRIPTED_MODEL, scripted_demo_transport

        return scripted_demo_transport(skip=replayed), settings.model or SCRIPTED_MODEL
    if choice.kind == "ollama":
        from rune.transport.ollama import OllamaChatTransport

        transport: Any = OllamaChatTransport(
            choice.url, num_ctx=settings.max_context, read_timeout=settings.timeout
        )
        stack.callback(transport.close)
        return transport, settings.model or _pick_model(transport, choice)
    if choice.kind == "embedded":
        assert choice.model_path is not None
        if not choice.model_path.is_file():
            raise BackendUnavailable(f"model file not found: {choice.model_path}")
        try:
            from rune.embedded import EmbeddedLlamaServer
        except ImportError as err:
            raise BackendUnavailable(
                f"the embedded backend is not available ({err}); "
                f"install it with: {EMBEDDED_INSTALL_HINT}"
            ) from None
        window = choice.catalog.context if choice.catalog else EMBEDDED_CONTEXT
        server = stack.enter_context(
            EmbeddedLlamaServer(
                choice.model_path,
                ctx=min(window, settings.max_context or window),
                slot_dir=prompt_cache_dir(),
            )
        )
        url, model = server.base_url, server.model
    else:
        url, model = str(choice.url), settings.model or ""
    from rune.transport.openai_compat import OpenAICompatTransport

    transport = OpenAICompatTransport(
        url,
        api_key=settings.api_key,
        context_length=settings.max_context,
        read_timeout=settings.timeout,
    )
    stack.callback(transport.close)
    if choice.kind == "embedded":
        from rune.prompt_cache import SlotCache

        cached = SlotCache(transport, url, prompt_cache_dir(), server.slot_file_name())
        return cached, model
    return transport, model or _pick_model(transport, choice)


def _pick_model(transport: Any, choice: BackendChoice) -> str:
    """No model configured: the first tool-capable model the server lists, else the first."""
    models = list(transport.list_models())
    if not models:
        hint = f"`ollama pull {RECOMMENDED_MODEL}`" if choice.kind == "ollama" else "load one"
        raise ConfigError(f"no model configured and {choice.label} has none; {hint}")
    for name in models:
        if transport.capabilities(name).tools:
            return str(name)
    return str(models[0])


def capabilities(transport: Transport, model: str) -> Capabilities:
    return Capabilities(
        tools=transport.supports_tools(model),
        thinking=transport.supports_thinking(model),
        context_length=transport.context_length(model),
    )


# --- the running agent --------------------------------------------------------------------


class Driver(Protocol):
    """What the edges drive: ``rune.operator.RuneOperator``."""

    @property
    def pending(self) -> PendingApproval | None: ...

    def send(self, text: str) -> OperatorResponse: ...

    def resume(self) -> OperatorResponse | None: ...

    def approve(self) -> OperatorResponse: ...

    def reject(self, reason: str = "") -> OperatorResponse: ...

    def allow(self, grant: Grant) -> None: ...

    def granted(self, pending: PendingApproval) -> Grant | None: ...

    def retry(self) -> OperatorResponse | None: ...

    def reload(self) -> None: ...


@dataclass
class EventRelay:
    """The operator's ``on_event``; an edge plugs its own sink in after the operator exists."""

    target: ev.EventSink = ev.ignore

    def __call__(self, event: ev.LoopEvent) -> None:
        self.target(event)


@dataclass
class Rune:
    """One agent ready to drive: what the CLI and TUI hold."""

    settings: Settings
    backend: BackendChoice
    transport: WatchedTransport
    model: str
    capabilities: Capabilities
    operator: Driver
    session_id: str
    relay: EventRelay = field(default_factory=EventRelay)
    #: the MCP servers' manager (None without servers): ``problems()`` for the user
    mcp: Any = None
    #: why Rune chose the model itself (no model was named), else None
    picked: str | None = None

    @property
    def budget(self) -> int:
        return self.settings.max_iterations

    def startup_warnings(self) -> list[str]:
        """What the user should hear before the first turn: each MCP server that failed to
        start, each tool a server listed that Rune left out (one line each)."""
        return list(self.mcp.problems()) if self.mcp is not None else []

    @property
    def workspace(self) -> Path:
        return Path(os.path.realpath(self.settings.workspace))


@dataclass(frozen=True)
class Opening:
    """What is known before the server is asked anything: enough for the first line."""

    model: str
    backend: BackendChoice
    picked: str | None
    session_id: str | None


def session_store() -> Any:
    from rune.sessions import SessionStore

    return SessionStore()


def check_workspace(settings: Settings) -> Path:
    """The workspace, resolved; a ConfigError when it is not an existing directory."""
    workspace = Path(os.path.realpath(settings.workspace))
    if not workspace.exists():
        raise ConfigError(f"the workspace {workspace} does not exist; create it or pick another")
    if not workspace.is_dir():
        raise ConfigError(f"the workspace {workspace} is not a directory")
    return workspace


def picked_by_rune(settings: Settings, choice: BackendChoice) -> str | None:
    """Why Rune chose the model itself, when the user named none."""
    if choice.kind == "embedded":
        return None if settings.model or settings.embedded_model else choice.reason
    if choice.kind in ("ollama", "openai") and not settings.model:
        return (
            "no model named, so the first tool-capable one the server lists; --model NAME chooses"
        )
    return None


@contextmanager
def open_rune(
    loaded: LoadedConfig,
    *,
    session_id: str | None = None,
    title: str = "",
    announce: Callable[[Opening], None] | None = None,
    status: Callable[[str], None] | None = None,
    can_ask: bool = False,
) -> Iterator[Rune]:
    """Build the agent for a new session (or reopen ``session_id``); close all on exit.

    ``can_ask``: someone at a terminal can approve a read outside the workspace (else such a
    read is refused with a message the model reads, and the run goes on).

    ``announce`` hears the model and backend as soon as they are chosen, before the server is
    asked anything (which may hang until the read timeout); ``status`` hears each slow step
    as it starts ("starting the embedded server", "asking the server about the model").
    """
    settings = loaded.settings
    store = session_store()
    say = status or (lambda _text: None)
    with ExitStack() as stack:
        session = None
        if session_id is not None:
            session = store.open(session_id)
            stack.callback(_close, session)
            settings = _settings_for_session(loaded, session)
        workspace = check_workspace(settings)
        choice = choose_backend(settings)
        if choice.kind == "embedded":
            say(f"starting the embedded llama.cpp server with {choice.model_path}")
        elif choice.kind in ("ollama", "openai") and not settings.model:
            say(f"asking {choice.label} which models it serves")
        replayed = _assistant_turns(session) if session is not None else 0
        relay = EventRelay()
        inner, model = open_transport(choice, settings, stack, replayed=replayed)
        transport = watched_transport(inner, relay)
        picked = picked_by_rune(settings, choice)
        if announce is not None:
            announce(Opening(model, choice, picked, session.id if session else None))
        say(f"asking {choice.label} about {model}")
        caps = capabilities(transport, model)
        if session is None:
            session = store.create(
                model=model,
                workspace=str(workspace),
                backend=choice.label,
                title=title,
            )
            stack.callback(_close, session)
        if loaded.mcp_servers:
            say("starting the MCP servers")
        manager = stack.enter_context(mcp_servers(loaded.mcp_servers, settings))
        operator = build_operator(
            settings,
            choice,
            transport,
            model,
            session=session,
            on_event=relay,
            mcp=manager,
            can_ask=can_ask,
        )
        yield Rune(
            settings,
            choice,
            transport,
            model,
            caps,
            operator,
            session.id,
            relay,
            manager,
            picked=picked,
        )


def watched_transport(inner: Transport, on_event: ev.EventSink) -> WatchedTransport:
    """The transport a run talks to: watched (progress, stop, each call's cost) around a guard
    that stops a reply repeating itself (:mod:`rune.transport.repetition`)."""
    return WatchedTransport(RepetitionGuard(inner), on_event=on_event)


def build_operator(
    settings: Settings,
    choice: BackendChoice,
    transport: Transport,
    model: str,
    *,
    session: Any = None,
    on_event: ev.EventSink | None = None,
    tools: Any = None,
    mcp: Any = None,
    can_ask: bool = False,
    without_assists: frozenset[str] = frozenset(),
) -> Any:
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
    executor: Any = ToolExecutor(
        policy,
        settings.workspace,
        tools=BUILTIN_TOOLS if tools is None else tools,
        changes=changes,
        ask_reads=can_ask,
    )
    assists = assists_for(settings, executor, without=without_assists)
    if mcp is not None:
        from rune.tools.mcp.executor import CombinedExecutor, McpExecutor

        executor = CombinedExecutor(executor, McpExecutor(mcp))
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


def _generation_options(settings: Settings, choice: BackendChoice) -> dict[str, Any] | None:
    """Ollama-style options: the settings, over the catalogue model's own defaults."""
    options: dict[str, Any] = dict(choice.catalog.options) if choice.catalog else {}
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
) -> list[Any]:
    """The small-model help the loop runs (:mod:`rune.assists`): every assist but those named
    in ``without``; the tests a request names when ``auto_tests`` is on and the executor can
    run tests, and the sampled repair, which tries changes with the built-in ``executor``
    (an MCP server's tools are never tried)."""
    from rune.assists import standard_assists

    auto_checks = None
    if settings.auto_tests and any(spec.name == RUN_TESTS.spec.name for spec in executor.specs()):
        workspace, policy = executor.workspace, executor.policy

        def auto_checks(request: str) -> AutoCheck | None:
            return auto_check(request, workspace, policy)

    return standard_assists(auto_checks=auto_checks, trials=executor, without=without)


def protocol_for(settings: Settings, choice: BackendChoice) -> str:
    """The tool protocol to run: the setting, and for ``auto`` this rule: the embedded backend
    (small models Rune runs itself, which write native calls as prose) gets the constrained
    protocol; a server gets the runtime's rule (docs/protocols.md: native calls when its model
    has tools, else the text protocol), which the runtime applies after discovery."""
    if settings.protocol != "auto":
        return settings.protocol
    return "constrained" if choice.kind == "embedded" else "auto"


def _assistant_turns(session: Any) -> int:
    return sum(1 for m in session.messages if m.get("role") == "assistant")


def _close(resource: Any) -> None:
    close = getattr(resource, "close", None)
    if close is not None:
        close()


def _settings_for_session(loaded: LoadedConfig, session: Any) -> Settings:
    """A resumed session keeps its model, backend and workspace unless a flag says otherwise."""
    recorded: dict[str, Any] = {}
    meta = session.meta
    flagged = {k for k, src in loaded.sources.items() if src.startswith("flag")}
    if "model" not in flagged:
        recorded["model"] = meta.get("model") or None
    if "workspace" not in flagged and meta.get("workspace"):
        recorded["workspace"] = Path(meta["workspace"])
    if "backend" not in flagged:
        backend = str(meta.get("backend") or "")
        if backend.startswith("embedded:"):
            recorded["backend"] = "embedded"
            recorded["embedded_model"] = Path(backend.removeprefix("embedded:"))
            recorded["model"] = None
        else:
            recorded["backend"] = backend
    return loaded.settings.model_copy(update=recorded)
