"""Hellos of thousands of boards of a few models: a catalog already checked is recognised by its bytes, never
by its name, and a refused one is refused every time it is sent."""

import pytest

from jetfleet.shared.catalog import get_catalog
from jetfleet.shared.convert import catalog_from_pb, catalog_to_pb
from jetfleet.shared.errors import InvalidArgument


def test_the_same_catalog_is_checked_once_and_any_other_catalog_on_its_own():
    msg = catalog_to_pb(get_catalog("agx-orin"))
    first = catalog_from_pb(msg)
    assert catalog_from_pb(catalog_to_pb(get_catalog("agx-orin"))) is first   # equal bytes: the same checked catalog
    renamed = catalog_to_pb(get_catalog("agx-orin"))
    renamed.name = "AGX Orin (lab variant)"                                # same model, other bytes
    other = catalog_from_pb(renamed)
    assert other is not first and other.model == first.model and other.name == "AGX Orin (lab variant)"
    assert first.name != other.name


def test_a_refused_catalog_is_refused_every_time():
    bad = catalog_to_pb(get_catalog("orin-nano"))
    bad.cpu_mhz.append(float("nan"))
    for _ in range(2):
        with pytest.raises(InvalidArgument) as e:
            catalog_from_pb(bad)
        assert e.value.field == "catalog.cpu_mhz"
