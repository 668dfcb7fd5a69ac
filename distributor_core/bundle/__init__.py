"""The source bundle contract: manifest model, canonical digest, parse/marshal, validation
(manifest-only and on disk), ``build_manifest``, ``write_manifest`` and ``write_bundle``.

See ``docs/integrations/source-bundle.md`` for the producer contract and
``docs/consumers/bundle.md`` for the Python producer API.

Owns: everything a producer and a consumer agree on about a bundle. ``digest`` and ``codec`` are
pure; ``disk`` / ``write`` / ``build`` touch only a local directory the caller names.

Must not know: destinations, state, storage backends, any shell.
"""

from __future__ import annotations

from distributor_core.bundle import admission, build, codec, digest, disk, errors, model, paths, validate, verify, write
from distributor_core.bundle.admission import *  # noqa: F403
from distributor_core.bundle.build import *  # noqa: F403
from distributor_core.bundle.codec import *  # noqa: F403
from distributor_core.bundle.digest import *  # noqa: F403
from distributor_core.bundle.disk import *  # noqa: F403
from distributor_core.bundle.errors import *  # noqa: F403
from distributor_core.bundle.model import *  # noqa: F403
from distributor_core.bundle.paths import *  # noqa: F403
from distributor_core.bundle.validate import *  # noqa: F403
from distributor_core.bundle.verify import *  # noqa: F403
from distributor_core.bundle.write import *  # noqa: F403

__all__: list[str] = []
__all__ += errors.__all__
__all__ += model.__all__
__all__ += paths.__all__
__all__ += digest.__all__
__all__ += validate.__all__
__all__ += codec.__all__
__all__ += verify.__all__
__all__ += disk.__all__
__all__ += build.__all__
__all__ += write.__all__
__all__ += admission.__all__
