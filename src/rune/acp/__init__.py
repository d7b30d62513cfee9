"""``rune acp``: Rune as an Agent Client Protocol agent for editors (Zed, JetBrains, Neovim).

Needs the ``acp`` extra (``pip install 'rune-agent[acp]'``, the ``agent-client-protocol``
SDK). :mod:`rune.acp.server` serves stdio, :mod:`rune.acp.agent` maps the protocol onto Rune's
sessions and operator, :mod:`rune.acp.updates` turns Rune's events into session updates, and
:mod:`rune.acp.wire` reads the client's JSON-RPC with distrust. See docs/acp.md.
"""
