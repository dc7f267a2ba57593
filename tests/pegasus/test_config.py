"""Configuration: shipped file = code defaults, clear errors naming the bad key, env rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from pegasus import config
from pegasus.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def test_shipped_config_equals_the_code_defaults() -> None:
    assert config.parse(config.shipped_text(), "shipped") == config.Settings()


def test_the_installed_copy_is_the_repository_file() -> None:
    assert config.shipped_text() == (REPO / "config" / "pegasus.toml").read_text(encoding="utf-8")


def test_every_default_is_written_in_the_shipped_file() -> None:
    """Not just equal by accident of defaults: every key appears in the file."""
    raw = config.parse_toml(config.shipped_text())
    for section, values in config.Settings().model_dump().items():
        assert set(values) == set(raw[section]), section


@pytest.mark.parametrize("text,key", [
    ("[pools]\nllm_workerz = 3", "pools.llm_workerz"),
    ("[pools]\nllm_workers = 0", "pools.llm_workers"),
    ("[pools]\nllm_workers = 100000", "pools.llm_workers: Input should be less than or equal to 512"),
    ("[pools]\ntool_workers = 513", "pools.tool_workers: Input should be less than or equal to 512"),
    ("[runtime]\napproval_policy = 'sometimes'", "runtime.approval_policy"),
    ("[nope]\nx = 1", "nope"),
    ("[verification]\ngates = [{name = 'g'}]", "verification.gates.0.command"),
])
def test_bad_values_name_the_key(text: str, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        config.parse(text)


def test_invalid_toml_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        config.parse("[pools\n")


def test_layers_file_then_environment(tmp_path: Path) -> None:
    user = tmp_path / "user.toml"
    user.write_text("[pools]\nllm_workers = 7\ntool_workers = 2\n")
    env = {"PEGASUS_POOLS__TOOL_WORKERS": "9", "PEGASUS_RUNTIME__APPROVAL_POLICY": "manual", "OTHER": "x"}
    settings = config.load(user, environ=env)
    assert (settings.pools.llm_workers, settings.pools.tool_workers) == (7, 9)
    assert settings.runtime.approval_policy == "manual"


def test_env_file_and_home(tmp_path: Path) -> None:
    (tmp_path / "pegasus.toml").write_text("[runtime]\nmax_active_tasks = 11\n")
    settings = config.load(environ={"PEGASUS_HOME": str(tmp_path)})
    assert settings.runtime.max_active_tasks == 11
    with pytest.raises(ConfigError, match="cannot read config file"):
        config.load(environ={"PEGASUS_CONFIG": str(tmp_path / "missing.toml")})
    with pytest.raises(ConfigError, match="pools.llm_workers"):
        config.load(environ={"PEGASUS_HOME": str(tmp_path), "PEGASUS_POOLS__LLM_WORKERS": "many"})


def test_state_dir_follows_settings_then_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PEGASUS_HOME", str(tmp_path / "env"))
    assert config.Settings().state_dir() == (tmp_path / "env").resolve()
    explicit = config.Settings().with_overrides({"state": {"home": str(tmp_path / "cfg")}})
    assert explicit.state_dir() == (tmp_path / "cfg").resolve()


def test_pool_sizes_are_bounded_but_allow_a_hundred_of_each() -> None:
    """100 llm + 100 tool workers on one host is a planned load; 100000 forked the host (issue 15)."""
    settings = config.parse("[pools]\nllm_workers = 100\ntool_workers = 100\n")
    assert (settings.pools.llm_workers, settings.pools.tool_workers) == (100, 100)
    assert config.MAX_POOL_WORKERS == 512
