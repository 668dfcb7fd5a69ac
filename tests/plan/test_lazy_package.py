"""The ``plan`` and ``state`` packages export their names lazily (issue 17 start-up): every public
name still resolves to its submodule's object, and the ``plan.decide`` function is not shadowed
by the submodule of the same name however the submodule gets imported."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

import distributor_core.plan as plan
import distributor_core.state as state


@pytest.mark.parametrize("package", [plan, state], ids=["plan", "state"])
def test_every_public_name_resolves_to_its_submodule_object(package) -> None:
    for name in package.__all__:
        value = getattr(package, name)
        assert not isinstance(value, types.ModuleType), f"{package.__name__}.{name} is a module"
        if isinstance(value, type | types.FunctionType):  # a class or function: its defining module's object
            assert value.__module__.startswith(package.__name__ + ".")
            assert getattr(sys.modules[value.__module__], value.__name__) is value
        assert name in dir(package)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        package.no_such_name  # noqa: B018


def test_a_light_submodule_does_not_import_its_heavy_siblings() -> None:
    probe = (
        "import sys, distributor_core.plan.model, distributor_core.state.fastcheck;"
        # msgspec is not among them: the config models (and PlannedOutput) are msgspec Structs
        "print(sorted(m for m in ('distributor_core.plan.decide', 'distributor_core.state.codec')"
        " if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_decide_stays_the_function_after_its_submodule_is_imported_directly() -> None:
    probe = (
        "import types, distributor_core.plan.decide as first;"
        "from distributor_core.plan import decide;"
        "import distributor_core.plan as plan;"
        "from distributor_core.plan.decide import decide as real;"
        "print(decide is real, plan.decide is real, first is real, isinstance(decide, types.FunctionType))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", "True", "True"]
