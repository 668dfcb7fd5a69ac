"""What a producer is told of a failed publication (issue 35, item 7): the failure class and a
short reason, never a detail of the server's hosts.

An upload's run status (``GET /runs/<id>``) reaches producers, who may not see what the operators
see: a key file's or known_hosts file's path, a server's key fingerprint, an ssh config file, a
bucket, an object key, an endpoint. The operator's text (:meth:`RunReport.error_message
<distributor_core.app.report.RunReport.error_message>`, the refusal with its root, paths and
remedy, an exception's message) goes to the server log and to Dagster; the record keeps what this
module makes of it, built only from what the producer sent or may know (pipeline and destination
ids, bundle paths, the plan's action and reason, which speak of the bundle's own paths, ids and
digests, a bundle error, which speaks of the bundle's own files) and fixed texts:

- a ``fail_*`` plan: ``<action>: <reason>``;
- an invalid bundle (``corrupt_bundle``): the bundle error;
- any other failure: ``<class>: <short reason>``, the class being the refusal's (``locked``,
  ``unreachable_root``...) or the storage error's kind (``permission``, ``integrity``...);

each with how to look the class up when it has a troubleshooting entry: ``(see <url>)`` where
the page is hosted (``DISTRIBUTOR_TROUBLESHOOTING_URL``), else ``(more: distributor explain
<class>)``; never the server's own installed copy (a ``file://`` path of its host).
"""

from __future__ import annotations

from typing import Any

from distributor_core import paths as lp
from distributor_core.app import refusal as refusals
from distributor_core.app.report import ActionReport, RunReport

#: failure class -> what a producer is told about it
REASONS: dict[str, str] = {
    refusals.UNMANAGED_CONTENT: "files no publication manages are where this bundle's outputs go",
    refusals.FOREIGN_OWNER: "the destination path holds another pipeline's publication",
    refusals.INVALID_STATE: "the destination's state record is not valid",
    refusals.SOURCE_CONFLICT: "the destination holds a publication this one may not replace",
    refusals.CORRUPT_BUNDLE: "the bundle does not match its manifest",
    refusals.MISSING_CREDENTIAL: "the server lacks a credential the destination needs",
    refusals.UNREACHABLE_ROOT: "the destination could not be reached",
    refusals.UNTRUSTED_HOST_KEY: "the destination's server could not be authenticated (its host key is not trusted)",
    refusals.LOCKED: "another writer holds the destination",
    # storage error kinds (distributor_core.storage.ErrorKind)
    "unavailable": "the destination could not be reached",
    "untrusted": "the destination's server could not be authenticated (its host key is not trusted)",
    "permission": "the destination refused access",
    "not_found": "something the publication needed at the destination was missing",
    "already_exists": "a path the publication writes already existed at the destination",
    "not_empty": "a directory at the destination was not empty",
    "invalid_path": "a path could not be used at the destination",
    "unsupported": "the destination lacks an operation the publication needs",
    "limit_exceeded": "a limit of the destination was exceeded",
    "conflict": "another writer changed the destination meanwhile",
    "integrity": "a file did not match its digest",
    "other": "the destination failed",
    # failures that are no destination's
    "lease_lost": "another publisher took the publication over; its outcome is the other's",
    "failed": "the publication failed",
}
#: what a producer is told when the failure is known only by the operator's text
GENERIC = "failed: the publication failed (the server's log has the details)"


def reason(failure: str) -> str:
    """``<class>: <short reason>`` (an unknown class is ``failed``)."""
    if failure not in REASONS:
        failure = "failed"
    return f"{failure}: {REASONS[failure]}"


def action_error(entry: ActionReport) -> str:
    """What a producer is told of one failed (bundle, destination) publication."""
    refusal = entry.refusal
    if entry.action is not None and entry.action.startswith("fail_"):
        text = f"{entry.action}: {entry.reason}"
    elif refusal is not None and refusal.failure == refusals.CORRUPT_BUNDLE and entry.error:
        text = f"{refusals.CORRUPT_BUNDLE}: {entry.error}"
    elif refusal is not None:
        text = reason(refusal.failure)
    else:
        text = reason(entry.error_kind or "failed")
    return f"{text} ({look_up(refusal.failure)})" if refusal is not None else text


def look_up(failure: str) -> str:
    """Where a producer reads about ``failure``: the hosted page, else the explain command."""
    if refusals.hosted_docs():
        return f"see {refusals.docs_url(failure.replace('_', '-'))}"
    return f"more: {refusals.explain_command(failure)}"


def report_error(report: RunReport) -> str:
    """:meth:`RunReport.error_message`'s form (resolutions C2) with each failure as
    :func:`action_error` words it; a pipeline's own error (a setup failure) is :data:`GENERIC`."""
    failed = report.failed_actions
    parts = [f"{a.pipeline_id}/{a.destination_id} [{lp.display_path(a.bundle_path)}]: {action_error(a)}"
             for a in failed]
    message = f"{len(failed)} destination(s) failed: " + "; ".join(parts) if failed else ""
    pipeline_errors = [f"pipeline {p.id}: {GENERIC}" for p in report.pipelines if p.error and not any(
        a.pipeline_id == p.id and a.failed for a in failed)]
    return "; ".join(filter(None, [message, *pipeline_errors]))


#: the keys of an action's report a producer gets (the refusal as its class and docs link only)
_ACTION_KEYS = ("pipeline_id", "destination_id", "backend", "bundle_path", "destination_path", "source_id",
                "action", "reason", "state_mode", "reconciliation_mode", "primary_url", "outputs", "status",
                "error", "bytes_written", "deletes", "taken_over_outputs", "planned_action")


def report_dict(report: RunReport | dict[str, Any]) -> dict[str, Any]:
    """The run report a producer gets: :meth:`RunReport.to_dict` without what belongs to the
    server's hosts (the refusal's root, absolute paths and remedy, a recovery's holder, the
    warnings, operators' error texts), each failed action's ``error`` as :func:`action_error`
    words it (a report known only as its dictionary: as :func:`dict_error` does)."""
    whole = dict(report.to_dict()) if isinstance(report, RunReport) else dict(report)
    entries = report.actions if isinstance(report, RunReport) else [None] * len(whole.get("actions", []))
    actions = []
    for entry, data in zip(entries, whole.get("actions", []), strict=True):
        kept = {key: data[key] for key in _ACTION_KEYS if key in data}
        failed = data.get("status") == "failed"
        kept["error"] = (action_error(entry) if entry is not None else _dict_action_error(data)) if failed else ""
        refusal = data.get("refusal")
        if isinstance(refusal, dict):
            failure = str(refusal.get("class"))
            kept["refusal"] = {"class": failure, "explain": refusals.explain_command(failure)}
            if refusals.hosted_docs():
                kept["refusal"]["docs_url"] = refusals.docs_url(failure.replace("_", "-"))
        actions.append(kept)
    whole["actions"] = actions
    whole["pipelines"] = [{**p, "error": GENERIC} if isinstance(p, dict) and p.get("error") else p
                          for p in whole.get("pipelines", [])]
    whole.pop("warnings", None)
    return whole


def exception_error(exc: BaseException) -> str:
    """What a producer is told of a publication that raised ``exc``."""
    from distributor_core.app.setup import SetupError
    from distributor_core.bundle import BundleError
    from distributor_core.config.errors import SecretError
    from distributor_core.lease import LeaseLost
    from distributor_core.storage.errors import StorageError

    if isinstance(exc, BundleError):
        return f"{refusals.CORRUPT_BUNDLE}: {exc}"
    if isinstance(exc, (SetupError, SecretError)):
        return reason(refusals.MISSING_CREDENTIAL)
    if isinstance(exc, LeaseLost):
        return reason("lease_lost")
    if isinstance(exc, StorageError):
        return reason(exc.kind.value)
    return GENERIC


def dict_error(report: dict[str, Any]) -> str:
    """:func:`report_error` for a report known only as its dictionary."""
    parts = [f"{data.get('pipeline_id')}/{data.get('destination_id')} "
             f"[{lp.display_path(str(data.get('bundle_path', '')))}]: {_dict_action_error(data)}"
             for data in report.get("actions", []) if data.get("status") == "failed"]
    return f"{len(parts)} destination(s) failed: " + "; ".join(parts) if parts else GENERIC


def _dict_action_error(data: dict[str, Any]) -> str:
    """:func:`action_error` of an action known only as its dictionary: a ``fail_*`` plan's action
    and reason, the refusal's class, or :data:`GENERIC`."""
    action = str(data.get("action") or "")
    if action.startswith("fail_"):
        return f"{action}: {data.get('reason', '')}"
    refusal = data.get("refusal")
    if isinstance(refusal, dict) and refusal.get("class") in REASONS:
        return reason(str(refusal["class"]))
    return GENERIC


__all__ = ["GENERIC", "REASONS", "action_error", "dict_error", "exception_error", "look_up", "reason", "report_dict",
           "report_error"]
