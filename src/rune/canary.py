"""Kept path: CI and the docs run ``python -m rune.canary``. The canary lives in
:mod:`rune.app.canary`; nothing in Rune imports this path."""

from rune.app.canary import main

if __name__ == "__main__":
    raise SystemExit(main())
