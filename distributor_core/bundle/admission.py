"""What an upload admits of a manifest beyond the manifest rules (issue 35, items 1 and 6): its
``id`` is no longer than :data:`MAX_ID_BYTES`.

Reading ``manifest.json`` already refuses every string that is not UTF-8 text (JSON's
``"\\ud800"`` escapes, :func:`~distributor_core.bundle.codec.utf8_problem`); an ``id`` given as a
Python string (the client's ``upload_files``) is checked here too. Checked by the upload server
before anything is staged, and by the Python upload client before it sends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from distributor_core.bundle.codec import manifest_to_obj, utf8_problem
from distributor_core.bundle.errors import ManifestError
from distributor_core.bundle.model import Manifest

#: bytes (UTF-8) of a manifest ``id`` an upload may carry: every place that keeps it takes this
#: much whole (the upload record, the destination state, the Dagster materialization metadata;
#: Dagster run tags shorten longer values with a hash, PostgreSQL indexing a tag up to about
#: 2,700 bytes)
MAX_ID_BYTES = 1024


def id_problem(value: str) -> str | None:
    """Why a manifest ``id`` cannot be uploaded (``is ...``), or ``None``."""
    problem = utf8_problem(value)
    if problem:
        return problem
    size = len(value.encode("utf-8"))
    if size > MAX_ID_BYTES:
        return f"is {size} bytes; the limit is {MAX_ID_BYTES} bytes (UTF-8)"
    return None


def check_upload_id(value: str) -> None:
    """:class:`ManifestError` naming the field when a manifest with ``id`` ``value`` cannot be
    uploaded."""
    problem = id_problem(value)
    if problem:
        raise ManifestError(f"manifest id {problem}")


class ChangedAfterAdmission(ManifestError):
    """A staged bundle whose manifest is not the one its upload was admitted with (issue 35,
    item 2): somebody changed the staging area (a bucket's objects, a directory) after the ``202``."""


def check_admitted(manifest: Manifest, admitted: Mapping[str, Any]) -> None:
    """:class:`ChangedAfterAdmission` unless ``manifest`` (a staged bundle's, as read before its
    files are checked) is the manifest identity the upload was admitted with (its record's
    ``manifest``, :func:`~distributor_core.bundle.manifest_to_obj`). Every file is then checked
    against this manifest, and every byte published against its sha256, so the bytes published are
    the ones admitted."""
    found = manifest_to_obj(manifest)
    if found == dict(admitted):
        return
    now, then = found.get("digest"), admitted.get("digest")
    if now != then:
        raise ChangedAfterAdmission(f"staged bundle changed after admission: its manifest has digest {now}, "
                                    f"the upload was admitted with digest {then}")
    fields = ", ".join(key for key in sorted(set(found) | set(admitted)) if found.get(key) != admitted.get(key))
    raise ChangedAfterAdmission(f"staged bundle changed after admission: its manifest's {fields} differ from "
                                f"the admitted one (digest {now} in both)")


__all__ = ["MAX_ID_BYTES", "ChangedAfterAdmission", "check_admitted", "check_upload_id", "id_problem"]
