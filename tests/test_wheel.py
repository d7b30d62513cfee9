"""Rune as a user gets it: the built wheel installed into a fresh venv, not the editable checkout.

``python -m build --no-isolation`` builds the sdist and then the wheel from that sdist (hatchling
and build come with the dev extra, so nothing is downloaded). The wheel goes into a new venv with
``pip install --no-deps --no-index``; that venv finds Rune's dependencies in the dev venv's
site-packages through a path line in a ``.pth`` file. A path line does not run the dev venv's own
``.pth`` files, so the editable install's ``src/`` never reaches ``sys.path``: ``rune`` can only
come from the wheel, and a test below checks that it does. No network, no package index.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rune import __version__
from rune.app.demo import FIXED_CALC
from rune.distribution import DISTRIBUTION

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src" / "rune"
WHEEL_STEM = f"{DISTRIBUTION.replace('-', '_')}-{__version__}"


def package_files() -> set[str]:
    """Every file of the ``rune`` package in the source tree, as the wheel names it."""
    return {
        path.relative_to(SRC.parent).as_posix()
        for path in SRC.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


DATA_FILES = sorted(name for name in package_files() if not name.endswith(".py"))


def missing_from_wheel(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return package_files() - set(archive.namelist())


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Built:
    wheel: Path
    sdist: Path


@dataclass(frozen=True)
class Installed:
    venv: Path
    site_packages: Path
    home: Path

    @property
    def bin(self) -> Path:
        return self.venv / ("Scripts" if os.name == "nt" else "bin")

    @property
    def python(self) -> Path:
        return self.bin / "python"

    def env(self) -> dict[str, str]:
        """A user's shell: the venv first on PATH, a temp HOME, data and config in temp dirs.

        Colour settings are dropped: NO_COLOR changes what the TUI snapshots render; and
        pytest's own (PYTEST_XDIST_WORKER made the inner pytest's snapshot plugin act as a
        worker of the outer one).
        """
        dropped = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "NO_COLOR", "FORCE_COLOR")
        environment = {
            k: v
            for k, v in os.environ.items()
            if k not in dropped and not k.startswith(("RUNE_", "TEXTUAL", "PYTEST_"))
        }
        environment.update(
            HOME=str(self.home),
            PATH=f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",
            RUNE_DATA_DIR=str(self.home / "rune-data"),
            XDG_DATA_HOME=str(self.home / "xdg-data"),
            XDG_CONFIG_HOME=str(self.home / "xdg-config"),
            XDG_CACHE_HOME=str(self.home / "xdg-cache"),
            OLLAMA_HOST=f"127.0.0.1:{closed_port()}",
        )
        return environment

    def run(
        self, *command: str | Path, stdin: str = "", cwd: Path | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(part) for part in command],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env(),
            cwd=cwd or self.home,
            timeout=timeout,
            check=False,
        )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return Built(wheel=out / f"{WHEEL_STEM}-py3-none-any.whl", sdist=out / f"{WHEEL_STEM}.tar.gz")


@pytest.fixture(scope="module")
def installed(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    root = tmp_path_factory.mktemp("installed")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
    site_packages = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    dev_site = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    (site_packages / "_dev_dependencies.pth").write_text("\n".join(sorted(dev_site)) + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check"]
    subprocess.run(
        [*pip, "install", "-q", "--no-deps", "--no-index", "--no-cache-dir", str(built.wheel)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    home = root / "home"
    home.mkdir()
    yield Installed(venv=venv, site_packages=site_packages, home=home)


# --- what the archives carry -----------------------------------------------------------------


def test_the_package_has_the_data_files_this_test_guards() -> None:
    guarded = {
        "rune/tui/rune.tcss",
        "rune/templates/qwen25-tools.jinja",
        "rune/app/model_check_tasks.json",
    }
    assert guarded <= set(DATA_FILES)


def test_the_wheel_carries_every_file_of_the_package(built: Built) -> None:
    assert missing_from_wheel(built.wheel) == set()
    with zipfile.ZipFile(built.wheel) as archive:
        info = f"{WHEEL_STEM}.dist-info"
        metadata = archive.read(f"{info}/METADATA").decode()
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
        stray = [n for n in archive.namelist() if "__pycache__" in n or n.endswith(".pyc")]
    assert f"Name: {DISTRIBUTION}\n" in metadata
    assert f"Version: {__version__}\n" in metadata
    assert "Provides-Extra: embedded\n" in metadata
    assert "rune = rune.cli:main" in entry_points
    assert stray == []


@pytest.mark.parametrize("data_file", DATA_FILES)
def test_a_wheel_without_a_data_file_is_caught(
    built: Built, data_file: str, tmp_path: Path
) -> None:
    broken = tmp_path / built.wheel.name
    with zipfile.ZipFile(built.wheel) as src, zipfile.ZipFile(broken, "w") as dst:
        for item in src.infolist():
            if item.filename != data_file:
                dst.writestr(item, src.read(item))
    assert missing_from_wheel(broken) == {data_file}


def test_the_sdist_carries_the_package_its_tests_and_its_design(built: Built) -> None:
    with tarfile.open(built.sdist) as archive:
        names = {name.partition("/")[2] for name in archive.getnames()}
    wanted = {f"src/{name}" for name in package_files()}
    wanted |= {"pyproject.toml", "README.md", "tests/test_wheel.py", "tests/test_tui.py"}
    wanted |= {"scripts/setup", "scripts/test", "docs/loop.md", "docs/sandbox.md"}
    assert wanted - names == set()
    assert not [n for n in names if n.startswith(".venv/") or "__pycache__" in n]


# --- what the installed wheel does -----------------------------------------------------------


def test_rune_comes_from_the_wheel_not_the_checkout(installed: Installed) -> None:
    done = installed.run(
        installed.python,
        "-c",
        "import rune, sys; print(rune.__file__); print(*sys.path, sep='\\n')",
    )
    assert done.returncode == 0, done.stderr
    origin, *path = done.stdout.splitlines()
    assert Path(origin) == installed.site_packages / "rune" / "__init__.py"
    assert str(SRC.parent) not in path


def test_installed_version_is_the_bare_version(installed: Installed) -> None:
    done = installed.run(installed.bin / "rune", "--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"rune {__version__}\n", "")
    helped = installed.run(installed.bin / "rune", "--help")
    assert helped.returncode == 0 and "rune demo" in helped.stdout


def test_installed_scripted_demo_fixes_the_sample(installed: Installed) -> None:
    done = installed.run(installed.bin / "rune", "demo", "--backend", "scripted", stdin="a\na\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "add(2, 3) == 5 now" in done.stdout
    project = installed.home / "xdg-cache" / "rune" / "demo"
    assert (project / "calc.py").read_text() == FIXED_CALC
    assert any((installed.home / "rune-data").rglob("*.jsonl")), "no session journal"


def test_installed_canary_holds(installed: Installed) -> None:
    done = installed.run(installed.python, "-m", "rune.app.canary")
    assert done.returncode == 0, done.stdout + done.stderr


def test_installed_tui_passes_its_smoke_and_snapshot_tests(installed: Installed) -> None:
    """tests/test_tui.py against the installed package: its stylesheet, its rendering."""
    code = (
        "import sys, pytest, rune; print('rune from', rune.__file__, flush=True); "
        "sys.exit(pytest.main(sys.argv[1:]))"
    )
    done = installed.run(
        installed.python,
        "-c",
        code,
        "tests/test_tui.py",
        "-q",
        "-p",
        "no:cacheprovider",
        cwd=REPO,
        timeout=100,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"rune from {installed.site_packages / 'rune' / '__init__.py'}" in done.stdout
    assert " passed" in done.stdout and "skipped" not in done.stdout


def test_installed_bundled_chat_template_loads(installed: Installed) -> None:
    code = (
        "from rune.models.embedded import load_chat_template; "
        "print(load_chat_template('qwen25-tools'))"
    )
    done = installed.run(installed.python, "-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (SRC / "templates" / "qwen25-tools.jinja").read_text() + "\n"


def test_installed_check_model_tasks_load(installed: Installed) -> None:
    code = (
        "from rune.app.model_check import builtin_tasks; print([t.name for t in builtin_tasks()])"
    )
    done = installed.run(installed.python, "-c", code)
    assert done.returncode == 0, done.stderr
    assert "01_add_sign" in done.stdout
