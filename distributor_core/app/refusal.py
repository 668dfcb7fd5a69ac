"""What an operator needs to act on a refusal or failure (issue 25 item 1), decided once here and
only rendered by the CLI (text and JSON), the upload server's run status and Dagster's failure
metadata.

A :class:`Refusal` names the failure class (also the anchor of its docs/troubleshooting.md entry),
the absolute root it happened in (a local directory, ``ssh://user@host:port/path``,
``s3://bucket/prefix``), the offending paths (absolute, the first :data:`SHOWN_PATHS` of
``count``), and the remedy in one line: the config key or command that resolves it.

The builders classify what the core decided, from facts, never from a message: a plan's
``fail_*`` action with its comparison and obstacle (:func:`for_plan`), a destination that could
not be reached or a storage failure (:func:`for_destination_error`), a typed state or storage
error of a maintenance run (:func:`for_maintenance_error`), an invalid source bundle
(:func:`for_invalid_bundle`) and a setup failure. The root and paths are the backend config's
own (:func:`root_location`).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from distributor_core import paths as lp
from distributor_core.config import LocalBackend, S3Backend, SourceBackend, SSHBackend, StorageBackend

if TYPE_CHECKING:
    from distributor_core.plan import Plan
    from distributor_core.storage.base import Storage

#: How many offending paths a refusal names; ``count`` says how many there are in all.
SHOWN_PATHS = 5
#: Bound of the walk that lists unmanaged files for a refusal (the count says ``at least``).
UNMANAGED_LISTING_LIMIT = 10_000
#: Where the troubleshooting page lives; set it to a hosted copy's address (the entry's anchor is
#: appended after ``#``) so links in reports and Dagster open in a browser. Unset, a link names
#: the page installed with distributor (``file://``, :func:`packaged_page`), which
#: ``distributor explain <class>`` prints.
DOCS_URL_ENV = "DISTRIBUTOR_TROUBLESHOOTING_URL"
#: the troubleshooting page, as the package ships it (``distributor_core/docs``, the repository's ``docs/``)
PACKAGED_PAGE = ("docs", "troubleshooting.md")

# failure classes (each is the anchor of a docs/troubleshooting.md entry, ``_`` as ``-``)
UNMANAGED_CONTENT = "unmanaged_content"
FOREIGN_OWNER = "foreign_owner"
INVALID_STATE = "invalid_state"
SOURCE_CONFLICT = "source_conflict"
CORRUPT_BUNDLE = "corrupt_bundle"
MISSING_CREDENTIAL = "missing_credential"
UNREACHABLE_ROOT = "unreachable_root"
UNTRUSTED_HOST_KEY = "untrusted_host_key"
MISSING_SOURCE_ROOT = "missing_source_root"
LOCKED = "locked"
MISSING_STATE = "missing_state"
AUDIT_PROBLEMS = "audit_problems"

FAILURE_CLASSES = (
    UNMANAGED_CONTENT, FOREIGN_OWNER, INVALID_STATE, SOURCE_CONFLICT, CORRUPT_BUNDLE, MISSING_CREDENTIAL,
    UNREACHABLE_ROOT, UNTRUSTED_HOST_KEY, MISSING_SOURCE_ROOT, LOCKED, MISSING_STATE, AUDIT_PROBLEMS,
)


def packaged_page() -> Path:
    """The troubleshooting page installed with distributor (a file every installation has)."""
    from importlib import resources

    return Path(str(resources.files("distributor_core").joinpath(*PACKAGED_PAGE)))


def hosted_docs() -> str:
    """``DISTRIBUTOR_TROUBLESHOOTING_URL`` without an anchor ("" when unset)."""
    return os.environ.get(DOCS_URL_ENV, "").strip().split("#", 1)[0]


def docs_url(anchor: str) -> str:
    """The troubleshooting entry ``anchor``: on the page ``DISTRIBUTOR_TROUBLESHOOTING_URL`` names,
    else on the page installed with distributor (a ``file://`` URL)."""
    return f"{hosted_docs() or packaged_page().as_uri()}#{anchor}"


def explain_command(failure: str) -> str:
    """The command that prints the troubleshooting entry of ``failure``."""
    return f"distributor explain {failure}"


#: How remedies name the config file: ``--config FILE`` until the shell that loaded a config says
#: which one (:func:`name_config`: the CLI for its ``--config``, the Dagster code location for
#: ``DISTRIBUTOR_CONFIG``); a process serves one config, so a remedy can be copied and run as it is.
_config_argument = "--config FILE"


def name_config(path: str | os.PathLike[str]) -> None:
    """Remedies built from now on name ``path`` (absolute, shell-quoted) as their ``--config``."""
    global _config_argument
    _config_argument = f"--config {shlex.quote(os.path.abspath(os.fspath(path)))}"


class Refusal(msgspec.Struct, frozen=True):
    """One refusal or failure, as an operator acts on it."""

    failure: str
    #: the absolute root (source or destination) it happened in
    root: str
    #: the remedy, one line: the config key or command that resolves it
    remedy: str
    #: absolute offending paths, the first :data:`SHOWN_PATHS`
    paths: tuple[str, ...] = ()
    #: how many offending paths there are (``len(paths)`` or more)
    count: int = 0
    #: ``count`` is a lower bound (the listing stopped at its limit)
    count_is_minimum: bool = False

    @property
    def anchor(self) -> str:
        return self.failure.replace("_", "-")

    @property
    def docs_url(self) -> str:
        return docs_url(self.anchor)

    @property
    def explain(self) -> str:
        """``distributor explain <class>``: the command that prints this class's entry."""
        return explain_command(self.failure)

    def paths_text(self) -> str:
        """``a, b and 3 more`` (empty without paths)."""
        if not self.paths:
            return ""
        text = ", ".join(self.paths)
        more = self.count - len(self.paths)
        if more > 0:
            text += f" and {'at least ' if self.count_is_minimum else ''}{more} more"
        return text

    def sentence(self) -> str:
        """``root <root>; paths (<n>): <paths>; remedy: <remedy>; more: distributor explain <class>``
        (and ``; see <url>`` where the page is hosted, ``DISTRIBUTOR_TROUBLESHOOTING_URL``)."""
        parts = [f"root {self.root}"]
        if self.paths:
            count = f"{self.count}{'+' if self.count_is_minimum else ''}"
            parts.append(f"paths ({count}): {self.paths_text()}")
        parts.append(f"remedy: {self.remedy}")
        parts.append(f"more: {self.explain}")
        if hosted_docs():
            parts.append(f"see {self.docs_url}")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "class": self.failure,
            "root": self.root,
            "paths": list(self.paths),
            "count": self.count,
            "count_is_minimum": self.count_is_minimum,
            "remedy": self.remedy,
            "explain": self.explain,
            "docs_url": self.docs_url,
        }

    def fields(self) -> dict[str, Any]:
        """The ``key=value`` fields of a text report's ``Refusal:`` line."""
        fields: dict[str, Any] = {"class": self.failure, "root": self.root}
        if self.paths:
            fields["paths"] = ",".join(self.paths)
            fields["count"] = f"{self.count}{'+' if self.count_is_minimum else ''}"
        fields["remedy"] = self.remedy
        fields["explain"] = self.explain
        fields["docs"] = self.docs_url
        return fields


def _join(*parts: str) -> str:
    return "/".join(part.strip("/") for part in parts if part.strip("/"))


#: where a refusal happened: a source's or destination's config (each backend names its own root,
#: :meth:`~distributor_core.config.LocalBackend.location`), or an upload's staged bundle (a
#: directory, or a URL in a shared ``s3://`` staging store)
Where = SourceBackend | str | os.PathLike[str]


def root_location(where: Where) -> str:
    """The root as an operator types it: the backend's location (the absolute local directory,
    ``ssh://user@host:port/path`` or ``s3://bucket/prefix``), with the endpoint of an S3-compatible
    service (``at <endpoint>``); a staged bundle's directory made absolute, its URL as it is."""
    if isinstance(where, str) and "://" in where:
        return where
    if isinstance(where, str | os.PathLike):
        return os.path.abspath(os.fspath(where))
    return where.location() + where.endpoint_note


def absolute(where: Where, path: str) -> str:
    """``path`` (root-relative) under the absolute root."""
    if isinstance(where, str | os.PathLike):
        base = root_location(where)
        return os.path.join(base, path) if path else base
    return where.location(path)


def _shown(paths: Sequence[str], count: int | None = None, *, minimum: bool = False) -> dict[str, Any]:
    total = len(paths) if count is None else count
    return {"paths": tuple(paths[:SHOWN_PATHS]), "count": total, "count_is_minimum": minimum}


def _scope(pipeline_id: str, destination_id: str) -> str:
    return f"{_config_argument} --pipeline {pipeline_id} --destination {destination_id}"


def unmanaged_content(
    storage: StorageBackend, pipeline_id: str, destination_id: str, relative: Sequence[str], *, minimum: bool = False,
    count: int | None = None, bundle_path: str = "",
) -> Refusal:
    """Files in a destination that no state records (``relative`` to the root) in the
    destination bundle path ``bundle_path``."""
    scope = _scope(pipeline_id, destination_id)
    bundle = f" --bundle {shlex.quote(bundle_path)}" if bundle_path.strip("/") not in ("", ".") else ""
    return Refusal(
        UNMANAGED_CONTENT, root_location(storage),
        remedy=(
            f"remove or move these files, replace them once with `distributor run {scope} --force` "
            f"(Dagster: force: true), or adopt identical copies with "
            f"`distributor reconcile-state {scope}{bundle} --adopt` (it lists them; `--apply` records them)"
        ),
        **_shown([absolute(storage, p) for p in relative], count, minimum=minimum),
    )


def foreign_owner(storage: StorageBackend, destination_id: str, relative: Sequence[str], owner: str = "",
                  pipeline_id: str = "") -> Refusal:
    """Another owner's (``<pipeline>/<destination>``) state or output where ``destination_id``
    publishes. Takeover across pipelines needs ``any_managed``: ``same_pipeline`` (the default)
    takes over only a retired destination of the same pipeline."""
    whose = f"{owner}'s" if owner else "another owner's"
    same = bool(owner) and bool(pipeline_id) and owner.split("/", 1)[0] == pipeline_id
    mode = ("`takeover.mode: same_pipeline` (a retired destination of the same pipeline)" if same else
            "`takeover.mode: any_managed` (another pipeline's publication; `same_pipeline`, the default, does not "
            "take it over)")
    return Refusal(
        FOREIGN_OWNER, root_location(storage),
        remedy=(
            f"this is {whose} publication: give destination {destination_id} its own root (or path), or, after "
            f"review, let destination {destination_id} take it over with {mode}"
        ),
        **_shown([absolute(storage, p) for p in relative]),
    )


def invalid_state(storage: StorageBackend, pipeline_id: str, destination_id: str, bundle_path: str) -> Refusal:
    state = absolute(storage, lp.state_path(bundle_path))
    return Refusal(
        INVALID_STATE, root_location(storage),
        remedy=(
            f"inspect it with `distributor inspect {absolute(storage, bundle_path)}` and restore it from a backup; "
            f"or replace the whole bundle path with `distributor run {_scope(pipeline_id, destination_id)} --force` "
            "and `transfer.on_conflict: replace`"
        ),
        **_shown([state]),
    )


def source_conflict(storage: StorageBackend, pipeline_id: str, destination_id: str, bundle_path: str) -> Refusal:
    return Refusal(
        SOURCE_CONFLICT, root_location(storage),
        remedy=(
            "keep bundle ids and `created` times consistent in the producer; to replace what is there, "
            f"`distributor run {_scope(pipeline_id, destination_id)} --force` with `transfer.on_conflict: replace` "
            "(or `transfer.on_destination_newer: replace`)"
        ),
        **_shown([absolute(storage, lp.state_path(bundle_path))]),
    )


def for_plan(plan: Plan, storage_config: StorageBackend, listing: Iterable[str] | None = None, *,
             listing_truncated: bool = False) -> Refusal | None:
    """The refusal a ``fail_*`` plan stands for (``None`` for any other plan), from its facts: the
    comparison's outcome, the state it read and the plan's :class:`~distributor_core.plan.Obstacle`.

    ``listing``: for ``fail_unmanaged``, the unmanaged files of the bundle path (relative to it)
    when the caller could list them; without it the path the plan names is used.
    """
    from distributor_core.compare import Outcome
    from distributor_core.plan.model import Action, Blocker

    if not plan.action.failed:
        return None
    pipeline_id, destination_id, bundle = plan.pipeline_id, plan.destination_id, plan.bundle_path
    obstacle = plan.obstacle
    if plan.action == Action.FAIL_UNMANAGED:
        relative = [_join(bundle, p) for p in listing] if listing is not None else []
        if not relative:
            relative = [_join(bundle, obstacle.path) if obstacle is not None else bundle]
        return unmanaged_content(storage_config, pipeline_id, destination_id, relative, minimum=listing_truncated,
                                 bundle_path=bundle)
    outcome = plan.comparison.outcome
    if outcome == Outcome.INVALID_STATE:
        return invalid_state(storage_config, pipeline_id, destination_id, bundle)
    if outcome == Outcome.IDENTITY_MISMATCH:
        state = plan.existing_state
        owner = f"{state.pipeline_id}/{state.destination_id}" if state is not None else ""
        return foreign_owner(storage_config, destination_id, [lp.state_path(bundle)], owner, pipeline_id)
    if obstacle is not None and obstacle.kind is Blocker.OWNED_PATH:
        return foreign_owner(storage_config, destination_id, [_join(bundle, obstacle.path)], str(obstacle.owner),
                             pipeline_id)
    return source_conflict(storage_config, pipeline_id, destination_id, bundle)


def for_destination_error(storage_config: StorageBackend, error_kind: str, pipeline_id: str, destination_id: str,
                          bundle_path: str = "") -> Refusal | None:
    """A destination storage failure an operator can act on: unreachable (``unavailable``) or
    locked (``conflict``); ``None`` for others."""
    if error_kind == "unavailable":
        return unreachable_root(storage_config)
    if error_kind == "untrusted":
        return untrusted_host_key(storage_config)
    if error_kind == "conflict":
        return Refusal(
            LOCKED, root_location(storage_config),
            remedy=("another run, prune or reconcile-state holds this bundle path (or took it over from this one, "
                    "which stalled past its lease): run again once it has finished; the lock of a writer that died "
                    "is taken over once seen unchanged for its lease (lock_lease)"),
            **_shown([absolute(storage_config, lp.lock_path(bundle_path))]),
        )
    return None


def _reachable_local(storage: LocalBackend) -> str:
    return "check that the directory's file system is mounted and readable, then run again"


def _reachable_ssh(storage: SSHBackend) -> str:
    return (f"check that {storage.host}:{storage.port} accepts SSH connections (network, `host`, `port`, "
            "firewall) and run again")


def _reachable_s3(storage: S3Backend) -> str:
    where = f"the S3 endpoint {storage.endpoint}" if storage.endpoint else "S3"
    return f"check that {where} answers (network, `endpoint`, `region`) and run again"


#: how to check that a root answers, by the type of its config
_REACHABLE: dict[type, Callable[[Any], str]] = {
    LocalBackend: _reachable_local, SSHBackend: _reachable_ssh, S3Backend: _reachable_s3,
}


def unreachable_root(storage_config: StorageBackend) -> Refusal:
    how = _REACHABLE[type(storage_config)](storage_config)
    return Refusal(UNREACHABLE_ROOT, root_location(storage_config), remedy=f"{how}; nothing was changed there")


def untrusted_host_key(storage_config: StorageBackend) -> Refusal:
    """An SSH server whose host key is not trusted: unknown to ``known_hosts_file``, different from
    the one recorded there, or not verifiable. Nothing was sent to it."""
    if not isinstance(storage_config, SSHBackend):  # only SSH checks host keys
        return unreachable_root(storage_config)
    host, port, known = storage_config.host, storage_config.port, str(storage_config.known_hosts_file)
    name = host if port == 22 else f"[{host}]:{port}"
    return Refusal(
        UNTRUSTED_HOST_KEY, root_location(storage_config),
        remedy=(f"an unknown key: fetch it with `ssh-keyscan -p {port} {host}`, compare its fingerprint "
                f"(`ssh-keygen -lf`) with the server's own and append it to {known}, or set "
                f"`host_key_policy: accept_new` to trust it on first use; a changed key: once you know why it "
                f"changed, remove the old line (`ssh-keygen -R '{name}' -f {known}`) and add the new one; "
                "nothing was sent to the server"),
        **_shown([known]),
    )


def for_invalid_bundle(source_config: Where, bundle_path: str, file: str = "", pipeline_id: str = "") -> Refusal:
    """A source bundle whose files do not match its manifest (or whose manifest is invalid)."""
    target = _join(bundle_path, file) if file else bundle_path
    check = "`distributor validate`"
    if pipeline_id:
        bundle = shlex.quote(bundle_path.strip("/") or ".")
        check = f"`distributor validate {_config_argument} --pipeline {pipeline_id} --bundle {bundle}`"
    return Refusal(
        CORRUPT_BUNDLE, root_location(source_config),
        remedy=("rebuild the manifest with `distributor manifest create` once the files are final (producers: write "
                f"the bundle elsewhere and rename it into place); check it with {check}"),
        **_shown([absolute(source_config, target)]),
    )


def missing_credential(
    storage_config: SourceBackend, secret: str = "", key_file: str = "", config_file: str = ""
) -> Refusal:
    if key_file:
        remedy = "make the key file readable by the user running distributor, or fix `private_key_file`"
        paths = [key_file]
    elif config_file:
        remedy = "make the OpenSSH config file readable by the user running distributor, or fix `ssh_config_file`"
        paths = [config_file]
    else:
        remedy = (f"export {secret or 'the variable'} (non-empty), or put a file named {secret or 'after it'} in "
                  "`secrets.directory`; `--pipeline`/`--destination` run the others alone")
        paths = []
    return Refusal(MISSING_CREDENTIAL, root_location(storage_config), remedy=remedy, **_shown(paths))


def missing_source_root(source_config: SourceBackend) -> Refusal:
    return Refusal(
        MISSING_SOURCE_ROOT, root_location(source_config),
        remedy="fix the pipeline's `source.path` (or bucket), or create the directory: an empty source root is a "
        "run with zero bundles",
    )


def unmanaged_listing(storage: Storage, plan: Plan, *, limit: int = UNMANAGED_LISTING_LIMIT) -> tuple[list[str], bool]:
    """The files a ``fail_unmanaged`` plan is refused for, relative to its bundle path, and whether
    the listing stopped at ``limit``: every unrecorded file of the bundle path when it must hold
    nothing else (no state, or ``replace``), else the planned outputs that exist unrecorded."""
    from distributor_core.app.unmanaged import unmanaged_entries
    from distributor_core.plan.model import Blocker

    bundle = plan.bundle_path
    managed: set[str] = set()
    if plan.existing_state is not None:
        managed |= {o.path for o in plan.existing_state.outputs}
    if plan.existing_shared_root is not None:
        managed |= {o.path for o in plan.existing_shared_root.outputs}
    if plan.obstacle is not None and plan.obstacle.kind is Blocker.UNMANAGED_PATH:
        candidates = [o.path for o in plan.outputs if o.path not in managed]
        found = [p for p in candidates if storage.exists(_join(bundle, p))]
        return found, False
    entries, truncated = unmanaged_entries(storage, bundle, managed, limit=limit)
    return [entry.path for entry in entries], truncated


def for_maintenance_error(
    storage_config: StorageBackend, pipeline_id: str, destination_id: str, bundle_path: str, exc: BaseException
) -> Refusal | None:
    """The refusal behind a failed ``prune``, ``reconcile-state`` (repair, adoption) or ``audit``
    of one bundle path: no state there, state of another owner, invalid state, an unreachable or
    locked destination; ``None`` for other failures."""
    from distributor_core.state import StateError, StateOwnerError
    from distributor_core.storage.errors import ErrorKind, StorageError

    if isinstance(exc, StateError):
        if isinstance(exc, StateOwnerError):
            owner = str(exc.owner)
            refusal = foreign_owner(storage_config, destination_id, [lp.state_path(bundle_path)], owner)
            return msgspec.structs.replace(refusal, remedy=(
                f"this is {owner}'s state: select that owner (`--pipeline`/`--destination` of {owner}), or give "
                f"destination {destination_id} its own root"))
        return invalid_state(storage_config, pipeline_id, destination_id, bundle_path)
    if isinstance(exc, StorageError):
        if exc.kind == ErrorKind.NOT_FOUND and lp.basename(exc.path) == lp.STATE_FILE_NAME:
            return Refusal(
                MISSING_STATE, root_location(storage_config),
                remedy=("nothing is published at this bundle path: select one that holds state with `--bundle PATH` "
                        "(Dagster: bundle_path) or all of them with `--all-bundles`, or publish first with "
                        f"`distributor run {_scope(pipeline_id, destination_id)}`"),
                **_shown([absolute(storage_config, exc.path)]),
            )
        return for_destination_error(storage_config, exc.kind.value, pipeline_id, destination_id, bundle_path)
    return None


def audit_problems(
    storage_config: StorageBackend, pipeline_id: str, destination_id: str, bundle_path: str, outputs: Sequence[str],
    unmanaged: Sequence[str],
) -> Refusal:
    """Recorded outputs an audit found missing or changed, and unmanaged files it does not allow
    (both relative to the bundle path)."""
    scope = _scope(pipeline_id, destination_id)
    bundle = f" --bundle {bundle_path}" if bundle_path else ""
    fixes = []
    if outputs:
        fixes.append(f"restore the outputs with `distributor run {scope} --republish`, or drop their records with "
                     f"`distributor reconcile-state {scope}{bundle} --audit`")
    if unmanaged:  # first: a republish refuses a bundle path with unmanaged files in it
        fixes.insert(0, "remove the unmanaged files, adopt copies of planned outputs with "
                        f"`distributor reconcile-state {scope}{bundle} --adopt --apply`, or allow them with "
                        "`--allow-unmanaged`")
    paths = [absolute(storage_config, _join(bundle_path, path)) for path in (*outputs, *unmanaged)]
    return Refusal(AUDIT_PROBLEMS, root_location(storage_config), remedy="; ".join(fixes), **_shown(paths))
