"""What producers read of a failed publication (issue 35, item 7), through uvicorn and the Python
client: the failure class and a short reason, never a detail of the server's hosts. ``GET
/runs/<id>`` carried the ``private_key_file`` path, the ``known_hosts_file`` path and the server's
key fingerprint, the ``ssh_config_file`` path, an S3 destination's bucket and key and the staging
store's endpoint; a ``503`` carried the run id of another upload. The operator's detail is in the
server log."""

from __future__ import annotations

import logging
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from distributor_core.upload import UploadClient
from tests.peers.moto import MotoServer
from tests.peers.sshd import SSHDServer
from tests.server.harness import TOKEN, bundle_archive, serve_setup, upload, wait_status, write_setup
from tests.server.shared import s3_connection, write_shared_setup


def _destinations(setup: Any, destinations: list[dict[str, Any]]) -> None:
    doc = yaml.safe_load(setup.config_path.read_text())
    doc["pipelines"][0]["destinations"] = destinations
    setup.config_path.write_text(yaml.safe_dump(doc, sort_keys=False))


def _impostor_known_hosts(tmp_path: Path, sshd_server: SSHDServer) -> Path:
    key = tmp_path / "impostor"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    kind, blob = key.with_name("impostor.pub").read_text().split()[:2]
    known_hosts = tmp_path / "secret-place" / "known_hosts"
    known_hosts.parent.mkdir()
    known_hosts.write_text(sshd_server.known_hosts_line(f"{kind} {blob}"))
    return known_hosts


def test_a_host_key_mismatch_reads_as_its_class_to_the_producer(
    tmp_path: Path, sshd_server: SSHDServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="distributor")
    setup = write_setup(tmp_path / "site", pipelines={"reports": 0})
    known_hosts = _impostor_known_hosts(tmp_path, sshd_server)
    ssh_config = tmp_path / "secret-place" / "ssh_config"
    ssh_config.write_text("Host *\n    ServerAliveCountMax 3\n")
    ssh = {"backend": "ssh", "host": sshd_server.host, "port": sshd_server.port, "user": sshd_server.user,
           "path": str(sshd_server.make_sftp_root()), "private_key_file": str(sshd_server.client_key_path),
           "known_hosts_file": str(known_hosts)}
    _destinations(setup, [{"id": "paramiko", **ssh},
                          {"id": "openssh", **ssh, "transport": "openssh", "ssh_config_file": str(ssh_config)}])
    with serve_setup(setup) as server, UploadClient(server.url, TOKEN) as client, server.client() as http:
        run_id = upload(http, "reports", bundle_archive(tmp_path)).json()["run_id"]
        wait_status(http, run_id, {"succeeded", "failed"})
        status = client.status(run_id)
    assert status.status == "failed"
    reason = ("untrusted_host_key: the destination's server could not be authenticated (its host key is not trusted) "
              "(more: distributor explain untrusted_host_key)")
    assert status.error == (f"2 destination(s) failed: reports/paramiko [.]: {reason}; "
                            f"reports/openssh [.]: {reason}")
    shown = str(status.raw)
    for secret in (str(known_hosts), str(sshd_server.client_key_path), str(ssh_config), "SHA256:",
                   sshd_server.known_hosts_name, str(tmp_path)):
        assert secret not in shown, secret
    assert [a["refusal"] for a in status.raw["report"]["actions"]] == [
        {"class": "untrusted_host_key", "explain": "distributor explain untrusted_host_key"}] * 2
    # the operator reads what happened where
    assert f"does not match known_hosts file {known_hosts}" in caplog.text and "SHA256:" in caplog.text


def test_an_s3_destination_refusal_names_no_bucket_key_or_endpoint(
    tmp_path: Path, moto_serial_server: MotoServer, caplog: pytest.LogCaptureFixture
) -> None:
    """An object no publication manages is where the bundle's ``report.md`` goes: the refusal's
    root and path (``s3://<bucket>/<prefix>/report.md at <endpoint>``) are the operator's."""
    caplog.set_level(logging.WARNING, logger="distributor")
    setup = write_shared_setup(tmp_path / "site", moto_serial_server)
    bucket = moto_serial_server.create_bucket()
    _destinations(setup, [{"id": "archive", "backend": "s3", "bucket": bucket, "prefix": "hidden/prefix",
                           **s3_connection(moto_serial_server)}])
    client_s3 = moto_serial_server.client()
    try:
        client_s3.put_object(Bucket=bucket, Key="hidden/prefix/report.md", Body=b"in the way\n")
    finally:
        client_s3.close()
    with serve_setup(setup) as server, UploadClient(server.url, TOKEN) as client, server.client() as http:
        run_id = upload(http, "reports", bundle_archive(tmp_path)).json()["run_id"]
        wait_status(http, run_id, {"succeeded", "failed"})
        status = client.status(run_id)
    assert status.status == "failed"
    assert status.error == ("1 destination(s) failed: reports/archive [.]: fail_unmanaged: destination has content "
                            "but no distributor state (more: distributor explain unmanaged_content)")
    shown = str(status.raw)
    for secret in (bucket, setup.bucket, "hidden/prefix", moto_serial_server.endpoint_url, "127.0.0.1", "s3://"):
        assert secret not in shown, secret
    assert f"s3://{bucket}/hidden/prefix/report.md" in caplog.text  # the operator's detail


def test_a_raced_admission_is_a_503_without_the_other_uploads_run_id(
    tmp_path: Path, moto_serial_server: MotoServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Two admissions given the same run id (a fixed clock and suffix): the second finds the
    first's record; its ``503`` said ``upload not accepted: upload record <the first's run id>
    already exists``."""
    caplog.set_level(logging.WARNING, logger="distributor")
    setup = write_shared_setup(tmp_path / "site", moto_serial_server)
    frozen = datetime(2026, 6, 3, 12, 0, tzinfo=UTC)
    with serve_setup(setup, clock=lambda: frozen, suffix=lambda: "0badcafe") as server, server.client() as http:
        first = upload(http, "reports", bundle_archive(tmp_path)).json()["run_id"]
        assert wait_status(http, first, {"succeeded", "failed"})["status"] == "succeeded"
        second = upload(http, "reports", bundle_archive(tmp_path, bundle_id="reports.other"))
    assert (second.status_code, second.json(), second.headers["retry-after"]) == (
        503, {"error": "upload was not admitted this time (the staging store changed meanwhile)",
              "retryable": True}, "1")
    assert first not in second.text
    assert f"upload record {first} already exists" in caplog.text
