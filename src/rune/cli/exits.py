"""The exit status of the ``rune`` command (also in ``rune --help``)."""

EXIT_OK = 0
#: the task or a check failed
EXIT_FAILED = 1
#: bad usage or configuration
EXIT_USAGE = 2
#: an approval is waiting (no answer on a non-interactive stdin)
EXIT_PENDING = 3
EXIT_INTERRUPTED = 130
