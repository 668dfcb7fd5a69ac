"""Secret resolution (interfaces §1.4), upload tokens at serve startup (§3.1), S3 credentials (§5.4)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from distributor_core.config import (
    Environment,
    S3Backend,
    SecretError,
    parse_config,
    resolve_s3_credentials,
    resolve_upload_tokens,
)

from .helpers import BASE_DIR, load, one_pipeline

UPLOADS = """
upload_tokens:
  - {id: weather, token_env: WEATHER_TOKEN, allow_pipelines: [weather-daily, calendar]}
  - {id: backup, token_env: BACKUP_TOKEN, allow_pipelines: [weather-daily]}
pipelines:
  - {id: weather-daily, source: {backend: http_upload}, destinations: [{id: a, backend: local, path: /a}]}
  - {id: calendar, source: {backend: http_upload}, destinations: [{id: a, backend: local, path: /c}]}
"""


def test_environment_wins_even_when_empty(tmp_path: Path) -> None:
    (tmp_path / "NAME").write_text("from-file\n")
    assert Environment({"NAME": "from-env"}, secrets_directory=tmp_path).lookup("NAME") == "from-env"
    assert Environment({"NAME": ""}, secrets_directory=tmp_path).lookup("NAME") == ""


def test_secret_file_is_stripped(tmp_path: Path) -> None:
    (tmp_path / "NAME").write_text("  s3cr3t \n\n")
    assert Environment({}, secrets_directory=tmp_path).lookup("NAME") == "s3cr3t"


def test_unset_everywhere_is_none(tmp_path: Path) -> None:
    assert Environment({}, secrets_directory=tmp_path).lookup("NAME") is None
    assert Environment({}).lookup("NAME") is None
    assert Environment({}, secrets_directory=tmp_path / "missing").lookup("NAME") is None


def test_only_regular_files_count(tmp_path: Path) -> None:
    (tmp_path / "DIR").mkdir()
    os.mkfifo(tmp_path / "FIFO")
    (tmp_path / "real").write_text("linked")
    (tmp_path / "LINK").symlink_to(tmp_path / "real")
    env = Environment({}, secrets_directory=tmp_path)
    assert env.lookup("DIR") is None
    assert env.lookup("FIFO") is None
    assert env.lookup("LINK") == "linked"  # a symlink to a regular file is a regular file


@pytest.mark.parametrize("name", ["sub/NAME", "..", ".", "a\\b", "", "../outside/NAME"])
def test_names_with_separators_are_never_files(tmp_path: Path, name: str) -> None:
    secrets = tmp_path / "secrets"
    (secrets / "sub").mkdir(parents=True)
    (secrets / "sub" / "NAME").write_text("nested")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "NAME").write_text("escaped")
    (secrets / "a\\b").write_text("backslash")
    assert Environment({}, secrets_directory=secrets).lookup(name) is None


def test_environment_name_with_separator_still_comes_from_the_environment() -> None:
    assert Environment({"a/b": "v"}).lookup("a/b") == "v"


def test_unreadable_secret_file_is_an_error_without_the_value(tmp_path: Path) -> None:
    path = tmp_path / "NAME"
    path.write_bytes(b"\xffsecret-bytes")
    with pytest.raises(SecretError) as info:
        Environment({}, secrets_directory=tmp_path).lookup("NAME")
    assert str(info.value) == f"secret file {path} is not valid UTF-8"


def test_default_environ_is_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTRIBUTOR_TEST_SECRET", "from-process")
    assert Environment().lookup("DISTRIBUTOR_TEST_SECRET") == "from-process"


def test_from_config_uses_the_resolved_secrets_directory(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "WEATHER_TOKEN").write_text("w-token\n")
    config = parse_config("secrets: {directory: secrets}\n" + UPLOADS, base_dir=tmp_path)
    env = Environment.from_config(config, {"BACKUP_TOKEN": "b-token"})
    assert env.secrets_directory == tmp_path / "secrets"
    table = resolve_upload_tokens(config, env)
    assert [grant.token_id for grant in table.grants] == ["weather", "backup"]
    assert "w-token" not in repr(env) and "w-token" not in repr(table)
    weather = table.authenticate("w-token")
    assert weather is not None and weather.token_id == "weather"
    assert weather.allows("calendar") and weather.allows("weather-daily")
    backup = table.authenticate("b-token")
    assert backup is not None and backup.token_id == "backup"
    assert not backup.allows("calendar")
    assert table.authenticate("nope") is None
    assert table.authenticate("") is None
    assert len(table) == 2


def test_token_not_set() -> None:
    with pytest.raises(SecretError) as info:
        resolve_upload_tokens(load(UPLOADS), Environment({"BACKUP_TOKEN": "b"}))
    assert str(info.value) == "upload token weather environment variable WEATHER_TOKEN is not set"


def test_token_empty() -> None:
    with pytest.raises(SecretError) as info:
        resolve_upload_tokens(load(UPLOADS), Environment({"WEATHER_TOKEN": "w", "BACKUP_TOKEN": ""}))
    assert str(info.value) == "upload token backup environment variable BACKUP_TOKEN is empty"


def test_empty_secret_file_is_empty(tmp_path: Path) -> None:
    (tmp_path / "WEATHER_TOKEN").write_text("  \n")
    env = Environment({"BACKUP_TOKEN": "b"}, secrets_directory=tmp_path)
    with pytest.raises(SecretError, match=r"^upload token weather environment variable WEATHER_TOKEN is empty$"):
        resolve_upload_tokens(load(UPLOADS), env)


def test_tokens_resolving_to_the_same_value() -> None:
    env = Environment({"WEATHER_TOKEN": "same-secret", "BACKUP_TOKEN": "same-secret"})
    with pytest.raises(SecretError) as info:
        resolve_upload_tokens(load(UPLOADS), env)
    assert str(info.value) == (
        "upload token environment variables for tokens weather and backup resolve to the same value"
    )
    assert "same-secret" not in str(info.value)


def test_no_tokens_resolve_to_an_empty_table() -> None:
    table = resolve_upload_tokens(load(one_pipeline()), Environment({}))
    assert len(table) == 0 and table.authenticate("x") is None


S3_CONFIG = one_pipeline(
    destination="{id: s3, backend: s3, bucket: b, credentials: {access_key_id_env: AK, secret_access_key_env: SK}}"
)


def _s3_storage(text: str = S3_CONFIG) -> S3Backend:
    storage = load(text).pipelines[0].destinations[0].storage
    assert isinstance(storage, S3Backend)
    return storage


def test_s3_credentials_resolve(tmp_path: Path) -> None:
    (tmp_path / "SK").write_text("secret-key\n")
    pair = resolve_s3_credentials(_s3_storage(), Environment({"AK": "access"}, secrets_directory=tmp_path))
    assert pair is not None
    assert (pair.access_key_id, pair.secret_access_key) == ("access", "secret-key")
    assert "secret-key" not in repr(pair) and "access" not in repr(pair).replace("access_key", "")


def test_s3_without_credentials_uses_default_chain() -> None:
    storage = _s3_storage(one_pipeline(destination="{id: s3, backend: s3, bucket: b}"))
    assert resolve_s3_credentials(storage, Environment({})) is None


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"SK": "s"}, "pipelines[0].destinations[0]: s3 access key id environment variable AK is not set"),
        ({"AK": "", "SK": "s"}, "pipelines[0].destinations[0]: s3 access key id environment variable AK is empty"),
        ({"AK": "a"}, "pipelines[0].destinations[0]: s3 secret access key environment variable SK is not set"),
        ({"AK": "a", "SK": ""}, "pipelines[0].destinations[0]: s3 secret access key environment variable SK is empty"),
    ],
)
def test_s3_credentials_must_both_be_non_empty(environ: dict[str, str], expected: str) -> None:
    with pytest.raises(SecretError) as info:
        resolve_s3_credentials(_s3_storage(), Environment(environ), context="pipelines[0].destinations[0]")
    assert str(info.value) == expected


def test_s3_error_without_context() -> None:
    with pytest.raises(SecretError, match=r"^s3 access key id environment variable AK is not set$"):
        resolve_s3_credentials(_s3_storage(), Environment({}))


def test_loading_never_resolves_secrets() -> None:
    # interfaces §3.1: only serve resolves tokens; a config with unset names loads fine.
    config = parse_config(UPLOADS, base_dir=BASE_DIR)
    assert [token.token_env for token in config.upload_tokens] == ["WEATHER_TOKEN", "BACKUP_TOKEN"]
