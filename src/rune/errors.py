"""Rune's error tree, in one place.

Every error Rune raises on purpose is a ``RuneError``. Foreign exceptions (httpx, OSError,
json, pydantic) are translated once, at the boundary that met them, into one of these; code
above the boundary never sees them::

    RuneError
    ├── ConfigError                 bad value in a config file, env var or flag; an unusable
    │                               approval key (rune.pause.seal)
    ├── BackendUnavailable          the chosen backend cannot start (missing extra, no model file)
    ├── PullError                   `rune pull` could not fetch, assemble or verify a model
    ├── TransportError              anything between Rune and the model server
    │   ├── ServerUnreachable       nothing listens at the address (connect refused / DNS)
    │   ├── TransportTimeout        connect or read timeout: the server went silent
    │   ├── ModelNotFound           404 for the model ("try `ollama pull <model>`")
    │   ├── ToolsUnsupported        400 "... does not support tools"
    │   ├── ServerError             the server answered with an error (4xx/5xx or an error line)
    │   └── ProtocolError           the answer did not parse (bad NDJSON/SSE, dropped stream)
    ├── ContextOverflow             the request cannot fit in the model's window even after eviction
    ├── ToolError                   a tool failed; its message goes back to the model
    │   ├── ToolInputError          unknown tool, missing or wrongly typed arguments
    │   │   ├── NothingToChange     a change whose file already holds exactly that content
    │   │   ├── OtherDefinition     code sent to replace a definition that does not define it
    │   │   ├── VariableNotFunction a new function named after a variable of another function
    │   │   └── InvalidCode         code sent for a Python file that does not parse on its own
    │   ├── MissingBody             a definition sent with its signature and docstring alone
    │   ├── SandboxDenied           the sandbox refused a path: outside the roots, blocked,
    │   │                           a credential store, protected, or odd syntax (message = denial)
    │   ├── CommandFailed           an approved command exited non-zero or timed out (message =
    │   │                           its output; ``exit_code``)
    │   ├── TestsNotRun             run_tests ran no test (none found, or no runner for them)
    │   └── McpError                an MCP server did not start, crashed, timed out or answered
    │                               malformed
    ├── ApprovalError               a pending approval cannot be resumed
    │   ├── InvalidPendingState     the state is not a pending state Rune wrote
    │   └── ApprovalMismatch        the state was altered after it was prepared and shown, or
    │                               sealed by another key
    └── SessionError                the session journal
        ├── SessionLocked           another process is driving the session
        ├── SessionNotFound         no such session
        └── UndoRefused             `rune undo`/`redo` would overwrite a file changed since, or
                                    has nothing to do (message = the situation, file by file)

Loop stop conditions (iteration limit, circuit breaker) are not exceptions: they end the run
with ``OperatorResponse(success=False, error=..., error_kind=...)``. A stop the user asks for is
``KeyboardInterrupt`` (Ctrl-C) or its subclass :class:`CallCancelled` (Esc in the TUI), never a
``RuneError``: it leaves the turn where it stopped, for ``rune resume``.
"""

from __future__ import annotations


class RuneError(Exception):
    """Base of every error Rune raises on purpose. ``str(err)`` is written for the user."""

    @property
    def kind(self) -> str:
        return type(self).__name__


class ConfigError(RuneError, ValueError):
    """Also a ValueError, so a bad constructor argument reads as one."""


class BackendUnavailable(RuneError):
    pass


class PullError(RuneError):
    pass


class TransportError(RuneError):
    pass


class ServerUnreachable(TransportError):
    pass


class TransportTimeout(TransportError):
    pass


class ModelNotFound(TransportError):
    pass


class ToolsUnsupported(TransportError):
    pass


class ServerError(TransportError):
    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class ProtocolError(TransportError):
    pass


class ContextOverflow(RuneError):
    pass


class ToolError(RuneError):
    pass


class ToolInputError(ToolError):
    pass


class NothingToChange(ToolInputError):
    """A change that would leave its file as it is (the model re-sent the code the file holds):
    nothing to approve or write. The loop may ask the model again instead
    (:mod:`rune.assists.again`, :mod:`rune.assists.rewrite`). ``content``: the bytes the file
    holds (read under the session's policy), when known."""

    def __init__(self, message: str, content: bytes | None = None) -> None:
        super().__init__(message)
        self.content = content


class OtherDefinition(ToolInputError):
    """Code sent to replace the definition of a name that does not define that name (a small
    model renames what it rewrites: the 1.5B sent ``def sieve_of_eratosthenes`` to replace
    ``primes_up_to``). ``content``: the bytes the file holds, as :class:`NothingToChange` has
    them (:mod:`rune.assists.rewrite` writes the function under its own name)."""

    def __init__(self, message: str, content: bytes | None = None) -> None:
        super().__init__(message)
        self.content = content


class VariableNotFunction(ToolInputError):
    """A new function sent under the name of a variable another function assigns:
    added at the end of the file it would never be called from there (the 1.5B sent
    ``def indegree(node)`` for the dict ``indegree`` in ``topological_order``, in every run of
    that task, and left it in the file). ``owner``: that function (``Class.method`` for a
    method), the one to send instead."""

    def __init__(self, message: str, owner: str) -> None:
        super().__init__(message)
        self.owner = owner


class InvalidCode(ToolInputError):
    """Code sent as definitions of a Python file that does not parse on its own (a small model
    writing code inside a JSON string: a line break inside quotes, a whole function on one
    line). ``code``: what was sent; ``problem``: the parser's complaint
    (:mod:`rune.assists.valid` asks the model for it as plain Python)."""

    def __init__(self, message: str, code: str, problem: str) -> None:
        super().__init__(message)
        self.code = code
        self.problem = problem


class MissingBody(ToolError):
    """A definition sent with its signature and docstring alone (a small model that ran short):
    taken as it is, it would delete the function's code. ``content``: the bytes the file holds,
    as :class:`NothingToChange` has them (:mod:`rune.assists.rewrite` writes the body)."""

    def __init__(self, message: str, content: bytes | None = None) -> None:
        super().__init__(message)
        self.content = content


class SandboxDenied(ToolError):
    pass


class CommandFailed(ToolError):
    """An approved command ran and exited non-zero (``exit_code``) or timed out (None). The
    model reads its output as the error; the run cannot be called done on it."""

    def __init__(self, report: str, exit_code: int | None) -> None:
        super().__init__(report)
        self.exit_code = exit_code


class TestsNotRun(ToolError):
    """``run_tests`` ran no test: none matched, or the project's interpreter has no pytest for
    pytest-style tests. Not a failure of the code: the loop does not drive a run with it."""


class McpError(ToolError):
    """An MCP server failed: it did not start, crashed, timed out, or answered in a shape
    Rune cannot read. The model hears it as a tool error; the loop and other servers go on."""


class ApprovalError(RuneError):
    pass


class InvalidPendingState(ApprovalError):
    pass


class ApprovalMismatch(ApprovalError):
    pass


class SessionError(RuneError):
    pass


class SessionLocked(SessionError):
    pass


class SessionNotFound(SessionError):
    pass


class UndoRefused(SessionError):
    pass


class CallCancelled(KeyboardInterrupt):
    """A model call stopped because the user asked (Esc in the TUI). Not a ``RuneError`` and
    not an ``Exception``: like Ctrl-C it passes through the loop, which journals nothing more,
    so the turn is left exactly where it stopped and ``rune resume`` picks it up."""
