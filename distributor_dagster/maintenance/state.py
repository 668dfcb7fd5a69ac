"""``load_state``: the first step of the prune and repair jobs. It resolves the bundle selection
and reads each selected ``.distributor.json`` without a lock, so the run view shows what the job
works on and a missing or invalid state fails the run before any planning."""


from dataclasses import dataclass, field

import dagster as dg

from distributor_core import paths as lp
from distributor_core.app.guard import read_state
from distributor_core.app.selection import SelectionError, check_bundle_selection, discover_state_bundles
from distributor_core.config import Destination, Pipeline
from distributor_core.state import SharedRootState, StateDocument, StateError
from distributor_core.storage.errors import StorageError
from distributor_core.storage.factory import open_destination_storage
from distributor_dagster.maintenance.config import BundleSelectionConfig, node_config
from distributor_dagster.site import Site


@dataclass(frozen=True)
class StateSelection:
    """The bundle paths a prune or repair run works on, and the loading errors of ``all_bundles``."""

    bundle_paths: tuple[str, ...]
    all_bundles: bool
    errors: dict[str, str] = field(default_factory=dict)


def describe_state(bundle_path: str, document: StateDocument) -> str:
    where = lp.display_path(bundle_path)
    count = len(document.outputs)
    if isinstance(document, SharedRootState):
        owners = ", ".join(f"{o.pipeline_id}/{o.destination_id}" for o in document.owners)
        return f"{where}: shared-root state v{document.schema_version}, {count} output(s), owners {owners}"
    owner = f"{document.pipeline_id}/{document.destination_id}"
    return f"{where}: single-owner state v{document.schema_version}, {count} output(s), owner {owner}"


def load_state_op(
    site: Site,
    pipeline: Pipeline,
    destination: Destination,
    *,
    name: str,
    config_node: str,
    config_type: type[BundleSelectionConfig],
) -> dg.OpDefinition:
    @dg.op(
        name=name,
        description=f"Read the .distributor.json of the selected bundle path(s) of {pipeline.id}/{destination.id} "
        f"(selection from ops.{config_node}.config).",
        tags={"distributor/destination": destination.id},
    )
    def load_state(context: dg.OpExecutionContext) -> StateSelection:
        selection = config_type.model_validate(node_config(context.run_config, config_node))
        try:
            bundle = check_bundle_selection(selection.bundle_path, selection.all_bundles)
        except SelectionError as exc:
            raise dg.Failure(str(exc)) from None
        errors: dict[str, str] = {}
        with open_destination_storage(destination, site.environment(), dry_run=True) as storage:
            paths = discover_state_bundles(storage) if selection.all_bundles else [bundle]
            for path in paths:
                try:
                    context.log.info(describe_state(path, read_state(storage, path).document))
                except (StorageError, StateError) as exc:
                    if not selection.all_bundles:
                        raise dg.Failure(str(exc)) from None
                    errors[path] = str(exc)
                    context.log.warning(f"{lp.display_path(path)}: {exc}")
        if selection.all_bundles:
            context.log.info(f"{len(paths)} bundle path(s) with state under {destination.storage.root_path}")
        return StateSelection(tuple(paths), selection.all_bundles, errors)

    return load_state
