"""``python -I -m rune.tools.mcp.launch BWRAP ARGS...``: exec bubblewrap with Rune's seccomp
filter for a contained MCP server.

The SDK starts a stdio server itself and passes it no extra file descriptors, while
``bwrap --seccomp FD`` reads the filter from an inherited one. So the server's command line
starts with this launcher: it writes the filter to a pipe (:func:`rune.tools.seccomp.filter_fd`),
puts the descriptor's number where the placeholder stands, and becomes bubblewrap.
"""

from __future__ import annotations

import os
import sys

from rune.tools.seccomp import filter_fd

PLACEHOLDER = "{rune-seccomp-fd}"


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m rune.tools.mcp.launch BWRAP ARGS...", file=sys.stderr)
        return 2
    fd = filter_fd(netlink=True)
    if fd is None:
        print("rune: no seccomp filter for this machine; not starting the server", file=sys.stderr)
        return 1
    os.set_inheritable(fd, True)
    command = [str(fd) if arg == PLACEHOLDER else arg for arg in argv]
    try:
        os.execv(command[0], command)
    except OSError as err:
        print(f"rune: cannot start {command[0]}: {err.strerror or err}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
