"""A step failure as an operator acts on it (issue 25 item 1): the core's refusals
(:mod:`distributor_core.app.refusal`) rendered as Dagster failure metadata.

``failure_class`` and ``root`` as text, the offending paths as a table (``class``, ``root``,
``path``), their ``path_count``, the ``remedy`` as text (one line per refusal class), the command
that prints the troubleshooting entry (``explain``: ``distributor explain <class>``) and the entry
as a URL (``docs_url``: the page installed with distributor, or the hosted copy
``DISTRIBUTOR_TROUBLESHOOTING_URL`` names). Expected refusals (a plan's ``fail_*``, a setup
failure) are not retried; a destination that could not be reached may be.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import dagster as dg

from distributor_core.app.refusal import UNREACHABLE_ROOT, Refusal

PATHS_SCHEMA = dg.TableSchema(
    columns=[
        dg.TableColumn("class", "string", description="failure class (the troubleshooting entry)"),
        dg.TableColumn("root", "string", description="absolute root of the source or destination"),
        dg.TableColumn("path", "string", description="absolute offending path"),
    ]
)


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(value for value in values if value))


def refusal_metadata(refusals: Iterable[Refusal | None]) -> dict[str, Any]:
    """Failure metadata of ``refusals`` (empty when there is none)."""
    found = [refusal for refusal in refusals if refusal is not None]
    if not found:
        return {}
    rows = [
        dg.TableRecord({"class": refusal.failure, "root": refusal.root, "path": path})
        for refusal in found
        for path in (refusal.paths or (refusal.root,))
    ]
    metadata: dict[str, Any] = {
        "failure_class": dg.MetadataValue.text(", ".join(_unique(r.failure for r in found))),
        "root": dg.MetadataValue.text(", ".join(_unique(r.root for r in found))),
        "paths": dg.MetadataValue.table(records=rows, schema=PATHS_SCHEMA),
        "path_count": dg.MetadataValue.int(sum(r.count for r in found)),
        "remedy": dg.MetadataValue.text("\n".join(_unique(r.remedy for r in found))),
        "explain": dg.MetadataValue.text("\n".join(_unique(r.explain for r in found))),
        "docs_url": dg.MetadataValue.url(found[0].docs_url),
    }
    for url in _unique(r.docs_url for r in found)[1:]:
        metadata[f"docs_url_{url.rsplit('#', 1)[-1].replace('-', '_')}"] = dg.MetadataValue.url(url)
    return metadata


def retryable(refusals: Iterable[Refusal | None]) -> bool:
    """Whether a retry could succeed: only when something could not be reached."""
    return any(refusal is not None and refusal.failure == UNREACHABLE_ROOT for refusal in refusals)


def failure(description: str, refusals: Iterable[Refusal | None], metadata: Mapping[str, Any] | None = None,
            ) -> dg.Failure:
    """A ``dg.Failure`` with ``description`` and the refusals' metadata (after ``metadata``);
    retries only allowed when a root was unreachable, or when nothing was classified."""
    found = [refusal for refusal in refusals if refusal is not None]
    return dg.Failure(
        description=description,
        metadata={**(metadata or {}), **refusal_metadata(found)},
        allow_retries=retryable(found) or not found,
    )
