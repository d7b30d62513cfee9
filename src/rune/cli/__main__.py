"""``python -m rune.cli``."""

import sys

from rune.cli import main

sys.exit(main())
