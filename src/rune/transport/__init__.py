"""Model-server transports. Each speaks one wire format and translates its errors once."""

from rune.transport.base import Capabilities, DeltaSink, Transport
from rune.transport.scripted import ScriptedTransport

__all__ = ["Capabilities", "DeltaSink", "ScriptedTransport", "Transport"]
