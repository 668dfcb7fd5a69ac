"""Lazy package exports (PEP 562): a package's public names, each imported from its submodule on
first use, so importing one light submodule (``plan.model``, ``state.fastcheck``) does not import
its heavy siblings (``plan.decide``, ``state.codec`` with msgspec). Keeps ``distributor run``'s
fixed cost down (issue 17, start-up).

Usage, in a package ``__init__``: the real imports under ``if TYPE_CHECKING:`` (for type checkers
and the import-linter contracts), then::

    __getattr__, __dir__ = lazy_exports(__name__, {"codec": ("marshal_state", ...), ...})
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, Iterable[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``exports`` maps a submodule (relative name)
    to the public names it provides."""
    owner = {name: sub for sub, names in exports.items() for name in names}
    module = sys.modules[package]
    namespace = module.__dict__
    shadowed = frozenset(name for name in owner if name in exports)
    if shadowed:
        # ``plan.decide`` is both a submodule and the function the package exports: importing the
        # submodule makes the import system set the package attribute to the module, which an
        # eager ``from .decide import decide`` used to overwrite. Keep the export instead.
        module.__class__ = _shadowing_module(shadowed)

    def __getattr__(name: str) -> Any:
        sub = owner.get(name)
        if sub is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{sub}"), name)
        namespace[name] = value  # later look-ups are plain attribute reads
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *owner})

    return __getattr__, __dir__


def _shadowing_module(shadowed: frozenset[str]) -> type[types.ModuleType]:
    class _Package(types.ModuleType):
        def __setattr__(self, name: str, value: Any) -> None:
            if name in shadowed and isinstance(value, types.ModuleType):
                return
            super().__setattr__(name, value)

    return _Package
