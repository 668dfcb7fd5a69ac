"""A corpus of invalid configs, each failing with exactly the listed messages.

Every message names the offending field (a dotted path such as ``pipelines[0].source.path``) or the
offending id. New invalid-config cases belong here.
"""

from __future__ import annotations

import re

import pytest

from .helpers import LOCAL_DEST, LOCAL_SOURCE, TOKENS, messages, one_pipeline, upload_pipeline, with_destination

P = "pipelines[0]"
S = "pipelines[0].source"
D = "pipelines[0].destinations[0]"


def src(fields: str) -> str:
    return one_pipeline(source=f"{{{fields}}}")


def dst(fields: str) -> str:
    return one_pipeline(destination=f"{{id: a, {fields}}}")


def server(fields: str) -> str:
    return f"server: {{http: {{{fields}}}}}\n" + one_pipeline()


SSH = "backend: ssh, host: h, user: u, path: /p"
S3 = "backend: s3, bucket: b"

CASES: list[tuple[str, str, list[str]]] = [
    # top level
    ("empty-document", "", ["pipelines is required"]),
    ("empty-pipelines", "pipelines: []", ["pipelines is required"]),
    ("top-level-unknown", "pipeline: []\n" + one_pipeline(), ["pipeline: unknown field"]),
    ("pipelines-mapping", "pipelines: {id: r}", ["pipelines must be a list"]),
    ("pipeline-scalar", "pipelines: [reports]", [f"{P} must be a mapping"]),
    ("secrets-unknown", "secrets: {dir: /x}\n" + one_pipeline(), ["secrets.dir: unknown field"]),
    ("secrets-type", "secrets: /run/secrets\n" + one_pipeline(), ["secrets must be a mapping"]),
    ("server-unknown", "server: {https: {}}\n" + one_pipeline(), ["server.https: unknown field"]),
    # server.http
    ("bind-no-port", server("bind: localhost"),
     ["server.http.bind must be a host:port address such as 127.0.0.1:8080"]),
    ("bind-big-port", server("bind: '127.0.0.1:65536'"),
     ["server.http.bind must be a host:port address such as 127.0.0.1:8080"]),
    ("bind-bare-ipv6", server("bind: '::1:8080'"),
     ["server.http.bind must be a host:port address such as 127.0.0.1:8080"]),
    ("bind-empty-host", server("bind: ':8080'"),
     ["server.http.bind must be a host:port address such as 127.0.0.1:8080"]),
    ("bind-int", server("bind: 8080"), ["server.http.bind must be a host:port address such as 127.0.0.1:8080"]),
    ("server-size-unit", server("max_upload_size: 20XB"),
     ["server.http.max_upload_size must be a byte size such as 20MB"]),
    ("server-size-zero", server("max_upload_size: 0B"), ["server.http.max_upload_size must be greater than zero"]),
    ("server-size-int-zero", server("max_upload_size: 0"), ["server.http.max_upload_size must be greater than zero"]),
    ("queue-zero", server("queue_size: 0"), ["server.http.queue_size must be greater than zero"]),
    ("queue-negative", server("queue_size: -3"), ["server.http.queue_size must be greater than zero"]),
    ("concurrency-zero", server("max_concurrency: 0"), ["server.http.max_concurrency must be greater than zero"]),
    ("retention-forever", server("retention: forever"), ["server.http.retention must be a duration such as 24h"]),
    ("retention-days", server("retention: 7d"), ["server.http.retention must be a duration such as 24h"]),
    ("retention-bare-int", server("retention: 24"), ["server.http.retention must be a duration such as 24h"]),
    ("retention-zero", server("retention: 0s"), ["server.http.retention must be greater than zero"]),
    ("retention-negative", server("retention: -1h"), ["server.http.retention must be greater than zero"]),
    ("staging-root-type", server("staging_root: [a]"), ["server.http.staging_root must be a string"]),
    # pipelines
    ("pipeline-id-missing", f"pipelines: [{{source: {LOCAL_SOURCE}, destinations: [{LOCAL_DEST}]}}]",
     [f"{P}.id is required"]),
    ("pipeline-id-dot", one_pipeline(pipeline_id="'.reports'"), [f"{P}.id must be a slug-like identifier"]),
    ("pipeline-id-space", one_pipeline(pipeline_id="'my reports'"), [f"{P}.id must be a slug-like identifier"]),
    ("pipeline-duplicated", f"pipelines: [{{id: r, source: {LOCAL_SOURCE}, destinations: [{LOCAL_DEST}]}}, "
                            f"{{id: r, source: {LOCAL_SOURCE}, destinations: [{LOCAL_DEST}]}}]",
     ["pipeline id r is duplicated"]),
    ("pipeline-unknown", f"pipelines: [{{id: r, name: x, source: {LOCAL_SOURCE}, destinations: [{LOCAL_DEST}]}}]",
     [f"{P}.name: unknown field"]),
    ("destinations-missing", f"pipelines: [{{id: r, source: {LOCAL_SOURCE}}}]", [f"{P}.destinations is required"]),
    ("validation-key", f"pipelines: [{{id: r, validation: {{digest: false}}, source: {LOCAL_SOURCE}, "
                       f"destinations: [{LOCAL_DEST}]}}]", [f"{P}.validation.digest: unknown field"]),
    ("validation-type", f"pipelines: [{{id: r, validation: strict, source: {LOCAL_SOURCE}, "
                        f"destinations: [{LOCAL_DEST}]}}]", [f"{P}.validation must be a mapping"]),
    # sources
    ("source-missing", f"pipelines: [{{id: r, destinations: [{LOCAL_DEST}]}}]", [f"{S}.backend is required"]),
    ("source-backend-bad", src("backend: ftp, path: /x"), [f"{S}.backend must be local, ssh, s3, or http_upload"]),
    ("source-backend-type", src("backend: [local]"), [f"{S}.backend must be a string"]),
    ("local-path-missing", src("backend: local"), [f"{S}.path is required for local backend"]),
    ("local-path-empty", src("backend: local, path: ''"), [f"{S}.path is required for local backend"]),
    ("local-cross-bucket", src("backend: local, path: /x, bucket: b"),
     [f"{S}.bucket is not supported for local backend"]),
    ("local-cross-staging", src("backend: local, path: /x, staging_path: /s"),
     [f"{S}.staging_path is not supported for local backend"]),
    ("source-id-key", src("backend: local, path: /x, id: s"), [f"{S}.id: unknown field"]),
    ("source-policy-key", src("backend: local, path: /x, publish: {html: true}"), [f"{S}.publish: unknown field"]),
    ("ssh-host-missing", src("backend: ssh, user: u, path: /p"), [f"{S}.host is required for ssh backend"]),
    ("ssh-user-missing", src("backend: ssh, host: h, path: /p"), [f"{S}.user is required for ssh backend"]),
    ("ssh-path-missing", src("backend: ssh, host: h, user: u"), [f"{S}.path is required for ssh backend"]),
    ("ssh-path-relative", src("backend: ssh, host: h, user: u, path: srv/in"),
     [f"{S}.path must be an absolute remote path for ssh backend"]),
    ("ssh-port-zero", src(f"{SSH}, port: 0"), [f"{S}.port must be between 1 and 65535"]),
    ("ssh-port-big", src(f"{SSH}, port: 70000"), [f"{S}.port must be between 1 and 65535"]),
    ("ssh-port-string", src(f"{SSH}, port: '22'"), [f"{S}.port must be an integer"]),
    ("ssh-host-key-policy", src(f"{SSH}, host_key_policy: accept_all"),
     [f"{S}.host_key_policy must be strict or accept_new"]),
    ("ssh-transport", src(f"{SSH}, transport: putty"), [f"{S}.transport must be paramiko or openssh"]),
    ("ssh-config-without-openssh", src(f"{SSH}, ssh_config_file: c, ssh_options: {{Compression: 'no'}}"),
     [f"{S}.ssh_config_file is only used with transport: openssh",
      f"{S}.ssh_options is only used with transport: openssh"]),
    ("ssh-option-refused", src(f"{SSH}, transport: openssh, ssh_options: {{StrictHostKeyChecking: 'no'}}"),
     [f"{S}.ssh_options.StrictHostKeyChecking is refused: host keys are checked strictly against "
      "known_hosts_file (host_key_policy decides about unknown keys)"]),
    ("ssh-option-name", src(f"{SSH}, transport: openssh, ssh_options: {{'-oProxyCommand': x}}"),
     [f"{S}.ssh_options.-oProxyCommand is not an OpenSSH option name (letters and digits)"]),
    ("ssh-option-empty", src(f"{SSH}, transport: openssh, ssh_options: {{Compression: ''}}"),
     [f"{S}.ssh_options.Compression must not be empty"]),
    ("ssh-cross-bucket", src(f"{SSH}, bucket: b"), [f"{S}.bucket is not supported for ssh backend"]),
    ("ssh-password", src(f"{SSH}, password: hunter2"), [f"{S}.password: unknown field"]),
    ("ssh-everything", src("backend: ssh, port: -1, host_key_policy: x"),
     [f"{S}.host is required for ssh backend", f"{S}.port must be between 1 and 65535",
      f"{S}.user is required for ssh backend", f"{S}.path is required for ssh backend",
      f"{S}.host_key_policy must be strict or accept_new"]),
    ("s3-bucket-missing", src("backend: s3"), [f"{S}.bucket is required for s3 backend"]),
    ("s3-prefix-leading-slash", src(f"{S3}, prefix: /reports"),
     [f"{S}.prefix must be a clean relative slash-separated path"]),
    ("s3-prefix-trailing-slash", src(f"{S3}, prefix: reports/"),
     [f"{S}.prefix must be a clean relative slash-separated path"]),
    ("s3-prefix-dotdot", src(f"{S3}, prefix: a/../b"), [f"{S}.prefix must be a clean relative slash-separated path"]),
    ("s3-prefix-backslash", src(f"{S3}, prefix: 'a\\b'"),
     [f"{S}.prefix must be a clean relative slash-separated path"]),
    ("s3-endpoint-scheme", src(f"{S3}, endpoint: 'ftp://minio:9000'"),
     [f"{S}.endpoint must be an absolute http or https URL"]),
    ("s3-endpoint-relative", src(f"{S3}, endpoint: minio:9000"),
     [f"{S}.endpoint must be an absolute http or https URL"]),
    ("s3-endpoint-bad-port", src(f"{S3}, endpoint: 'http://minio:99999'"),
     [f"{S}.endpoint must be an absolute http or https URL"]),
    ("s3-credentials-half", src(f"{S3}, credentials: {{access_key_id_env: AK}}"),
     [f"{S}.credentials.access_key_id_env and secret_access_key_env must be set together"]),
    ("s3-credentials-other-half", src(f"{S3}, credentials: {{secret_access_key_env: SK}}"),
     [f"{S}.credentials.access_key_id_env and secret_access_key_env must be set together"]),
    ("s3-credentials-literal", src(f"{S3}, credentials: {{access_key_id: AKIA, secret_access_key_env: SK}}"),
     [f"{S}.credentials.access_key_id: unknown field"]),
    ("s3-credentials-type", src(f"{S3}, credentials: AK"), [f"{S}.credentials must be a mapping"]),
    ("s3-path-style-type", src(f"{S3}, force_path_style: 1"), [f"{S}.force_path_style must be a boolean"]),
    # YAML 1.1 words are booleans only in the case forms yaml.v3 accepts (resolutions G2)
    ("s3-path-style-mixed-case", src(f"{S3}, force_path_style: yEs"), [f"{S}.force_path_style must be a boolean"]),
    ("s3-path-style-word", src(f"{S3}, force_path_style: enabled"), [f"{S}.force_path_style must be a boolean"]),
    ("s3-conditional-writes-word", src(f"{S3}, conditional_writes: always"),
     [f"{S}.conditional_writes must be trusted or precheck"]),
    ("s3-conditional-writes-boolean", src(f"{S3}, conditional_writes: true"),
     [f"{S}.conditional_writes must be a string"]),
    ("s3-cross-port", src(f"{S3}, port: 9000"), [f"{S}.port is not supported for s3 backend"]),
    ("upload-size-zero", upload_pipeline("max_upload_size: 0"), [f"{S}.max_upload_size must be greater than zero"]),
    ("upload-size-float", upload_pipeline("max_upload_size: 1.5MB"),
     [f"{S}.max_upload_size must be a byte size such as 20MB"]),
    ("upload-legacy-token", upload_pipeline("token_env: TOKEN"), [f"{S}.token_env: unknown field"]),
    ("upload-cross-path", upload_pipeline("path: /x"), [f"{S}.path is not supported for http_upload backend"]),
    ("upload-shared-staging",
     "upload_tokens: [{id: t, token_env: T, allow_pipelines: [a, b]}]\n"
     "pipelines: [{id: a, source: {backend: http_upload, staging_path: /s}, destinations: [" + LOCAL_DEST + "]}, "
     "{id: b, source: {backend: http_upload, staging_path: /s/b}, destinations: [" + LOCAL_DEST + "]}]",
     ["pipelines[1].source.staging_path overlaps the staging path of pipeline a"]),
    ("upload-no-tokens", one_pipeline(source="{backend: http_upload}"),
     ["upload_tokens is required when any pipeline source backend is http_upload"]),
    # destinations: id and backend
    ("dest-id-missing", one_pipeline(destination="{backend: local, path: /a}"), [f"{D}.id is required"]),
    ("dest-id-slash", dst("backend: local, path: /a").replace("id: a,", "id: a/b,"),
     [f"{D}.id must be a slug-like identifier"]),
    ("dest-duplicated", one_pipeline(destination=f"{LOCAL_DEST}, {LOCAL_DEST}"),
     ["destination id archive is duplicated in pipeline reports"]),
    ("dest-backend-missing", dst("path: /a"), [f"{D}.backend is required"]),
    ("dest-backend-upload", dst("backend: http_upload"),
     [f"{D}.backend http_upload is valid only as a source backend"]),
    ("dest-backend-bad", dst("backend: gcs, bucket: b"), [f"{D}.backend must be local, ssh, or s3"]),
    ("dest-local-path-missing", dst("backend: local"), [f"{D}.path is required for local backend"]),
    ("dest-cross-staging", dst("backend: local, path: /a, staging_path: /s"),
     [f"{D}.staging_path is not supported for local backend"]),
    ("dest-s3-bucket-missing", dst("backend: s3, prefix: x"), [f"{D}.bucket is required for s3 backend"]),
    ("dest-unknown", dst("backend: local, path: /a, notify: true"), [f"{D}.notify: unknown field"]),
    ("dest-not-mapping", one_pipeline(destination="archive"), [f"{D} must be a mapping"]),
    # destination policies
    ("publish-nothing", with_destination("publish: {source: false, html: false}"),
     [f"{D}.publish must enable source or html"]),
    ("publish-empty-block", with_destination("publish: {}"), [f"{D}.publish must enable source or html"]),
    ("publish-unknown", with_destination("publish: {source: true, pdf: true}"), [f"{D}.publish.pdf: unknown field"]),
    ("html-without-transform", with_destination("publish: {html: true}"),
     [f"{D}.transform.markdown_to_html must be enabled when publish.html is true"]),
    ("html-transform-disabled", with_destination("publish: {html: true}, transform: {markdown_to_html: {mode: index}}"),
     [f"{D}.transform.markdown_to_html must be enabled when publish.html is true"]),
    ("transform-mode", with_destination("transform: {markdown_to_html: {enabled: true, mode: inline}}"),
     [f"{D}.transform.markdown_to_html.mode must be sidecar or index"]),
    ("transform-unknown", with_destination("transform: {pdf: {enabled: true}}"), [f"{D}.transform.pdf: unknown field"]),
    ("transform-enabled-type", with_destination("transform: {markdown_to_html: {enabled: oN}}"),
     [f"{D}.transform.markdown_to_html.enabled must be a boolean"]),
    ("transform-enabled-list", with_destination("transform: {markdown_to_html: {enabled: [yes]}}"),
     [f"{D}.transform.markdown_to_html.enabled must be a boolean"]),
    ("publish-source-yaml11-long", with_destination("publish: {source: 'Y E S'}"),
     [f"{D}.publish.source must be a boolean"]),
    # a string field keeps a YAML 1.1 word as the string it is: a choice field then names its choices
    ("transform-mode-yaml11", with_destination("transform: {markdown_to_html: {enabled: yes, mode: on}}"),
     [f"{D}.transform.markdown_to_html.mode must be sidecar or index"]),
    ("state-mode-yaml11", with_destination("state: {mode: no}"),
     [f"{D}.state.mode must be single_owner or shared_root"]),
    ("path-mapping-mode", with_destination("path_mapping: {mode: flat}"),
     [f"{D}.path_mapping.mode must be preserve_relative or fixed"]),
    ("path-mapping-unknown", with_destination("path_mapping: {mode: fixed, prefix: x}"),
     [f"{D}.path_mapping.prefix: unknown field"]),
    ("links-base-missing", with_destination("links: {primary: source}"), [f"{D}.links.base_url is required"]),
    ("links-base-relative", with_destination("links: {base_url: /reports/}"),
     [f"{D}.links.base_url must be an absolute http or https URL"]),
    ("links-base-ftp", with_destination("links: {base_url: 'ftp://h/x/'}"),
     [f"{D}.links.base_url must be an absolute http or https URL"]),
    ("links-base-query", with_destination("links: {base_url: 'https://h/x/?a=1'}"),
     [f"{D}.links.base_url must not have a query or fragment"]),
    ("links-primary", with_destination("links: {base_url: 'https://h/', primary: generated}"),
     [f"{D}.links.primary must be auto, source, or html"]),
    ("links-unknown", with_destination("links: {base_url: 'https://h/', public: true}"),
     [f"{D}.links.public: unknown field"]),
    ("state-mode", with_destination("state: {mode: shared}"), [f"{D}.state.mode must be single_owner or shared_root"]),
    ("state-mode-type", with_destination("state: {mode: true}"), [f"{D}.state.mode must be a string"]),
    ("reconciliation-mode", with_destination("reconciliation: {mode: append}"),
     [f"{D}.reconciliation.mode must be replace or merge"]),
    ("prune-no-policy", with_destination("retention: {prune: {enabled: true}}"),
     [f"{D}.retention.prune must set older_than or keep_latest when enabled is true"]),
    ("prune-zero", with_destination("retention: {prune: {enabled: true, older_than: 0s}}"),
     [f"{D}.retention.prune.older_than must be greater than zero"]),
    ("prune-negative-keep", with_destination("retention: {prune: {enabled: true, keep_latest: -1}}"),
     [f"{D}.retention.prune.keep_latest must be zero or greater"]),
    ("prune-forever", with_destination("retention: {prune: {enabled: false, older_than: forever}}"),
     [f"{D}.retention.prune.older_than must be a duration such as 24h"]),
    ("prune-enabled-type", with_destination("retention: {prune: {enabled: 'true', keep_latest: 1}}"),
     [f"{D}.retention.prune.enabled must be a boolean"]),
    ("retention-unknown", with_destination("retention: {archive: {}}"), [f"{D}.retention.archive: unknown field"]),
    ("takeover-mode", with_destination("takeover: {mode: bogus}"),
     [f"{D}.takeover.mode must be same_pipeline, same_source, any_managed, or never"]),
    ("takeover-unknown", with_destination("takeover: {mode: never, force: true}"),
     [f"{D}.takeover.force: unknown field"]),
    ("transfer-same", with_destination("transfer: {on_destination_same: replace}"),
     [f"{D}.transfer.on_destination_same must be skip or fail"]),
    ("transfer-older-skip", with_destination("transfer: {on_destination_older: skip}"),
     [f"{D}.transfer.on_destination_older must be replace or fail"]),
    ("transfer-newer", with_destination("transfer: {on_destination_newer: merge}"),
     [f"{D}.transfer.on_destination_newer must be skip, fail, or replace"]),
    ("transfer-conflict", with_destination("transfer: {on_conflict: skip}"),
     [f"{D}.transfer.on_conflict must be fail or replace"]),
    ("transfer-unknown", with_destination("transfer: {on_missing: fail}"), [f"{D}.transfer.on_missing: unknown field"]),
    # upload tokens
    ("tokens-without-upload", TOKENS + one_pipeline(),
     ["upload_tokens must reference configured http_upload pipelines"]),
    ("tokens-mapping", "upload_tokens: {id: t}\n" + one_pipeline(), ["upload_tokens must be a list"]),
    ("token-literal", "upload_tokens: [{id: t, token: s3cr3t, token_env: T, allow_pipelines: [reports]}]\n"
                      + one_pipeline(source="{backend: http_upload}"), ["upload_tokens[0].token: unknown field"]),
    ("token-id-missing", upload_pipeline().replace("id: reporter, ", ""), ["upload_tokens[0].id is required"]),
    ("token-env-missing", upload_pipeline().replace("token_env: UPLOAD_TOKEN, ", ""),
     ["upload_tokens[0].token_env is required"]),
    ("token-allow-unknown", upload_pipeline().replace("[reports]", "[reports, weekly]"),
     ["upload_tokens[0].allow_pipelines[1] references unknown pipeline weekly"]),
]


@pytest.mark.parametrize(("text", "expected"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_invalid_config(text: str, expected: list[str]) -> None:
    assert messages(text) == expected


_NAMES_A_FIELD = re.compile(r"^(?:[a-z_]+(?:\[\d+\])?(?:\.[a-z_]+(?:\[\d+\])?)*\b|pipeline id |destination id |"
                            r"upload token id |http_upload pipeline )")


def test_corpus_is_broad_and_every_message_names_a_field() -> None:
    assert len(CASES) >= 60
    assert len({case[0] for case in CASES}) == len(CASES)
    for name, _, expected in CASES:
        for message in expected:
            assert _NAMES_A_FIELD.match(message), (name, message)
