"""An outage of the shared S3 staging store (issue 35, item 5), through uvicorn and the Python
client: the fault proxy in front of moto cuts every connection, as a store that went away does.

``POST`` answered ``500 internal error`` and ``GET /runs/<id>`` ``404 run not found`` for an upload
that exists; both must be ``503`` with ``Retry-After`` and ``"retryable": true``, with nothing of the
store in the body (its endpoint, bucket and keys are the server log's), and the Python client
retries both until the store is back.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from distributor_core.bundle import BundleFile
from distributor_core.upload import RetryOptions, UploadClient
from tests.peers.faultproxy import FaultProxy
from tests.peers.moto import MotoServer
from tests.server.harness import TOKEN, bundle_archive, serve_setup, upload, wait_status
from tests.server.shared import s3_connection, write_shared_setup

AUTH = {"Authorization": f"Bearer {TOKEN}"}
UNAVAILABLE = {"error": "upload staging is unavailable", "retryable": True}


def test_a_staging_store_outage_is_a_503_to_retry_and_the_client_rides_it_out(
    tmp_path: Path, moto_serial_server: MotoServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="distributor")
    with FaultProxy(urlsplit(moto_serial_server.endpoint_url).port or 80) as proxy:
        setup = write_shared_setup(tmp_path / "site", moto_serial_server, http={
            "staging_s3": {**s3_connection(moto_serial_server), "endpoint": proxy.url}})
        statuses: list[int] = []

        def back_after_a_503(response: httpx.Response) -> None:
            """The producer's client saw the server refuse while the store was away: bring it back."""
            statuses.append(response.status_code)
            if response.status_code == 503:
                proxy.outage.clear()

        producer_http = httpx.Client(timeout=60, event_hooks={"response": [back_after_a_503]})
        with serve_setup(setup) as server, server.client() as http, producer_http, UploadClient(
                server.url, TOKEN, http_client=producer_http,
                retry=RetryOptions(max_attempts=4, base_delay=0.2, max_delay=1.0)) as client:
            before = upload(http, "reports", bundle_archive(tmp_path), key="before").json()["run_id"]
            assert wait_status(http, before, {"succeeded", "failed"})["status"] == "succeeded"

            proxy.outage.set()
            with ThreadPoolExecutor(2) as pool:
                posted = pool.submit(upload, http, "reports", bundle_archive(tmp_path), key="during")
                read = pool.submit(http.get, f"/runs/{before}", headers=AUTH)
                answers = [posted.result(), read.result()]
            for answer in answers:
                assert (answer.status_code, answer.json(), answer.headers.get("retry-after")) == (503, UNAVAILABLE, "2")
            assert proxy.cut > 0 and proxy.outage.is_set()
            # the operator's detail is in the log, the producer's body names nothing of the store
            assert "the upload staging failed" in caplog.text
            assert all(setup.bucket not in a.text and str(proxy.port) not in a.text for a in answers)

            # the client, started while the store is away, retries the 503 (with the server's
            # Retry-After) and gets its 202 once the store is back
            report = tmp_path / "report.md"
            report.write_text("during the outage\n")
            accepted = client.upload_files(pipeline_id="reports", id="reports.outage",
                                           files=[BundleFile(report, "report.md")], idempotency_key="during")
            assert statuses[:1] == [503] and statuses[-1] == 202, statuses
            assert wait_status(http, accepted.run_id, {"succeeded", "failed"})["status"] == "succeeded"

            # a status read during an outage is retried too, and answers once the store is back
            proxy.outage.set()
            statuses.clear()
            assert client.status(before).status == "succeeded"
            assert statuses == [503, 200], statuses
