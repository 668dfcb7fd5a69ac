"""Building the :class:`~distributor_core.config.models.Config` of an already validated tree
without a pydantic schema (issue 17, start-up).

``load.py`` only gets here after ``decode`` converted every value to its type, ``defaults`` filled
every default and ``validate`` checked every rule (and worded every message), so pydantic's
validation of the finished tree can never fail; building its schema and looking up its plugins
(which imports ``importlib.metadata``) cost ~0.05 s CPU per start. :func:`construct` walks each
model's declared fields instead: nested models, ``tuple[X, ...]``, optional values, the backend
unions by their ``backend`` discriminator, and ``Path`` fields given as text; any other value is
taken as it is. A field name the model lacks, or a union value no member matches, raises
``TypeError`` (a bug, never a config error). tests/config/test_construct.py compares the result
with ``Config.model_validate`` for every example and a spread of configs.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def construct(model: type[M], data: Mapping[str, Any]) -> M:
    """``model`` built from the validated mapping ``data`` (its keys are ``model``'s fields)."""
    fields = model.model_fields
    values = {}
    for name, value in data.items():
        info = fields.get(name)
        if info is None:
            raise TypeError(f"{model.__name__} has no field {name!r}")
        values[name] = _value(info.annotation, value, info.discriminator)
    return model.model_construct(**values)


def _value(annotation: Any, value: Any, discriminator: Any = None) -> Any:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        inner, *meta = typing.get_args(annotation)
        found = next((getattr(m, "discriminator", None) for m in meta if getattr(m, "discriminator", None)), None)
        return _value(inner, value, discriminator or found)
    if origin in (types.UnionType, typing.Union):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if value is None:
            return None
        if len(members) == 1:
            return _value(members[0], value)
        if isinstance(discriminator, str) and isinstance(value, Mapping):
            for member in members:
                field = member.model_fields.get(discriminator)
                if field is not None and field.default == value.get(discriminator):
                    return construct(member, value)
        raise TypeError(f"no member of {annotation} for {value!r}")
    if origin is tuple:
        args = typing.get_args(annotation)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_value(args[0], item) for item in value)
        raise TypeError(f"unsupported tuple type {annotation}")
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if isinstance(value, annotation):
            return value
        return construct(annotation, value)
    if annotation is Path and isinstance(value, str):
        return Path(value)
    return value
