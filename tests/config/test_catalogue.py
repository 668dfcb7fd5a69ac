"""Every row of the validation message catalogue (interfaces §1.10) and §1.11 cases 8–11 and 14,
with the exact messages, plus the C5 rules (type errors, cross-backend fields, YAML errors alone)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from distributor_core.config import ConfigError, parse_config
from distributor_core.config.validate import one_of, validate_tree

from .helpers import BASE_DIR, LOCAL_DEST, LOCAL_SOURCE, TOKENS, load, messages, one_pipeline, upload_pipeline

P = "pipelines[0]"
D = "pipelines[0].destinations[0]"


# --- §1.10, row by row ------------------------------------------------------------------------------


def test_no_pipelines() -> None:
    assert messages("") == ["pipelines is required"]
    assert messages("pipelines: []") == ["pipelines is required"]


def test_pipeline_id_missing_and_not_slug() -> None:
    assert messages(f"pipelines: [{{source: {LOCAL_SOURCE}, destinations: [{LOCAL_DEST}]}}]") == [f"{P}.id is required"]
    assert messages(one_pipeline(pipeline_id="'-reports'")) == [f"{P}.id must be a slug-like identifier"]


@pytest.mark.parametrize("bad", ["'.hidden'", "'a b'", "'a/b'", "'ré'", "'a\\n'", "'_x'", "'x:y'"])
def test_slug_rule_is_a_full_ascii_match(bad: str) -> None:
    text = f'pipelines: [{{id: "{bad[1:-1]}", source: {LOCAL_SOURCE}, destinations: [{LOCAL_DEST}]}}]'
    assert messages(text) == [f"{P}.id must be a slug-like identifier"]


def test_duplicate_pipeline_id() -> None:
    text = "pipelines:\n" + "".join(
        f"  - {{id: reports, source: {LOCAL_SOURCE}, destinations: [{LOCAL_DEST}]}}\n" for _ in range(2)
    )
    assert messages(text) == ["pipeline id reports is duplicated"]


def test_no_destinations() -> None:
    assert messages(f"pipelines: [{{id: reports, source: {LOCAL_SOURCE}}}]") == [f"{P}.destinations is required"]
    assert messages(f"pipelines: [{{id: reports, source: {LOCAL_SOURCE}, destinations: []}}]") == [
        f"{P}.destinations is required"
    ]


def test_destination_id_missing_not_slug_duplicated() -> None:
    assert messages(one_pipeline(destination="{backend: local, path: /a}")) == [f"{D}.id is required"]
    assert messages(one_pipeline(destination="{id: 'a b', backend: local, path: /a}")) == [
        f"{D}.id must be a slug-like identifier"
    ]
    assert messages(one_pipeline(destination=f"{LOCAL_DEST}, {LOCAL_DEST}")) == [
        "destination id archive is duplicated in pipeline reports"
    ]


def test_same_destination_id_in_two_pipelines_is_fine() -> None:
    text = "pipelines:\n" + "".join(
        f"  - {{id: p{i}, source: {LOCAL_SOURCE}, destinations: [{LOCAL_DEST}]}}\n" for i in range(2)
    )
    assert [p.destinations[0].id for p in load(text).pipelines] == ["archive", "archive"]


def test_upload_source_staging_path_empty() -> None:
    # Unreachable from YAML (staging_root always has a default, resolutions D4); checked on the tree.
    tree = _defaulted_tree(upload_pipeline())
    tree["pipelines"][0]["source"]["staging_path"] = None
    assert validate_tree(tree) == [f"{P}.source.staging_path is required for http_upload backend"]


def test_bad_state_and_reconciliation_modes() -> None:
    assert messages(one_pipeline(destination="{id: a, backend: local, path: /a, state: {mode: shared}}")) == [
        "pipelines[0].destinations[0].state.mode must be single_owner or shared_root"
    ]
    assert messages(one_pipeline(destination="{id: a, backend: local, path: /a, reconciliation: {mode: append}}")) == [
        "pipelines[0].destinations[0].reconciliation.mode must be replace or merge"
    ]


def test_prune_rows() -> None:
    base = "{id: a, backend: local, path: /a, retention: {prune: %s}}"
    assert messages(one_pipeline(destination=base % "{enabled: true}")) == [
        f"{D}.retention.prune must set older_than or keep_latest when enabled is true"
    ]
    assert messages(one_pipeline(destination=base % "{enabled: true, older_than: 0s}")) == [
        f"{D}.retention.prune.older_than must be greater than zero"
    ]
    assert messages(one_pipeline(destination=base % "{enabled: true, older_than: -1h}")) == [
        f"{D}.retention.prune.older_than must be greater than zero"
    ]
    assert messages(one_pipeline(destination=base % "{enabled: true, keep_latest: -1}")) == [
        f"{D}.retention.prune.keep_latest must be zero or greater"
    ]
    assert messages(one_pipeline(destination=base % "{enabled: true, older_than: '0', keep_latest: -2}")) == [
        f"{D}.retention.prune.older_than must be greater than zero",
        f"{D}.retention.prune.keep_latest must be zero or greater",
    ]


def test_bad_on_destination_same() -> None:
    assert messages(one_pipeline(destination="{id: a, backend: local, path: /a, "
                                             "transfer: {on_destination_same: replace}}")) == [
        f"{D}.transfer.on_destination_same must be skip or fail"
    ]


def test_tokens_without_upload_pipeline() -> None:
    assert messages(TOKENS + one_pipeline()) == ["upload_tokens must reference configured http_upload pipelines"]


def test_upload_pipeline_without_tokens() -> None:
    assert messages(one_pipeline(source="{backend: http_upload}")) == [
        "upload_tokens is required when any pipeline source backend is http_upload"
    ]
    assert messages("upload_tokens: []\n" + one_pipeline(source="{backend: http_upload}")) == [
        "upload_tokens is required when any pipeline source backend is http_upload"
    ]


def _token_config(token: str, extra_pipelines: str = "") -> str:
    return (
        f"upload_tokens: [{token}]\n"
        "pipelines:\n"
        f"  - {{id: reports, source: {{backend: http_upload}}, destinations: [{LOCAL_DEST}]}}\n" + extra_pipelines
    )


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("{token_env: T, allow_pipelines: [reports]}", ["upload_tokens[0].id is required"]),
        ("{id: .reporter, token_env: T, allow_pipelines: [reports]}",
         ["upload_tokens[0].id must be a slug-like identifier"]),
        ("{id: reporter, allow_pipelines: [reports]}", ["upload_tokens[0].token_env is required"]),
        ("{id: reporter, token_env: T}",
         ["upload_tokens[0].allow_pipelines is required",
          "http_upload pipeline reports is not allowed by any upload token"]),
        ("{id: reporter, token_env: T, allow_pipelines: []}",
         ["upload_tokens[0].allow_pipelines is required",
          "http_upload pipeline reports is not allowed by any upload token"]),
        ("{id: reporter, token_env: T, allow_pipelines: [reports, '']}",
         ["upload_tokens[0].allow_pipelines[1] is required"]),
        ("{id: reporter, token_env: T, allow_pipelines: [reports, ~]}",
         ["upload_tokens[0].allow_pipelines[1] is required"]),
        ("{id: reporter, token_env: T, allow_pipelines: [reports, reports]}",
         ["upload_tokens[0].allow_pipelines contains duplicate pipeline id reports"]),
        ("{id: reporter, token_env: T, allow_pipelines: [reports, missing]}",
         ["upload_tokens[0].allow_pipelines[1] references unknown pipeline missing"]),
    ],
)
def test_upload_token_rows(token: str, expected: list[str]) -> None:
    assert messages(_token_config(token)) == expected


def test_duplicate_token_id() -> None:
    text = _token_config("{id: reporter, token_env: ONE, allow_pipelines: [reports]}, "
                         "{id: reporter, token_env: TWO, allow_pipelines: [reports]}")
    assert messages(text) == ["upload token id reporter is duplicated"]


def test_allowed_pipeline_not_upload() -> None:
    text = (
        "upload_tokens: [{id: reporter, token_env: A, allow_pipelines: [reports]}, "
        "{id: uploader, token_env: B, allow_pipelines: [upload]}]\n"
        "pipelines: [{id: reports, source: {backend: local, path: /source}, destinations: [" + LOCAL_DEST + "]}, "
        "{id: upload, source: {backend: http_upload}, destinations: [{id: archive, backend: local, path: /up}]}]"
    )
    assert messages(text) == ["upload_tokens[0].allow_pipelines[0] references non-http_upload pipeline reports"]


def test_upload_pipelines_never_allowed_are_listed_in_file_order() -> None:
    text = _token_config(
        "{id: reporter, token_env: T, allow_pipelines: [reports]}",
        f"  - {{id: zeta, source: {{backend: http_upload}}, destinations: [{LOCAL_DEST}]}}\n"
        f"  - {{id: alpha, source: {{backend: http_upload}}, destinations: [{LOCAL_DEST}]}}\n",
    )
    assert messages(text) == [
        "http_upload pipeline zeta is not allowed by any upload token",
        "http_upload pipeline alpha is not allowed by any upload token",
    ]


def test_duplicate_allow_entry_is_reported_once_and_not_checked_further() -> None:
    text = _token_config("{id: reporter, token_env: T, allow_pipelines: [reports, missing, missing]}")
    assert messages(text) == [
        "upload_tokens[0].allow_pipelines[1] references unknown pipeline missing",
        "upload_tokens[0].allow_pipelines contains duplicate pipeline id missing",
    ]


def test_upload_pipeline_with_invalid_id_counts_as_upload_but_not_as_known() -> None:
    text = (
        "upload_tokens: [{id: t, token_env: T, allow_pipelines: ['-bad']}]\n"
        f"pipelines: [{{id: '-bad', source: {{backend: http_upload}}, destinations: [{LOCAL_DEST}]}}]"
    )
    assert messages(text) == [
        f"{P}.id must be a slug-like identifier",
        "upload_tokens[0].allow_pipelines[0] references unknown pipeline -bad",
        "http_upload pipeline -bad is not allowed by any upload token",
    ]


def test_token_checks_run_only_with_upload_pipelines() -> None:
    text = "upload_tokens: [{id: '', token_env: ''}]\n" + one_pipeline()
    assert messages(text) == ["upload_tokens must reference configured http_upload pipelines"]


# --- §1.11 case 8 (substrings from the Go tests) ----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "want"),
    [
        (one_pipeline(source="{backend: http_upload}"), "upload_tokens is required"),
        (_token_config("{id: reporter, token_env: ONE, allow_pipelines: [reports]}, "
                       "{id: reporter, token_env: TWO, allow_pipelines: [reports]}"),
         "upload token id reporter is duplicated"),
        (_token_config("{id: reporter, token_env: T, allow_pipelines: [reports, reports]}"),
         "allow_pipelines contains duplicate pipeline id reports"),
        (_token_config("{id: reporter, token_env: T, allow_pipelines: [missing]}"),
         "references unknown pipeline missing"),
        ("upload_tokens: [{id: r, token_env: T, allow_pipelines: [reports]}, {id: u, token_env: O, "
         "allow_pipelines: [upload]}]\npipelines: [{id: reports, source: {backend: local, path: /source}, "
         "destinations: [{id: archive, backend: local, path: /archive}]}, {id: upload, source: {backend: "
         "http_upload}, destinations: [{id: archive, backend: local, path: /archive-upload}]}]",
         "references non-http_upload pipeline reports"),
        (_token_config("{id: reporter, token_env: T, allow_pipelines: [reports]}",
                       "  - {id: other, source: {backend: http_upload}, destinations: [{id: archive, "
                       "backend: local, path: /archive-other}]}\n"),
         "http_upload pipeline other is not allowed by any upload token"),
        (_token_config("{token_env: T, allow_pipelines: [reports]}"), "upload_tokens[0].id is required"),
        (_token_config("{id: '.reporter', token_env: T, allow_pipelines: [reports]}"),
         "upload_tokens[0].id must be a slug-like identifier"),
        (_token_config("{id: reporter, allow_pipelines: [reports]}"), "upload_tokens[0].token_env is required"),
        (_token_config("{id: reporter, token_env: T}"), "upload_tokens[0].allow_pipelines is required"),
    ],
)
def test_case8_invalid_upload_tokens(text: str, want: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(text)
    assert want in str(info.value)


# --- §1.11 case 9 --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("server: {http: {max_upload_size: 20XB}}\n" + one_pipeline(),
         ["server.http.max_upload_size must be a byte size such as 20MB"]),
        (upload_pipeline("max_upload_size: 20XB"), [f"{P}.source.max_upload_size must be a byte size such as 20MB"]),
        (upload_pipeline("max_upload_size: 0B"), [f"{P}.source.max_upload_size must be greater than zero"]),
        ("server: {http: {retention: forever}}\n" + one_pipeline(),
         ["server.http.retention must be a duration such as 24h"]),
        ("server: {http: {retention: 0s}}\n" + one_pipeline(), ["server.http.retention must be greater than zero"]),
        (one_pipeline(destination="{id: archive, backend: local, path: /archive, "
                                  "retention: {prune: {enabled: true, older_than: forever}}}"),
         [f"{D}.retention.prune.older_than must be a duration such as 24h"]),
        (one_pipeline(source="{backend: http_upload}"),
         ["upload_tokens is required when any pipeline source backend is http_upload"]),
        (one_pipeline(destination="{id: ingest, backend: http_upload}"),
         [f"{D}.backend http_upload is valid only as a source backend"]),
        ("upload_tokens: [{id: reporter, token: secret, token_env: UPLOAD_TOKEN, allow_pipelines: [reports]}]\n"
         + one_pipeline(source="{backend: http_upload}"), ["upload_tokens[0].token: unknown field"]),
        ("server: {http: {surprise: true}}\n" + one_pipeline(), ["server.http.surprise: unknown field"]),
        (upload_pipeline("token_env: UPLOAD_TOKEN"), [f"{P}.source.token_env: unknown field"]),
        (upload_pipeline("surprise: true"), [f"{P}.source.surprise: unknown field"]),
    ],
    ids=["server-size", "source-size", "zero-source-size", "server-duration", "zero-server-duration",
         "prune-duration", "missing-upload-tokens", "destination-http-upload", "literal-token",
         "unknown-server-field", "legacy-source-token-env", "unknown-source-field"],
)
def test_case9_invalid_http_upload_configs(text: str, expected: list[str]) -> None:
    assert messages(text) == expected


def test_case9_prune_duration_is_a_load_error_even_when_disabled() -> None:
    text = one_pipeline(destination="{id: a, backend: local, path: /a, retention: {prune: {older_than: forever}}}")
    assert messages(text) == [f"{D}.retention.prune.older_than must be a duration such as 24h"]


# --- §1.11 cases 10, 11 -----------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "ok"), [("append", False), ("replace", True), ("merge", True)])
def test_case10_reconciliation(mode: str, ok: bool) -> None:
    text = one_pipeline(destination=f"{{id: a, backend: local, path: /a, reconciliation: {{mode: {mode}}}}}")
    if ok:
        assert load(text).pipelines[0].destinations[0].reconciliation.mode == mode
    else:
        assert messages(text) == [f"{D}.reconciliation.mode must be replace or merge"]


@pytest.mark.parametrize(("mode", "ok"), [("shared", False), ("single_owner", True), ("shared_root", True)])
def test_case10_state(mode: str, ok: bool) -> None:
    text = one_pipeline(destination=f"{{id: a, backend: local, path: /a, state: {{mode: {mode}}}}}")
    if ok:
        assert load(text).pipelines[0].destinations[0].state.mode == mode
    else:
        assert messages(text) == [f"{D}.state.mode must be single_owner or shared_root"]


@pytest.mark.parametrize(
    ("prune", "expected"),
    [
        ("{}", None),
        ("{enabled: true, older_than: 24h}", None),
        ("{enabled: true, keep_latest: 0}", None),
        ("{enabled: true, keep_latest: 3}", None),
        ("{enabled: true, older_than: 24h, keep_latest: 3}", None),
        ("{enabled: true}", f"{D}.retention.prune must set older_than or keep_latest when enabled is true"),
        ("{enabled: true, older_than: 0s}", f"{D}.retention.prune.older_than must be greater than zero"),
        ("{enabled: true, keep_latest: -1}", f"{D}.retention.prune.keep_latest must be zero or greater"),
    ],
    ids=["disabled", "older-than", "keep-zero", "keep-latest", "combined", "missing-policy", "zero-older-than",
         "negative-keep-latest"],
)
def test_case11_retention_table(prune: str, expected: str | None) -> None:
    text = one_pipeline(destination=f"{{id: a, backend: local, path: /a, retention: {{prune: {prune}}}}}")
    if expected is None:
        policy = load(text).pipelines[0].destinations[0].retention.prune
        assert policy.older_than in (None, timedelta(hours=24))
    else:
        assert messages(text) == [expected]


# --- §1.11 case 14 and C5: unknown fields, cross-backend fields, type errors ---------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("upload_tokens: [{id: r, token: x}]\n" + one_pipeline(), "upload_tokens[0].token: unknown field"),
        (upload_pipeline("token_env: X"), f"{P}.source.token_env: unknown field"),
        (one_pipeline(destination="{id: a, backend: local, path: /a, surprise: 1}"), f"{D}.surprise: unknown field"),
        ("surprise: 1\n" + one_pipeline(), "surprise: unknown field"),
        (one_pipeline(destination="{id: a, backend: local, path: /a, publish: {source: true, pdf: true}}"),
         f"{D}.publish.pdf: unknown field"),
        ("pipelines: [{id: r, validation: {strict: true}, source: {backend: local, path: /s}, "
         "destinations: [{id: a, backend: local, path: /a}]}]", f"{P}.validation.strict: unknown field"),
        (one_pipeline(destination="{id: a, backend: s3, bucket: b, credentials: {session_token_env: X}}"),
         f"{D}.credentials.session_token_env: unknown field"),
    ],
)
def test_case14_unknown_field_names_the_key(text: str, expected: str) -> None:
    assert messages(text) == [expected]


@pytest.mark.parametrize(
    ("source", "destination", "expected"),
    [
        ("{backend: local, path: /s, bucket: b}", LOCAL_DEST, f"{P}.source.bucket is not supported for local backend"),
        (LOCAL_SOURCE, "{id: a, backend: local, path: /a, staging_path: /x}",
         f"{D}.staging_path is not supported for local backend"),
        (LOCAL_SOURCE, "{id: a, backend: s3, bucket: b, path: /x}", f"{D}.path is not supported for s3 backend"),
        (LOCAL_SOURCE, "{id: a, backend: ssh, host: h, user: u, path: /p, region: x}",
         f"{D}.region is not supported for ssh backend"),
        ("{backend: http_upload, path: /x}", LOCAL_DEST, f"{P}.source.path is not supported for http_upload backend"),
        ("{backend: s3, bucket: b, host: h}", LOCAL_DEST, f"{P}.source.host is not supported for s3 backend"),
        (LOCAL_SOURCE, "{id: a, backend: local, path: /a, max_upload_size: 1MB}",
         f"{D}.max_upload_size is not supported for local backend"),
    ],
)
def test_cross_backend_field_wins_over_unknown_field(source: str, destination: str, expected: str) -> None:
    text = one_pipeline(source=source, destination=destination)
    if source.startswith("{backend: http_upload"):
        text = TOKENS + text
    assert messages(text) == [expected]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (one_pipeline(destination="{id: a, backend: local, path: /a, publish: {source: sure}}"),
         f"{D}.publish.source must be a boolean"),
        (one_pipeline(destination="{id: a, backend: s3, bucket: b, force_path_style: 'true'}"),
         f"{D}.force_path_style must be a boolean"),
        ("server: {http: {queue_size: '16'}}\n" + one_pipeline(), "server.http.queue_size must be an integer"),
        ("server: {http: {max_concurrency: 1.5}}\n" + one_pipeline(), "server.http.max_concurrency must be an integer"),
        (one_pipeline(destination="{id: a, backend: ssh, host: h, user: u, path: /p, port: true}"),
         f"{D}.port must be an integer"),
        (one_pipeline(pipeline_id="true"), f"{P}.id must be a string"),
        (one_pipeline(destination="{id: [a], backend: local, path: /a}"), f"{D}.id must be a string"),
        (one_pipeline(source="{backend: local, path: {x: 1}}"), f"{P}.source.path must be a string"),
        ("pipelines: {id: r}", "pipelines must be a list"),
        (f"pipelines: [{{id: r, source: {LOCAL_SOURCE}, destinations: {LOCAL_DEST}}}]",
         f"{P}.destinations must be a list"),
        ("upload_tokens: [{id: r, token_env: T, allow_pipelines: reports}]\n" + one_pipeline(),
         "upload_tokens[0].allow_pipelines must be a list"),
        ("upload_tokens: [{id: r, token_env: T, allow_pipelines: [[reports]]}]\n" + one_pipeline(),
         "upload_tokens[0].allow_pipelines[0] must be a string"),
        ("server: [http]\n" + one_pipeline(), "server must be a mapping"),
        ("server: {http: 8080}\n" + one_pipeline(), "server.http must be a mapping"),
        (f"pipelines: [{{id: r, source: local, destinations: [{LOCAL_DEST}]}}]", f"{P}.source must be a mapping"),
        ("pipelines: [reports]", f"{P} must be a mapping"),
        (one_pipeline(destination="{id: a, backend: local, path: /a, retention: {prune: {keep_latest: '3'}}}"),
         f"{D}.retention.prune.keep_latest must be an integer"),
        (one_pipeline(destination="{id: a, backend: local, path: /a, retention: {prune: {older_than: 24}}}"),
         f"{D}.retention.prune.older_than must be a duration such as 24h"),
        ("server: {http: {retention: 86400}}\n" + one_pipeline(),
         "server.http.retention must be a duration such as 24h"),
        ("server: {http: {max_upload_size: -1}}\n" + one_pipeline(),
         "server.http.max_upload_size must be a byte size such as 20MB"),
        ("secrets: {directory: [a]}\n" + one_pipeline(), "secrets.directory must be a string"),
    ],
)
def test_type_errors_read_plainly(text: str, expected: str) -> None:
    assert messages(text) == [expected]


def test_pydantic_texts_never_reach_the_user() -> None:
    found = messages(
        "server: {http: {queue_size: x, bind: [1]}}\n"
        + one_pipeline(destination="{id: a, backend: local, path: /a, publish: 3, state: {mode: [x]}}")
    )
    assert found == [
        "server.http.queue_size must be an integer",
        "server.http.bind must be a string",
        f"{D}.publish must be a mapping",
        f"{D}.state.mode must be a string",
    ]
    assert not any("validation error" in m or "Input should" in m or "type=" in m for m in found)


def test_yaml_errors_are_reported_alone() -> None:
    text = "surprise: 1\npipelines: [{id: '-x', source: {backend: local}}]\nsurprise: 2\n"
    assert messages(text) == ['<string>: yaml: line 3: mapping key "surprise" already defined at line 1']


def test_schema_errors_are_reported_together_before_rules() -> None:
    # Unknown fields and type errors (document order) are reported without the rule checks.
    text = (
        "pipelines:\n"
        "  - id: '-x'\n"
        "    source: {backend: local, surprise: 1}\n"
        "    destinations: [{id: a, backend: local, publish: {html: maybe}}]\n"
        "server: {http: {bogus: 1}}\n"
    )
    assert messages(text) == [
        f"{P}.source.surprise: unknown field",
        f"{D}.publish.html must be a boolean",
        "server.http.bogus: unknown field",
    ]


def test_rules_are_reported_in_discovery_order() -> None:
    text = (
        "upload_tokens: [{id: t, token_env: T, allow_pipelines: [up]}, {id: t, token_env: U, allow_pipelines: [up]}]\n"
        "pipelines:\n"
        "  - {id: up, source: {backend: http_upload}, destinations: [{id: a, backend: s3}]}\n"
        "  - {id: up, source: {backend: nfs}, destinations: [{id: a, backend: local, path: /x, state: {mode: x}}]}\n"
        "server: {http: {queue_size: 0, bind: nope}}\n"
    )
    assert messages(text) == [
        "server.http.bind must be a host:port address such as 127.0.0.1:8080",
        "server.http.queue_size must be greater than zero",
        "pipelines[0].destinations[0].bucket is required for s3 backend",
        "pipeline id up is duplicated",
        "pipelines[1].source.backend must be local, ssh, s3, or http_upload",
        "pipelines[1].destinations[0].state.mode must be single_owner or shared_root",
        "upload token id t is duplicated",
    ]


def test_one_of_wording() -> None:
    assert one_of(["a", "b"]) == "a or b"
    assert one_of(["skip", "fail", "replace"]) == "skip, fail, or replace"


def test_str_of_error_is_the_joined_messages() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config("pipelines: [{}]", base_dir=BASE_DIR)
    assert str(info.value) == (
        "invalid config: pipelines[0].id is required; pipelines[0].source.backend is required; "
        "pipelines[0].destinations is required"
    )


def _defaulted_tree(text: str) -> dict:
    from distributor_core.config.decode import decode_document
    from distributor_core.config.fill import fill
    from distributor_core.config.loader import load_yaml_mapping

    tree, problems = decode_document(load_yaml_mapping(text))
    assert problems == []
    return fill(tree, BASE_DIR)


@pytest.mark.parametrize(
    ("first", "second"),
    [("/spool/up", "/spool/up"), ("/spool", "/spool/up"), ("/spool/up/inner", "/spool/up"), ("s", "./s")],
)
def test_upload_pipelines_must_not_share_staging_paths(first: str, second: str) -> None:
    text = (
        "upload_tokens: [{id: t, token_env: T, allow_pipelines: [a, b]}]\n"
        f"pipelines:\n"
        f"  - {{id: a, source: {{backend: http_upload, staging_path: '{first}'}}, destinations: [{LOCAL_DEST}]}}\n"
        f"  - {{id: b, source: {{backend: http_upload, staging_path: '{second}'}}, destinations: [{LOCAL_DEST}]}}\n"
    )
    assert messages(text) == ["pipelines[1].source.staging_path overlaps the staging path of pipeline a"]


def test_default_staging_paths_do_not_overlap() -> None:
    text = (
        "upload_tokens: [{id: t, token_env: T, allow_pipelines: [a, a.b]}]\n"
        f"pipelines:\n"
        f"  - {{id: a, source: {{backend: http_upload}}, destinations: [{LOCAL_DEST}]}}\n"
        f"  - {{id: a.b, source: {{backend: http_upload}}, destinations: [{LOCAL_DEST}]}}\n"
    )
    sources = [pipeline.source for pipeline in load(text).pipelines]
    assert [source.staging_path for source in sources] == [  # type: ignore[union-attr]
        BASE_DIR / ".distributor/staging/a", BASE_DIR / ".distributor/staging/a.b"
    ]
