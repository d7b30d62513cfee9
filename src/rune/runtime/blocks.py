"""The code-block protocol: a reply changes code the way people write code in a chat.

A small model writes code best as code: a file's path on a line, then a fenced block with the
whole new version of each function it changes (or the complete file). Inside a JSON string
the same code must be escaped, and a grammar that checks the JSON cannot express every escape a
regex needs (``\\w``); a tool choice every turn also leaves the model no room to say what is
wrong before it writes the fix. Here the reply is plain text:

    hello.py
    ```python
    def greet(name):
        return "Hello, " + name
    ```

A block under a Python path becomes ``replace_function(path, "", code)`` (every definition
in it replaces its namesake; the complete file is taken whole); under another path,
``write_file``; under the name of a tool that takes ``code`` (``run_python``), a call of that
tool. Other tools are called as in the text protocol (:mod:`rune.fallback`). A reply with no
block and no call is the answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rune.formats import constrained, fallback
from rune.text import fenced
from rune.tools.spec import ToolSpec

__all__ = [
    "BlockCall",
    "BlocksTurn",
    "blocks_prompt",
    "code_blocks",
    "format_hint",
    "parse_blocks",
    "reply",
]

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})([^\n`]*)$")
#: a path as a model writes it on its own line: `hello.py`, **src/a.py**, hello.py:
_PATH = re.compile(r"^[\w.\-/]*[\w\-]\.[A-Za-z0-9]{1,8}$")
_HEADER_NOISE = " \t*`#:>'\""
_HEADER_WORDS = re.compile(r"^(?:file(?:name)?|path|in|update|updated|new|fixed)\s*:?\s+", re.I)
_PATH_COMMENT = re.compile(r"^\s*#\s*(?:file(?:name)?\s*:\s*)?(\S+\.[A-Za-z0-9]{1,8})\s*$", re.I)
#: the longest text read as a path: a longer line is prose (and the patterns stay linear)
MAX_PATH = 255
_TOKEN_NOISE = _HEADER_NOISE + "(),;"
#: fenced languages that show something rather than change it (a shell session, output)
_SHOWN = frozenset({"bash", "sh", "shell", "console", "text", "output", "txt", "json"})
_PYTHON_SUFFIXES = (".py", ".pyi")
#: the edit tools a block becomes
EDIT_TOOL = "replace_function"
WRITE_TOOL = "write_file"


@dataclass(frozen=True, slots=True)
class BlockCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class BlocksTurn:
    """One reply read: its calls, or the answer, or an error to tell the model about."""

    calls: list[BlockCall] = field(default_factory=list)
    answer: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class _Block:
    header: str | None
    info: str
    body: str
    prose: str  # the text between the previous block and this one
    closed: bool


def parse_blocks(content: str, tools: Sequence[ToolSpec]) -> BlocksTurn:
    """Read one reply into calls (blocks first, then calls written as in the text protocol),
    or the answer when it has neither."""
    names = frozenset(spec.name for spec in tools)
    code_tools = {spec.name for spec in tools if _takes_code(spec)}
    blocks, outside = _split(fallback.strip_thinking(content))
    calls: list[BlockCall] = []
    for block in blocks:
        call = _call_of(block, code_tools, names)
        if isinstance(call, str):
            return BlocksTurn(error=call)
        if call is not None:
            calls.append(call)
        else:  # a call the model fenced is still its call
            fenced = fallback.parse_tool_calls(block.body, names).calls
            calls.extend(BlockCall(c.name, dict(c.arguments)) for c in fenced)
    parsed = fallback.parse_tool_calls(outside, names)
    calls.extend(BlockCall(c.name, dict(c.arguments)) for c in parsed.calls)
    if calls:
        return BlocksTurn(calls=calls)
    if parsed.error is not None:
        return BlocksTurn(error=parsed.error)
    return BlocksTurn(answer=parsed.visible_text.strip())


def code_blocks(text: str) -> list[str]:
    """The bodies of the fenced blocks in ``text``, in order (an unclosed last one too)."""
    return [block.body for block in _split(fallback.strip_thinking(text))[0]]


def _split(text: str) -> tuple[list[_Block], str]:
    """The fenced blocks of ``text`` with the line above each, and the text outside them."""
    lines = text.split("\n")
    blocks: list[_Block] = []
    outside: list[str] = []
    prose_start = 0
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            outside.append(lines[index])
            index += 1
            continue
        fence, info = opening.group(1), opening.group(2).strip()
        end = index + 1
        while end < len(lines) and not _closes(lines[end], fence):
            end += 1
        prose = "\n".join(lines[prose_start:index])
        header = next((line for line in reversed(lines[prose_start:index]) if line.strip()), None)
        body = "\n".join(lines[index + 1 : end])
        blocks.append(_Block(header, info, body + "\n", prose, closed=end < len(lines)))
        index = end + 1
        prose_start = index
    return blocks, "\n".join(outside)


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0])


def _call_of(block: _Block, code_tools: set[str], names: frozenset[str]) -> BlockCall | str | None:
    """The call a block makes; None when it only shows something; a string: why it cannot be
    used."""
    language, _, info_path = block.info.partition(" ")
    body, commented = _path_comment(block.body)
    first, _, rest = body.partition("\n")
    if first.strip() in code_tools:  # the tool's name written inside the block
        if not rest.strip():
            return f"write the code for {first.strip()} in the block, below its name"
        return BlockCall(first.strip(), {"code": rest})
    target = (
        _header_target(block.header, code_tools)
        or _clean(info_path)
        or (_clean(language) if "." in language else None)
        or commented
    )
    if target in code_tools:
        return BlockCall(target, {"code": body})
    if target is None:
        if language.lower() in _SHOWN or not body.strip() or _is_tool_call(body, names):
            return None
        mentioned = {
            token
            for word in block.prose.split()
            if (token := word.strip(_TOKEN_NOISE).rstrip(".!?")).endswith(".py") and _clean(token)
        }
        if len(mentioned) != 1:
            return (
                "a code block has no file path: write the file's path on the line before "
                "the ``` that opens each block"
            )
        target = mentioned.pop()
    if not block.closed:
        return f"the block for {target} is not closed with ```: the reply was cut off"
    if target.endswith(_PYTHON_SUFFIXES):
        return BlockCall(EDIT_TOOL, {"path": target, "name": "", "code": body})
    return BlockCall(WRITE_TOOL, {"path": target, "content": body})


def _header_target(header: str | None, code_tools: set[str]) -> str | None:
    if header is None or len(header) > MAX_PATH + 32:
        return None
    cleaned = _HEADER_WORDS.sub("", header.strip(_HEADER_NOISE)).strip(_HEADER_NOISE)
    if cleaned in code_tools:
        return cleaned
    return _clean(cleaned)


def _clean(text: str) -> str | None:
    if len(text) > MAX_PATH + 8:
        return None
    text = text.strip(_HEADER_NOISE)
    return text if _PATH.match(text) and ".." not in text.split("/") else None


def _path_comment(body: str) -> tuple[str, str | None]:
    """The body without a first line that names its file (``# hello.py``), and that name."""
    first, _, rest = body.partition("\n")
    match = _PATH_COMMENT.match(first) if len(first) <= MAX_PATH + 16 else None
    if match is None or _clean(match.group(1)) is None:
        return body, None
    return rest, match.group(1)


def _is_tool_call(body: str, names: frozenset[str]) -> bool:
    return bool(fallback.parse_tool_calls(body, names).calls)


def _takes_code(spec: ToolSpec) -> bool:
    required = spec.parameters.get("required", ())
    return list(required) == ["code"] and not spec.mutating


# --- writing ------------------------------------------------------------------------------


def reply(call: BlockCall) -> str:
    """The reply that makes ``call``, as the model writes one."""
    arguments = call.arguments
    if call.name == EDIT_TOOL and not str(arguments.get("name", "")).strip():
        return _fenced(str(arguments.get("path", "")), str(arguments.get("code", "")), "python")
    if call.name == WRITE_TOOL:
        return _fenced(str(arguments.get("path", "")), str(arguments.get("content", "")), "")
    if set(arguments) == {"code"}:
        return _fenced(call.name, str(arguments["code"]), "python")
    return fallback.format_call(call.name, arguments)


def _fenced(header: str, body: str, language: str) -> str:
    return f"{header}\n{fenced(body.rstrip(chr(10)), language)}"


_EXAMPLE = """Example. The user says: "greet() in hello.py uses the wrong name"; hello.py holds:
NAME = "world"


def greet(name):
    return "Hello, " + NAME

You reply:
greet() adds NAME instead of the name it is given.

hello.py
```python
def greet(name):
    return "Hello, " + name
```"""

_EXAMPLE_CHECK = """
run_python
```python
from hello import greet
assert greet("Ada") == "Hello, Ada", greet("Ada")
```
and when the check passes, a short answer: greet() now greets the name it is given."""


def blocks_prompt(specs: Sequence[ToolSpec]) -> str:
    """The system block that tells the model how to reply, and the tools."""
    code_tools = [spec.name for spec in specs if _takes_code(spec)]
    lines = [
        "How to reply:",
        "- To change code: one sentence on what is wrong, then the file's path on a line by "
        "itself and a ```python block with the complete new version of each function or class "
        "you change (the whole file only for a new or short file).",
    ]
    if code_tools:
        lines.append(
            f"- To check a change: {code_tools[0]} on a line by itself and a ```python block "
            "that imports the code and asserts what the task says it should do."
        )
    lines += [
        "- To use another tool, one call written exactly like this: "
        + fallback.format_call("read_file", {"path": "hello.py"}),
        "- When the task is done: a short answer in plain text, no code block.",
        "Tools:",
    ]
    lines += constrained.tool_lines(specs)
    lines += ["", _EXAMPLE + (_EXAMPLE_CHECK if code_tools else "")]
    return "\n".join(lines)


def format_hint() -> str:
    """The reminder sent back after a reply that could not be used."""
    return (
        "To change code, write the file's path on a line by itself, then a ```python block with "
        "the complete new version of each function you change."
    )
