"""The seccomp filter of a contained run: sockets of allowed families only; no io_uring, no keyring.

A UNIX socket on a read-only mount can still be connected to, a socket file may lie anywhere,
and some families ignore the network namespace altogether: ``AF_VSOCK`` reaches the
hypervisor of a VM (CID 2 answered from inside the old sandbox), ``AF_BLUETOOTH`` the radio.
So the filter lets ``socket`` create only the families in :data:`ALLOWED_FAMILIES`: IP (useless
in the empty network namespace, but programs probe it) and netlink (``getaddrinfo`` and
``getifaddrs`` ask the kernel about interfaces through it). Every other family, ``AF_UNIX``
included, fails with ``EAFNOSUPPORT``, as on a kernel without it, so programs take their
fallback path. ``socketpair`` stays allowed: it makes a connected pair between a run's own
processes (asyncio, multiprocessing pipes) and reaches nothing else. io_uring, which can create
sockets without the ``socket`` system call, fails with ``ENOSYS`` (programs fall back to
ordinary I/O), and so does the kernel keyring (``keyctl``, ``add_key``, ``request_key``): no
namespace separates it, so a run would read the keys of the session that started Rune
(Kerberos tickets in a ``KEYRING:`` cache, tokens a tool stored there).

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

# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6]
_NR, _ARCH, _ARG0_LOW = 0, 4, 16
# classic BPF opcodes
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
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


def _arch() -> tuple[int, int, tuple[int, ...], bool] | None:
    """(AUDIT_ARCH value, socket's number, the numbers refused with ENOSYS, has x32) for this
    machine. Refused: io_uring (setup, enter, register) and the kernel keyring (add_key,
    request_key, keyctl)."""
    machine = platform.machine().lower()
    io_uring = (425, 426, 427)
    if machine in ("x86_64", "amd64"):
        return 0xC000003E, 41, (*io_uring, 248, 249, 250), True
    if machine in ("aarch64", "arm64"):
        return 0xC00000B7, 198, (*io_uring, 217, 218, 219), False
    return None


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def filter_program() -> bytes | None:
    """The filter as bwrap's ``--seccomp`` reads it (an array of ``struct sock_filter``), or
    None where Rune has no filter for this machine."""
    arch = _arch()
    if arch is None:
        return None
    audit_arch, socket_nr, refused, x32 = arch
    # Straight-line program with jumps to the returns at its end.
    body: list[tuple[int, int, str | None, str | None]] = [
        (_LD_W_ABS, _ARCH, None, None),
        (_JEQ_K, audit_arch, None, "kill"),
        (_LD_W_ABS, _NR, None, None),
    ]
    if x32:
        body.append((_JGE_K, _X32_BIT, "kill", None))
    for number in refused:
        body.append((_JEQ_K, number, "enosys", None))
    body += [(_JEQ_K, socket_nr, None, "allow"), (_LD_W_ABS, _ARG0_LOW, None, None)]
    body += [(_JEQ_K, family, "allow", None) for family in ALLOWED_FAMILIES]
    body.append((_JGE_K, 0, "eafnosupport", None))  # always true: the fall-through refuses
    returns = {
        "allow": _ALLOW,
        "eafnosupport": _ERRNO | errno.EAFNOSUPPORT,
        "enosys": _ERRNO | errno.ENOSYS,
        "kill": _KILL_PROCESS,
    }
    at = {name: len(body) + i for i, name in enumerate(returns)}
    program = []
    for index, (code, k, true, false) in enumerate(body):
        jt = at[true] - index - 1 if true else 0
        jf = at[false] - index - 1 if false else 0
        program.append(_insn(code, k, jt, jf))
    program += [_insn(_RET_K, value) for value in returns.values()]
    return b"".join(program)


def filter_fd() -> int | None:
    """A readable descriptor holding the filter, for ``bwrap --seccomp FD`` (the caller passes
    it to the child and closes it), or None without a filter."""
    program = filter_program()
    if program is None:
        return None
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, program)  # a few hundred bytes: far below a pipe's buffer
    finally:
        os.close(write_end)
    return read_end
