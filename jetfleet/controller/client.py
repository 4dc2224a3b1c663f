"""The operator API client the CLI uses (blocking gRPC). Errors come back as domain errors."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import grpc

from jetfleet.shared.grpc_errors import from_rpc_error
from jetfleet.shared.netutil import channel_credentials
from jetfleet.shared.proto import common_pb2, operator_pb2, operator_pb2_grpc

DEFAULT_CONTROLLER = "127.0.0.1:50051"


def controller_address(explicit: str | None) -> str:
    return explicit or os.environ.get("JETFLEET_CONTROLLER") or DEFAULT_CONTROLLER


class OperatorClient:
    def __init__(self, address: str, *, timeout_s: float = 30.0) -> None:
        """Mutual TLS when JETFLEET_TLS_CA, JETFLEET_TLS_CERT and JETFLEET_TLS_KEY name the lab CA and an
        operator certificate (jetfleet certs issue operator NAME)."""
        self.address = address
        self.timeout_s = timeout_s
        env = os.environ.get
        creds = channel_credentials(env("JETFLEET_TLS_CA", ""), env("JETFLEET_TLS_CERT", ""), env("JETFLEET_TLS_KEY", ""))
        self._channel = grpc.secure_channel(address, creds) if creds else grpc.insecure_channel(address)
        self._stub = operator_pb2_grpc.OperatorStub(self._channel)

    def __enter__(self) -> OperatorClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def _unary(self, method: Any, request: Any, timeout_s: float | None = None) -> Any:
        try:
            return method(request, timeout=timeout_s or self.timeout_s, wait_for_ready=False)
        except grpc.RpcError as e:
            err = from_rpc_error(e)
            details = (e.details() or "").lower()  # type: ignore[attr-defined]
            if e.code() == grpc.StatusCode.UNAVAILABLE and ("connect" in details or "dns" in details):  # type: ignore[attr-defined]
                err.message = f"controller {self.address} is unreachable ({e.details()})"  # type: ignore[attr-defined]
            raise err from None

    def list_devices(self, model: str = "") -> list[operator_pb2.Device]:
        return list(self._unary(self._stub.ListDevices, operator_pb2.ListDevicesRequest(model=model)).devices)

    def get_device(self, device_id: str) -> operator_pb2.Device:
        result: operator_pb2.Device = self._unary(self._stub.GetDevice,
                                                  operator_pb2.GetDeviceRequest(device_id=device_id))
        return result

    def set_mode(self, device_id: str, mode: str, *, request_id: str = "",
                 timeout_s: float = 30.0) -> operator_pb2.SetModeResponse:
        req = operator_pb2.SetModeRequest(device_id=device_id, mode=mode, request_id=request_id, timeout_s=timeout_s)
        result: operator_pb2.SetModeResponse = self._unary(self._stub.SetMode, req, timeout_s + 5)
        return result

    def create_campaign(self, **fields: Any) -> operator_pb2.Campaign:
        result: operator_pb2.Campaign = self._unary(self._stub.CreateCampaign,
                                                    operator_pb2.CreateCampaignRequest(**fields), 120)
        return result

    def list_campaigns(self) -> list[operator_pb2.Campaign]:
        return list(self._unary(self._stub.ListCampaigns, operator_pb2.ListCampaignsRequest()).campaigns)

    def get_campaign(self, campaign_id: str) -> operator_pb2.Campaign:
        result: operator_pb2.Campaign = self._unary(self._stub.GetCampaign,
                                                    operator_pb2.GetCampaignRequest(campaign_id=campaign_id))
        return result

    def control_campaign(self, campaign_id: str, action: str) -> operator_pb2.Campaign:
        result: operator_pb2.Campaign = self._unary(
            self._stub.ControlCampaign, operator_pb2.ControlCampaignRequest(campaign_id=campaign_id, action=action))
        return result

    def export_profiles(self, **filters: str) -> operator_pb2.ExportProfilesResponse:
        result: operator_pb2.ExportProfilesResponse = self._unary(
            self._stub.ExportProfiles, operator_pb2.ExportProfilesRequest(**filters), 300)
        return result

    def import_profiles(self, csv_text: str, name: str) -> operator_pb2.ImportProfilesResponse:
        result: operator_pb2.ImportProfilesResponse = self._unary(
            self._stub.ImportProfiles, operator_pb2.ImportProfilesRequest(csv=csv_text, name=name), 300)
        return result

    def call(self, method: str, request: Any, timeout_s: float = 600.0) -> Any:
        """Any operator RPC by name (the PowerTrain calls: TrainReference, TransferModel, Predict, ...)."""
        return self._unary(getattr(self._stub, method), request, timeout_s)

    def watch(self, device_id: str, max_samples: int = 0) -> Iterator[common_pb2.TelemetrySample]:
        call = self._stub.WatchTelemetry(operator_pb2.WatchTelemetryRequest(device_id=device_id,
                                                                            max_samples=max_samples))
        try:
            yield from call
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        finally:
            call.cancel()
