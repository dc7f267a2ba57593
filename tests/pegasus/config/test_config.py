"""Configuration: shipped file = code defaults, clear errors naming the bad key, env rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from pegasus import config
from pegasus.errors import ConfigError

REPO = Path(__file__).resolve().parents[3]


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


def test_held_move_after_s_is_0_or_at_least_half_a_second() -> None:
    """Its worker asks its pool after a call of half of it: 0.05 s would leave 25 ms for two messages' transit."""
    with pytest.raises(ConfigError, match=r"pools\.held_move_after_s: .*must be 0 \(never move a held step\) "
                                          r"or at least 0\.5 s, not 0\.05"):
        config.parse("[pools]\nheld_move_after_s = 0.05")
    assert [config.parse(f"[pools]\nheld_move_after_s = {value}").pools.held_move_after_s
            for value in ("0", "0.5", "2")] == [0.0, 0.5, 2.0]


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


def _numeric_settings() -> list[tuple[str, str, type]]:
    """(section, key, int or float) of every number setting of every section."""
    found = []
    for section, field in config.Settings.model_fields.items():
        model = field.annotation
        for key, info in model.model_fields.items():  # type: ignore[union-attr]
            if info.annotation in (int, float):
                found.append((section, key, info.annotation))
    return found


NUMERIC = _numeric_settings()


def test_every_number_setting_is_bounded_above() -> None:
    """Each int or float setting has a ceiling (a count, a size, a timer): none is open-ended."""
    unbounded = [f"{section}.{key}" for section, key, _ in NUMERIC
                 if not any(hasattr(meta, "le") or hasattr(meta, "lt")
                            for meta in getattr(config.Settings.model_fields[section].annotation, "model_fields")[key].metadata)]
    assert not unbounded and len(NUMERIC) > 50


@pytest.mark.parametrize("section,key,kind", NUMERIC, ids=[f"{s}.{k}" for s, k, _ in NUMERIC])
def test_inf_nan_and_huge_values_name_their_key(section: str, key: str, kind: type) -> None:
    """``[pools] tool_timeout_s = inf`` and ``[retry] backoff_s = 1e308`` were accepted (issue 28): every
    number setting refuses inf, nan and a value past its ceiling, naming its key, in a file and in the
    environment."""
    bad = ["inf", "nan", "-inf", "1e308"] if kind is float else ["99999999999999999", "1e308"]
    for value in bad:
        with pytest.raises(ConfigError, match=rf"{section}\.{key}: "):
            config.parse(f"[{section}]\n{key} = {value}\n")
        with pytest.raises(ConfigError, match=rf"{section}\.{key}: "):
            config.load(environ={"PEGASUS_CONFIG": "/dev/null", f"PEGASUS_{section.upper()}__{key.upper()}": value})


@pytest.mark.parametrize("text,key", [
    ("[[verification.gates]]\nname = 'g'\ncommand = ['true']\ntimeout_s = inf", "verification.gates.0.timeout_s"),
    ("[[mcp.servers]]\nname = 's'\ncommand = 'x'\ntimeout_s = 1e308", "mcp.servers.0.timeout_s"),
    ("[llm.tiers.fast]\nmodel = 'm'\nrpm = 1e30", "llm.tiers.fast.rpm"),
    ("[llm.prices.m]\ninput = nan\noutput = 1", "llm.prices.m.input"),
])
def test_nested_number_settings_are_bounded_too(text: str, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        config.parse(text)
