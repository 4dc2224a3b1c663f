"""`devices ls` under load (issue 28, target 1): a board's current mode is parsed once per (catalog, mode) and each
Device is built in place in the response; every board still shows the mode it runs now, with its preset's name."""

from __future__ import annotations

from jetfleet.client import OperatorClient
from jetfleet.shared.catalog import get_catalog

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
