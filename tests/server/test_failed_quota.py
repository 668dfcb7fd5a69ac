"""Failed uploads' staged bundles stay within byte quotas (issue 26, item 4).

A token could make its own publications fail at will (the same ``created`` as the published
bundle, another bundle id: ``fail_conflict``), and each failed upload kept up to
``max_upload_size`` on the staging disk for 24 h, with no bound per token or in total. Now
``server.http.max_failed_bytes_per_token`` and ``max_failed_bytes`` bound what is kept: a token's
own oldest failed bundles go first, and over the total the oldest of the token holding the most.
The records stay and say why their bundle is gone.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from distributor_core import staging as sg
from tests.server.harness import (
    DEFAULT_FILES,
    bundle_archive,
    serve_setup,
    upload,
    wait_idle,
    wait_status,
    write_setup,
)

CREATED = datetime(2026, 6, 8, 12, tzinfo=UTC)
PER_TOKEN = 5 * 1024
TOTAL = 6 * 1024


def _bundle_bytes(bundle: Path) -> int:
    return sum(os.lstat(Path(d) / f).st_size for d, _, files in os.walk(bundle) for f in files)


def test_failed_bundles_are_kept_within_the_quotas_oldest_dropped_first(tmp_path: Path) -> None:
    setup = write_setup(
        tmp_path / "site", pipelines={"a": 1, "b": 1},
        tokens={"token-a": ("secret-a", ["a"]), "token-b": ("secret-b", ["b"])},
        http={"max_failed_bytes_per_token": PER_TOKEN, "max_failed_bytes": TOTAL, "queue_size": 16},
    )
    big = {**DEFAULT_FILES, "pad.bin": b"a" * 1500}  # about 2.1 KiB staged: two fit the token's 5 KiB
    small = {**DEFAULT_FILES, "pad.bin": b"b" * 500}  # about 1.1 KiB staged

    def send(pipeline: str, token: str, files: dict[str, bytes], bundle_id: str) -> str:
        body = bundle_archive(tmp_path, files, bundle_id=bundle_id, created=CREATED)
        response = upload(http, pipeline, body, token=token)
        assert response.status_code == 202, response.text
        return response.json()["run_id"]

    with serve_setup(setup) as server, server.client() as http:
        # the published bundle each failure conflicts with
        wait_status(http, send("a", "secret-a", big, "base"), "succeeded", token="secret-a")
        wait_status(http, send("b", "secret-b", small, "base"), "succeeded", token="secret-b")
        failed_a = [send("a", "secret-a", big, f"evil-{i}") for i in range(5)]
        failed_b = [send("b", "secret-b", small, "other-0")]
        wait_idle(server.service)
        sizes = {run_id: _bundle_bytes(sg.bundle_dir(setup.staging("a"), run_id)) for run_id in failed_a[-2:]}
        sizes[failed_b[0]] = _bundle_bytes(sg.bundle_dir(setup.staging("b"), failed_b[0]))
        assert 2 * min(sizes.values()) < PER_TOKEN < 3 * sizes[failed_a[-1]]
        # token a: its own three oldest went for its per-token quota; token b is untouched
        assert _kept(setup, "a", failed_a) == failed_a[-2:]
        assert _kept(setup, "b", failed_b) == failed_b
        assert server.service.kept_failed_bytes() == {
            "token-a": sizes[failed_a[-2]] + sizes[failed_a[-1]], "token-b": sizes[failed_b[0]]}

        # token b fails again: the total is over, and the token holding the most (a) gives up its oldest
        failed_b.append(send("b", "secret-b", small, "other-1"))
        wait_idle(server.service)
        assert _kept(setup, "a", failed_a) == failed_a[-1:]
        assert _kept(setup, "b", failed_b) == failed_b
        assert sum(server.service.kept_failed_bytes().values()) <= TOTAL

        # every record still answers as failed, and the removed ones say why
        for run_id in failed_a:
            view = wait_status(http, run_id, "failed", token="secret-a")
            assert view["error"].startswith("1 destination(s) failed: a/dest1 [.]: fail_conflict")
            if run_id in failed_a[:3]:
                assert view["error"].endswith("; staged bundle removed to stay within "
                                              "server.http.max_failed_bytes_per_token")
        assert wait_status(http, failed_a[3], "failed", token="secret-a")["error"].endswith(
            "; staged bundle removed to stay within server.http.max_failed_bytes")
        assert "removed" not in wait_status(http, failed_a[4], "failed", token="secret-a")["error"]
    assert list((setup.staging("a") / sg.INCOMING_DIR).iterdir()) == []


def _kept(setup, pipeline: str, run_ids: list[str]) -> list[str]:  # type: ignore[no-untyped-def]
    return [run_id for run_id in run_ids if sg.bundle_dir(setup.staging(pipeline), run_id).exists()]


def test_the_quotas_hold_across_a_restart(tmp_path: Path) -> None:
    """Failed bundles found at startup count too: lowering the quota and restarting removes the
    oldest ones."""
    setup = write_setup(tmp_path / "site", http={"queue_size": 16})
    with serve_setup(setup) as server, server.client() as http:
        wait_status(http, upload(http, "reports", bundle_archive(tmp_path, bundle_id="base", created=CREATED))
                    .json()["run_id"], "succeeded")
        failed = [upload(http, "reports", bundle_archive(tmp_path, bundle_id=f"evil-{i}", created=CREATED))
                  .json()["run_id"] for i in range(3)]
        wait_idle(server.service)
    assert _kept(setup, "reports", failed) == failed  # within the defaults (1 GiB per token)
    smaller = write_setup(tmp_path / "site", http={"queue_size": 16, "max_failed_bytes_per_token": "600B"})
    with serve_setup(smaller) as server:
        assert _kept(setup, "reports", failed) == failed[-1:]
        assert list(server.service.kept_failed_bytes()) == ["reporter"]
