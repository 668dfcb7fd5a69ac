"""Startup: token resolution (interfaces §3.9 items 1–3), upload pipelines, staging directories (D4)."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest
import yaml

from distributor_core.config import Environment, SecretError, load_config, resolve_upload_tokens
from distributor_core.server import create_app
from distributor_core.server.errors import ServerSetupError
from tests.server.harness import Setup, write_setup


def _two_token_setup(tmp_path: Path) -> Setup:
    return write_setup(
        tmp_path / "site",
        pipelines={"reports": 1, "weekly": 1},
        tokens={"reporter": ("a", ["reports"]), "weekly-reporter": ("b", ["weekly"])},
    )


def test_duplicate_token_values_name_both_ids_without_the_secret(tmp_path: Path) -> None:
    setup = _two_token_setup(tmp_path)
    secret = "super-secret-token"
    env = Environment({"TOKEN_REPORTER": secret, "TOKEN_WEEKLY_REPORTER": secret})
    with pytest.raises(SecretError) as info:
        create_app(setup.config, env=env)
    assert str(info.value) == (
        "upload token environment variables for tokens reporter and weekly-reporter resolve to the same value"
    )
    assert secret not in str(info.value)
    assert not setup.staging_root.exists()  # nothing is created before the tokens resolve


def test_missing_and_empty_token_variables(tmp_path: Path) -> None:
    setup = _two_token_setup(tmp_path)
    with pytest.raises(SecretError, match=r"^upload token weekly-reporter environment variable "
                                          r"TOKEN_WEEKLY_REPORTER is not set$"):
        create_app(setup.config, env=Environment({"TOKEN_REPORTER": "a"}))
    with pytest.raises(SecretError, match=r"^upload token reporter environment variable TOKEN_REPORTER is empty$"):
        create_app(setup.config, env=Environment({"TOKEN_REPORTER": "", "TOKEN_WEEKLY_REPORTER": "b"}))


def test_one_token_may_allow_several_pipelines(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site", pipelines={"reports": 1, "weekly": 1},
                        tokens={"reporter": ("secret", ["reports", "weekly"])})
    table = resolve_upload_tokens(setup.config, Environment({"TOKEN_REPORTER": "secret"}))
    grant = table.authenticate("secret")
    assert grant is not None
    assert grant.token_id == "reporter"
    assert grant.pipelines == frozenset({"reports", "weekly"})
    assert table.authenticate("secreT") is None
    assert "secret" not in repr(table)


def test_defaulted_server_section_still_builds_an_app(tmp_path: Path) -> None:
    root = tmp_path / "site"
    root.mkdir()
    doc = {
        "upload_tokens": [{"id": "reporter", "token_env": "UPLOAD_TOKEN", "allow_pipelines": ["reports"]}],
        "pipelines": [{"id": "reports", "source": {"backend": "http_upload"},
                       "destinations": [{"id": "archive", "backend": "local", "path": "out"}]}],
    }
    (root / "distributor.yml").write_text(yaml.safe_dump(doc))
    config = load_config(root / "distributor.yml")
    assert config.server.http.bind == "127.0.0.1:8080"
    app = create_app(config, env=Environment({"UPLOAD_TOKEN": "secret"}))
    try:
        staging = root / ".distributor" / "staging"
        assert (staging / "reports").is_dir()
        assert os.stat(staging).st_mode & 0o777 == 0o700
        assert os.stat(staging / "reports").st_mode & 0o777 == 0o700
        assert os.stat(root / ".distributor").st_mode & 0o777 == 0o700
    finally:
        app.state.runtime.shutdown()


def test_serve_requires_an_upload_pipeline(tmp_path: Path) -> None:
    root = tmp_path / "site"
    root.mkdir()
    (root / "src").mkdir()
    doc = {"pipelines": [{"id": "files", "source": {"backend": "local", "path": "src"},
                          "destinations": [{"id": "archive", "backend": "local", "path": "out"}]}]}
    (root / "distributor.yml").write_text(yaml.safe_dump(doc))
    with pytest.raises(ServerSetupError, match=r"^serve requires at least one http_upload pipeline$"):
        create_app(load_config(root / "distributor.yml"), env=Environment({}))


@pytest.mark.parametrize("mode", [0o770, 0o702, 0o775])
def test_group_or_world_writable_staging_root_is_refused(tmp_path: Path, mode: int) -> None:
    setup = write_setup(tmp_path / "site")
    setup.staging_root.mkdir(parents=True)
    os.chmod(setup.staging_root, mode)
    with pytest.raises(ServerSetupError) as info:
        create_app(setup.config, env=setup.env)
    assert str(info.value) == (
        f"staging directory {setup.staging_root} is writable by group or others (mode {mode:04o})"
    )
    assert not setup.staging("reports").exists()


def test_pipeline_staging_path_checks(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    staging = setup.staging("reports")
    staging.mkdir(parents=True, mode=0o700)
    os.chmod(staging, 0o720)
    with pytest.raises(ServerSetupError, match=f"^staging directory {staging} is writable by group or others"):
        create_app(setup.config, env=setup.env)
    os.chmod(staging, 0o700)
    if os.geteuid() == 0:
        os.chown(staging, 65534, 65534)
        with pytest.raises(ServerSetupError, match=f"^staging directory {staging} is owned by another user"):
            create_app(setup.config, env=setup.env)
        os.chown(staging, 0, 0)
    staging.rmdir()
    staging.write_text("not a directory")
    with pytest.raises(ServerSetupError, match=f"^staging directory {staging} is not a directory$"):
        create_app(setup.config, env=setup.env)


def test_one_serve_per_staging_path(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    first = create_app(setup.config, env=setup.env)
    try:
        with pytest.raises(ServerSetupError) as info:
            create_app(setup.config, env=setup.env)
        assert str(info.value) == (
            f"staging directory {setup.staging('reports')} is in use by another distributor serve process"
        )
    finally:
        first.state.runtime.shutdown()
    second = create_app(setup.config, env=setup.env)  # released on shutdown
    second.state.runtime.shutdown()


def test_pipelines_sharing_a_staging_path_are_refused(tmp_path: Path) -> None:
    # The config loader already refuses overlapping staging paths; a programmatic config is
    # refused by the server as well.
    setup = write_setup(tmp_path / "site", pipelines={"a": 1, "b": 1})
    config = setup.config
    shared = config.pipelines[0].source
    second = msgspec.structs.replace(config.pipelines[1], source=shared)
    config = msgspec.structs.replace(config, pipelines=(config.pipelines[0], second))
    with pytest.raises(ServerSetupError) as info:
        create_app(config, env=setup.env)
    assert str(info.value) == f"pipelines a and b share staging directory {setup.staging('a')}"
