"""What an upload admits of a manifest beyond the manifest rules (issue 35, items 1 and 6): its
``id`` is UTF-8 text no longer than :data:`MAX_ID_BYTES`.

The manifest rules take any characters in an ``id``, and JSON's ``\\ud800`` escape carries a lone
UTF-16 surrogate into one, which no UTF-8 document (the upload record, the destination state, a
Dagster tag) can hold; every file path is already refused with one (bundle path rules). Checked
by the upload server before anything is staged, and by the Python upload client before it sends.
"""

from __future__ import annotations

from distributor_core.bundle.errors import ManifestError

#: bytes (UTF-8) of a manifest ``id`` an upload may carry: every place that keeps it takes this
#: much whole (the upload record, the destination state, the Dagster materialization metadata;
#: Dagster run tags shorten longer values with a hash, PostgreSQL indexing a tag up to about
#: 2,700 bytes)
MAX_ID_BYTES = 1024


def id_problem(value: str) -> str | None:
    """Why a manifest ``id`` cannot be uploaded (``is ...``), or ``None``."""
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        return (f"is not valid UTF-8: character {exc.start + 1} is an unpaired UTF-16 surrogate "
                f"(\\u{ord(value[exc.start]):04x})")
    if size > MAX_ID_BYTES:
        return f"is {size} bytes; the limit is {MAX_ID_BYTES} bytes (UTF-8)"
    return None


def check_upload_id(value: str) -> None:
    """:class:`ManifestError` naming the field when a manifest with ``id`` ``value`` cannot be
    uploaded."""
    problem = id_problem(value)
    if problem:
        raise ManifestError(f"manifest id {problem}")


__all__ = ["MAX_ID_BYTES", "check_upload_id", "id_problem"]
