"""Tool calls as they arrive, decoded into :class:`rune.messages.ToolRequest`.

A model's tool call carries its arguments as a JSON object (Ollama), as JSON text (the OpenAI
wire format), or as whatever a broken reply holds. :func:`decode_arguments` is the one place
that reads them; the runtime and both wire-format transports call it.

A request whose arguments cannot be used is still a request: its arguments are
``{UNPARSED: what came, PROBLEM: why}`` and the runtime answers it with
:func:`unusable_error` (the model reads why) instead of running it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rune.errors import ToolInputError
from rune.limits import shape_problem
from rune.messages import ToolRequest, ToolSource, thaw

#: the argument key that carries a call's arguments when they were not a JSON object
UNPARSED = "__unparsed__"
#: beside UNPARSED: why the arguments cannot be used (too deep, a huge number...)
PROBLEM = "__problem__"
#: how much of unreadable arguments a request keeps (enough for the model to see its mistake)
KEPT_CHARS = 200


@dataclass(frozen=True, slots=True)
class Arguments:
    """Decoded tool-call arguments: ``value`` when they are a JSON object; otherwise ``text``
    (what came, as text) and, when reading it failed for a reason of its own, ``problem``."""

    value: Mapping[str, Any] | None
    text: str = ""
    problem: str | None = None


def decode_arguments(arguments: object) -> Arguments:
    """Read tool-call arguments: an object is taken as it is, text is decoded as JSON (blank
    text is no arguments), anything else is not an object."""
    if isinstance(arguments, Mapping):
        return Arguments(arguments)
    if not isinstance(arguments, str):
        return Arguments(None, str(arguments))
    if not arguments.strip():
        return Arguments({})
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        return Arguments(None, arguments)
    except RecursionError:
        return Arguments(None, arguments, "they are nested too deeply to read")
    except ValueError as err:  # an integer past Python's digit limit
        if "digits" in str(err):
            return Arguments(None, arguments, "they carry an integer too long to read")
        return Arguments(None, arguments, f"they cannot be read ({err})")
    if isinstance(value, dict):
        return Arguments(value)
    return Arguments(None, str(value))


def tool_request(
    name: str,
    arguments: Mapping[str, Any],
    call_id: str | None = None,
    source: ToolSource = "ollama-native",
) -> ToolRequest:
    """A request whose arguments are in a shape Rune takes (:mod:`rune.limits`); otherwise one
    that answers the model with why not (it never runs)."""
    problem = shape_problem(arguments)
    if problem is not None:
        arguments = {UNPARSED: "", PROBLEM: f"they are {problem}"}
    else:
        arguments = _backslashes_meant(arguments)
    return ToolRequest(name, arguments, call_id, source)


#: what JSON's ``\b`` and ``\f`` decode to, and what a model writing code inside a JSON string
#: meant by them: the regex escape ``\b``, a ``\f``. No tool takes a backspace or a form feed
#: (text tools refuse control characters), so reading them back as the backslash the model
#: wrote loses nothing; read as they decode, ``re.sub(r'\bword', ...)`` was refused.
_JSON_ESCAPES_MEANT = str.maketrans({"\b": "\\b", "\f": "\\f"})


def _backslashes_meant(arguments: Mapping[str, Any]) -> Mapping[str, Any]:
    if not any(isinstance(v, str) and ("\b" in v or "\f" in v) for v in arguments.values()):
        return arguments
    return {
        key: value.translate(_JSON_ESCAPES_MEANT) if isinstance(value, str) else value
        for key, value in arguments.items()
    }


def native_request(call: object, source: ToolSource) -> ToolRequest:
    """The request of one ``tool_calls`` entry (``{"id"?, "function": {"name", "arguments"}}``)."""
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(call, Mapping) or not isinstance(function, Mapping):
        return ToolRequest("", {UNPARSED: json.dumps(thaw(call), default=str)}, None, source)
    name = function.get("name")
    name = name if isinstance(name, str) else ""
    call_id = call.get("id")
    decoded = decode_arguments(function.get("arguments"))
    arguments: Mapping[str, Any]
    if decoded.value is not None:
        arguments = decoded.value
    elif decoded.problem is not None:
        arguments = {UNPARSED: decoded.text[:KEPT_CHARS], PROBLEM: decoded.problem}
    else:
        arguments = {UNPARSED: decoded.text}
    return tool_request(name, arguments, call_id, source)


def is_unusable(request: ToolRequest) -> bool:
    return UNPARSED in request.arguments


def unusable_error(request: ToolRequest) -> ToolInputError:
    """What the model is told about a request whose arguments cannot be used."""
    name = request.name or "the call"
    problem = request.arguments.get(PROBLEM)
    if problem:
        return ToolInputError(
            f"the arguments of {name} cannot be used: {problem}. Send a flat JSON object with "
            "the tool's arguments."
        )
    shown = str(request.arguments[UNPARSED])[:KEPT_CHARS]
    return ToolInputError(f"the arguments of {name} are not a JSON object: {shown!r}")
