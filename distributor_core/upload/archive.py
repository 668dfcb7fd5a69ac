"""The upload archive: a gzip-compressed tar of ``manifest.json`` (canonical bytes) followed by
exactly the manifest-listed files in manifest order, regular-file entries with mode 0644.

It is written once to a temporary file and replayed from there on every attempt, so large
bundles are never held in memory and retries send identical bytes.
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from distributor_core.bundle import MANIFEST_NAME, Manifest, marshal_manifest
from distributor_core.bundle.disk import open_regular

CHUNK = 256 * 1024


def _info(name: str, size: int, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = 0o644
    info.mtime = mtime
    info.type = tarfile.REGTYPE
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def write_archive(root: str | os.PathLike[str], manifest: Manifest, dest: BinaryIO) -> None:
    """Write the gzip tar of the bundle at ``root`` described by ``manifest`` to ``dest``."""
    root_path = Path(root)
    mtime = int(manifest.created.timestamp())
    with gzip.GzipFile(fileobj=dest, mode="wb", mtime=0) as compressed, tarfile.open(
        fileobj=compressed, mode="w|", format=tarfile.PAX_FORMAT, encoding="utf-8"
    ) as tar:
        data = marshal_manifest(manifest)
        tar.addfile(_info(MANIFEST_NAME, len(data), mtime), io.BytesIO(data))
        for record in manifest.files:
            fd, size = open_regular(root_path, record.path)
            with os.fdopen(fd, "rb") as source:
                tar.addfile(_info(record.path, size, mtime), source)


def iter_file(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as stream:
        while chunk := stream.read(CHUNK):
            yield chunk
