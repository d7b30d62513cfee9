"""Rune's settings and where each one came from.

Layers, later wins::

    defaults < user file < project file < RUNE_* environment < command-line flags

The user file is ``platformdirs.user_config_path("rune") / "config.toml"``; the project file is
``<workspace>/.rune/config.toml``. Both are TOML with the keys of :data:`KEYS` (``sandbox.*``
keys live in a ``[sandbox]`` table).

A project file comes with the code being worked on, so it is not trusted (Codex
CVE-2025-61260): it may narrow what Rune is allowed to do, never widen it, and it may not
choose where the user's code goes (the backend, host or key) or what Rune loads (the model, a
model file). Only the keys in :data:`PROJECT_KEYS` may come from a project file, and only with
a narrowing value; any other key — including every key added later — is dropped with one line
naming it, in :attr:`LoadedConfig.refused`.

MCP servers (``[mcp.servers.NAME]`` tables, :class:`McpServerConfig`) come from the user file
only: a server is a program Rune starts, so a project file that names one is refused whole.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rune.errors import ConfigError
from rune.limits import DEFAULT_BUDGETS, MAX_BUDGETS, MAX_ITERATIONS, MIN_ITERATIONS
from rune.settings.keys import SETTINGS, Check

ApprovalMode = Literal["ask", "edits", "all"]
Protocol = Literal["auto", "native", "text", "constrained", "blocks"]
NAMED_BACKENDS = ("ollama", "embedded", "scripted")

# key -> (what it means, what is allowed), as declared once in rune.settings.keys.SETTINGS;
# the order is the order `rune config` shows.
KEYS: dict[str, tuple[str, str]] = {s.key: (s.means, s.allowed) for s in SETTINGS}
ENV_PREFIX = "RUNE_"
# Keys whose environment variable is a list of paths separated by os.pathsep.
PATH_LISTS = frozenset(s.key for s in SETTINGS if s.path_list)
# Settings whose command-line flag is not simply --<key>.
FLAG_NAMES = {
    s.key: s.flag for s in SETTINGS if s.flag and s.flag != "--" + s.key.replace("_", "-")
}
#: the read timeout (seconds) when none is set: a stalled server fails after this much silence
DEFAULT_TIMEOUT = 300.0
# Ollama's own variable, honoured below RUNE_OLLAMA_HOST.
OLLAMA_ENV = "OLLAMA_HOST"


def _field(key: str) -> str:
    return key.replace(".", "_")


def _expand(path: Path) -> Path:
    return Path(os.path.expanduser(os.fspath(path)))


class Settings(BaseModel):
    """The effective configuration. Field names are the keys with ``.`` replaced by ``_``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = None
    backend: str | None = None
    ollama_host: str | None = None
    api_key: str | None = None
    embedded_model: Path | None = None
    workspace: Path = Field(default_factory=Path.cwd)
    max_iterations: Annotated[int, Field(ge=MIN_ITERATIONS, le=MAX_ITERATIONS, strict=False)] = (
        MAX_ITERATIONS
    )
    max_budgets: Annotated[int, Field(ge=1, le=MAX_BUDGETS, strict=False)] = DEFAULT_BUDGETS
    approval: ApprovalMode = "ask"
    max_context: Annotated[int, Field(ge=512)] | None = None
    think: bool | None = None
    auto_tests: bool = True
    max_output_tokens: Annotated[int, Field(ge=16)] | None = None
    protocol: Protocol = "auto"
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    seed: int | None = None
    timeout: Annotated[float, Field(ge=1, le=86400)] = DEFAULT_TIMEOUT
    sandbox_workspace_only: bool = False
    sandbox_write_roots: tuple[Path, ...] = ()
    sandbox_read_roots: tuple[Path, ...] = ()
    sandbox_allow_credentials: tuple[Path, ...] = ()
    sandbox_contained_reads: tuple[Path, ...] = ()

    @field_validator("backend")
    @classmethod
    def _backend(cls, value: str | None) -> str | None:
        if value is None or value in NAMED_BACKENDS:
            return value
        parts = urlsplit(value)
        if parts.scheme in ("http", "https") and parts.hostname:
            return value.rstrip("/")
        raise ValueError("not a backend name or an http(s) URL")

    @field_validator("ollama_host")
    @classmethod
    def _host(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from rune.transport.ollama import resolve_host

        try:
            resolve_host(value)
        except ConfigError as err:
            raise ValueError(str(err)) from None
        return value.strip()

    @field_validator("embedded_model", "workspace")
    @classmethod
    def _path(cls, value: Path | None) -> Path | None:
        return None if value is None else _expand(value)

    @field_validator(
        "sandbox_write_roots",
        "sandbox_read_roots",
        "sandbox_allow_credentials",
        "sandbox_contained_reads",
    )
    @classmethod
    def _paths(cls, value: tuple[Path, ...]) -> tuple[Path, ...]:
        return tuple(_expand(p) for p in value)

    def value(self, key: str) -> Any:
        return getattr(self, _field(key))


#: a server's name: it prefixes its tools' names (``NAME__tool``), so no ``__`` in it
MCP_SERVER_NAME = re.compile(r"[A-Za-z][A-Za-z0-9-]*(?:_[A-Za-z0-9-]+)*")
MCP_SERVER_NAME_MAX = 24
#: seconds a server has to start and list its tools, and a call to return, by default
MCP_START_TIMEOUT = 20.0
MCP_CALL_TIMEOUT = 60.0


class McpServerConfig(BaseModel):
    """One ``[mcp.servers.NAME]`` table of the user's config: a stdio server (``command``) or a
    streamable-HTTP one (``url``).

    ``trusted``: all its tools run without asking; ``trusted_tools``: these (the server's own
    tool names) do. ``contained``: None = inside bubblewrap when it works here, True = only
    inside it (refuse to start otherwise), False = never. ``network`` lets a contained server
    reach the network; ``writable`` lets it write its ``cwd`` (default: the workspace), with
    the protections commands get; otherwise it writes nowhere but its private TMPDIR.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = Field(default_factory=dict)
    cwd: Path | None = None
    url: str | None = None
    trusted: bool = False
    trusted_tools: tuple[str, ...] = ()
    contained: bool | None = None
    network: bool = False
    writable: bool = False
    start_timeout: Annotated[float, Field(gt=0, le=600)] = MCP_START_TIMEOUT
    call_timeout: Annotated[float, Field(gt=0, le=3600)] = MCP_CALL_TIMEOUT

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if len(value) > MCP_SERVER_NAME_MAX or not MCP_SERVER_NAME.fullmatch(value):
            raise ValueError(
                f"a server name is a letter, then letters, digits, '-' or single '_', at most "
                f"{MCP_SERVER_NAME_MAX} characters (its tools are named NAME__tool)"
            )
        return value

    @field_validator("cwd")
    @classmethod
    def _cwd(cls, value: Path | None) -> Path | None:
        return None if value is None else _expand(value)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("not an http(s) URL")
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a stdio server) or url (streamable HTTP)")
        if self.command is not None and not self.command.strip():
            raise ValueError("command is empty")
        return self


@dataclass(frozen=True)
class LoadedConfig:
    """Settings plus, for each key, the layer its value came from."""

    settings: Settings
    sources: Mapping[str, str]
    refused: tuple[str, ...] = ()
    files: tuple[Path, ...] = field(default=())
    #: the MCP servers of the user's file (never from a project file)
    mcp_servers: tuple[McpServerConfig, ...] = ()


def user_config_file() -> Path:
    from rune.paths import config_dir

    return config_dir() / "config.toml"


def project_config_file(workspace: Path) -> Path:
    return workspace / ".rune" / "config.toml"


def load(
    flags: Mapping[str, Any] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    user_file: Path | None = None,
) -> LoadedConfig:
    """Read every layer and return the effective settings. Raises ConfigError on bad values.

    ``flags`` holds only the options the user actually gave (keys as in :data:`KEYS`).
    """
    env = os.environ if env is None else env
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    user_file = user_config_file() if user_file is None else user_file

    values: dict[str, Any] = {}
    sources: dict[str, str] = {key: "default" for key in KEYS}
    files: list[Path] = []

    def apply(
        layer: Mapping[str, Any], source: str, origin: Mapping[str, str] | None = None
    ) -> None:
        _validate_layer(layer, source, origin)
        for key, value in layer.items():
            values[key] = value
            sources[key] = origin[key] if origin else source

    user = _read_toml(user_file)
    servers: tuple[McpServerConfig, ...] = ()
    if user is not None:
        files.append(user_file)
        servers = mcp_servers(user.pop(MCP_TABLE, None), f"user file {user_file}")
        apply(user, f"user file {user_file}")

    # The workspace decides where the project file is, so it is settled first, without it.
    early = {k: v for k, v in _env_layer(env)[0].items() if k == "workspace"}
    chosen = flags.get("workspace") or early.get("workspace") or values.get("workspace")
    workspace = _expand(Path(chosen)) if chosen else Path.cwd()
    project_file = project_config_file(workspace)
    refused: list[str] = []
    # A workspace that is no directory is refused later, in words (rune.app.check_workspace).
    project = _read_toml(project_file) if workspace.is_dir() else None
    if project is not None:
        files.append(project_file)
        source = f"project file {project_file}"
        if project.pop(MCP_TABLE, None) is not None:
            refused.append(
                f"{source}: ignored [mcp]: a project file may not add or change MCP servers "
                "(each is a program Rune would start); put them in your user file"
            )
        _validate_layer(project, source)
        narrowed, not_taken = _narrow(project, values, source)
        refused += not_taken
        apply(narrowed, source)

    env_values, env_origin = _env_layer(env)
    apply(env_values, "environment", env_origin)
    apply(
        flags, "flag", {k: "flag " + FLAG_NAMES.get(k, "--" + k.replace("_", "-")) for k in flags}
    )

    settings = Settings.model_validate({_field(k): v for k, v in values.items()})
    return LoadedConfig(settings, sources, tuple(refused), tuple(files), servers)


MCP_TABLE = "mcp"


def mcp_servers(table: Any, source: str) -> tuple[McpServerConfig, ...]:
    """The ``[mcp]`` table of the user's file: ``[mcp.servers.NAME]`` tables, in file order."""
    if table is None:
        return ()
    if not isinstance(table, dict) or set(table) - {"servers"}:
        raise ConfigError(f"{source}: [mcp] holds only [mcp.servers.NAME] tables")
    servers = table.get("servers", {})
    if not isinstance(servers, dict):
        raise ConfigError(f"{source}: [mcp.servers] holds only [mcp.servers.NAME] tables")
    found: list[McpServerConfig] = []
    for name, entry in servers.items():
        if not isinstance(entry, dict):
            raise ConfigError(f"{source}: [mcp.servers.{name}] must be a table")
        try:
            found.append(McpServerConfig.model_validate({**entry, "name": name}))
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "the table"
            raise ConfigError(
                f"{source}: [mcp.servers.{name}]: bad {where}: {first['msg']}"
            ) from None
    return tuple(found)


#: the biggest config file read: a cloned repository's ``.rune/config.toml`` may be a link to
#: ``/dev/zero`` or a FIFO, and reading it must not take the host's memory or block
MAX_CONFIG_BYTES = 1024 * 1024


def _read_toml(path: Path) -> dict[str, Any] | None:
    try:
        data = tomllib.loads(_config_text(path))
    except FileNotFoundError:
        return None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {err.object[err.start]:#04x} at offset {err.start}); "
            "TOML files are UTF-8"
        ) from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror or err}") from None
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if key == "sandbox" and isinstance(value, dict):
            flat.update({f"sandbox.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    return flat


def _config_text(path: Path) -> str:
    """A config file's text: a regular file (a link to one is followed: dotfiles are often
    links) of at most :data:`MAX_CONFIG_BYTES`; a ConfigError otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(f"{path}: not a regular file (a device, FIFO or directory)")
        chunks, size = [], 0
        while size <= MAX_CONFIG_BYTES and (chunk := os.read(fd, MAX_CONFIG_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: over {MAX_CONFIG_BYTES // 1024} KiB; not read as a config file")
    return data.decode("utf-8")


def _env_layer(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    if env.get(OLLAMA_ENV):
        values["ollama_host"] = env[OLLAMA_ENV]
        origin["ollama_host"] = f"env {OLLAMA_ENV}"
    for key in KEYS:
        name = ENV_PREFIX + _field(key).upper()
        raw = env.get(name)
        if raw is None or raw == "":
            continue
        values[key] = [p for p in raw.split(os.pathsep) if p] if key in PATH_LISTS else raw
        origin[key] = f"env {name}"
    return values, origin


def _validate_layer(
    layer: Mapping[str, Any], source: str, origin: Mapping[str, str] | None = None
) -> None:
    unknown = [key for key in layer if key not in KEYS]
    if unknown:
        where = origin[unknown[0]] if origin else source
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}. Known keys: {', '.join(KEYS)}.")
    try:
        Settings.model_validate({_field(k): v for k, v in layer.items()})
    except ValidationError as err:
        first = err.errors()[0]
        key = str(first["loc"][0]).replace("sandbox_", "sandbox.", 1)
        where = origin[key] if origin else source
        raise ConfigError(
            f"{where}: bad value {layer[key]!r} for {key!r}: {first['msg']}. "
            f"Allowed: {KEYS[key][1]}."
        ) from None


# What a project file may set, each with its check (None: the value narrows or changes
# nothing about trust). Every other key is refused from a project file.
PROJECT_KEYS: dict[str, Check] = {s.key: s.project for s in SETTINGS if callable(s.project)}
_WHY_REFUSED = {s.key: s.project for s in SETTINGS if isinstance(s.project, str)}


def _narrow(
    project: Mapping[str, Any], current: Mapping[str, Any], source: str
) -> tuple[dict[str, Any], list[str]]:
    """Keep what a project file may set; explain, one line per key, what it may not."""
    kept: dict[str, Any] = {}
    refused: list[str] = []
    for key, value in project.items():
        check = PROJECT_KEYS.get(key)
        why = (
            check(value, current)
            if check is not None
            else _WHY_REFUSED.get(key, "only the user's own config, env or flags may set it")
        )
        if why is None:
            kept[key] = value
        else:
            refused.append(f"{source}: ignored {key!r}: {why}")
    return kept, refused
