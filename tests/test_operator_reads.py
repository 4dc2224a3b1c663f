"""`devices ls` under load (issue 28, target 1): a board's current mode is parsed once per (catalog, mode) and each
Device is built in place in the response; every board still shows the mode it runs now, with its preset's name."""

from __future__ import annotations

from jetfleet.client import OperatorClient
from jetfleet.controller.leases import Holder
from jetfleet.shared.catalog import get_catalog
from jetfleet.shared.proto import operator_pb2

from .harness import LabThread, wait_until


def test_devices_ls_shows_each_boards_own_mode_as_it_changes(store_spec):
    lab = LabThread(store_spec, ["agx-orin", "agx-orin"]).start()
    try:
        cat = get_catalog("agx-orin")
        preset = next(name for name, mode in cat.presets.items() if mode != cat.maxn)
        plain = cat.sample(1, seed=7)[0]
        with OperatorClient(lab.address) as c:
            def shown() -> dict[str, tuple[str, str | None]]:
                return {d.device_id: (str(d.current_mode), d.current_mode_name) for d in c.list_devices()}

            c.set_mode("agx-orin-0", preset)
            c.set_mode("agx-orin-1", str(plain))
            want = {"agx-orin-0": (str(cat.presets[preset]), preset), "agx-orin-1": (str(plain), None)}
            wait_until(lambda: shown() == want, 10, f"both boards' modes shown: {want}")
            c.set_mode("agx-orin-0", str(plain))   # the same catalog, the same text as the other board now
            c.set_mode("agx-orin-1", "MAXN")
            want = {"agx-orin-0": (str(plain), None), "agx-orin-1": (str(cat.maxn), cat.preset_name(cat.maxn))}
            wait_until(lambda: shown() == want, 10, f"the new modes shown: {want}")
            one = c.get_device("agx-orin-1")
            assert (str(one.current_mode), one.current_mode_name) == want["agx-orin-1"]
    finally:
        lab.close()


def test_devices_ls_kept_bytes_agree_with_each_board_built_afresh(store_spec):
    """`devices ls` joins each board's kept bytes (listing.py); after every kind of change (a sample, a mode, a
    label, a lease, a board going offline, forgotten) the listing equals the boards' Devices built field by field,
    and a board that did not change is not built again."""
    lab = LabThread(store_spec, ["orin-nano", "orin-nano"]).start()
    try:
        views = lab.lab.controller.service.views
        a, b = (x.device_id for x in lab.lab.agents)

        def both() -> tuple[operator_pb2.ListDevicesResponse, operator_pb2.ListDevicesResponse]:
            listed = views.list_devices()
            built = operator_pb2.ListDevicesResponse(devices=[views.device_pb(d) for d in lab.registry.list()])
            for resp in (listed, built):
                for d in resp.devices:
                    if d.online:   # the call's own time: checked as set, then both cleared
                        assert d.last_seen_s > 0
                        d.last_seen_s = 0
            return listed, built

        def agree(what: str) -> operator_pb2.ListDevicesResponse:
            listed, built = lab.do(both)
            assert listed == built, what
            return listed

        with OperatorClient(lab.address) as c:
            lab.wait(lambda: all(lab.telemetry.last(d) is not None for d in (a, b)), 10, "a sample of each board")
            first = agree("at start")
            kept = lab.do(lambda: views._kept[b][1])
            lab.wait(lambda: lab.do(lambda: views.list_devices()).devices[0].last_telemetry
                     != first.devices[0].last_telemetry, 10, "a newer sample listed")
            agree("after a new sample")
            cat = get_catalog("orin-nano")
            for name in [n for n, mode in cat.presets.items() if mode != cat.maxn][:1] + ["MAXN"]:
                c.set_mode(a, name)
                assert agree(f"after a mode change to {name}").devices[0].current_mode_name == (
                    cat.preset_name(cat.presets.get(name, cat.maxn)))
            c.label_device(a, {"rack": "r1"})
            assert dict(agree("after a label").devices[0].labels) == {"rack": "r1"}
            holder = Holder("job", "j1", "job j1 (test)")
            lab.do(lambda: lab.lab.controller.leases.take(a, holder))
            assert agree("while held").devices[0].held_by == "job j1 (test)"
            lab.do(lambda: lab.lab.controller.leases.release(a, holder))
            assert agree("after the lease ended").devices[0].held_by == ""
            assert lab.do(lambda: views._kept[b][1]) is kept, "a board that did not change was built again"
            lab.call(lab.lab.agents[0].stop())
            lab.wait(lambda: not lab.online(a), 10, f"{a} offline")
            assert not agree("after going offline").devices[0].online
            c.forget_device(a)
            assert [d.device_id for d in agree("after forgetting a board").devices] == [b]
            assert a not in lab.do(lambda: set(views._kept)), "a forgotten board's bytes were kept"
    finally:
        lab.close()
