"""`job submit --template NAME --arg K=V --device D --power-budget W`: the board's agent launches a command of its
own configuration (the example's plain PyTorch script on scikit-learn's digits), the job adopts the process exactly
as `--attach` does (online profiling on its steps, transfer, choice, the rest in the chosen mode), the process is
asked to stop once the job has its length and exits 0: done, with what the board counted equal to the job's length
and the process's output tail in `job show`. A template the board's agent does not have, or args it does not take,
are refused before anything is stored; a command that exits 3 fails the job naming 3 and its last line; a cancelled
job's process group is stopped on the board, also when its board was cut off from the controller at the cancel (it is
stopped once the board is back)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from jetfleet.agent.templates import parse_templates
from jetfleet.cli.main import cli
from jetfleet.client import OperatorClient
from jetfleet.shared.errors import InvalidArgument

from .harness import LabThread
from .jobs_lab import wait_job
from .netcut import CuttableProxy
from .test_attach_job import session_lab, trained_for
from .waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "own-training" / "train.py"
WAIT = "import signal\nprint('loading the data', flush=True)\nsignal.pause()"   # until a signal stops it
CRASH = "import sys\nprint('loading the data', flush=True)\nprint('CUDA out of memory', file=sys.stderr)\nsys.exit(3)"


@pytest.fixture
def lab(tmp_path, reference_nets):
    pytest.importorskip("sklearn", reason="the example's dataset ships with scikit-learn (the dev extra)")
    templates = parse_templates({"kill_grace_s": 2, "templates": {
        "digits-mlp": {"command": [sys.executable, str(EXAMPLE), "--epochs", "{epochs}"],
                       "args": {"epochs": {"type": "int", "min": 1, "max": 1000}},
                       "cwd": str(EXAMPLE.parent), "exit_wait_s": 60},
        "crash": {"command": [sys.executable, "-c", CRASH]}}}, euid=os.geteuid())
    with session_lab(tmp_path, reference_nets, templates) as lt:
        yield lt


@pytest.mark.slow
def test_a_template_job_is_launched_profiled_online_trained_and_done_when_its_process_exits_0(lab):
    (agent,) = lab.lab.agents
    with OperatorClient(lab.address) as c:
        assert c.get_device(agent.device_id).templates == {"crash": [], "digits-mlp": ["epochs"]}
        job = c.submit_job("digits-mlp", device_id=agent.device_id, power_budget_w=9.0, minibatches=800,
                           profile_modes=10, attach_timeout_s=120, template="digits-mlp",
                           template_args={"epochs": "1000"})
        final = wait_job(lab, job.job_id, timeout_s=300)
    assert final.state == "done", final.detail
    assert final.minibatches_done == 800 == trained_for(agent, job.job_id)    # judged on the board
    launched = agent.link.executor.launcher.launches[job.job_id]
    assert launched.returncode == 0 and launched.trained == 800               # it was asked to stop, and did
    assert final.template == "digits-mlp"
    assert "the agent asked to stop: the job has trained its length" in final.output_tail, final.output_tail
    assert "online profiling: 200 of its own steps" in final.detail, final.detail   # 10 modes x (10 + 10): online.plan
    assert lab.lab.controller.leases.holder(agent.device_id) is None
    text = CliRunner().invoke(cli, ["job", "show", job.job_id, "--controller", lab.address]).output
    assert "output of the launched 'digits-mlp' (last " in text and "| the agent asked to stop" in text, text


def test_a_template_or_args_the_boards_agent_does_not_take_are_refused_before_anything_is_stored(lab):
    (agent,) = lab.lab.agents
    cases = (({"template": "rm-rf"}, "template", "not in"),
             ({"template": "digits-mlp"}, "template_args.epochs", "needs --arg epochs=VALUE"),
             ({"template": "digits-mlp", "template_args": {"epochs": "3", "lr": "1"}}, "template_args.lr", "no arg"),
             ({"template": "digits-mlp", "template_args": {"epochs": "$(reboot)"}}, "template_args.epochs", "letters"),
             ({"template": "digits-mlp", "template_args": {"epochs": "many"}}, "template_args.epochs",
              "allowed an integer in 1..1000"),   # the rule of the agent's configuration, from its hello
             ({"template": "digits-mlp", "template_args": {"epochs": "3"}, "attach": True}, "attach", "not both"),
             ({"template_args": {"epochs": "3"}}, "template_args", "--template"))
    with OperatorClient(lab.address) as c:
        for kw, field, words in cases:
            with pytest.raises(InvalidArgument) as e:
                c.submit_job(kw.get("template", "digits-mlp"), device_id=agent.device_id, power_budget_w=9.0,
                             minibatches=1000, profile_modes=10, **kw)
            assert e.value.field == field and words in e.value.message, (field, e.value.message)
        assert c.list_jobs() == []
    assert agent.link.executor.launcher.launches == {}                         # nothing started
    shown = CliRunner().invoke(cli, ["devices", "show", agent.device_id, "--controller", lab.address]).output
    assert "template digits-mlp (job submit --template digits-mlp --arg epochs=<an integer in 1..1000>)" in shown, shown


def test_a_launched_command_that_exits_3_fails_the_job_naming_3_and_its_last_line(lab):
    (agent,) = lab.lab.agents
    with OperatorClient(lab.address) as c:
        job = c.submit_job("crash", device_id=agent.device_id, power_budget_w=9.0, minibatches=1000,
                           profile_modes=10, template="crash")
        final = wait_job(lab, job.job_id, timeout_s=60)
    assert final.state == "failed"
    assert "exited with status 3" in final.detail and "its output ends: CUDA out of memory" in final.detail, final.detail
    assert lab.lab.controller.leases.holder(agent.device_id) is None


@pytest.mark.slow
def test_cancelling_a_template_job_stops_its_process_on_the_board(lab):
    (agent,) = lab.lab.agents
    with OperatorClient(lab.address) as c:
        job = c.submit_job("digits-mlp", device_id=agent.device_id, power_budget_w=9.0, minibatches=5000,
                           profile_modes=10, attach_timeout_s=120, template="digits-mlp",
                           template_args={"epochs": "1000"})
        lab.wait(lambda: trained_for(agent, job.job_id) > 60, 120, "profiling on the launched process's steps")
        c.cancel_job(job.job_id)
        assert wait_job(lab, job.job_id, timeout_s=60).state == "cancelled"
    launched = agent.link.executor.launcher.launches[job.job_id]
    wait_until(lambda: launched.returncode is not None, 30, "the launched process to be stopped")
    assert launched.returncode < 0 and launched.stopped                       # by a signal, from the agent




@contextlib.contextmanager
def cuttable_lab(tmp_path: Path, reference_nets) -> Iterator[tuple[LabThread, CuttableProxy]]:  # type: ignore[no-untyped-def]
    """A session lab whose agent reaches the controller only through a proxy the test can cut, and may launch the
    "wait" template (a process that never opens its training session: its job waits for it)."""
    templates = parse_templates({"kill_grace_s": 2, "templates": {"wait": {"command": [sys.executable, "-c", WAIT]}}},
                                euid=os.geteuid())
    proxies: list[CuttableProxy] = []

    def dial(address: str) -> str:
        proxies.append(CuttableProxy(address))
        return proxies[-1].address

    try:
        with session_lab(tmp_path, reference_nets, templates, dial=dial) as lab:
            yield lab, proxies[0]
    finally:
        for p in proxies:
            p.close()


def launch_waiting(lab: LabThread, c: OperatorClient) -> tuple[str, Any]:
    """Submit a "wait" template job on the lab's board; its id and what the board launched for it."""
    (agent,) = lab.lab.agents
    job = c.submit_job("wait", device_id=agent.device_id, power_budget_w=9.0, minibatches=1000, profile_modes=10,
                       attach_timeout_s=600, template="wait")
    launches = agent.link.executor.launcher.launches
    lab.wait(lambda: job.job_id in launches, 30, "the agent to launch the template")
    return job.job_id, launches[job.job_id]


def cut_off(lab: LabThread, proxy: CuttableProxy) -> None:
    proxy.cut()
    lab.wait(lambda: not lab.online(lab.lab.agents[0].device_id), 30, "the board offline at the controller")


def test_a_template_job_waits_out_its_board_being_cut_off_and_a_cancel_it_missed_stops_its_process_once_back(
        tmp_path, reference_nets):
    with cuttable_lab(tmp_path, reference_nets) as (lab, proxy), OperatorClient(lab.address) as c:
        job_id, launched = launch_waiting(lab, c)
        # cut off while profiling online: the job waits for its board instead of failing
        cut_off(lab, proxy)
        lab.wait(lambda: c.get_job(job_id).state == "queued", 30, "the job waiting for its board")
        assert any(st == "queued" and "went away while profiling online" in why for st, why, _ in c.get_job(job_id).history)
        proxy.restore()
        lab.wait(lambda: c.get_job(job_id).state == "profiling", 30, "the job profiling again")
        launches = lab.lab.agents[0].link.executor.launcher.launches
        assert list(launches) == [job_id] and launched.returncode is None   # the same process, launched once
        # cut off again, and cancelled meanwhile: the board cannot be told, its process runs on
        cut_off(lab, proxy)
        c.cancel_job(job_id)
        assert wait_job(lab, job_id, timeout_s=60).state == "cancelled"
        assert launched.returncode is None
        proxy.restore()
        wait_until(lambda: launched.returncode is not None, 30, "the launched process stopped once the board is back "
                   "(its heartbeat lists the launch)")
        assert launched.returncode < 0 and launched.stopped == "its job ended without it"   # by the agent
        assert lab.lab.controller.router.superseded_cancels >= 1


def test_a_cancel_the_board_missed_stops_its_process_also_when_the_controller_restarted_meanwhile(
        tmp_path, reference_nets):
    with cuttable_lab(tmp_path, reference_nets) as (lab, proxy):
        with OperatorClient(lab.address) as c:
            job_id, launched = launch_waiting(lab, c)
            cut_off(lab, proxy)
            c.cancel_job(job_id)
            assert wait_job(lab, job_id, timeout_s=60).state == "cancelled"
        lab.call(lab.lab.stop_controller())   # what the old controller meant to cancel is gone with it
        lab.call(lab.lab.start_controller())
        assert launched.returncode is None
        proxy.restore()
        wait_until(lambda: launched.returncode is not None, 30, "the launched process stopped once the board is back "
                   "at the restarted controller")
        assert launched.returncode < 0 and launched.stopped == "its job ended without it"
        assert lab.lab.controller.router.superseded_cancels >= 1
