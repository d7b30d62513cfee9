"""Starting what a backend needs and reaching its model: the transport (an embedded server
started first, its prompt cache put around it), the model's name when none was given, and
what the server says the model can do."""

from __future__ import annotations

from contextlib import ExitStack
from typing import TYPE_CHECKING

from rune.app.backend import EMBEDDED_CONTEXT, RECOMMENDED_MODEL, BackendChoice, EmbeddedBackend
from rune.distribution import embedded_install_hint
from rune.errors import BackendUnavailable, ConfigError
from rune.paths import prompt_cache_dir
from rune.settings.config import Settings
from rune.transport.base import Capabilities, Transport, TransportWrapper

if TYPE_CHECKING:
    from rune.transport.ollama import OllamaChatTransport
    from rune.transport.openai_compat import OpenAICompatTransport


def open_transport(
    choice: BackendChoice, settings: Settings, stack: ExitStack, *, replayed: int = 0
) -> tuple[Transport, str]:
    """Start what ``choice`` needs (closed by ``stack``); return the transport and model name.

    ``replayed`` is how many model turns a resumed session already holds: the scripted
    backend skips that many, so it goes on where it stopped.
    """
    match choice.kind:
        case "scripted":
            from rune.app.demo import SCRIPTED_MODEL, scripted_demo_transport

            return scripted_demo_transport(skip=replayed), settings.model or SCRIPTED_MODEL
        case "ollama":
            from rune.transport.ollama import OllamaChatTransport

            ollama = OllamaChatTransport(
                choice.url, num_ctx=settings.max_context, read_timeout=settings.timeout
            )
            stack.callback(ollama.close)
            return ollama, settings.model or _pick_model(ollama, choice)
        case "embedded":
            return _open_embedded(choice, settings, stack)
        case "openai":
            server = _openai(choice.url, settings, stack)
            return server, settings.model or _pick_model(server, choice)


def script_spent(transport: Transport) -> bool:
    """Whether ``transport`` replays a script (``--backend scripted``, under its wrappers) and
    has no turn of it left: a resumed session that had them all would fail at its first call."""
    from rune.transport.scripted import ScriptedTransport

    while isinstance(transport, TransportWrapper):
        transport = transport.inner
    return isinstance(transport, ScriptedTransport) and transport.remaining == 0


def _openai(url: str, settings: Settings, stack: ExitStack) -> OpenAICompatTransport:
    from rune.transport.openai_compat import OpenAICompatTransport

    transport = OpenAICompatTransport(
        url,
        api_key=settings.api_key,
        context_length=settings.max_context,
        read_timeout=settings.timeout,
    )
    stack.callback(transport.close)
    return transport


def _open_embedded(
    choice: EmbeddedBackend, settings: Settings, stack: ExitStack
) -> tuple[Transport, str]:
    """llama.cpp in-process on the model file, behind its prompt cache."""
    if choice.model_path is None or not choice.model_path.is_file():
        raise BackendUnavailable(f"model file not found: {choice.model_path}")
    try:
        from rune.models.embedded import EmbeddedLlamaServer
    except ImportError as err:
        raise BackendUnavailable(
            f"the embedded backend is not available ({err}); "
            f"install it with: {embedded_install_hint()}"
        ) from None
    from rune.transport.prompt_cache import SlotCache

    window = choice.catalog.context if choice.catalog else EMBEDDED_CONTEXT
    server = stack.enter_context(
        EmbeddedLlamaServer(
            choice.model_path,
            ctx=min(window, settings.max_context or window),
            slot_dir=prompt_cache_dir(),
        )
    )
    transport = _openai(server.base_url, settings, stack)
    cached = SlotCache(transport, server.base_url, prompt_cache_dir(), server.slot_file_name())
    return cached, server.model


def _pick_model(
    transport: OllamaChatTransport | OpenAICompatTransport, choice: BackendChoice
) -> str:
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
