"""The supervisor an uncontained command runs under, so that nothing outlives it.

A process group is not enough: ``setsid`` (or a daemon's double fork) leaves it, and killing
the group misses it. The supervisor is a small Python process (``python -I -c SOURCE``; no
import from the workspace, no user site) that makes itself a *child subreaper*
(``prctl(PR_SET_CHILD_SUBREAPER)``, Linux 3.4+): every orphan below it, ``setsid`` ones
included, is re-parented to it instead of to init. It runs the command as its child and, when
the command has exited (after a short grace for leftovers that finish on their own), or when
Rune closes the control pipe (a timeout, or Rune itself gone), kills every descendant,
round after round, until it has no child left; then it exits with the command's status.

Where there is no ``prctl`` (not Linux) it still runs the command and kills its process group,
and says so on stderr.
"""

from __future__ import annotations

#: argv: CONTROL_FD GRACE_SECONDS COMMAND...
SOURCE = r"""
import ctypes, os, select, signal, sys, time

control, grace, argv = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]
PR_SET_CHILD_SUBREAPER = 36
try:
    libc = ctypes.CDLL(None, use_errno=True)
    subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
except (OSError, AttributeError):
    subreaper = False
if not subreaper:
    sys.stderr.write("[rune: no child subreaper here; only the process group is killed]\n")

me = os.getpid()
main = os.fork()
if main == 0:
    os.close(control)
    try:
        os.execvp(argv[0], argv)
    except OSError as err:
        sys.stderr.write(f"cannot run {argv[0]}: {err.strerror}\n")
    os._exit(127)


def children():
    found = []
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == me:
            found.append(int(name))
    return found


def reap():
    global status
    while True:
        try:
            pid, code = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True
        if pid == main:
            status = os.waitstatus_to_exitcode(code)


def kill_all():
    for _ in range(10000):
        if not reap():
            return
        pids = children()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.005)


status = None
done_at = None
signal.signal(signal.SIGTERM, lambda *_: None)
while True:
    ready, _, _ = select.select([control], [], [], 0.05)
    if ready and not os.read(control, 4096):
        break  # Rune closed the pipe: a timeout, or Rune is gone
    left = reap()
    if status is not None:
        done_at = done_at or time.monotonic()
        if not left or time.monotonic() - done_at >= grace:
            break
kill_all()
code = status if status is not None else 128 + signal.SIGKILL
sys.exit(code if code >= 0 else 128 - code)
"""
