"""``load_config`` builds the validated tree into the config Structs with ``msgspec.convert``
(config/construct.py, issue 17 start-up): every value of the tree must arrive in the model,
converted to the field's type (``Path`` from text, tuples from lists, the backend member its
``backend`` tag names), and every field the tree leaves out must keep its default, for every
example and a spread of configs covering every backend, optional block and union."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import msgspec
import pytest

from distributor_core.config.construct import construct
from distributor_core.config.decode import decode_document
from distributor_core.config.defaults import apply_defaults
from distributor_core.config.loader import load_yaml_mapping
from distributor_core.config.models import Config, LocalBackend, S3Backend, SSHBackend
from distributor_core.config.validate import validate_tree
from tests.config.helpers import BASE_DIR, TOKENS, one_pipeline, upload_pipeline, with_destination

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for p in (ROOT / "examples").rglob("*.yml") if p.name != "docker-compose.yml")

SSH = "{backend: ssh, host: files.example.com, port: 2222, user: deploy, path: /srv/out, known_hosts_file: /etc/kh}"
S3 = "{backend: s3, bucket: site, prefix: out, region: eu-west-1, force_path_style: true}"
TEXTS = {
    "local": one_pipeline(),
    "ssh source": one_pipeline(source=SSH),
    "s3 destination": one_pipeline(destination=f"{{id: archive, {S3[1:]}"),
    "ssh destination": one_pipeline(destination=f"{{id: archive, {SSH[1:]}"),
    "markdown and links": with_destination(
        "publish: {source: true, html: true}, transform: {markdown_to_html: {enabled: true, mode: index}}, "
        "links: {base_url: 'https://example.com/site', primary: html}"
    ),
    "policies": with_destination(
        "state: {mode: shared_root}, reconciliation: {mode: merge}, takeover: {mode: any_managed}, "
        "retention: {prune: {keep_latest: 3, older_than: 720h}}"
    ),
    "upload": upload_pipeline(),
    "server and secrets": "server: {http: {bind: '127.0.0.1:8080', staging_root: staging, max_upload_size: 20MB}}\n"
    + "secrets: {directory: secrets}\n"
    + TOKENS
    + one_pipeline(source="{backend: http_upload}"),
}


def _tree(text: str, base_dir: Path) -> dict:
    raw = load_yaml_mapping(text, source_name="<test>")
    tree, messages = decode_document(raw)
    assert messages == []
    filled = apply_defaults(tree, Path(os.path.abspath(base_dir)))
    assert validate_tree(filled) == []
    return {**filled, "config_path": None}


def _same(model: object, tree: object, path: str = "config") -> None:
    """``model`` holds exactly ``tree``: field for field, with the field's type."""
    if isinstance(model, msgspec.Struct):
        assert isinstance(tree, Mapping), f"{path}: a model built from {tree!r}"
        fields = {f.name: f for f in msgspec.structs.fields(model)}
        for key, value in tree.items():
            if key == "backend" and key not in fields:
                assert type(model).backend == value, f"{path}: {type(model).__name__} for backend {value}"
                continue
            assert key in fields, f"{path}: {type(model).__name__} has no field {key}"
            _same(getattr(model, key), value, f"{path}.{key}")
        for name, field in fields.items():
            if name not in tree:
                default = field.default_factory() if field.default_factory is not msgspec.NODEFAULT else field.default
                assert default is not msgspec.NODEFAULT, f"{path}.{name}: required but not in the tree"
                assert getattr(model, name) == default, f"{path}.{name}: not its default"
    elif isinstance(model, tuple):
        assert isinstance(tree, list | tuple) and len(model) == len(tree), path
        for i, (a, b) in enumerate(zip(model, tree, strict=True)):
            _same(a, b, f"{path}[{i}]")
    elif isinstance(model, Path):
        assert isinstance(tree, str | Path) and model == Path(tree), f"{path}: {model!r} != {tree!r}"
    else:
        assert type(model) is type(tree) and model == tree, f"{path}: {model!r} != {tree!r}"


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_builds_the_models_of_its_tree(example: Path) -> None:
    tree = _tree(example.read_text(), example.parent)
    built = construct(Config, tree)
    _same(built, tree)
    assert built == construct(Config, tree) and hash(built) == hash(construct(Config, tree))


@pytest.mark.parametrize("name", list(TEXTS))
def test_a_spread_of_configs_builds_the_models_of_its_tree(name: str) -> None:
    tree = _tree(TEXTS[name], BASE_DIR)
    _same(construct(Config, tree), tree)


def test_the_backend_tag_picks_the_union_member() -> None:
    ssh = construct(Config, _tree(TEXTS["ssh destination"], BASE_DIR)).pipelines[0].destinations[0]
    s3 = construct(Config, _tree(TEXTS["s3 destination"], BASE_DIR)).pipelines[0].destinations[0]
    assert (type(ssh.storage), ssh.backend) == (SSHBackend, "ssh")
    assert (type(s3.storage), s3.backend) == (S3Backend, "s3")


def test_models_are_frozen() -> None:
    backend = construct(LocalBackend, {"path": "x", "resolved_path": "/x"})
    with pytest.raises(AttributeError):
        backend.path = "y"  # type: ignore[misc]


def test_a_field_the_model_does_not_have_is_a_type_error_not_a_silent_extra() -> None:
    with pytest.raises(TypeError, match="unknown field `colour`"):
        construct(LocalBackend, {"path": "x", "resolved_path": "/x", "colour": "red"})
