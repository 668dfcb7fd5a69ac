"""Destination state ``.distributor.json`` (core-semantics §2, §5.6, §7): schema 1 (read only,
normalised to 2), schema 2 single-owner and schema 3 shared-root; parse, validate, serialise; pure
helpers on outputs; prune planning (of outputs, and of whole bundle paths).

Owns: the state model (including the ``StateMode`` / ``ReconciliationMode`` enums), the codec
with its exact error messages, validation, the output-record helpers and prune selection.

Must not know: storage (a document comes in as bytes and goes out as bytes), comparison,
planning, execution, any shell. See ``docs/integrations/destination-state.md`` for the file
contract.
"""

from __future__ import annotations

from distributor_core.state import bundle_retention, codec, errors, model, outputs, prune, validate
from distributor_core.state.bundle_retention import *  # noqa: F403
from distributor_core.state.codec import *  # noqa: F403
from distributor_core.state.errors import *  # noqa: F403
from distributor_core.state.model import *  # noqa: F403
from distributor_core.state.outputs import *  # noqa: F403
from distributor_core.state.prune import *  # noqa: F403
from distributor_core.state.validate import *  # noqa: F403

__all__: list[str] = []
__all__ += errors.__all__
__all__ += model.__all__
__all__ += validate.__all__
__all__ += codec.__all__
__all__ += outputs.__all__
__all__ += prune.__all__
__all__ += bundle_retention.__all__
