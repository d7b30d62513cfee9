"""Tools from Model Context Protocol servers, beside the built-in ones.

- :mod:`rune.tools.mcp.listing`: what a server lists becomes :class:`McpTool` entries, named
  ``SERVER__tool``, with every hostile shape (names, descriptions, schemas) refused or cut;
- :mod:`rune.tools.mcp.client`: :class:`McpManager` runs the official ``mcp`` SDK's client
  sessions on one background event-loop thread, with a timeout on every step, and stops every
  server with the session; stdio servers start inside bubblewrap where it works;
- :mod:`rune.tools.mcp.executor`: the tools as the loop sees them (``readOnlyHint: true`` or
  trusted: run at once; anything else: prepared, shown, approved, then called).

The SDK is imported only when a server is started: ``rune --help`` never loads it.
"""
