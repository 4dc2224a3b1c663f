"""A lab for the job tests: an Orin Nano (or several) on accelerated emulated boards with a small reference model
in its store, precomputed target models to install, and a wait for a job to end. The models are computed once per
test run (``tests/conftest.py`` fixtures ``reference_nets`` and ``target_models``)."""

from __future__ import annotations

from jetfleet.client import OperatorClient
from jetfleet.shared.proto import operator_pb2 as op

from .harness import LabThread

SPEED = 300.0       # board seconds per wall second: a 10 s power window takes ~33 ms
NANO = "orin-nano"


def make_lab(tmp_path, reference_nets, boards=1, speed=SPEED):
    lt = LabThread(str(tmp_path / "data"), []).start()
    for _ in range(boards):
        lt.do(lambda: lt.lab.add_agent(NANO, speed=speed))
    lt.call(lt.lab.wait_online(boards))
    from jetfleet.controller.powertrain.artifacts import ModelRepo

    modes, (tn, pn) = reference_nets
    lt.do(lambda: ModelRepo(lt.lab.controller.store).save("reference", NANO, "resnet18", "", modes, tn, pn, {},
                                                          (0.0, 0.0, 0.0), None))
    return lt


def wait_job(lab, job_id, states=("done", "failed", "cancelled"), timeout_s=120.0):
    with OperatorClient(lab.address) as c:
        lab.wait(lambda: c.call("GetJob", op.GetJobRequest(job_id=job_id)).state in states, timeout_s,
                 f"job {job_id} to reach {states}")
        return c.call("GetJob", op.GetJobRequest(job_id=job_id))


def install(lab, target_models, which="fair"):
    """Put one of the precomputed target models into the lab's store (as a transfer would have)."""
    from jetfleet.controller.powertrain.artifacts import ModelRepo

    modes, ct, cp = target_models[which]
    return lab.do(lambda: ModelRepo(lab.lab.controller.store).save(
        "transfer", NANO, "mobilenet_v3", "test-reference", modes, ct.net, cp.net, {"power_cv_mape_pct": cp.cv_mape},
        (0.0, 0.0, 0.0), (ct.calibration, cp.calibration)))
