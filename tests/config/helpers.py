"""Helpers shared by the config tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from distributor_core.config import Config, ConfigError, parse_config

BASE_DIR = Path("/srv/config")

LOCAL_SOURCE = "{backend: local, path: /source}"
LOCAL_DEST = "{id: archive, backend: local, path: /archive}"
TOKENS = "upload_tokens: [{id: reporter, token_env: UPLOAD_TOKEN, allow_pipelines: [reports]}]\n"


def load(text: str, base_dir: Path = BASE_DIR) -> Config:
    return parse_config(text, base_dir=base_dir)


def messages(text: str, base_dir: Path = BASE_DIR) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(text, base_dir=base_dir)
    return info.value.messages


def one_pipeline(source: str = LOCAL_SOURCE, destination: str = LOCAL_DEST, pipeline_id: str = "reports") -> str:
    """A single-pipeline config in flow style."""
    return f"pipelines: [{{id: {pipeline_id}, source: {source}, destinations: [{destination}]}}]\n"


def with_destination(fields: str) -> str:
    """The minimal config whose one destination has the extra ``fields`` (flow-style text)."""
    return one_pipeline(destination=f"{{id: archive, backend: local, path: /archive, {fields}}}")


def upload_pipeline(source_fields: str = "") -> str:
    extra = f", {source_fields}" if source_fields else ""
    return TOKENS + one_pipeline(source=f"{{backend: http_upload{extra}}}")
