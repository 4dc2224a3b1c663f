"""The fleet's state in Prometheus, moved board by board as boards come, go and are forgotten: the per-model
counts of `jetfleet_agents`, each board's `jetfleet_board_online`, and a board's idle power as the lowest it
has reported (kept at ingest, not recomputed from every window on every tick)."""

from __future__ import annotations

from dataclasses import replace

from prometheus_client import generate_latest

from jetfleet.shared.columns import columns_from_samples
from jetfleet.shared.convert import sample_to_pb
from jetfleet.shared.proto import agent_pb2
from jetfleet.twin.board import EmulatedBoard

from .harness import FAST_CONTROLLER, LabThread


def agents(lt: LabThread) -> dict[tuple[str, str], float]:
    """jetfleet_agents as a scrape shows it: (board model, state) -> boards."""
    text = generate_latest(lt.lab.controller.metrics.registry).decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("jetfleet_agents{"):
            labels = dict(kv.split("=") for kv in line[len("jetfleet_agents{"):line.index("}")].split(","))
            out[(labels["board_model"].strip('"'), labels["state"].strip('"'))] = float(line.rsplit(" ", 1)[1])
    return out


def test_counts_and_states_follow_boards_coming_going_and_forgotten(tmp_path):
    lt = LabThread(str(tmp_path / "data"), ["agx-orin", "agx-orin", "orin-nano"]).start()
    try:
        lt.call(lt.lab.wait_online())
        assert agents(lt) == {("agx-orin", "online"): 2, ("orin-nano", "online"): 1}
        nano = next(a for a in lt.lab.agents if a.board.model == "orin-nano")
        lt.call(nano.stop())
        lt.wait(lambda: not lt.online(nano.device_id), 10, "the nano to go offline")
        assert agents(lt) == {("agx-orin", "online"): 2, ("orin-nano", "offline"): 1}
        lt.call(lt.registry.forget(nano.device_id))
        assert agents(lt) == {("agx-orin", "online"): 2}   # a count that reaches 0 goes
        text = generate_latest(lt.lab.controller.metrics.registry).decode()
        assert nano.device_id not in text
        orin = lt.lab.agents[0]
        lt.call(orin.stop())
        lt.wait(lambda: not lt.online(orin.device_id), 10, "an orin to go offline")
        assert agents(lt) == {("agx-orin", "online"): 1, ("agx-orin", "offline"): 1}
        lt.do(orin.start)   # the same board again: online, counted once
        lt.wait(lambda: lt.online(orin.device_id), 10, "the orin to come back")
        assert agents(lt) == {("agx-orin", "online"): 2}
        assert f'jetfleet_board_online{{board_model="agx-orin",device="{orin.device_id}"}} 1.0' in \
            generate_latest(lt.lab.controller.metrics.registry).decode()
    finally:
        lt.close()


def test_idle_power_is_the_lowest_ever_reported_after_the_window_has_moved_on(tmp_path):
    """One low batch, then enough higher ones to push it out of a 5-sample window, with no fleet tick in
    between: the board's idle power is still the low one, whether it came as samples or as columns."""
    lt = LabThread(str(tmp_path / "data"), ["orin-nano"], config=replace(FAST_CONTROLLER, telemetry_window=5,
                                                                          fleet_period_s=3600)).start()
    try:
        lt.call(lt.lab.wait_online())
        dev = lt.lab.agents[0].device_id
        lt.call(lt.lab.agents[0].stop())          # only the batches below from now on
        lt.wait(lambda: not lt.online(dev), 10, "the board to go offline")
        catalog = lt.registry.get(dev).catalog
        board = EmulatedBoard("orin-nano", 7)
        board.run_minibatches("resnet18", 50)
        busy = board.trace(board.now_s() - 2.0, board.now_s(), 0.1)
        low = min(s.total_w for s in busy)
        idle = [replace(s, total_w=low / 2, rails_w={k: v / 2 for k, v in s.rails_w.items()}) for s in busy[:2]]
        hub = lt.telemetry

        def ingest(samples, as_columns):
            batch = (agent_pb2.TelemetryBatch(columns=columns_from_samples(samples)) if as_columns else
                     agent_pb2.TelemetryBatch(samples=[sample_to_pb(s) for s in samples]))
            lt.do(lambda: hub.ingest(dev, catalog, batch))

        ingest(idle, as_columns=False)
        for i in range(4):                          # 20 busy samples: the idle ones left the window long ago
            ingest(busy[5 * i:5 * i + 5], as_columns=i % 2 == 1)
        assert min(s.total_w for s in lt.do(lambda: hub.window(dev))) >= low
        assert lt.do(lambda: hub.lowest_w(dev)) == idle[0].total_w
        ingest([replace(s, total_w=low / 4, rails_w={k: v / 4 for k, v in s.rails_w.items()}) for s in busy[:1]],
               as_columns=True)
        for i in range(4):
            ingest(busy[5 * i:5 * i + 5], as_columns=i % 2 == 0)
        assert lt.do(lambda: hub.lowest_w(dev)) == low / 4   # from a column block too
        assert lt.do(lambda: hub.last_w(dev)) == busy[19].total_w == lt.do(lambda: hub.last(dev)).total_w
        caps = lt.lab.controller.fleet
        lt.do(caps.refresh)                                   # the first look since the low samples left the window
        assert caps.idle_w(dev) == low / 4
    finally:
        lt.close()


def test_a_board_profiling_for_a_campaign_is_held_by_it_until_the_campaign_ends(tmp_path):
    """What the fleet queue asks per board per tick: the board's lease is the campaign's while it profiles there, and
    free once it ends."""
    from jetfleet.client import OperatorClient

    lt = LabThread(str(tmp_path / "data"), []).start()
    try:
        lt.do(lambda: lt.lab.add_agent("orin-nano", speed=20.0))   # a mode takes ~0.2 s: the campaign runs a while
        lt.call(lt.lab.wait_online(1))
        dev = lt.lab.agents[0].device_id
        leases = lt.lab.controller.leases

        def held_by() -> str | None:
            holder = leases.holder(dev)
            return None if holder is None else holder.kind

        assert lt.do(held_by) is None
        with OperatorClient(lt.address) as c:
            camp = c.create_campaign(workload="resnet18", modes="random:200", minibatches=40, device_id=dev)
            lt.wait(lambda: lt.do(held_by) == "campaign", 10, "the campaign to hold the board")
            c.cancel_campaign(camp.campaign_id)
        lt.wait(lambda: lt.do(held_by) is None, 10, "the board to be free again")
    finally:
        lt.close()
