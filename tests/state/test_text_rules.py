"""The URL rule of state links (core-semantics §2.6) and Go ``%q`` quoting used in messages."""

from __future__ import annotations

import pytest

from distributor_core.state import check_http_url, go_quote


@pytest.mark.parametrize(
    "url",
    [
        "https://reports.example.com/archive/report.html",
        "http://localhost:8080/",
        "HTTPS://EXAMPLE.COM",
        "https://user:pw@example.com/a?b=1#c",
        "http://[::1]:9000/x",
        "https://example.com/a b.html",
        "https://例え.jp/ü",
    ],
)
def test_valid_urls(url: str) -> None:
    assert check_http_url(url) is None


@pytest.mark.parametrize(
    "url",
    [
        "",
        "file:///tmp/report.md",
        "ftp://example.com/x",
        "javascript:alert(1)",
        "mailto:a@example.com",
        "//example.com/x",
        "/relative/path",
        "report.html",
        "https://",
        "https:///path",
        "http://user@/x",
        "http://[::1/x",
        "http://example.com:port/",
        "http://exa mple.com/",
        "https://example.com/a\nb",
        "https://example.com/\x7f",
    ],
)
def test_invalid_urls(url: str) -> None:
    problem = check_http_url(url)
    assert problem is not None
    assert problem.endswith("must be an absolute http or https URL")


def test_url_problem_quotes_the_value() -> None:
    assert (
        check_http_url("file:///tmp/<x>") == 'url "file:///tmp/\\u003cx\\u003e" must be an absolute http or https URL'
    )


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ("reports", '"reports"'),
        ("", '""'),
        ('a"b\\c', '"a\\"b\\\\c"'),
        ("tab\there\nnl", '"tab\\there\\nnl"'),
        ("\x00\x1b\x7f", '"\\x00\\x1b\\x7f"'),
        ("café <r&d>", '"café <r&d>"'),
        ("\u2028", '"\\u2028"'),
        ("\u00a0", '"\\u00a0"'),
        ("🚀", '"🚀"'),
        ("\U000e0001", '"\\U000e0001"'),
    ],
)
def test_go_quote(value: str, quoted: str) -> None:
    assert go_quote(value) == quoted
