"""`jetfleet top` headless (textual's pilot) against a real in-process lab: boards, a campaign in progress, a
board that dies, sorting, drilling into a board, mutual TLS, an unreachable controller. SVG screenshots are
taken as a person would see them; `python -m tests.test_top docs` writes the ones in docs/."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

pytest.importorskip("textual", reason="the top extra (textual) is part of make install")

from jetfleet.cli.main import cli  # noqa: E402
from jetfleet.cli.top import view  # noqa: E402
from jetfleet.cli.top.app import BoardScreen, TopApp  # noqa: E402
from jetfleet.cli.top.data import Board, FleetSource  # noqa: E402
from jetfleet.client import OperatorClient  # noqa: E402
from jetfleet.shared.tls import init_ca, issue  # noqa: E402

from .harness import FAST_CONTROLLER, LabThread, free_port, until  # noqa: E402

SIZE = (160, 40)
BOARDS = ["agx-orin", "orin-nano", "agx-xavier"]


def rows(app: TopApp, table: str = "#boards") -> list[list[str]]:
    t = app.screen.query_one(table)
    return [[str(c) for c in t.get_row(r.key)] for r in t.ordered_rows]


def run_app(app: TopApp, scenario: Any) -> None:
    async def main() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await scenario(app, pilot)

    asyncio.run(main())


@pytest.fixture
def lab(tmp_path):
    lt = LabThread(str(tmp_path / "data"), [])
    lt.lab.speed = 60.0   # board seconds per wall second: a resnet18 mode takes ~0.1 s, a campaign is seen running
    lt.start()
    for model in BOARDS:
        lt.do(lambda model=model: lt.lab.add_agent(model))
    lt.call(lt.lab.wait_online(3))
    lt.wait(lambda: all(lt.telemetry.last(a.device_id) is not None for a in lt.lab.agents), 10, "telemetry")
    yield lt
    lt.close()


def test_top_shows_the_fleet_and_its_work_sorts_drills_in_and_follows_a_board_that_dies(lab, tmp_path):
    with OperatorClient(lab.address) as c:
        c.set_mode("agx-orin-0", "30W")
        camp = c.create_campaign(workload="resnet18", device_id="orin-nano-1", modes="random:400")
    app = TopApp(FleetSource(lambda: OperatorClient(lab.address)), interval_s=0.2)

    async def scenario(app: TopApp, pilot: Any) -> None:
        await until(lambda: len(rows(app)) == 3 and rows(app, "#work"), 15, "boards and the campaign on screen")
        table = {r[0]: r for r in rows(app)}
        assert [r[0] for r in rows(app)] == ["agx-orin-0", "agx-xavier-2", "orin-nano-1"]   # by device id
        cols = {name: i for i, name in enumerate(view.BOARD_COLUMNS)}
        assert table["agx-orin-0"][cols["STATE"]] == "online"
        assert table["agx-orin-0"][cols["MODE"]] == "MODE_30W (8/1728/624.75/3199)"
        assert "GPU_SOC" in table["agx-orin-0"][cols["RAILS W"]] and float(table["agx-orin-0"][cols["POWER W"]]) > 0
        assert table["orin-nano-1"][cols["WORK"]].startswith(f"campaign {camp.campaign_id[:12]}")
        work = rows(app, "#work")[0]
        assert work[:5] == ["campaign", camp.campaign_id, "resnet18", "orin-nano-1", "running"]
        assert "modes" in work[-1] and "%" in work[5]
        (tmp_path / "fleet.svg").write_text(app.export_screenshot())

        await pilot.press("s")   # by power, highest first
        await pilot.pause()
        powers = [float(r[cols["POWER W"]]) for r in rows(app)]
        assert app.sort == "power" and powers == sorted(powers, reverse=True)
        await pilot.press("r")
        await pilot.pause()
        now = [float(r[cols["POWER W"]]) for r in rows(app)]   # (readings move between two looks)
        assert app.reverse and now == sorted(now)
        assert "sorted by power (reversed)" in str(app.query_one("#summary").render())

        order = [r[0] for r in rows(app)]
        assert app.selected_board() == "agx-orin-0"   # the cursor stays on its board when the order changes
        await pilot.press("down" if order.index("agx-orin-0") < 2 else "up")
        target = order[order.index("agx-orin-0") + (1 if order.index("agx-orin-0") < 2 else -1)]
        await pilot.press("enter")   # the board under the cursor
        await until(lambda: isinstance(app.screen, BoardScreen) and app.screen.detail is not None, 10, "its screen")
        screen = app.screen
        assert isinstance(screen, BoardScreen) and screen.device_id == target
        rails = rows(app, "#rails")
        shown = {r[0]: float(r[1]) for r in rails}
        assert shown and shown == pytest.approx(screen.detail.board.rails_w, abs=0.006)
        assert max(shown.values()) <= screen.detail.board.power_w + 0.01   # every rail within the board's power
        assert rows(app, "#temps") and screen.detail.modes > 1000
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, BoardScreen)

        lab.call(lab.lab.agents[2].stop())   # agx-xavier-2's agent goes away
        await until(lambda: "offline" in {r[0]: r for r in rows(app)}["agx-xavier-2"][cols["STATE"]], 10, "offline")
        dead = {r[0]: r for r in rows(app)}["agx-xavier-2"]
        assert dead[cols["POWER W"]] == "-" and dead[cols["RAILS W"]] == "-"   # a dead board reports nothing
        assert "2/3 boards online" in str(app.query_one("#summary").render())

    run_app(app, scenario)
    svg = (tmp_path / "fleet.svg").read_text()
    assert svg.startswith("<svg") and "agx-orin-0" in svg and "resnet18" in svg


def test_top_over_mutual_tls_uses_the_operator_certificate_from_the_environment(tmp_path, monkeypatch):
    pki = tmp_path / "pki"
    init_ca(pki)
    issue(pki, "controller", "ctl", sans=["127.0.0.1"])
    issue(pki, "operator", "alice")
    cfg = replace(FAST_CONTROLLER, tls_cert=str(pki / "ctl.crt"), tls_key=str(pki / "ctl.key"), tls_ca=str(pki / "ca.crt"))
    lt = LabThread(str(tmp_path / "data"), ["orin-nano"], config=cfg)
    lt.lab.agent_config = replace(lt.lab.agent_config, tls_ca=str(pki / "ca.crt"))
    for name in ("orin-nano-0",):
        issue(pki, "agent", name)
    lt.lab.agent_config = replace(lt.lab.agent_config, tls_cert=str(pki / "orin-nano-0.crt"),
                                  tls_key=str(pki / "orin-nano-0.key"))
    lt.start()
    try:
        for var, name in (("CA", "ca.crt"), ("CERT", "alice.crt"), ("KEY", "alice.key")):
            monkeypatch.setenv(f"JETFLEET_TLS_{var}", str(pki / name))
        shot = tmp_path / "tls.svg"
        r = CliRunner().invoke(cli, ["top", "--controller", lt.address, "--screenshot", str(shot)])
        assert r.exit_code == 0, r.output
        svg = shot.read_text()
        assert "orin-nano-0" in svg and "1/1" in svg and "UNAVAILABLE" not in svg
        monkeypatch.delenv("JETFLEET_TLS_CERT")
        monkeypatch.delenv("JETFLEET_TLS_KEY")
        monkeypatch.delenv("JETFLEET_TLS_CA")   # plaintext against a TLS controller: said on screen, not a crash
        r = CliRunner().invoke(cli, ["top", "--controller", lt.address, "--screenshot", str(shot)])
        assert r.exit_code == 0 and "UNAVAILABLE" in shot.read_text()
    finally:
        lt.close()


def test_an_unreachable_controller_is_said_on_screen_and_retried():
    address = f"127.0.0.1:{free_port()}"
    app = TopApp(FleetSource(lambda: OperatorClient(address, timeout_s=2)), interval_s=0.2)

    async def scenario(app: TopApp, pilot: Any) -> None:
        await until(lambda: "unreachable" in str(app.query_one("#summary").render()), 10, "the error on screen")
        text = str(app.query_one("#summary").render())
        assert "UNAVAILABLE" in text and address in text and "retrying" in text and rows(app) == []

    run_app(app, scenario)


def test_sort_orders_put_missing_readings_last():
    a = Board("a", "agx-orin", True, "", "", 30.0, temps_c={"cpu": 50.0})
    b = Board("b", "orin-nano", False, "", "", None)
    c = Board("c", "agx-orin", True, "", "", 10.0, temps_c={"cpu": 80.0})
    ids = lambda bs: [x.device_id for x in bs]  # noqa: E731
    assert ids(view.sort_boards((a, b, c), "power")) == ["a", "c", "b"]
    assert ids(view.sort_boards((a, b, c), "temp")) == ["c", "a", "b"]
    assert ids(view.sort_boards((a, b, c), "state")) == ["b", "a", "c"]
    assert ids(view.sort_boards((a, b, c), "id", reverse=True)) == ["c", "b", "a"]
    assert view.bar(0.62) == "██████░░░░  62%" and view.duration(3725) == "1h02m" and view.duration(None) == "-"


def write_docs_screenshots(out: Path) -> None:
    """The screenshots in docs/: a lab of four boards (one gone), a campaign and a job under way."""
    import tempfile

    from jetfleet.research.powertrain.evaluate import csv_text, twin_truth

    tmp = Path(tempfile.mkdtemp())
    lt = LabThread(str(tmp / "data"), [])
    lt.lab.speed = 20.0
    lt.start()
    for model in ("agx-orin", "agx-orin", "orin-nano", "agx-xavier"):
        lt.do(lambda model=model: lt.lab.add_agent(model))
    lt.call(lt.lab.wait_online(4))
    try:
        with OperatorClient(lt.address) as c:
            (tmp / "ref.csv").write_text(csv_text(twin_truth("agx-orin", "resnet18")))
            c.import_profiles((tmp / "ref.csv").read_text(), "ref.csv")
            c.train_reference("agx-orin", "resnet18", epochs=3)
            c.set_mode("agx-orin-0", "30W")
            c.set_mode("agx-xavier-3", "MODE_15W")
            c.create_campaign(workload="yolo_v8n", device_id="agx-orin-1", modes="random:200")
            job = c.submit_job("mobilenet_v3", device_id="agx-orin-0", power_budget_w=25, minibatches=100_000,
                               window_s=2)
            lt.call(lt.lab.agents[3].stop())
            lt.wait(lambda: not lt.online("agx-xavier-3"), 10, "offline")
            def windowed() -> bool:
                return (c.get_job(job.job_id).observed_power_w or 0) > 0

            lt.wait(windowed, 300, "the job to run a full window")
        for args, name in (([], "top-fleet.svg"), (["--board", "agx-orin-0"], "top-board.svg")):
            r = CliRunner().invoke(cli, ["top", "--controller", lt.address, "--screenshot", str(out / name), *args])
            assert r.exit_code == 0, r.output
    finally:
        lt.close()


if __name__ == "__main__":
    write_docs_screenshots(Path(sys.argv[1] if len(sys.argv) > 1 else "docs"))
