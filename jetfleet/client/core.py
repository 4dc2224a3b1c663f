"""``OperatorClient``: every typed method of the operator API on one blocking client.

One mixin per area of the API; a new area (an engineer's new rpcs) is a new module with its dataclasses and a
``...Methods`` mixin, added to the bases below (docs/client.md, "Adding a method")."""

from __future__ import annotations

from jetfleet.client.base import ClientBase
from jetfleet.client.campaigns import CampaignMethods
from jetfleet.client.devices import DeviceMethods
from jetfleet.client.fleet import FleetMethods
from jetfleet.client.jobs import JobMethods
from jetfleet.client.models import ModelMethods
from jetfleet.client.rooflines import RooflineMethods
from jetfleet.client.settings import DEFAULT_CONTROLLER


class OperatorClient(DeviceMethods, CampaignMethods, ModelMethods, JobMethods, RooflineMethods, FleetMethods, ClientBase):
    """A blocking client of a jetfleet controller: typed methods returning dataclasses; a refused or failed call
    raises the matching ``jetfleet.client.errors`` error (its ``code``, ``field`` and ``message``). Use it as a
    context manager, or call ``close``."""

    def __enter__(self) -> OperatorClient:
        return self


def connect(controller: str | None = None, *, tls_ca: str | None = None, tls_cert: str | None = None,
            tls_key: str | None = None, timeout_s: float = 30.0) -> OperatorClient:
    """A client of ``controller`` (HOST[:PORT]), or of the one the environment or the config file names
    (``jetfleet.client.settings``: flag > env > config file > 127.0.0.1:50051)."""
    return OperatorClient(controller, tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key, timeout_s=timeout_s)


def controller_address(explicit: str | None) -> str:
    """The controller to dial: ``explicit`` if given, else $JETFLEET_CONTROLLER, else the config file's, else
    127.0.0.1:50051; a missing port is 50051."""
    from jetfleet.client.settings import resolve

    return resolve(explicit).controller


__all__ = ["DEFAULT_CONTROLLER", "OperatorClient", "connect", "controller_address"]
