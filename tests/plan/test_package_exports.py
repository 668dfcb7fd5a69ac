"""The ``bundle``, ``plan`` and ``state`` packages export their submodules' public names: every
name resolves to its defining submodule's object, and each submodule is importable as a module
under its own name (no submodule is named like a function it exports)."""

from __future__ import annotations

import importlib
import sys
import types

import pytest

import distributor_core.bundle as bundle
import distributor_core.plan as plan
import distributor_core.state as state


@pytest.mark.parametrize("package", [bundle, plan, state], ids=["bundle", "plan", "state"])
def test_every_public_name_resolves_to_its_submodule_object(package) -> None:
    assert len(set(package.__all__)) == len(package.__all__)
    for name in package.__all__:
        value = getattr(package, name)
        assert not isinstance(value, types.ModuleType), f"{package.__name__}.{name} is a module"
        if isinstance(value, type | types.FunctionType):  # a class or function: its defining module's object
            assert value.__module__.startswith(package.__name__ + ".")
            assert getattr(sys.modules[value.__module__], value.__name__) is value
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        package.no_such_name  # noqa: B018


def test_the_planner_module_and_the_decide_function_are_distinct() -> None:
    planner = importlib.import_module("distributor_core.plan.planner")
    assert isinstance(planner, types.ModuleType)
    assert plan.decide is planner.decide and isinstance(plan.decide, types.FunctionType)
