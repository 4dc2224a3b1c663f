"""The Ansible roles for real: lint, syntax, and both roles run against localhost into a temporary
prefix (systemd units rendered, not started), twice — the second run changes nothing."""

import json
import os
import re
import shutil
import stat
import sys
from pathlib import Path

import pytest

from jetfleet.shared.tls import init_ca, issue

from . import procs

ANSIBLE = Path(__file__).resolve().parents[1] / "deploy" / "ansible"
REPO = Path(__file__).resolve().parents[1]


def need(tool: str) -> str:
    path = shutil.which(tool)
    if not path:
        pytest.skip(f"{tool} is not installed (the dev extra installs ansible-core and ansible-lint)")
    return path


def test_lint_and_syntax():
    out = procs.run([need("ansible-lint"), "site.yml", "rotate-certs.yml", "roles"], cwd=ANSIBLE)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for playbook in ("site.yml", "rotate-certs.yml"):
        out = procs.run([need("ansible-playbook"), "-i", "inventory/example.yml", "--syntax-check", playbook],
                        cwd=ANSIBLE)
        assert out.returncode == 0, out.stdout + out.stderr


def render(role: str, template: str, **overrides) -> str:
    """A role template rendered the way Ansible's template module does (trim_blocks), from the role's defaults
    and vars plus ``overrides``, variables that refer to other variables expanded first."""
    import jinja2
    import yaml

    base = ANSIBLE / "roles" / role
    raw = {**yaml.safe_load((base / "defaults/main.yml").read_text()),
           **(yaml.safe_load((base / "vars/main.yml").read_text()) or {}), "inventory_hostname": "ctl.lab",
           "inventory_hostname_short": "ctl", "groups": {}, "hostvars": {}, **overrides, "ansible_managed": "managed"}
    env = jinja2.Environment(trim_blocks=True, undefined=jinja2.StrictUndefined)

    templated = {k: v for k, v in raw.items() if isinstance(v, str) and ("{{" in v or "{%" in v)}
    values = dict(raw)
    for k, v in raw.items():   # secrets the role generates on the control node (Ansible's password lookup): given here
        if k in templated and "lookup(" in v:
            values[k] = "generated-secret-0123456789abcdef" if k.endswith("_password") else "/nonexistent"
            del templated[k]

    def value(text: str) -> object:   # as Ansible does, a template that renders to a boolean's text is that boolean
        return text == "True" if text in ("True", "False") else text

    def attempt(v: str) -> object:   # a variable naming one not rendered yet is rendered in a later round
        try:
            return value(env.from_string(v).render(values))
        except jinja2.UndefinedError:
            return v

    for _ in range(20):  # variables refer to variables: render them all again until nothing changes (lazily, as Ansible)
        new = {k: attempt(v) for k, v in templated.items()}
        if all(values[k] == v for k, v in new.items()):
            break
        values.update(new)
    return env.from_string((base / "templates" / template).read_text()).render(values)


def exposure(unit_text: str, tmp_path: Path, name: str) -> float:
    analyze = need("systemd-analyze")
    unit = tmp_path / name
    unit.write_text(unit_text)
    out = procs.run([analyze, "security", "--offline=true", str(unit)])
    m = re.search(r"Overall exposure level for \S+: ([\d.]+)", out.stdout)
    assert m, out.stdout[-2000:] + out.stderr[-2000:]
    return float(m.group(1))


def test_controller_unit_is_hardened_to_exposure_4_or_less(tmp_path):
    unit = render("jetfleet_controller", "jetfleet-controller.service.j2", jetfleet_controller_pki_dir="/srv/pki",
                  jetfleet_controller_cert_name="ctl.lab", jetfleet_controller_metrics_password="pw")
    level = exposure(unit, tmp_path, "jetfleet-controller.service")
    print(f"systemd-analyze security: jetfleet-controller.service exposure {level} (limit 4.0)")
    assert level <= 4.0
    # a dynamic user cannot read root's keys: systemd hands them over as credentials (%d)
    assert "LoadCredential=tls.key:/etc/jetfleet/pki/ctl.lab.key" in unit and "--tls-key %d/tls.key" in unit
    assert "--store" not in unit and "LimitNOFILE=65536" in unit   # the store URL (with a password) stays in the env file


def test_agent_unit_keeps_only_what_clock_control_needs(tmp_path):
    unit = render("jetfleet_agent", "jetfleet-agent.service.j2", jetfleet_agent_device_id="orin-01")
    level = exposure(unit, tmp_path, "jetfleet-agent.service")
    print(f"systemd-analyze security: jetfleet-agent.service exposure {level}")
    assert "CapabilityBoundingSet=CAP_SYS_ADMIN CAP_DAC_OVERRIDE CAP_SYS_NICE\n" in unit
    assert "\nProtectKernelTunables=" not in unit and "\nPrivateDevices=" not in unit  # /sys and the GPU stay reachable
    assert "LimitNOFILE=65536" in unit and level <= 5.0


def test_agent_arguments_follow_the_inventory():
    env = render("jetfleet_agent", "agent.env.j2", jetfleet_agent_device_id="xavier-01", jetfleet_agent_pki_dir="/srv/pki",
                 jetfleet_agent_route="nvpmodel", jetfleet_agent_metrics_tls=True, jetfleet_agent_metrics_password="pw",
                 jetfleet_agent_path="/opt/fake/bin:/usr/bin")
    args = {k: v.strip("'") for k, v in (ln.split("=", 1) for ln in env.splitlines() if "=" in ln and not ln.startswith("#"))}
    words = args["JETFLEET_AGENT_ARGS"].split()
    assert words[:2] == ["agent", "run"] and "\n" not in args["JETFLEET_AGENT_ARGS"]
    opt = {w: words[i + 1] for i, w in enumerate(words) if w.startswith("--")}
    assert opt["--route"] == "nvpmodel" and opt["--id"] == "xavier-01"
    assert opt["--tls-cert"] == opt["--metrics-tls-cert"] == "/etc/jetfleet/pki/xavier-01.crt"
    assert opt["--metrics-auth-file"] == "/etc/jetfleet/agent-metrics-auth" and args["PATH"] == "/opt/fake/bin:/usr/bin"
    bare = render("jetfleet_agent", "agent.env.j2", jetfleet_agent_device_id="x")
    assert "--tls" not in bare and "PATH=" not in bare
    assert "--metrics-auth-file" in bare   # a metrics password is always there: the inventory's, or generated


def test_redis_password_goes_to_the_redis_settings_and_the_store_url_only():
    conf = render("jetfleet_controller", "redis-jetfleet.conf.j2", jetfleet_controller_redis_password="r3dis-pw")
    assert "requirepass r3dis-pw" in conf and "appendfsync always" in conf
    env = render("jetfleet_controller", "controller.env.j2", jetfleet_controller_redis_password="r3dis-pw")
    assert "JETFLEET_STORE='redis://:r3dis-pw@127.0.0.1:6379/0'" in env
    odd = render("jetfleet_controller", "controller.env.j2", jetfleet_controller_redis_password="a/b@c:d")
    assert "JETFLEET_STORE='redis://:a%2Fb%40c%3Ad@127.0.0.1:6379/0'" in odd   # URL-encoded; redis-py decodes it
    unit = render("jetfleet_controller", "jetfleet-controller.service.j2", jetfleet_controller_redis_password="r3dis-pw")
    assert "r3dis-pw" not in unit
    assert "requirepass generated-secret" in render("jetfleet_controller", "redis-jetfleet.conf.j2")   # never without


def test_the_rendered_prometheus_config_loads_the_alert_rules_and_promtool_accepts_it(tmp_path):
    promtool = shutil.which("promtool")
    if not promtool:
        pytest.skip("promtool is not installed (make test installs the Debian prometheus package when run as root)")
    shutil.copy(REPO / "deploy/prometheus/alerts.yml", tmp_path / "jetfleet-alerts.yml")   # what the role copies
    shipped = len(re.findall(r"^\s*- alert:", (REPO / "deploy/prometheus/alerts.yml").read_text(), re.M))
    for password in ("", "s3cret"):   # without and with basic auth on the metrics endpoints
        conf = render("jetfleet_controller", "prometheus.yml.j2", jetfleet_controller_prometheus_dir=str(tmp_path),
                      jetfleet_controller_pki_dir="/pki", jetfleet_controller_metrics_password=password)
        (tmp_path / "prometheus.yml").write_text(conf)
        (tmp_path / "jetfleet-ca.crt").write_text("")
        (tmp_path / "jetfleet-controller.password").write_text(password)
        out = procs.run([promtool, "check", "config", str(tmp_path / "prometheus.yml")])
        assert out.returncode == 0 and f"{shipped} rules found" in out.stdout, out.stdout + out.stderr
        assert f"{tmp_path}/jetfleet-alerts.yml" in conf


@pytest.mark.slow
@pytest.mark.timeout(1800)   # two runs, each installing torch into a venv: minutes on a shared machine
def test_roles_run_for_real_against_localhost_and_are_idempotent(tmp_path):
    playbook = need("ansible-playbook")
    wheels = tmp_path / "wheels"
    procs.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(REPO)],
              check=True, timeout=300)
    version = re.search(r"jetfleet-([^-]+)-", next(wheels.glob("jetfleet-*.whl")).name).group(1)
    pki = tmp_path / "pki"
    init_ca(pki)
    issue(pki, "agent", "lab-orin-1")
    issue(pki, "controller", "localhost")
    root = tmp_path / "root"
    extra = {}
    for role in ("agent", "controller"):
        p = f"jetfleet_{role}_"
        extra.update({p + "prefix": str(root / "opt/jetfleet"), p + "etc": str(root / "etc/jetfleet"),
                      p + "systemd_dir": str(root / "etc/systemd/system"), p + "render_only": True,
                      p + "python": sys.executable, p + "pip_extra_args": f"--find-links {wheels}",
                      p + "pki_dir": str(pki), p + "package": f"jetfleet[{role}]=={version}"})
    extra.update({"jetfleet_agent_device_id": "lab-orin-1", "jetfleet_controller_manage_packages": False,
                  "jetfleet_controller_secrets_dir": str(tmp_path / "secrets"),
                  "jetfleet_agent_secrets_dir": str(tmp_path / "secrets"),
                  "jetfleet_controller_data_dir": str(root / "var/lib/jetfleet"),
                  "jetfleet_controller_prometheus_dir": str(root / "etc/prometheus"),
                  "jetfleet_controller_grafana_dir": str(root / "etc/grafana"),
                  "jetfleet_controller_grafana_dashboards_dir": str(root / "var/lib/grafana/dashboards/jetfleet"),
                  "jetfleet_controller_cert_name": "localhost"})
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                                                     "ansible_python_interpreter": sys.executable}},
                                             "children": {"controller": {"hosts": {"localhost": {}}},
                                                          "agents": {"hosts": {"localhost": {}}}}}}))
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_BECOME": "false"}

    # An EC key's PEM carries its public point too, which the certificate (printed by --diff, as it may be)
    # also carries: only the lines that are not in the certificate are the private part.
    key_lines = []
    for name in ("lab-orin-1", "localhost"):
        cert = (pki / f"{name}.crt").read_text().replace("\n", "")
        key_lines += [ln for ln in (pki / f"{name}.key").read_text().splitlines()
                      if ln and not ln.startswith("-----") and ln not in cert]
    assert key_lines

    def run() -> str:
        # --diff prints the content of every file a task changes, unless the task has no_log
        out = procs.run([playbook, "-i", str(inventory), "site.yml", "--diff", "-e", json.dumps(extra), "-e",
                              '{"ansible_become": false}'], cwd=ANSIBLE, env=env,
                        timeout=1200)
        assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
        printed = out.stdout + out.stderr
        assert "PRIVATE KEY" not in printed and not [ln for ln in key_lines if ln in printed], "a private key leaked"
        return out.stdout

    run()
    second = run()
    changed = [b.split("]", 1)[0] for b in re.split(r"\n(?:TASK|RUNNING HANDLER) \[", second)[1:]
               if re.search(r"^changed: ", b, re.M)]
    assert re.search(r"localhost\s*:\s*ok=\d+\s+changed=0\s", second), (changed, second[-1500:])
    venv_python = root / "opt/jetfleet/venv/bin/python"
    check = procs.run([str(venv_python), "-c", "import jetfleet.agent.link, jetfleet.controller.server; print('ok')"])
    assert check.stdout.strip() == "ok", check.stderr
    unit = (root / "etc/systemd/system/jetfleet-agent.service").read_text()
    assert "Restart=on-failure" in unit and "--tls-cert" not in unit and "EnvironmentFile=" in unit
    env_file = (root / "etc/jetfleet/agent.env").read_text()
    assert "JETFLEET_DEVICE_ID='lab-orin-1'" in env_file and "lab-orin-1.crt" in env_file
    assert oct((root / "etc/jetfleet/pki/lab-orin-1.key").stat().st_mode & 0o777) == "0o600"
    assert (root / "etc/systemd/system/jetfleet-controller.service").exists()
    assert "appendfsync always" in (root / "etc/jetfleet/redis/jetfleet.conf").read_text()
    assert (root / "etc/prometheus/prometheus.yml").exists()
    assert (root / "etc/prometheus/jetfleet-alerts.yml").read_text() == (REPO / "deploy/prometheus/alerts.yml").read_text()
    shipped = sorted(p.name for p in (REPO / "deploy/grafana/dashboards").glob("*.json"))
    assert len(shipped) >= 5 and sorted(p.name for p in (root / "var/lib/grafana/dashboards/jetfleet").glob("*.json")) == shipped


# --- safe defaults (issue 29): the roles' own tasks run by ansible-playbook against this machine ----------------
def play_tasks(tmp_path: Path, role: str, tasks: str, **extra: object) -> procs.subprocess.CompletedProcess:
    """Run ``role``'s ``tasks`` file (as the role imports it) on localhost with ``extra`` variables."""
    book = tmp_path / "check.yml"
    book.write_text(json.dumps([{"hosts": "localhost", "connection": "local", "gather_facts": False,
                                 "tasks": [{"ansible.builtin.import_role": {"name": role, "tasks_from": tasks}}]}]))
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(ANSIBLE / "roles"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false"}
    return procs.run([need("ansible-playbook"), "-i", "localhost,", str(book), "-e",
                      json.dumps({"ansible_python_interpreter": sys.executable, **extra})], env=env, timeout=300)


@pytest.mark.slow   # five ansible-playbook runs: ~20 s
def test_the_controller_role_refuses_plaintext_off_loopback_unless_told_and_generates_its_secrets(tmp_path):
    secrets = tmp_path / "secrets"
    where = {"jetfleet_controller_secrets_dir": str(secrets)}
    out = play_tasks(tmp_path, "jetfleet_controller", "checks", **where)   # the defaults: 0.0.0.0, no PKI
    assert out.returncode != 0 and "would be open to the network" in out.stdout, out.stdout[-3000:]
    for ok in ({"jetfleet_controller_pki_dir": "/srv/pki"}, {"jetfleet_controller_insecure": True},
               {"jetfleet_controller_listen": "127.0.0.1:50051"}):
        out = play_tasks(tmp_path, "jetfleet_controller", "checks", **where, **ok)
        assert out.returncode == 0, (ok, out.stdout[-3000:])
    made = {p.name: p.read_text() for p in secrets.iterdir()}
    assert set(made) >= {"redis.password", "controller-metrics.password", "agents-metrics.password"}
    assert all(len(v.split()[0]) == 32 for v in made.values())
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in secrets.iterdir())
    out = play_tasks(tmp_path, "jetfleet_controller", "checks", **where, jetfleet_controller_insecure=True)
    assert {p.name: p.read_text() for p in secrets.iterdir()} == made   # generated once, reused
    assert not [v for v in made.values() if v.split()[0] in out.stdout]   # and never printed
    weak = play_tasks(tmp_path, "jetfleet_controller", "checks", **where, jetfleet_controller_insecure=True,
                      jetfleet_controller_redis_password="short")
    assert weak.returncode != 0 and "at least 16 characters" in weak.stdout


def test_an_insecure_controller_says_so_loudly_and_a_secure_one_has_no_insecure_flag():
    insecure = render("jetfleet_controller", "jetfleet-controller.service.j2", jetfleet_controller_insecure=True)
    assert "--insecure" in insecure and "WARNING: INSECURE" in insecure
    assert "Description=jetfleet controller (INSECURE" in insecure
    secure = render("jetfleet_controller", "jetfleet-controller.service.j2", jetfleet_controller_pki_dir="/srv/pki")
    assert "--insecure" not in secure and "INSECURE" not in secure and "--tls-cert" in secure
    loopback = render("jetfleet_controller", "jetfleet-controller.sh.j2", jetfleet_controller_listen="127.0.0.1:50051")
    assert "--insecure" not in loopback and "INSECURE" not in loopback   # plaintext on loopback needs no flag


def test_the_jtop_service_is_enabled_only_where_it_exists(tmp_path):
    board = {"jetfleet_agent_jtop": True, "jetfleet_agent_render_only": False, "jetfleet_agent_service_manager": "systemd"}
    out = play_tasks(tmp_path, "jetfleet_agent", "jtop", **board, jetfleet_agent_telemetry="jtop")
    assert out.returncode != 0 and "has no jtop service" in out.stdout, out.stdout[-3000:]   # no jetson-stats here
    out = play_tasks(tmp_path, "jetfleet_agent", "jtop", **board, jetfleet_agent_telemetry="sysfs")
    assert out.returncode == 0 and re.search(r"Jetson-stats service .*\n(skipping|.*skipping)", out.stdout), out.stdout


def test_the_agent_role_installs_everything_under_its_constraints():
    import yaml

    defaults = yaml.safe_load((ANSIBLE / "roles/jetfleet_agent/defaults/main.yml").read_text())
    assert "numpy<2" in defaults["jetfleet_agent_constraints"]
    env = render("jetfleet_agent", "agent.env.j2", jetfleet_agent_device_id="x", jetfleet_agent_pip_extra_args="--no-index")
    assert env   # the role's variables render
    tasks = yaml.safe_load((ANSIBLE / "roles/jetfleet_agent/tasks/main.yml").read_text())
    pips = [t for t in tasks if "ansible.builtin.pip" in t]
    assert len(pips) == 2 and all("jetfleet_agent_constraints_file" in t["ansible.builtin.pip"]["extra_args"]
                                  or t["ansible.builtin.pip"]["extra_args"] == "{{ jetfleet_agent_pip_args }}" for t in pips)
    rendered = yaml.safe_load((ANSIBLE / "roles/jetfleet_agent/vars/main.yml").read_text())["jetfleet_agent_pip_args"]
    assert rendered.startswith("-c {{ jetfleet_agent_constraints_file }}")


@pytest.mark.slow   # pip resolves jetfleet[agent] against the package index: ~30 s
def test_on_jetpack_6s_python_the_agents_dependencies_resolve_to_numpy_1(tmp_path):
    """What pip would install on a JetPack 6 board (CPython 3.10) under the role's constraints: numpy below 2, which
    NVIDIA's torch wheels need; without them pip takes numpy 2."""
    import yaml

    root = procs.run(["pyenv", "root"]).stdout.strip() if shutil.which("pyenv") else ""
    found = sorted(Path(root, "versions").glob("3.10.*")) if root else []
    if not found:
        pytest.skip("pyenv has no CPython 3.10 (make test-boards uses the same)")
    python = str(found[-1] / "bin" / "python3")
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("\n".join(yaml.safe_load((ANSIBLE / "roles/jetfleet_agent/defaults/main.yml").read_text())
                                     ["jetfleet_agent_constraints"]) + "\n")

    def numpy_version(*args: str) -> str:
        out = procs.run([python, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed", "--report",
                         str(tmp_path / "report.json"), *args, f"jetfleet[agent] @ file://{REPO}"], timeout=600)
        assert out.returncode == 0, out.stderr[-2000:]
        report = json.loads((tmp_path / "report.json").read_text())
        return next(i["metadata"]["version"] for i in report["install"] if i["metadata"]["name"] == "numpy")

    assert int(numpy_version("-c", str(constraints)).split(".")[0]) == 1
    assert int(numpy_version().split(".")[0]) >= 2   # what the constraint is for


# --- a lab of controllers under Redis Sentinel (issue 27): the inventory's groups decide the store URL -------------
SENTINEL_LAB = {"groups": {"jetfleet_controllers": ["ctl-a", "ctl-b"], "jetfleet_redis": ["ctl-a", "ctl-b"],
                           "jetfleet_sentinels": ["ctl-a", "ctl-b", "mon"]},
                "hostvars": {"ctl-a": {"ansible_host": "10.0.0.11"}, "ctl-b": {"ansible_host": "10.0.0.12"},
                             "mon": {"ansible_host": "10.0.0.13", "jetfleet_redis_sentinel_port": 26380}}}


def test_controllers_under_sentinel_get_the_sentinels_in_their_store_url_and_agents_every_controller():
    env = render("jetfleet_controller", "controller.env.j2", jetfleet_controller_redis_password="a/b@c:d", **SENTINEL_LAB)
    assert ("JETFLEET_STORE='redis+sentinel://:a%2Fb%40c%3Ad@10.0.0.11:26379,10.0.0.12:26379,10.0.0.13:26380/jetfleet'"
            in env), env
    agent = render("jetfleet_agent", "agent.env.j2", jetfleet_agent_device_id="x", **SENTINEL_LAB)
    assert "--controller 10.0.0.11:50051,10.0.0.12:50051 " in agent, agent
    # one controller, no such groups: what it always was
    assert "JETFLEET_STORE='redis://:pw-0123456789abcdef@127.0.0.1:6379/0'" in render(
        "jetfleet_controller", "controller.env.j2", jetfleet_controller_redis_password="pw-0123456789abcdef")
    assert "--controller 127.0.0.1:50051 " in render("jetfleet_agent", "agent.env.j2", jetfleet_agent_device_id="x")


def test_the_redis_role_makes_a_master_a_replica_and_sentinels_with_quorum_timeouts_and_passwords():
    common = {**SENTINEL_LAB, "jetfleet_redis_password": "r3dis-pw-0123456789"}
    master = render("jetfleet_redis", "redis.conf.j2", inventory_hostname="ctl-a", jetfleet_redis_address="10.0.0.11",
                    **common)
    replica = render("jetfleet_redis", "redis.conf.j2", inventory_hostname="ctl-b", jetfleet_redis_address="10.0.0.12",
                     **common)
    for conf in (master, replica):
        assert "requirepass r3dis-pw-0123456789" in conf and "masterauth r3dis-pw-0123456789" in conf
        assert "appendfsync always" in conf
    assert "replicaof" not in master and "replicaof 10.0.0.11 6379" in replica
    assert "bind 127.0.0.1 10.0.0.12" in replica and "replica-announce-ip 10.0.0.12" in replica
    sentinel = render("jetfleet_redis", "sentinel.conf.j2", inventory_hostname="mon", jetfleet_redis_address="10.0.0.13",
                      **common)
    assert "sentinel monitor jetfleet 10.0.0.11 6379 2\n" in sentinel
    assert "sentinel auth-pass jetfleet r3dis-pw-0123456789" in sentinel and "requirepass r3dis-pw-0123456789" in sentinel
    assert "sentinel down-after-milliseconds jetfleet 5000" in sentinel
    assert "sentinel failover-timeout jetfleet 60000" in sentinel


@pytest.mark.slow   # four ansible-playbook runs: ~15 s
def test_the_redis_role_refuses_a_layout_sentinel_cannot_fail_over(tmp_path):
    book = tmp_path / "check.yml"
    book.write_text(json.dumps([{"hosts": "localhost", "connection": "local", "gather_facts": False,
                                 "tasks": [{"ansible.builtin.import_role": {"name": "jetfleet_redis",
                                                                            "tasks_from": "checks"}}]}]))
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(ANSIBLE / "roles"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_LOCALHOST_WARNING": "false"}

    def check(sentinels: list[str], **extra: object) -> procs.subprocess.CompletedProcess:
        inventory = tmp_path / "inventory.json"
        inventory.write_text(json.dumps({"all": {
            "hosts": {h: {} for h in ["localhost", *sentinels]},
            "children": {"jetfleet_redis": {"hosts": {"localhost": {}}},
                         "jetfleet_sentinels": {"hosts": {h: {} for h in sentinels}}}}}))
        return procs.run([need("ansible-playbook"), "-i", str(inventory), str(book), "-e",
                          json.dumps({"ansible_python_interpreter": sys.executable,
                                      "jetfleet_redis_secrets_dir": str(tmp_path / "secrets"), **extra})],
                         env=env, timeout=300)

    three = ["localhost", "s2", "s3"]
    assert check(three).returncode == 0   # the password generated on the control node
    for sentinels, extra in ((["localhost", "s2"], {}), (three, {"jetfleet_redis_quorum": 1}),
                             (three, {"jetfleet_redis_master": "s2"})):
        out = check(sentinels, **extra)
        assert out.returncode != 0 and "Sentinel cannot fail over" in out.stdout, (sentinels, extra, out.stdout[-2000:])
    weak = check(three, jetfleet_controller_redis_password="short")
    assert weak.returncode != 0 and "at least 16 characters" in weak.stdout and "short" not in weak.stdout
