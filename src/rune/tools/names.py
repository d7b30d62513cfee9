"""What a path's names mean to the sandbox: credentials, protected, sensitive.

Each list matches path components case-folded (NFC), at any depth, existing or not
(docs/sandbox.md, "What the names mean"):

- **credentials**: never read or written for the model (a user's own config may let Rune read
  one specific store: ``sandbox.allow_credentials``);
- **protected**: never written: files another program runs or obeys outside any sandbox —
  shell and tool start-up files, everything inside ``.git``, IDE and agent configuration;
- **sensitive**: part of a normal project, but they steer an agent or run code the next time a
  tool is used (``AGENTS.md``, ``conftest.py``, CI workflows); changing one always asks, even
  under ``--yes``.

A :class:`NameList` entry is a single name (any component), a prefix or a suffix of a
component, or a run of components (``.config/gh``; its last part may end in ``*``:
``.config/google-chrome*``); a match covers that component and everything below it.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path


def fold(text: str) -> str:
    return unicodedata.normalize("NFC", text).casefold()


@dataclass(frozen=True)
class NameList:
    """Names that mean one thing (``what``) wherever they appear in a path.

    ``names`` match one component; ``sequences`` (``".config/gh"``) match components in a
    row, the last one by prefix when it ends in ``*`` (``".config/google-chrome*"``);
    ``prefixes`` and ``suffixes`` match the start or end of a component, ``dot_suffixes``
    only the end of a dot-name (``.bash_history``, not ``order_history``). All are compared
    case-folded.
    """

    what: str
    names: frozenset[str] = frozenset()
    sequences: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    suffixes: tuple[str, ...] = ()
    dot_suffixes: tuple[str, ...] = ()
    _names: frozenset[str] = field(init=False, repr=False, compare=False)
    _first: dict[str, list[tuple[str, ...]]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_names", frozenset(fold(n) for n in self.names))
        object.__setattr__(self, "prefixes", tuple(fold(p) for p in self.prefixes))
        first: dict[str, list[tuple[str, ...]]] = {}
        for entry in self.sequences:
            seq = tuple(fold(part) for part in entry.split("/"))
            first.setdefault(seq[0], []).append(seq)
        object.__setattr__(self, "_first", first)

    def match_end(self, folded: list[str]) -> int | None:
        """How many leading components of ``folded`` reach the first match, or None."""
        for i, part in enumerate(folded):
            if part in self._names or (self.suffixes and part.endswith(self.suffixes)):
                return i + 1
            if self.prefixes and part.startswith(self.prefixes):
                return i + 1
            if self.dot_suffixes and part.startswith(".") and part.endswith(self.dot_suffixes):
                return i + 1
            for seq in self._first.get(part, ()):
                if _sequence_at(folded[i : i + len(seq)], seq):
                    return i + len(seq)
        return None

    def match(self, path: Path) -> Path | None:
        """The part of ``path`` that is on this list (itself, or the directory it lies in)."""
        end = self.match_end([fold(p) for p in path.parts])
        return None if end is None else Path(*path.parts[:end])

    def entries(self) -> list[str]:
        """Every entry as the documentation writes it, for ``rune doctor``."""
        shown = [*sorted(self.names, key=str.casefold), *self.sequences]
        shown += [f"{p}*" for p in self.prefixes] + [f"*{s}" for s in self.suffixes]
        return shown + [f".*{s}" for s in self.dot_suffixes]


def _sequence_at(parts: list[str], seq: tuple[str, ...]) -> bool:
    """Whether ``parts`` are the components of ``seq`` (its last one by prefix: ``name*``)."""
    if len(parts) != len(seq):
        return False
    *head, last = seq
    if last.endswith("*"):
        return parts[:-1] == head and parts[-1].startswith(last[:-1])
    return tuple(parts) == seq


def first_match(lists: Iterable[NameList], path: Path) -> tuple[NameList, Path] | None:
    for names in lists:
        hit = names.match(path)
        if hit is not None:
            return names, hit
    return None


# --- credentials: never read, never written ---------------------------------------------------

CREDENTIALS = NameList(
    "holds credentials",
    names=frozenset(
        {
            ".ssh",
            ".gnupg",
            ".aws",
            ".azure",
            ".kube",
            ".oci",
            ".password-store",
            ".netrc",
            ".git-credentials",
            ".npmrc",
            ".pypirc",
            ".pgpass",
            ".my.cnf",
            ".s3cfg",
            ".boto",
            ".vault-token",
            ".databrickscfg",
            "credentials.tfrc.json",
            # Browser and mail profiles: saved logins, cookies.
            ".mozilla",
            ".thunderbird",
            ".librewolf",
            # Chromium-based browsers keep saved passwords in these files, wherever the profile is.
            "Login Data",
            "Login Data For Account",
            # Kerberos keys (tickets are krb5cc_*, below).
            "krb5.keytab",
            # Shell and REPL histories: typed passwords and tokens.
            ".histfile",
            ".zhistory",
            ".history",
            "fish_history",
        }
    ),
    # Kerberos ticket caches: /tmp/krb5cc_1000, krb5cc_1000_XXXX.
    prefixes=("krb5cc",),
    sequences=(
        ".config/gcloud",
        ".config/gh",
        ".config/hub",
        ".config/git/credentials",
        ".config/containers/auth.json",
        ".config/rclone",
        ".config/doctl",
        ".config/hcloud",
        ".config/op",
        ".local/share/keyrings",
        ".local/share/kwalletd",
        ".gnome2/keyrings",
        ".docker/config.json",
        ".cargo/credentials",
        ".cargo/credentials.toml",
        ".gem/credentials",
        ".m2/settings.xml",
        ".m2/settings-security.xml",
        ".gradle/gradle.properties",
        # Browser profiles (saved logins, cookies), every channel: -beta, -unstable, -dev.
        ".config/google-chrome*",
        ".config/chromium*",
        ".config/BraveSoftware",
        ".config/microsoft-edge*",
        ".config/vivaldi*",
        ".config/opera*",
        ".var/app/com.google.Chrome*",
        ".var/app/org.chromium.Chromium*",
        ".var/app/com.brave.Browser*",
        ".var/app/com.microsoft.Edge*",
        ".var/app/org.mozilla.firefox",
        "snap/chromium",
        "snap/firefox",
        "snap/brave",
        "snap/opera",
        "snap/vivaldi",
        "snap/thunderbird",
        # Other agents' and assistants' sign-in tokens.
        ".claude/.credentials.json",
        ".codex/auth.json",
        ".config/github-copilot",
        ".gemini/oauth_creds.json",
        ".gemini/google_accounts.json",
        # Model hubs and secret managers.
        ".cache/huggingface/token",
        ".cache/huggingface/stored_tokens",
        ".huggingface/token",
        "sops/age",
    ),
    dot_suffixes=("_history",),
)

# Rune's own config, approval key and sessions wherever a home puts them (the directories
# Rune actually uses are checked by path too): like credentials, but no config lifts them.
RUNE_OWN = NameList(
    "holds Rune's own configuration or sessions",
    sequences=(".config/rune", ".local/share/rune"),
)

# --- protected: never written ------------------------------------------------------------------

STARTUP_FILES = NameList(
    "runs, or is read, when a shell, tool or interpreter starts",
    names=frozenset(
        {
            ".bashrc",
            ".bash_profile",
            ".bash_login",
            ".bash_logout",
            ".bash_aliases",
            ".bashrc.d",
            ".profile",
            ".zshrc",
            ".zprofile",
            ".zshenv",
            ".zlogin",
            ".zlogout",
            ".oh-my-zsh",
            ".cshrc",
            ".tcshrc",
            ".kshrc",
            ".inputrc",
            ".envrc",
            ".pam_environment",
            ".xprofile",
            ".xsession",
            ".xsessionrc",
            ".xinitrc",
            ".vimrc",
            ".gvimrc",
            ".exrc",
            ".nvimrc",
            ".vim",
            ".emacs",
            ".emacs.el",
            ".emacs.d",
            ".tmux.conf",
            ".screenrc",
            ".gdbinit",
            ".lldbinit",
            ".pdbrc",
            ".pdbrc.py",
            ".pythonrc.py",
            ".rprofile",
            ".irbrc",
            ".pryrc",
            ".psqlrc",
            ".sqliterc",
            ".gitconfig",
            ".gitmodules",
            ".hgrc",
            ".ripgreprc",
            ".condarc",
            "pip.conf",
            "pip.ini",
            "sitecustomize.py",
            "usercustomize.py",
        }
    ),
    sequences=(
        ".config/autostart",
        ".config/systemd",
        ".config/environment.d",
        ".config/fish",
        ".config/zsh",
        ".config/git",
        ".config/nvim",
        ".config/emacs",
        ".config/tmux",
        ".config/kitty",
        ".config/powershell",
        ".config/direnv",
        ".config/mise",
        ".config/pip",
        ".config/mimeapps.list",
        ".pip/pip.conf",
        ".local/bin",
        # The user site-packages: Python imports whatever is there (a pytest.py shadows pytest).
        ".local/lib",
        ".local/share/nvim",
        ".local/share/applications",
        ".cargo/bin",
        ".cargo/config",
        ".cargo/config.toml",
        "go/bin",
        ".npm-global/bin",
        ".gradle/init.d",
        ".gradle/init.gradle",
        ".docker/cli-plugins",
        ".jupyter",
    ),
    suffixes=(".pth",),
)

GIT_INTERNALS = NameList(
    "is a version-control directory: git (or hg) runs and trusts what is in it",
    # ".git" as a file redirects git anywhere; inside it, commondir, objects/info/alternates,
    # hooks, config and submodules under modules/ all steer what the next `git status` runs.
    names=frozenset({".git", ".hg"}),
)

AGENT_CONFIG = NameList(
    "holds IDE or agent configuration",
    names=frozenset(
        {
            ".vscode",
            ".vscode-server",
            ".idea",
            ".fleet",
            ".vs",
            ".zed",
            ".cursor",
            ".cursor-server",
            ".cursorrules",
            ".claude",
            ".codex",
            ".rune",
            ".continue",
            ".aider",
            ".aider.conf.yml",
            ".gemini",
            ".windsurf",
            ".windsurfrules",
            ".kiro",
            ".clinerules",
            ".roo",
            ".roomodes",
            ".kilocode",
            ".amazonq",
            ".junie",
            ".augment",
            ".opencode",
            "opencode.json",
            ".goose",
            ".goosehints",
            ".qwen",
            ".crush",
            ".trae",
            ".openhands",
            ".mcp.json",
            ".ipython",
        }
    ),
    sequences=(
        ".github/copilot-instructions.md",
        ".github/instructions",
        ".github/prompts",
        ".github/chatmodes",
        ".config/Code",
        ".config/Code - OSS",
        ".config/VSCodium",
        ".config/Cursor",
        ".config/JetBrains",
        ".config/zed",
        ".config/sublime-text",
    ),
    suffixes=(".code-workspace", ".sublime-project"),
)

PROTECTED: tuple[NameList, ...] = (GIT_INTERNALS, AGENT_CONFIG, STARTUP_FILES)

# Under the user's home only (a project's own bin/ is ordinary): on PATH in common profiles.
HOME_PROTECTED: tuple[str, ...] = ("bin",)

# --- sensitive: may be written, always asks ----------------------------------------------------

AGENT_INSTRUCTIONS = NameList(
    "steers an agent that reads it (Rune loads AGENTS.md and RUNE.md into its own prompt)",
    names=frozenset({"AGENTS.md", "AGENT.md", "RUNE.md", "CLAUDE.md", "GEMINI.md"}),
)

RUNS_CODE = NameList(
    "runs code the next time a tool is used (a test runner, build, package manager or CI)",
    names=frozenset(
        {
            "conftest.py",
            "pytest.ini",
            "tox.ini",
            "noxfile.py",
            "setup.py",
            "setup.cfg",
            "pyproject.toml",
            "Makefile",
            "GNUmakefile",
            "justfile",
            ".justfile",
            "Taskfile.yml",
            "Rakefile",
            "build.rs",
            "build.gradle",
            "build.gradle.kts",
            "settings.gradle",
            "settings.gradle.kts",
            "gradlew",
            "package.json",
            ".yarnrc",
            ".yarnrc.yml",
            ".pre-commit-config.yaml",
            ".husky",
            ".gitlab-ci.yml",
            ".circleci",
            ".buildkite",
            ".travis.yml",
            "azure-pipelines.yml",
            "bitbucket-pipelines.yml",
            "Jenkinsfile",
            ".devcontainer",
            "mise.toml",
            ".mise.toml",
        }
    ),
    sequences=(".github/workflows", ".github/actions"),
)

INSTALLED = NameList(
    "is inside an installed environment (a virtualenv, site-packages, node_modules): its code "
    "runs the next time the project's interpreter or tools start",
    # A project's environment is where its python, pytest and packages are run from, outside
    # any sandbox once the user runs them: a changed .venv/bin/pytest or an __init__.py in
    # site-packages runs then. (A user's own site-packages under ~/.local is protected.)
    names=frozenset(
        {
            ".venv",
            "venv",
            ".tox",
            ".nox",
            "pyvenv.cfg",
            "site-packages",
            "dist-packages",
            "__pypackages__",
            "node_modules",
        }
    ),
)

SENSITIVE: tuple[NameList, ...] = (AGENT_INSTRUCTIONS, RUNS_CODE, INSTALLED)
