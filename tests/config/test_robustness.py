"""Whatever a config file holds, loading ends in a Config or a ConfigError with plain messages."""

from __future__ import annotations

import copy
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distributor_core.config import Config, ConfigError, parse_config

from .helpers import BASE_DIR

BASE: dict[str, Any] = {
    "server": {"http": {"bind": "127.0.0.1:8080", "max_upload_size": "10MB", "queue_size": 2, "retention": "1h"}},
    "secrets": {"directory": "secrets"},
    "upload_tokens": [{"id": "t", "token_env": "T", "allow_pipelines": ["up"]}],
    "pipelines": [
        {
            "id": "up",
            "source": {"backend": "http_upload", "max_upload_size": "1MB"},
            "destinations": [
                {
                    "id": "s3",
                    "backend": "s3",
                    "bucket": "b",
                    "prefix": "p",
                    "credentials": {"access_key_id_env": "A", "secret_access_key_env": "B"},
                    "links": {"base_url": "https://h/", "primary": "html"},
                    "publish": {"source": True, "html": True},
                    "transform": {"markdown_to_html": {"enabled": True, "mode": "index"}},
                }
            ],
        },
        {
            "id": "local",
            "validation": {},
            "source": {"backend": "ssh", "host": "h", "user": "u", "path": "/in", "port": 22},
            "destinations": [
                {
                    "id": "a",
                    "backend": "local",
                    "path": "out",
                    "retention": {"prune": {"enabled": True, "older_than": "24h", "keep_latest": 3}},
                    "transfer": {"on_conflict": "replace"},
                    "takeover": {"mode": "never"},
                    "state": {"mode": "shared_root"},
                    "reconciliation": {"mode": "merge"},
                    "path_mapping": {"mode": "fixed"},
                }
            ],
        },
    ],
}

KEYS = ["id", "backend", "path", "mode", "enabled", "bucket", "surprise", "token", "http", "prune", "links",
        "publish", "staging_path", "max_upload_size", "allow_pipelines", "destinations", "source", "port"]

values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False)
    | st.sampled_from(["", "local", "s3", "http_upload", "24h", "0s", "forever", "20MB", "x y", "/abs", "yes", "-1h"])
    | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.sampled_from(KEYS), children, max_size=3),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, child in node.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found += _paths(child, (*prefix, index))
    return found


ALL_PATHS = _paths(BASE)[1:]


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(ALL_PATHS))
        parent: Any = doc
        try:
            for step in path[:-1]:
                parent = parent[step]
            if draw(st.booleans()) and isinstance(parent, dict):
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = draw(values)
        except (KeyError, IndexError, TypeError):
            continue
    return doc


def test_base_document_is_valid() -> None:
    assert isinstance(parse_config(yaml.safe_dump(BASE), base_dir=BASE_DIR), Config)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(mutated())
def test_mutated_configs_load_or_fail_plainly(doc: dict[str, Any]) -> None:
    text = yaml.safe_dump(doc)
    try:
        config = parse_config(text, base_dir=BASE_DIR)
    except ConfigError as error:
        assert error.messages
        for message in error.messages:
            assert isinstance(message, str) and message
            assert "Input should" not in message and "validation error" not in message
        assert str(error) == "invalid config: " + "; ".join(error.messages)
    else:
        assert isinstance(config, Config)
        assert config.pipelines
