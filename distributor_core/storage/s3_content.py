"""Content types for S3 objects, inferred from the logical path (interfaces §5.4).

The fixed table wins; other extensions fall back to Python's built-in ``mimetypes`` table (a
private instance that does not read ``/etc/mime.types``, so the result does not depend on the
machine), then ``application/octet-stream``. Compressed names (``.tar.gz``, ``.svg.gz``) get the
compression's type, since objects are stored without ``Content-Encoding``. Extensions are matched case-insensitively.
"""

from __future__ import annotations

import mimetypes

DEFAULT_CONTENT_TYPE = "application/octet-stream"

CONTENT_TYPES: dict[str, str] = {
    ".html": "text/html; charset=utf-8",
    ".htm": "text/html; charset=utf-8",
    ".md": "text/markdown; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".json": "application/json",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}

_ENCODED_TYPES: dict[str, str] = {
    "gzip": "application/gzip",
    "bzip2": "application/x-bzip2",
    "xz": "application/x-xz",
    "br": "application/x-brotli",
    "compress": "application/x-compress",
}

_BUILTIN = mimetypes.MimeTypes()


def content_type_for(path: str) -> str:
    """Content type of the object stored under logical ``path``."""
    name = path.rpartition("/")[2]
    dot = name.rfind(".")
    if dot > 0:
        found = CONTENT_TYPES.get(name[dot:].lower())
        if found:
            return found
    guessed, encoding = _BUILTIN.guess_type(name.lower(), strict=False)
    if encoding is not None:
        # objects are stored as they are, without Content-Encoding: a .tar.gz is a gzip file
        return _ENCODED_TYPES.get(encoding, DEFAULT_CONTENT_TYPE)
    return guessed or DEFAULT_CONTENT_TYPE
