"""Staging locations (issue 29, items 1 and 4): ``server.http.staging_root`` is a local directory
or ``s3://bucket/prefix`` (staging shared by several ``serve`` replicas); any other URL is refused
naming the field (before, ``s3://bucket/x`` silently became a local directory named
``s3:/bucket/x``), and so is a URL as a pipeline's ``staging_path``."""

from __future__ import annotations

import pytest

from .helpers import TOKENS, load, messages, one_pipeline, upload_pipeline

ROOT_REFUSED = (
    "URLs are not supported for staging; use a local directory path (one server) or s3://bucket/prefix "
    "(any number of serve replicas)"
)


@pytest.mark.parametrize("url", ["S3://bucket", "gs://b/p", "file:///srv/staging", "https://h/x"])
def test_staging_root_url_of_another_scheme_is_refused(url: str) -> None:
    scheme = url.split("://", 1)[0]
    text = f"server: {{http: {{staging_root: '{url}'}}}}\n" + upload_pipeline()
    assert messages(text) == [f"server.http.staging_root: {scheme}:// {ROOT_REFUSED}"]


def test_s3_staging_root_stages_each_pipeline_under_its_id() -> None:
    config = load(
        "server: {http: {staging_root: 's3://uploads/staging/', staging_s3: {region: eu-west-1, "
        "endpoint: 'http://127.0.0.1:9000', force_path_style: true, conditional_writes: trusted, "
        "credentials: {access_key_id_env: KEY_ID, secret_access_key_env: SECRET}}}}\n" + upload_pipeline()
    )
    store = config.pipelines[0].source.staging_store
    assert store is not None and config.pipelines[0].source.shared
    assert (store.bucket, store.prefix, store.region, store.endpoint) == (
        "uploads", f"staging/{config.pipelines[0].id}", "eu-west-1", "http://127.0.0.1:9000"
    )
    assert store.credentials is not None and store.credentials.access_key_id_env == "KEY_ID"
    assert store.conditional_writes == "trusted"


def test_local_staging_root_is_not_shared() -> None:
    config = load("server: {http: {staging_root: 'staging'}}\n" + upload_pipeline())
    assert not config.pipelines[0].source.shared


def test_s3_staging_root_needs_a_bucket() -> None:
    assert messages("server: {http: {staging_root: 's3:///x'}}\n" + upload_pipeline()) == [
        "server.http.staging_root must name a bucket: s3://bucket/prefix"
    ]


def test_staging_s3_without_an_s3_root_is_refused() -> None:
    text = "server: {http: {staging_root: 'staging', staging_s3: {region: eu-west-1}}}\n" + upload_pipeline()
    assert messages(text) == ["server.http.staging_s3 is only used with an s3:// staging_root"]


def test_staging_s3_is_checked_like_an_s3_backend() -> None:
    text = "server: {http: {staging_root: 's3://b/p', staging_s3: {endpoint: 'ftp://x'}}}\n" + upload_pipeline()
    assert messages(text) == ["server.http.staging_s3.endpoint must be an absolute http or https URL"]


def test_pipeline_staging_path_url_is_refused() -> None:
    assert messages(upload_pipeline("staging_path: 's3://bucket/reports'")) == [
        "pipelines[0].source.staging_path must be a local directory path: s3:// URLs are not supported there "
        "(to stage in S3, set server.http.staging_root to s3://bucket/prefix)"
    ]


def test_pipeline_staging_path_with_an_s3_root_is_refused() -> None:
    text = "server: {http: {staging_root: 's3://b/p'}}\n" + upload_pipeline("staging_path: spool")
    assert messages(text) == [
        "pipelines[0].source.staging_path cannot be set with an s3:// server.http.staging_root: every pipeline "
        "stages under <staging_root>/<pipeline id> in the shared store; remove it"
    ]


def test_url_refusal_is_reported_with_the_other_problems() -> None:
    text = "server: {http: {staging_root: 'gs://bucket/x', queue_size: 0}}\n" + upload_pipeline()
    assert messages(text) == [
        f"server.http.staging_root: gs:// {ROOT_REFUSED}",
        "server.http.queue_size must be greater than zero",
    ]


@pytest.mark.parametrize("path", ["staging", "/srv/staging", "./s3:/odd-but-local", "spool/x:y"])
def test_directory_paths_are_still_accepted(path: str) -> None:
    config = load(f"server: {{http: {{staging_root: '{path}'}}}}\n" + TOKENS
                  + one_pipeline(source="{backend: http_upload}"))
    assert config.server.http.staging_root.is_absolute()
