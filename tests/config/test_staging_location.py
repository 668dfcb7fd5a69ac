"""A staging location given as a URL is refused, naming the field (issue 29, item 4): before, a
``staging_root: s3://bucket/x`` silently became a local directory named ``s3:/bucket/x``."""

from __future__ import annotations

import pytest

from .helpers import TOKENS, messages, one_pipeline, upload_pipeline

REFUSED = "URLs are not supported for staging (staging in an object store is not available yet)"


@pytest.mark.parametrize("url", ["s3://bucket/x", "S3://bucket", "gs://b/p", "file:///srv/staging", "https://h/x"])
def test_staging_root_url_is_refused(url: str) -> None:
    scheme = url.split("://", 1)[0]
    text = f"server: {{http: {{staging_root: '{url}'}}}}\n" + upload_pipeline()
    assert messages(text) == [f"server.http.staging_root must be a local directory path: {scheme}:// {REFUSED}"]


def test_pipeline_staging_path_url_is_refused() -> None:
    assert messages(upload_pipeline("staging_path: 's3://bucket/reports'")) == [
        f"pipelines[0].source.staging_path must be a local directory path: s3:// {REFUSED}"
    ]


def test_url_refusal_is_reported_with_the_other_problems() -> None:
    text = "server: {http: {staging_root: 's3://bucket/x', queue_size: 0}}\n" + upload_pipeline()
    assert messages(text) == [
        f"server.http.staging_root must be a local directory path: s3:// {REFUSED}",
        "server.http.queue_size must be greater than zero",
    ]


@pytest.mark.parametrize("path", ["staging", "/srv/staging", "./s3:/odd-but-local", "spool/x:y"])
def test_directory_paths_are_still_accepted(path: str) -> None:
    from .helpers import load

    config = load(f"server: {{http: {{staging_root: '{path}'}}}}\n" + TOKENS
                  + one_pipeline(source="{backend: http_upload}"))
    assert config.server.http.staging_root.is_absolute()
