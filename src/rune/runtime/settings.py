"""What a :class:`~rune.runtime.runner.Runner` is built with, and the check of it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Required, TypedDict

from rune import events as ev
from rune.errors import ConfigError
from rune.limits import MAX_ITERATIONS, MIN_ITERATIONS
from rune.runtime.chat import RequestShaper
from rune.runtime.protocol import ToolProtocol
from rune.runtime.protocols import PROTOCOLS

__all__ = ["RunnerSettings", "check_settings"]


class RunnerSettings(TypedDict, total=False):
    """The keyword arguments of ``Runner`` but its assists (a subclass passes them on)."""

    model: Required[str]
    max_iterations: int
    think: bool | None
    options: Mapping[str, Any] | None
    shaper: RequestShaper | None
    on_event: ev.EventSink | None
    protocol: str | ToolProtocol
    seal_key: bytes | None


def check_settings(max_iterations: object, protocol: object, seal_key: bytes | None) -> None:
    """A :class:`ConfigError` for a setting the loop cannot run with (never a silent clamp)."""
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, int):
        raise ConfigError(f"max_iterations must be an integer, got {max_iterations!r}")
    if not MIN_ITERATIONS <= max_iterations <= MAX_ITERATIONS:
        raise ConfigError(
            f"max_iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, "
            f"got {max_iterations}"
        )
    if isinstance(protocol, str) and protocol not in PROTOCOLS:
        raise ConfigError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    if seal_key is not None and len(seal_key) < 16:
        raise ConfigError("seal_key must be at least 16 bytes")
