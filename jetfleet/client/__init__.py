"""The operator API client: what the CLI, scripts and notebooks use to talk to a controller (docs/client.md).

    from jetfleet.client import connect
    with connect("127.0.0.1:50051") as c:
        for d in c.list_devices():
            print(d.device_id, d.current_mode, d.power_w)

Methods return dataclasses (``Device``, ``Campaign``, ``Model``, ``Predictions``, ``Choice``, ``Job``, ...); a
refused call raises a typed error from ``jetfleet.client.errors``. Names are loaded on first use, so importing
``jetfleet.client.settings`` (where the controller is) costs no gRPC."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Campaign": "campaigns", "ExportedProfiles": "campaigns", "ImportResult": "campaigns",
    "DEFAULT_CONTROLLER": "core", "OperatorClient": "core", "connect": "core", "controller_address": "core",
    "CatalogSummary": "devices", "Device": "devices", "SetModeResult": "devices", "TelemetrySample": "devices",
    "Job": "jobs", "JobConfirm": "jobs", "JobRun": "jobs", "JobSegment": "jobs", "JobStep": "jobs", "JobVerdict": "jobs",
    "Applied": "models", "Choice": "models", "KnobCoverage": "models", "Model": "models", "ModelCoverage": "models",
    "Prediction": "models", "Predictions": "models", "TrainingProgress": "models",
    "ProfiledWorkload": "rooflines", "RooflinePoint": "rooflines", "Rooflines": "rooflines",
    "ClientSettings": "settings", "resolve": "settings",
}
__all__ = ["DEFAULT_CONTROLLER", "Applied", "Campaign", "CatalogSummary", "Choice", "ClientSettings", "Device",
           "ExportedProfiles", "ImportResult", "Job", "JobConfirm", "JobRun", "JobSegment", "JobStep", "JobVerdict",
           "KnobCoverage",
           "Model", "ModelCoverage",
           "OperatorClient", "Prediction",
           "Predictions", "ProfiledWorkload", "RooflinePoint", "Rooflines", "SetModeResult", "TelemetrySample",
           "TrainingProgress", "connect", "controller_address", "resolve"]

if TYPE_CHECKING:
    from jetfleet.client.campaigns import Campaign, ExportedProfiles, ImportResult
    from jetfleet.client.core import DEFAULT_CONTROLLER, OperatorClient, connect, controller_address
    from jetfleet.client.devices import CatalogSummary, Device, SetModeResult, TelemetrySample
    from jetfleet.client.jobs import Job, JobConfirm, JobRun, JobSegment, JobStep, JobVerdict
    from jetfleet.client.models import (
        Applied,
        Choice,
        KnobCoverage,
        Model,
        ModelCoverage,
        Prediction,
        Predictions,
        TrainingProgress,
    )
    from jetfleet.client.rooflines import ProfiledWorkload, RooflinePoint, Rooflines
    from jetfleet.client.settings import ClientSettings, resolve


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'jetfleet.client' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"jetfleet.client.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value
