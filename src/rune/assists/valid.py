"""Ask for plain Python when a change's code does not parse: the JSON string, not the change.

The default protocol has the model write code inside a JSON string, and the 1.5B often cannot
escape it: it writes ``newline='\\n'`` as a line break inside the quotes, a whole function on one
line, a docstring's prose without its quotes. On the repository suite four runs ended that way
in one measurement (``bench/README.md``, twelfth session): told the code is not valid Python, the
model re-sent the same code, the same failing call twice, and the breaker ended the run at step
2 of 8. Aider's plain whole-code replies have no such trouble.

So when the turn's one call is a ``replace_function`` whose code does not parse
(:class:`rune.errors.InvalidCode`), Rune asks the model, once per function and run, for that
definition as plain Python: one request of its own (no tools, no grammar, no JSON) that shows
the code as it arrived and the parser's complaint, the reply's fenced block read by Rune
(:func:`rune.assists.rewrite.ask_for_definition`). The definition takes the call's place when it
parses and defines the function; otherwise the call runs as it is and the model reads why. The
model's change is kept as the model meant it: the request shows nothing else to write from.
This assist runs before the others that replace a call, so the sampled repair and the rewrite
judge the code the model meant, not a string Rune could not read.
"""

from __future__ import annotations

from rune.assists.again import preparing_fails
from rune.assists.rewrite import ask_for_definition, function_target
from rune.calls import tool_request
from rune.errors import InvalidCode
from rune.messages import ToolRequest
from rune.pause.state import LoopState
from rune.runtime.assist import Assist, Loop
from rune.text import fenced, for_display

__all__ = ["PlainWhenInvalid", "plain_prompt"]


def plain_prompt(path: str, name: str, code: str, problem: str) -> str:
    """What the model is asked: ``code`` is what it sent for ``name``, ``problem`` why it
    does not parse."""
    return (
        f"You sent this as the new definition of `{name}` in {path}, but it is not valid "
        f"Python ({problem}):\n\n{fenced(code.rstrip(), 'python')}\n\n"
        f"Write the same definition again as valid Python: one statement per line, every "
        f"string and docstring quoted and escaped as Python needs. Reply with the whole "
        f"definition of `{name}` in one ```python block."
    )


class PlainWhenInvalid(Assist):
    """Puts the definition the model writes as plain Python in place of a change whose code
    does not parse."""

    name = "valid"

    def replace_call(self, loop: Loop, state: LoopState, call: ToolRequest) -> ToolRequest:
        target = function_target(call)
        if target is None:
            return call
        path, name, key = target
        if key in self.recalled(state).get("asked", []):
            return call
        invalid = preparing_fails(loop.executor, call, InvalidCode)
        if invalid is None:
            return call
        memory = self.memory(state)
        memory["asked"] = [*memory.get("asked", []), key]
        prompt = plain_prompt(path, name, invalid.code, invalid.problem)
        asking = f"for {name} as plain Python"
        code = ask_for_definition(loop, state, call, name, prompt, asking, by=self.name)
        if code is None:
            return call
        arguments = {**call.arguments, "code": code}
        replaced = tool_request(call.name, arguments, call.call_id, call.source)
        if preparing_fails(loop.executor, replaced, InvalidCode) is not None:
            return call
        loop.note(
            state,
            f"the model's code for {name} in {for_display(path)} was not valid Python "
            f"({invalid.problem}); Rune asked it for the same definition as plain Python and "
            "takes that",
        )
        return replaced
