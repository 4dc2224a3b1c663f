"""gRPC health checking and server reflection on the controller's port: what a load balancer and grpcurl use,
with no jetfleet .proto file or stub on the client's side."""

import threading
from dataclasses import replace

import grpc
import pytest
from google.protobuf import descriptor_pool, message_factory
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from jetfleet.shared.tls import init_ca, issue

from .harness import FAST_CONTROLLER, LabThread

SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING


@pytest.fixture
def lab(tmp_path):
    lt = LabThread(str(tmp_path / "data"), ["orin-nano"]).start()
    yield lt
    lt.close()


def test_health_answers_serving_for_the_server_and_each_jetfleet_service(lab):
    with grpc.insecure_channel(lab.address) as ch:
        check = health_pb2_grpc.HealthStub(ch).Check
        for service in ("", "jetfleet.v1.Operator", "jetfleet.v1.AgentLink"):
            assert check(health_pb2.HealthCheckRequest(service=service), timeout=5).status == SERVING, service
        with pytest.raises(grpc.RpcError) as e:
            check(health_pb2.HealthCheckRequest(service="jetfleet.v1.Nothing"), timeout=5)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_stopping_controller_tells_health_watchers_not_serving_before_it_goes(lab):
    seen: list[int] = []
    first = threading.Event()

    def watch() -> None:
        with grpc.insecure_channel(lab.address) as ch:
            try:
                for r in health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest(service=""), timeout=30):
                    seen.append(r.status)
                    first.set()
            except grpc.RpcError:
                pass   # the server went away after saying so

    t = threading.Thread(target=watch)
    t.start()
    assert first.wait(10)
    lab.call(lab.lab.stop_controller(grace_s=2.0))
    t.join(20)
    assert seen[0] == SERVING and NOT_SERVING in seen, seen


def call_by_reflection(channel: grpc.Channel, service: str, method: str) -> object:
    """Call a unary method knowing only its name: types from the server's reflection, as grpcurl does."""
    pool = descriptor_pool.DescriptorPool(ProtoReflectionDescriptorDatabase(channel))
    m = pool.FindServiceByName(service).methods_by_name[method]
    request, response = (message_factory.GetMessageClass(t) for t in (m.input_type, m.output_type))
    rpc = channel.unary_unary(f"/{service}/{method}", request_serializer=request.SerializeToString,
                              response_deserializer=response.FromString)
    return rpc(request(), timeout=10)


def test_reflection_lists_the_services_and_lets_a_client_without_stubs_call_them(lab):
    with grpc.insecure_channel(lab.address) as ch:
        services = set(ProtoReflectionDescriptorDatabase(ch).get_services())
        assert {"jetfleet.v1.Operator", "jetfleet.v1.AgentLink", "grpc.health.v1.Health"} <= services
        reply = call_by_reflection(ch, "jetfleet.v1.Operator", "ListDevices")
        assert [(d.device_id, d.model, d.online) for d in reply.devices] == [("orin-nano-0", "orin-nano", True)]
        assert type(reply).__module__ != "jetfleet.shared.proto.operator_pb2"   # built from reflection, not our stubs


def test_health_and_reflection_over_mutual_tls_need_a_lab_certificate(tmp_path):
    pki = tmp_path / "pki"
    init_ca(pki)
    issue(pki, "controller", "ctl", sans=["127.0.0.1"])
    issue(pki, "operator", "alice")
    cfg = replace(FAST_CONTROLLER, tls_cert=str(pki / "ctl.crt"), tls_key=str(pki / "ctl.key"), tls_ca=str(pki / "ca.crt"))
    lt = LabThread(str(tmp_path / "data"), [], config=cfg).start()
    try:
        ca = (pki / "ca.crt").read_bytes()
        alice = grpc.ssl_channel_credentials(ca, (pki / "alice.key").read_bytes(), (pki / "alice.crt").read_bytes())
        with grpc.secure_channel(lt.address, alice) as ch:
            assert health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5).status == SERVING
            assert "jetfleet.v1.Operator" in set(ProtoReflectionDescriptorDatabase(ch).get_services())
        with grpc.secure_channel(lt.address, grpc.ssl_channel_credentials(ca)) as ch:   # no client certificate
            with pytest.raises(grpc.RpcError) as e:
                health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5)
            assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        lt.close()
