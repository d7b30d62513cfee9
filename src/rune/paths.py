"""Where Rune keeps its own files. One place, because the sandbox must protect exactly these."""

from __future__ import annotations

import os
from pathlib import Path


def config_dir() -> Path:
    """The user's Rune configuration (``config.toml``)."""
    from platformdirs import user_config_path  # only when asked: keeps `import rune` light

    return user_config_path("rune")


def data_dir() -> Path:
    """Rune's data (session journals): ``$RUNE_DATA_DIR`` when set, else the platform's."""
    override = os.environ.get("RUNE_DATA_DIR")
    if override:
        return Path(override).expanduser()
    from platformdirs import user_data_path

    return user_data_path("rune")


def prompt_cache_dir() -> Path:
    """Where the embedded server saves its prompt cache (see :mod:`rune.transport.prompt_cache`)."""
    return data_dir() / "prompt-cache"


def seal_key_file() -> Path:
    """The per-user key that seals pending approvals (see :mod:`rune.pause.seal`)."""
    return data_dir() / "approval.key"


def own_dirs() -> tuple[Path, ...]:
    """Every directory whose contents steer Rune itself: a model must never write there (a
    forged journal would be replayed by `rune resume`, a config could widen the sandbox)."""
    from platformdirs import user_data_path

    return tuple(dict.fromkeys([config_dir(), data_dir(), user_data_path("rune")]))
