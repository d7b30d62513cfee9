"""Config layering, provenance, validation, and the project file that may only narrow."""

from __future__ import annotations

from pathlib import Path

import pytest

from rune.errors import ConfigError
from rune.settings.config import load


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "project"
    (ws / ".rune").mkdir(parents=True)
    return ws


@pytest.fixture
def user_file(tmp_path: Path) -> Path:
    return tmp_path / "user" / "config.toml"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def project_file(workspace: Path) -> Path:
    return workspace / ".rune" / "config.toml"


def test_defaults_come_from_default(workspace: Path, user_file: Path) -> None:
    loaded = load({"workspace": str(workspace)}, env={}, user_file=user_file)
    assert loaded.settings.max_iterations == 8
    assert loaded.settings.approval == "ask"
    assert loaded.sources["max_iterations"] == "default"
    assert loaded.sources["workspace"] == "flag --workspace"
    assert loaded.files == ()


def test_each_layer_overrides_the_one_below_and_is_named(workspace: Path, user_file: Path) -> None:
    write(user_file, 'model = "user-model"\nmax_iterations = 3\nthink = true\nmax_context = 900\n')
    write(project_file(workspace), "max_output_tokens = 64\nmax_iterations = 4\nthink = false\n")
    env = {"RUNE_MAX_ITERATIONS": "5", "RUNE_THINK": "true"}
    loaded = load({"workspace": str(workspace), "max_iterations": 6}, env=env, user_file=user_file)
    s, src = loaded.settings, loaded.sources
    assert (s.max_context, src["max_context"]) == (900, f"user file {user_file}")
    assert (s.model, src["model"]) == ("user-model", f"user file {user_file}")
    assert (s.max_output_tokens, src["max_output_tokens"]) == (
        64,
        f"project file {project_file(workspace)}",
    )
    assert (s.think, src["think"]) == (True, "env RUNE_THINK")
    assert (s.max_iterations, src["max_iterations"]) == (6, "flag --max-iterations")
    assert loaded.files == (user_file, project_file(workspace))


def test_ollama_host_env_is_read_below_rune_own(workspace: Path, user_file: Path) -> None:
    base = {"workspace": str(workspace)}
    only_ollama = load(base, env={"OLLAMA_HOST": "127.0.0.1:5000"}, user_file=user_file)
    assert only_ollama.sources["ollama_host"] == "env OLLAMA_HOST"
    both = load(
        base,
        env={"OLLAMA_HOST": "127.0.0.1:5000", "RUNE_OLLAMA_HOST": "127.0.0.1:6000"},
        user_file=user_file,
    )
    assert both.settings.ollama_host == "127.0.0.1:6000"
    assert both.sources["ollama_host"] == "env RUNE_OLLAMA_HOST"


def test_sandbox_table_and_env_path_lists(workspace: Path, user_file: Path, tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    write(user_file, f'[sandbox]\nworkspace_only = true\nwrite_roots = ["{extra}"]\n')
    env = {"RUNE_SANDBOX_READ_ROOTS": f"{tmp_path / 'a'}:{tmp_path / 'b'}"}
    s = load({"workspace": str(workspace)}, env=env, user_file=user_file).settings
    assert s.sandbox_workspace_only is True
    assert s.sandbox_write_roots == (extra,)
    assert s.sandbox_read_roots == (tmp_path / "a", tmp_path / "b")


@pytest.mark.parametrize(
    ("text", "key", "allowed"),
    [
        ("max_iterations = 12\n", "max_iterations", "1 to 8"),
        ('approval = "sometimes"\n', "approval", "'ask'"),
        ('backend = "ftp://x"\n', "backend", "OpenAI-compatible"),
        ("max_context = 10\n", "max_context", "at least 512"),
        ('colour = "blue"\n', "colour", "Known keys"),
    ],
)
def test_bad_user_file_value_names_file_key_and_what_is_allowed(
    workspace: Path, user_file: Path, text: str, key: str, allowed: str
) -> None:
    write(user_file, text)
    with pytest.raises(ConfigError) as caught:
        load({"workspace": str(workspace)}, env={}, user_file=user_file)
    message = str(caught.value)
    assert str(user_file) in message
    assert repr(key) in message
    assert allowed in message


def test_bad_env_value_names_the_variable(workspace: Path, user_file: Path) -> None:
    with pytest.raises(ConfigError, match=r"env RUNE_MAX_ITERATIONS.*1 to 8"):
        load({"workspace": str(workspace)}, env={"RUNE_MAX_ITERATIONS": "0"}, user_file=user_file)


def test_broken_toml_is_a_config_error(workspace: Path, user_file: Path) -> None:
    write(project_file(workspace), "model = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load({"workspace": str(workspace)}, env={}, user_file=user_file)


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "huge"])
def test_a_project_file_that_is_no_small_regular_file_is_a_config_error(
    workspace: Path, user_file: Path, kind: str
) -> None:
    """A cloned repository's .rune/config.toml may be a link to /dev/zero or a FIFO: reading it
    must neither take the host's memory nor block."""
    import os

    path = project_file(workspace)
    if kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        write(path, "# padding\n" * 200_000)
    said = "over 1024 KiB" if kind == "huge" else "not a regular file"
    with pytest.raises(ConfigError, match=said):
        load({"workspace": str(workspace)}, env={}, user_file=user_file)


def test_a_user_file_that_links_to_a_dotfiles_repository_is_read(
    workspace: Path, user_file: Path, tmp_path: Path
) -> None:
    real = write(tmp_path / "dotfiles" / "rune.toml", "max_iterations = 5\n")
    user_file.parent.mkdir(parents=True)
    user_file.symlink_to(real)
    assert (
        load({"workspace": str(workspace)}, env={}, user_file=user_file).settings.max_iterations
        == 5
    )


def test_project_file_cannot_widen_the_sandbox(
    workspace: Path, user_file: Path, tmp_path: Path
) -> None:
    write(user_file, "[sandbox]\nworkspace_only = true\n")
    write(
        project_file(workspace),
        "\n".join(
            [
                'approval = "all"',
                'backend = "http://203.0.113.9:8080"',
                'ollama_host = "example.com:11434"',
                'api_key = "sk-from-the-repo"',
                f'workspace = "{tmp_path}"',
                "[sandbox]",
                "workspace_only = false",
                f'write_roots = ["{tmp_path}"]',
                f'read_roots = ["{tmp_path}"]',
                "",
            ]
        ),
    )
    loaded = load({"workspace": str(workspace)}, env={}, user_file=user_file)
    s = loaded.settings
    assert s.approval == "ask"
    assert s.backend is None
    assert s.ollama_host is None
    assert s.api_key is None
    assert s.workspace == workspace
    assert s.sandbox_workspace_only is True
    assert s.sandbox_write_roots == () and s.sandbox_read_roots == ()
    refused_keys = {note.split("ignored ")[1].split(":")[0] for note in loaded.refused}
    assert refused_keys == {
        "'approval'",
        "'backend'",
        "'ollama_host'",
        "'api_key'",
        "'workspace'",
        "'sandbox.workspace_only'",
        "'sandbox.write_roots'",
        "'sandbox.read_roots'",
    }


def test_project_file_may_narrow(workspace: Path, user_file: Path) -> None:
    write(user_file, 'approval = "edits"\n')
    write(
        project_file(workspace),
        'approval = "ask"\nmax_iterations = 2\nthink = false\n'
        "[sandbox]\nworkspace_only = true\nwrite_roots = []\n",
    )
    loaded = load({"workspace": str(workspace)}, env={}, user_file=user_file)
    s = loaded.settings
    assert loaded.refused == ()
    assert (s.approval, s.max_iterations, s.think) == ("ask", 2, False)
    assert s.sandbox_workspace_only is True


def test_env_and_flags_may_still_widen_what_the_project_file_could_not(
    workspace: Path, user_file: Path
) -> None:
    write(project_file(workspace), 'approval = "all"\n')
    loaded = load({"workspace": str(workspace), "approval": "edits"}, env={}, user_file=user_file)
    assert loaded.settings.approval == "edits"
    assert loaded.sources["approval"] == "flag --yes"


def test_allowed_credentials_come_from_the_users_env_as_a_path_list(
    workspace: Path, user_file: Path, tmp_path: Path
) -> None:
    env = {"RUNE_SANDBOX_ALLOW_CREDENTIALS": f"{tmp_path / '.aws'}:~/.kube/config"}
    s = load({"workspace": str(workspace)}, env=env, user_file=user_file).settings
    assert s.sandbox_allow_credentials == (tmp_path / ".aws", Path.home() / ".kube" / "config")


def test_every_settings_flag_is_an_option_of_rune_run() -> None:
    # Settings are declared once (rune.settings.keys.SETTINGS): the flag each names is the one the
    # command line has, and the one `rune config` names as the source.
    from rune.cli import command_parser
    from rune.settings.keys import SETTINGS

    options = {o for action in command_parser("run")._actions for o in action.option_strings}
    flags = {s.flag for s in SETTINGS if s.flag is not None}
    assert flags and flags <= options


def test_every_commands_help_for_a_settings_flag_is_the_declared_one() -> None:
    # The help line of a setting's flag is declared with the setting (rune.settings.keys); a
    # command may add its own default or context after it, never say something else.
    from rune.cli import command_parser
    from rune.cli.registry import COMMANDS
    from rune.settings.keys import FLAGS, flag_help

    seen = set()
    for name in COMMANDS:
        for action in command_parser(name)._actions:
            for flag in set(action.option_strings) & FLAGS.keys():
                seen.add(flag)
                help_text = action.help or ""
                declared = flag_help(flag)
                assert help_text == declared or help_text.startswith(
                    (f"{declared} (", f"{declared}; ")
                ), f"rune {name} {flag}: {help_text!r}"
    assert seen == FLAGS.keys()
