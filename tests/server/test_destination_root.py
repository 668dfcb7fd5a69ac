"""The destination lock never spins (issue 14, sixth finding): when a destination root was a
regular file, the lock's retry loop skipped both its deadline and its sleep, one core spun and the
upload stayed ``running`` for ever. Now a root (or bundle path) that is not a directory is an
error naming it, and every wait keeps its deadline and sleeps."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from distributor_core.execute.lock import DestinationLock
from distributor_core.storage.base import Entry
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.local import LocalStorage
from tests.server.harness import bundle_archive, serve_setup, upload, wait_status, write_setup

pytestmark = pytest.mark.timeout(120)  # the old loop spun for ever


def test_an_upload_to_a_root_that_is_a_file_fails_with_the_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    setup = write_setup(tmp_path / "site", pipelines={"reports": 2})
    root = setup.destinations["reports/dest1"]
    root.parent.mkdir(parents=True)
    root.write_text("not a directory\n")
    with serve_setup(setup) as server, server.client() as http:
        begin = time.monotonic()
        run_id = upload(http, "reports", bundle_archive(tmp_path)).json()["run_id"]
        record = wait_status(http, run_id, {"succeeded", "failed"}, timeout=20)
        elapsed = time.monotonic() - begin
    assert record["status"] == "failed"
    # the producer reads the class and a short reason; the server log names the root (issue 35, item 7)
    assert record["error"] == ("1 destination(s) failed: reports/dest1 [.]: invalid_path: a path could not be "
                               "used at the destination"), record["error"]
    assert "destination root out/reports/dest1 is not a directory" in caplog.text
    assert elapsed < 10  # not the lock's 30 s wait, and not for ever
    actions = {a["destination_id"]: a["status"] for a in record["report"]["actions"]}
    assert actions == {"dest1": "failed", "dest2": "completed"}
    assert root.read_text() == "not a directory\n"


def test_a_bundle_path_that_is_a_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "reports").write_text("x")
    lock = DestinationLock(LocalStorage(tmp_path / "root", display="srv"), "reports", holder="test", wait=30)
    begin = time.monotonic()
    with pytest.raises(StorageError) as info:
        lock.acquire()
    assert time.monotonic() - begin < 2
    assert info.value.kind == ErrorKind.INVALID_PATH
    assert str(info.value) == "destination bundle path srv/reports is not a directory"


class _VanishingLock(LocalStorage):
    """Fault injection: the create is refused as if a lock existed, but no lock can be read."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.writes = 0

    def write_bytes(self, path: str, data: bytes, **kwargs: object) -> object:  # type: ignore[override]
        self.writes += 1
        if self.writes > 100_000:
            raise StorageError("write", "local", path, ErrorKind.OTHER, "spinning")
        raise StorageError("write", "local", path, ErrorKind.ALREADY_EXISTS)


def test_the_wait_keeps_its_deadline_and_sleeps_when_the_lock_cannot_be_read(tmp_path: Path) -> None:
    storage = _VanishingLock(tmp_path)
    storage.root_display = "srv"
    lock = DestinationLock(storage, "", holder="test", wait=0.5)
    errors: list[BaseException] = []
    cpu_before = time.thread_time()

    def acquire() -> None:
        try:
            lock.acquire()
        except BaseException as exc:
            errors.append(exc)

    begin = time.monotonic()
    thread = threading.Thread(target=acquire)
    thread.start()
    thread.join(10)
    assert not thread.is_alive()
    assert 0.5 <= time.monotonic() - begin < 3
    assert len(errors) == 1 and isinstance(errors[0], StorageError)
    assert errors[0].kind == ErrorKind.CONFLICT
    assert str(errors[0]) == "destination srv is locked by an unknown writer since an unknown time"
    assert storage.writes < 20, storage.writes  # it slept between attempts
    assert time.thread_time() - cpu_before < 1


class _KeyOfTheSameName(LocalStorage):
    """Fault injection of S3's layout: a key named like the bundle path sits next to the keys
    below it, and the first create is refused by a lock released before it could be read."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.refused = 0

    def write_bytes(self, path: str, data: bytes, **kwargs: object) -> object:  # type: ignore[override]
        if self.refused == 0:
            self.refused += 1
            raise StorageError("write", "s3", path, ErrorKind.ALREADY_EXISTS)
        return super().write_bytes(path, data, **kwargs)  # type: ignore[arg-type]

    def stat(self, path: str) -> Entry:
        if path == "reports":
            return Entry(path="reports", type="file", size=1)
        return super().stat(path)


def test_one_refusal_over_a_key_of_that_name_is_not_conclusive(tmp_path: Path) -> None:
    storage = _KeyOfTheSameName(tmp_path)
    lock = DestinationLock(storage, "reports", holder="test", wait=5, renew=False)
    lock.acquire()
    assert lock.held and storage.refused == 1
    assert (tmp_path / "reports" / ".distributor.lock").is_file()
    lock.release()
