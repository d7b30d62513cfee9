"""Which model server a run talks to: the backend as a tagged union (one class per kind, each
with what only it has), the rule that picks one when the settings do not, and the help when
none can be had.

A session records its backend in its header (:attr:`OllamaBackend.header` and the others) and
a resumed session reads it back with :func:`settings_from_header`, the one place that knows
the header's forms: ``ollama``, ``scripted``, a base URL, or ``embedded:PATH``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rune.distribution import embedded_install_hint, embedded_installed
from rune.errors import BackendUnavailable
from rune.models.catalog import DEFAULT_MODEL, CatalogModel, catalog_model_for, pulled_models
from rune.models.catalog import find as find_catalog_model
from rune.settings.config import Settings

BackendKind = Literal["ollama", "openai", "embedded", "scripted"]

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
            f"  - or let Rune run a model itself: first {embedded_install_hint()},"
            f" then {PULL_HINT};\n",
        ]
    return (
        "No model server found and no model configured. Any one of these works:\n"
        + "".join(first)
        + "  - or watch the whole flow with no model at all, in a throw-away project of its"
        " own: rune demo --backend scripted."
    )


NO_BACKEND_HELP = no_backend_help(embedded=True)


# --- the backends -------------------------------------------------------------------------


@dataclass(frozen=True)
class OllamaBackend:
    """An Ollama server at ``url``; ``reason``: why it was chosen (``doctor``, ``config``)."""

    reason: str
    url: str
    kind: Literal["ollama"] = "ollama"
    demo_model: Literal[False] = False
    catalog: None = None

    @property
    def label(self) -> str:
        return "ollama"

    @property
    def header(self) -> str:
        return "ollama"


@dataclass(frozen=True)
class OpenAIBackend:
    """An OpenAI-compatible server (llama-server, vLLM, LM Studio) at the base URL ``url``."""

    reason: str
    url: str
    kind: Literal["openai"] = "openai"
    demo_model: Literal[False] = False
    catalog: None = None

    @property
    def label(self) -> str:
        return self.url

    @property
    def header(self) -> str:
        return self.url


@dataclass(frozen=True)
class EmbeddedBackend:
    """A GGUF file Rune runs itself (llama.cpp in-process). ``catalog``: the catalogue model
    it is, when it is one (its name and defaults); ``demo_model``: one that only shows the
    loop working. ``url``: a server already running it (the benchmark starts its own)."""

    reason: str
    model_path: Path | None
    catalog: CatalogModel | None = None
    demo_model: bool = False
    url: str | None = None
    kind: Literal["embedded"] = "embedded"

    @property
    def label(self) -> str:
        return f"embedded:{self.model_path}"

    @property
    def header(self) -> str:
        return f"{EMBEDDED_HEADER}{self.model_path}"


@dataclass(frozen=True)
class ScriptedBackend:
    """The demo's fixed turns, replayed (tests, CI, a machine without a model)."""

    reason: str
    kind: Literal["scripted"] = "scripted"
    demo_model: Literal[False] = False
    catalog: None = None
    url: None = None

    @property
    def label(self) -> str:
        return "scripted"

    @property
    def header(self) -> str:
        return "scripted"


BackendChoice = OllamaBackend | OpenAIBackend | EmbeddedBackend | ScriptedBackend
#: how an embedded backend's header begins; the model file's path follows
EMBEDDED_HEADER = "embedded:"


def settings_from_header(header: str) -> dict[str, object]:
    """The settings that bring back the backend a session's header names (see the module)."""
    if header.startswith(EMBEDDED_HEADER):
        path = Path(header.removeprefix(EMBEDDED_HEADER))
        return {"backend": "embedded", "embedded_model": path, "model": None}
    return {"backend": header}


# --- choosing one -------------------------------------------------------------------------


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
        from rune.models.embedded import demo_model_path
    except ImportError:
        return None
    return demo_model_path()


def _best_pulled() -> CatalogModel | None:
    pulled = pulled_models()
    return pulled[0] if pulled else None


def _embedded(path: Path, reason: str, *, demo: bool = False) -> EmbeddedBackend:
    return EmbeddedBackend(reason, path, catalog_model_for(path), demo_model=demo)


def _pulled(model: CatalogModel, reason: str) -> EmbeddedBackend:
    return EmbeddedBackend(reason, model.path, model, demo_model=model.rank <= DEMO_RANK)


def _not_pulled(model: CatalogModel) -> BackendUnavailable:
    pull = f"`rune pull {model.name}` ({model.size / 1e9:.1f} GB, once)"
    if not embedded_installed():
        # pull refuses without the backend that would run the model: say that first
        return BackendUnavailable(
            f"{model.name} runs in Rune's embedded backend, which is not installed: "
            f"{embedded_install_hint()}; then {pull}. Or serve it with Ollama (`ollama serve`)"
        )
    return BackendUnavailable(
        f"{model.name} is not pulled yet: {pull}, or serve it with Ollama (`ollama serve`)"
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
        return ScriptedBackend("configured")
    if backend == "ollama":
        return OllamaBackend("configured", ollama_host(settings))
    if backend is not None and backend != "embedded":
        return OpenAIBackend("configured", backend)
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
                f"pass --model path/to/model.gguf or {_one_it_runs(best_pulled)}"
            )
        return _embedded_default(best_pulled, demo_model, "configured")
    host = ollama_host(settings)
    if probe(host):
        return OllamaBackend(f"Ollama answered at {host}", host)
    if named is not None:
        if not named.is_pulled():
            raise _not_pulled(named)
        return _pulled(named, f"no Ollama at {host}; {named.name} runs embedded")
    if model:
        raise BackendUnavailable(
            f"No Ollama answered at {host}, and Rune cannot run {model!r} itself. Start "
            f"Ollama (`ollama serve`, then `ollama pull {model}`), pass --backend URL of an "
            f"OpenAI-compatible server that has it, or {_one_it_runs(best_pulled)}."
        )
    return _embedded_default(best_pulled, demo_model, f"no Ollama at {host}")


def _one_it_runs(best_pulled: Callable[[], CatalogModel | None]) -> str:
    """The way out to a model Rune runs itself: the best one pulled, else how to pull one."""
    pulled = best_pulled()
    if pulled is not None:
        return f"use a model Rune runs itself, already pulled: --model {pulled.name}"
    return f"use a model Rune runs itself: {PULL_HINT}, then --model {DEFAULT_MODEL}"


def _embedded_default(
    best_pulled: Callable[[], CatalogModel | None],
    demo_model: Callable[[], Path | None],
    why: str,
) -> EmbeddedBackend:
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
