"""Route names, per-role routes and settings from the environment or .env."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from worldsim.domain.errors import ConfigError
from worldsim.models import Route, RouteTable, parse_role_route, parse_route, resolve_settings
from worldsim.models.routes import OPENAI_BASE_URL, env_prefix, parse_dotenv


def test_route_model_part_may_contain_slashes() -> None:
    route = parse_route("openrouter/meta-llama/llama-3.1-8b")
    assert (route.provider, route.model) == ("openrouter", "meta-llama/llama-3.1-8b")
    assert route.name == "openrouter/meta-llama/llama-3.1-8b"
    assert parse_route("offline").is_offline


@pytest.mark.parametrize(
    "text", ["", "gpt-4o", "openai/", "/gpt-4o", "open ai/x", "openai/a b", "offline/x"]
)
def test_bad_routes_are_config_errors(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_route(text, field="--model")
    assert caught.value.field == "--model"


def test_role_routes_override_the_default() -> None:
    table = RouteTable.from_flags(
        "openai/gpt-4o-mini", ["governance=openai/gpt-4o", "actor=vllm/qwen/Qwen2.5-7B"]
    )
    assert table.for_role("cohort") == Route("openai", "gpt-4o-mini")
    assert table.for_role("governance").model == "gpt-4o"
    assert table.for_role("actor").provider == "vllm"
    assert len(table.routes()) == 3
    assert table.default.name == "openai/gpt-4o-mini"
    assert RouteTable.from_flags().default.is_offline


@pytest.mark.parametrize("text", ["actor", "=openai/x", "actor=", "bad role=openai/x"])
def test_bad_role_routes_are_config_errors(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_role_route(text)


def test_conflicting_role_routes_are_rejected() -> None:
    with pytest.raises(ConfigError, match="two routes"):
        RouteTable.from_flags(None, ["actor=openai/a", "actor=openai/b"])


def test_env_prefix_upper_cases_and_replaces_dashes() -> None:
    assert env_prefix("acme-ai") == "ACME_AI"


def test_openai_defaults_to_the_official_url_and_needs_a_key(tmp_path: Path) -> None:
    settings = resolve_settings("openai/gpt-4o", environ={"OPENAI_API_KEY": "sk-x"}, dotenv=None)
    assert settings.base_url == OPENAI_BASE_URL and settings.base_url_host == "api.openai.com"
    assert "sk-x" not in repr(settings)
    with pytest.raises(ConfigError) as caught:
        resolve_settings("openai/gpt-4o", environ={}, dotenv=tmp_path / "none.env")
    assert caught.value.field == "OPENAI_API_KEY" and "OPENAI_API_KEY" in str(caught.value)


def test_other_providers_need_a_base_url() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_settings("groq/llama3", environ={"GROQ_API_KEY": "k"}, dotenv=None)
    assert caught.value.field == "GROQ_BASE_URL"


def test_local_servers_need_no_key() -> None:
    env = {"VLLM_BASE_URL": "http://127.0.0.1:8000/v1/"}
    settings = resolve_settings("vllm/qwen/Qwen2.5-7B", environ=env, dotenv=None)
    assert settings.base_url == "http://127.0.0.1:8000/v1"
    assert settings.api_key == "not-needed"


def test_dotenv_fills_what_the_environment_lacks(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text(
        "# keys\nexport ACME_AI_BASE_URL='https://llm.acme.example/v1'\n"
        'ACME_AI_API_KEY="from-file"  \nIGNORED LINE\n'
    )
    settings = resolve_settings("acme-ai/big", environ={}, dotenv=env_file)
    assert settings.base_url == "https://llm.acme.example/v1" and settings.api_key == "from-file"
    overridden = resolve_settings(
        "acme-ai/big", environ={"ACME_AI_API_KEY": "from-env"}, dotenv=env_file
    )
    assert overridden.api_key == "from-env"


def test_parse_dotenv_handles_comments_and_quotes() -> None:
    values = parse_dotenv("A=1 # note\nB='x # y'\n\n#C=3\nD=\n")
    assert values == {"A": "1", "B": "x # y", "D": ""}


def test_a_quoted_dotenv_value_may_be_followed_by_a_comment(tmp_path: Path) -> None:
    text = (
        'ACME_API_KEY="sk-env-123456"  # my key\n'
        "S='it\\'s' #note\n"
        'D="a\\"b\\nc"#x\n'
        'OPEN="unclosed # c\n'
    )
    values = parse_dotenv(text)
    assert values == {
        "ACME_API_KEY": "sk-env-123456",
        "S": "it's",
        "D": 'a"b\nc',
        "OPEN": '"unclosed',
    }
    env_file = tmp_path / ".env"
    env_file.write_text(text + "ACME_BASE_URL=http://127.0.0.1:9/v1\n")
    assert resolve_settings("acme/m", environ={}, dotenv=env_file).api_key == "sk-env-123456"


def test_base_url_must_be_http() -> None:
    with pytest.raises(ConfigError, match="http"):
        resolve_settings("x/y", environ={"X_BASE_URL": "ftp://h", "X_API_KEY": "k"}, dotenv=None)


def test_dotenv_in_the_working_directory_is_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".env").write_text("LOCAL_BASE_URL=http://localhost:11434/v1\n")
    monkeypatch.chdir(tmp_path)
    settings = resolve_settings("local/llama3", environ={})
    assert settings.base_url_host == "localhost:11434" and settings.api_key == "not-needed"


@given(
    provider=st.from_regex(r"[a-z0-9][a-z0-9_-]{0,12}", fullmatch=True),
    model=st.from_regex(r"[A-Za-z0-9._-]{1,12}(/[A-Za-z0-9._-]{1,12}){0,2}", fullmatch=True),
)
def test_route_names_round_trip(provider: str, model: str) -> None:
    assume(provider != "offline")
    route = parse_route(f"{provider}/{model}")
    assert (route.provider, route.model) == (provider, model)
    assert parse_route(route.name) == route
