"""Every setting, declared once: its key, what it means, what it takes, its command-line flag,
whether its environment variable is a path list, and what a project file may do with it (a
narrowing check, or why it is refused), and the help line of its flag. :mod:`rune.settings.config`
derives its tables from :data:`SETTINGS`, the CLI's registry its flags' help (:func:`flag_help`);
the CLI's flags and the docs' sentence on project files are checked against it
(tests/test_docs.py, tests/test_config.py).

Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from rune.limits import DEFAULT_BUDGETS, MAX_BUDGETS, MAX_ITERATIONS, MIN_ITERATIONS

#: a project file's value for a key, the user's effective values so far -> why it is refused
#: (None: it narrows, or changes nothing about trust, and is taken)
Check = Callable[[Any, Mapping[str, Any]], str | None]
#: how the docs say what a project file may do with a key: lower it (a cap), set it (any
#: value), or a phrase of its own (``approval = "ask"``)
May = Literal["lower", "set"] | str


@dataclass(frozen=True)
class Setting:
    key: str
    means: str
    allowed: str
    #: the command-line flag that sets it (None: none does)
    flag: str | None = None
    #: its RUNE_* variable is a list of paths separated by os.pathsep
    path_list: bool = False
    #: a project file's rule: a narrowing check, or the reason the key is refused
    project: Check | str = "only the user's own config, env or flags may set it"
    #: for a key a project file may set, how the docs say what it may do
    may: May = ""
    #: the flag's help line on the command line (default: ``means``)
    help: str = ""


def _anything(value: Any, current: Mapping[str, Any]) -> str | None:
    return None


def _not_above(key: str, ceiling: int | None) -> Check:
    """A numeric cap a project may lower, never raise above the user's effective value
    (``ceiling`` when the user set none; None: no cap, so any value lowers it)."""

    def check(value: Any, current: Mapping[str, Any]) -> str | None:
        limit = current.get(key, ceiling)
        if limit is None or int(value) <= int(limit):
            return None
        return f"a project file may only lower it, not raise it above your {int(limit)}"

    return check


def _ask_only(value: Any, current: Mapping[str, Any]) -> str | None:
    return None if value == "ask" else "a project file may not auto-approve changes"


def _no_lifting(value: Any, current: Mapping[str, Any]) -> str | None:
    if value or not current.get("sandbox.workspace_only"):
        return None
    return "a project file may not lift the user's workspace_only"


def _empty_only(value: Any, current: Mapping[str, Any]) -> str | None:
    # An empty list drops the user's extra directories: that narrows.
    return None if not value else "a project file may not give Rune more directories or files"


_SERVER = "a project file may not choose the model server (it receives your code)"
_EMPTY = "empty `sandbox.*` lists"

# The order is the order `rune config` shows. Caps a project may lower, never raise: a higher
# max_context or max_output_tokens would make the user's server allocate (and spend) what the
# user chose not to.
SETTINGS: tuple[Setting, ...] = (
    Setting(
        "model",
        "model name, or a path to a .gguf file",
        "a model name or a .gguf path",
        flag="--model",
        project="a project file may not choose the model (a model file is loaded into Rune)",
    ),
    Setting(
        "backend",
        "model server",
        "'ollama', 'embedded', 'scripted' or an http(s) base URL of an OpenAI-compatible server",
        flag="--backend",
        project=_SERVER,
        help="'ollama' (at OLLAMA_HOST, default 127.0.0.1:11434), 'embedded', or the base URL "
        "of an OpenAI-compatible server: llama-server, vLLM, LM Studio, e.g. "
        "http://127.0.0.1:8080/v1; 'scripted' plays canned replies (the demo's, or "
        "RUNE_SCRIPT's) and is no model: for demos and tests",
    ),
    Setting(
        "ollama_host",
        "where Ollama listens",
        "host[:port] or an http(s) URL, as OLLAMA_HOST",
        project=_SERVER,
    ),
    Setting(
        "api_key",
        "API key for an OpenAI-compatible server",
        "a string",
        flag="--api-key",
        project="keys do not belong in a project's files; use the user file or env",
        help="API key for an OpenAI-compatible server (other users can see it in `ps`: "
        "RUNE_API_KEY or `api_key` in config.toml keep it out of sight)",
    ),
    Setting(
        "embedded_model",
        "GGUF file for the embedded backend",
        "a path to a .gguf file",
        project="a project file may not choose a model file (it is loaded into Rune)",
    ),
    Setting(
        "workspace",
        "the project directory",
        "a directory path",
        flag="--workspace",
        project="a project file may not move the workspace",
        help="project directory (default: the current one)",
    ),
    Setting(
        "max_iterations",
        "model turns per task",
        f"an integer from {MIN_ITERATIONS} to {MAX_ITERATIONS}",
        flag="--max-iterations",
        project=_not_above("max_iterations", MAX_ITERATIONS),
        may="lower",
        help=f"model turns per budget, {MIN_ITERATIONS}-{MAX_ITERATIONS}",
    ),
    Setting(
        "max_budgets",
        "budgets of max_iterations turns a task may chain while each one makes a change",
        f"an integer from 1 to {MAX_BUDGETS}",
        flag="--max-budgets",
        project=_not_above("max_budgets", DEFAULT_BUDGETS),
        may="lower",
        help="budgets a task may chain while each one makes a change, "
        f"1-{MAX_BUDGETS} (default {DEFAULT_BUDGETS})",
    ),
    Setting(
        "approval",
        "which changes need a human",
        "'ask' (every change), 'edits' (file edits auto-approved), 'all' (everything)",
        flag="--yes",
        project=_ask_only,
        may='`approval = "ask"`',
        help="approve file edits inside the workspace without asking (not sensitive ones: "
        "AGENTS.md, conftest.py, CI, ...); give it twice to approve commands too",
    ),
    Setting(
        "max_context",
        "context window cap in tokens",
        "an integer of at least 512",
        project=_not_above("max_context", None),
        may="lower",
    ),
    Setting(
        "think",
        "ask thinking models to think",
        "true or false",
        project=_anything,
        may="set",
    ),
    Setting(
        "auto_tests",
        "run the project's tests the task names before the first model call and after each change",
        "true or false",
        project=_anything,
        may="set",
    ),
    Setting(
        "max_output_tokens",
        "cap on tokens per model reply",
        "an integer of at least 16",
        project=_not_above("max_output_tokens", None),
        may="lower",
    ),
    Setting(
        "protocol",
        "how the model calls tools",
        "'auto' (constrained for the embedded backend; native when the server's model has "
        "tools, else text), 'native', 'text', 'constrained' or 'blocks'",
        flag="--protocol",
        # It changes how tool calls are written, not what they may do.
        project=_anything,
        may="set",
        help="how the model calls tools (default auto: constrained for the embedded backend, "
        "native when the server's model has tools, else text)",
    ),
    Setting("temperature", "sampling temperature", "a number from 0 to 2 (0 is greedy)"),
    Setting("seed", "sampling seed, for repeatable replies", "an integer"),
    Setting(
        "timeout",
        "seconds to wait for the model server to send anything (read timeout)",
        "a number of seconds from 1 to 86400 (default 300)",
        flag="--timeout",
        help="how long the model server may send nothing before Rune gives up (default 300; "
        "also RUNE_TIMEOUT or `timeout` in config.toml)",
    ),
    Setting(
        "sandbox.workspace_only",
        "read and write only the workspace",
        "true or false",
        project=_no_lifting,
        may="`sandbox.workspace_only = true`",
    ),
    Setting(
        "sandbox.write_roots",
        "extra directories Rune may write",
        "a list of directory paths",
        flag="--write-root",
        path_list=True,
        project=_empty_only,
        may=_EMPTY,
        help="also let Rune write in DIR (default: only the workspace); repeatable",
    ),
    Setting(
        "sandbox.read_roots",
        "extra directories Rune may read",
        "a list of directory paths",
        path_list=True,
        project=_empty_only,
        may=_EMPTY,
    ),
    Setting(
        "sandbox.allow_credentials",
        "credential stores Rune may read anyway (never write)",
        "a list of paths, each a credential store or a path inside one",
        flag="--allow-credential",
        path_list=True,
        project=_empty_only,
        may=_EMPTY,
        help="let Rune read this credential store, or a file in one (never write); repeatable",
    ),
    Setting(
        "sandbox.contained_reads",
        "files and directories commands, checks and MCP servers may read in their sandbox "
        "(read-only; home is otherwise private and empty there)",
        "a list of paths",
        path_list=True,
    ),
)

#: each flag's setting
FLAGS: dict[str, Setting] = {s.flag: s for s in SETTINGS if s.flag is not None}


def flag_help(flag: str) -> str:
    """The help line of ``flag`` on the command line, as its setting declares it (a flag no
    setting declares is a KeyError: declare the setting first)."""
    setting = FLAGS[flag]
    return setting.help or setting.means


def project_file_rule() -> str:
    """What a project file may set, in one sentence, as the docs say it."""

    def listed(keys: list[str]) -> str:
        quoted = [f"`{k}`" for k in keys]
        return ", ".join(quoted[:-1]) + " and " + quoted[-1] if len(quoted) > 1 else quoted[0]

    lowered = [s.key for s in SETTINGS if s.may == "lower"]
    chosen = [s.key for s in SETTINGS if s.may == "set"]
    phrases = list(dict.fromkeys(s.may for s in SETTINGS if s.may not in ("", "lower", "set")))
    return (
        f"it may lower {listed(lowered)} (a value above yours is ignored), set "
        f"{listed(chosen)}, {', '.join(phrases[:-1])} and {phrases[-1]}, nothing else"
    )
