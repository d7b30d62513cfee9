"""The seccomp filter of a contained run: sockets of allowed families only; no namespaces of its
own; no io_uring, no keyring.

A UNIX socket on a read-only mount can still be connected to, a socket file may lie anywhere,
and some families ignore the network namespace altogether: ``AF_VSOCK`` reaches the
hypervisor of a VM (CID 2 answered from inside the old sandbox), ``AF_BLUETOOTH`` the radio.
So the filter lets ``socket`` create only the families in :data:`ALLOWED_FAMILIES`: IP (useless
in the empty network namespace, but programs probe it) and, for an approved command or an MCP
server, netlink's routing protocol (``getifaddrs`` asks the kernel about interfaces through
it). A check gets no netlink at all: the kernel's replies queued on a netlink socket are
memory no cgroup counts, and ``getaddrinfo`` does without it. Every other family, ``AF_UNIX``
included, fails with ``EAFNOSUPPORT``, as on a kernel without it, and every other netlink
protocol (netfilter, audit, uevents, xfrm) with ``EPROTONOSUPPORT``, so programs take their
fallback path. ``socketpair`` makes a connected pair between a run's own processes (asyncio,
multiprocessing pipes), of stream or seqpacket sockets only: a datagram end can send to any
socket path the run sees (one in the workspace) with ``sendto``, whose address a filter cannot
read. io_uring, which can create sockets without the ``socket`` system call, fails with
``ENOSYS`` (programs fall back to ordinary I/O), and so does the kernel keyring (``keyctl``,
``add_key``, ``request_key``): no namespace separates it, so a run would read the keys of the
session that started Rune (Kerberos tickets in a ``KEYRING:`` cache, tokens a tool stored
there). ``multiprocessing``'s ``forkserver`` start method, which needs an ``AF_UNIX`` socket,
does not work inside (Python 3.14 makes it the default on Linux: a check that uses a pool
there must choose ``fork`` or ``spawn``).

A run makes no namespace of its own: ``unshare`` and ``clone`` with a ``CLONE_NEW*`` flag fail
with ``EPERM``, and ``clone3``, whose flags lie in memory a filter cannot read, with ``ENOSYS``
(glibc then makes threads and children with ``clone``, as Docker's default profile has it). A
user namespace of its own gives a process every capability over the network and mount
namespaces it makes there, and that is how kernel exploits reach code no unprivileged process
otherwise can (CVE-2024-1086 went through nf_tables so; a check ran that far, unasked, before
this filter). A nested sandbox, a rootless container or Chrome's own sandbox cannot start
inside Rune's (Chrome runs with ``--no-sandbox`` there).

The filter is a small classic-BPF program, assembled here (no libseccomp needed) for x86-64
and AArch64, and handed to bubblewrap with ``--seccomp FD``. A system call made through another
ABI than the native one (32-bit x86 on x86-64, x32) kills the process: those ABIs reach
``socket`` through ``socketcall``, whose arguments a filter cannot read. On other machines
there is no filter (:func:`filter_program` returns None) and the preview says so.
"""

from __future__ import annotations

import errno
import os
import platform
import struct
from dataclasses import dataclass

# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6]
_NR, _ARCH, _ARG0_LOW, _ARG1_LOW, _ARG2_LOW = 0, 4, 16, 24, 32
# classic BPF opcodes
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_AND_K = 0x54
_RET_K = 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_KILL_PROCESS = 0x80000000
_X32_BIT = 0x40000000
AF_UNIX = 1
AF_INET = 2
AF_INET6 = 10
AF_NETLINK = 16
#: the only families ``socket`` may create
ALLOWED_FAMILIES = (AF_INET, AF_INET6, AF_NETLINK)
#: the only netlink protocol, where netlink is let in: routing (interfaces and addresses)
NETLINK_ROUTE = 0
#: the socket types of a pair that may be made: stream and seqpacket (a datagram end can send
#: to any socket path the run sees, bound or not)
SOCK_STREAM, SOCK_SEQPACKET = 1, 5
_SOCK_TYPE_MASK = 0xF
#: every ``CLONE_NEW*`` flag: a new namespace of any kind (user, mount, network, PID, IPC,
#: UTS, cgroup, time)
NAMESPACE_FLAGS = 0x7E020080


@dataclass(frozen=True, slots=True)
class _Numbers:
    """One machine's system call numbers the filter names."""

    audit_arch: int
    socket: int
    socketpair: int
    unshare: int
    clone: int
    #: refused with ENOSYS: io_uring (setup, enter, register), the kernel keyring (add_key,
    #: request_key, keyctl), and clone3 (its flags lie in memory a filter cannot read)
    refused: tuple[int, ...]
    has_x32: bool


def _arch() -> _Numbers | None:
    """This machine's numbers, or None where Rune has no filter."""
    machine = platform.machine().lower()
    io_uring, clone3 = (425, 426, 427), 435
    if machine in ("x86_64", "amd64"):
        return _Numbers(0xC000003E, 41, 53, 272, 56, (*io_uring, 248, 249, 250, clone3), True)
    if machine in ("aarch64", "arm64"):
        return _Numbers(0xC00000B7, 198, 199, 97, 220, (*io_uring, 217, 218, 219, clone3), False)
    return None


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


#: an instruction: (opcode, operand, where it jumps when true, when false; None: the next);
#: a bare string marks the place a jump of that name lands
_Line = tuple[int, int, str | None, str | None] | str


def filter_program(*, netlink: bool = False) -> bytes | None:
    """The filter as bwrap's ``--seccomp`` reads it (an array of ``struct sock_filter``), or
    None where Rune has no filter for this machine. ``netlink``: let netlink's routing protocol
    in (an approved command or an MCP server: some programs cannot do without it); a check
    gets no netlink at all, since the kernel's replies queued on a netlink socket are memory
    no cgroup counts (326 routing sockets held 2.6 GiB of the host's), and ``getaddrinfo``
    does without it."""
    n = _arch()
    if n is None:
        return None
    always = (_JGE_K, 0)  # an unsigned value >= 0: a jump taken every time
    body: list[_Line] = [
        (_LD_W_ABS, _ARCH, None, None),
        (_JEQ_K, n.audit_arch, None, "kill"),
        (_LD_W_ABS, _NR, None, None),
    ]
    if n.has_x32:
        body.append((_JGE_K, _X32_BIT, "kill", None))
    body += [(_JEQ_K, number, "enosys", None) for number in n.refused]
    body += [
        (_JEQ_K, n.unshare, "namespaces", None),
        (_JEQ_K, n.clone, "namespaces", None),
        (_JEQ_K, n.socketpair, "pair", None),
        (_JEQ_K, n.socket, None, "allow"),
        (_LD_W_ABS, _ARG0_LOW, None, None),
        (_JEQ_K, AF_NETLINK, "netlink" if netlink else "eafnosupport", None),
        *((_JEQ_K, family, "allow", None) for family in ALLOWED_FAMILIES),
        (*always, "eafnosupport", None),
        "pair",
        (_LD_W_ABS, _ARG1_LOW, None, None),
        (_AND_K, _SOCK_TYPE_MASK, None, None),
        (_JEQ_K, SOCK_STREAM, "allow", None),
        (_JEQ_K, SOCK_SEQPACKET, "allow", "eprotonosupport"),
        # unshare's and clone's flags are their first argument on both machines
        "namespaces",
        (_LD_W_ABS, _ARG0_LOW, None, None),
        (_JSET_K, NAMESPACE_FLAGS, "eperm", "allow"),
    ]
    if netlink:
        body += [
            "netlink",
            (_LD_W_ABS, _ARG2_LOW, None, None),
            (_JEQ_K, NETLINK_ROUTE, "allow", "eprotonosupport"),
        ]
    returns = {
        "allow": _ALLOW,
        "eafnosupport": _ERRNO | errno.EAFNOSUPPORT,
        "eprotonosupport": _ERRNO | errno.EPROTONOSUPPORT,
        # what a process without the right to make a namespace gets anyway
        "eperm": _ERRNO | errno.EPERM,
        "enosys": _ERRNO | errno.ENOSYS,
        "kill": _KILL_PROCESS,
    }
    lines: list[tuple[int, int, str | None, str | None]] = []
    at: dict[str, int] = {}  # where each label and each return lands
    for line in body:
        if isinstance(line, str):
            at[line] = len(lines)
        else:
            lines.append(line)
    at |= {name: len(lines) + i for i, name in enumerate(returns)}
    program = []
    for index, (code, k, true, false) in enumerate(lines):
        jt = at[true] - index - 1 if true else 0
        jf = at[false] - index - 1 if false else 0
        program.append(_insn(code, k, jt, jf))
    program += [_insn(_RET_K, value) for value in returns.values()]
    return b"".join(program)


def filter_fd(*, netlink: bool = False) -> int | None:
    """A readable descriptor holding the filter (:func:`filter_program`), for ``bwrap
    --seccomp FD`` (the caller passes it to the child and closes it), or None without a
    filter."""
    program = filter_program(netlink=netlink)
    if program is None:
        return None
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, program)  # a few hundred bytes: far below a pipe's buffer
    finally:
        os.close(write_end)
    return read_end
