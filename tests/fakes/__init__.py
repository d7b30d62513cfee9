"""Fake model servers for tests: real HTTP servers on 127.0.0.1, speaking the exact wire format."""
