"""The policy modes are enums (issue 16 item 2): the config accepts exactly their values, and a
member serialises as its plain string wherever reports and state are written."""

from __future__ import annotations

import json

import pytest

from distributor_core import jsonfmt
from distributor_core.config import models
from distributor_core.config.shape import field
from distributor_core.plan.modes import (
    ConflictChoice,
    LinkPrimary,
    MarkdownMode,
    NewerChoice,
    OlderChoice,
    PathMapping,
    ReconciliationMode,
    SameChoice,
    StateMode,
    TakeoverMode,
    choices,
    coerce,
)

#: config choice tuple -> the enum planning turns it into (``generated`` is planning's alias of
#: ``html`` for hand-built requests; the config offers the canonical three)
CONFIG_CHOICES = [
    (field(models.MarkdownToHTML, "mode").choices, MarkdownMode, ()),
    (field(models.PathMappingPolicy, "mode").choices, PathMapping, ()),
    (field(models.LinksPolicy, "primary").choices, LinkPrimary, (LinkPrimary.GENERATED,)),
    (field(models.StatePolicy, "mode").choices, StateMode, ()),
    (field(models.ReconciliationPolicy, "mode").choices, ReconciliationMode, ()),
    (field(models.TakeoverPolicy, "mode").choices, TakeoverMode, ()),
    (field(models.TransferPolicy, "on_destination_same").choices, SameChoice, ()),
    (field(models.TransferPolicy, "on_destination_older").choices, OlderChoice, ()),
    (field(models.TransferPolicy, "on_destination_newer").choices, NewerChoice, ()),
    (field(models.TransferPolicy, "on_conflict").choices, ConflictChoice, ()),
]


@pytest.mark.parametrize(("configured", "kind", "aliases"), CONFIG_CHOICES, ids=lambda v: getattr(v, "__name__", None))
def test_config_choices_are_the_enum_members_in_order(configured, kind, aliases):
    assert tuple(configured) == tuple(member.value for member in kind if member not in aliases)


@pytest.mark.parametrize("kind", [kind for _, kind, _ in CONFIG_CHOICES], ids=lambda k: k.__name__)
def test_every_member_is_its_string_in_json_and_reports(kind):
    members = list(kind)
    values = [member.value for member in members]
    document = {"modes": members, "records": [{"mode": member} for member in members]}
    plain = {"modes": values, "records": [{"mode": value} for value in values]}
    assert json.dumps(document) == json.dumps(plain)
    assert jsonfmt.dumps_indented(document) == jsonfmt.dumps_indented(plain)
    assert [f"{member}" for member in members] == [str(member) for member in members] == values


def test_coerce_names_the_field_and_its_choices():
    assert coerce(TakeoverMode, "never", "takeover.mode") is TakeoverMode.NEVER
    with pytest.raises(ValueError, match=r"^takeover\.mode must be same_pipeline, same_source, any_managed or never$"):
        coerce(TakeoverMode, "sometimes", "takeover.mode")
    assert choices(PathMapping) == "preserve_relative or fixed"
