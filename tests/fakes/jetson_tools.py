"""Fake board tools for fixture trees: nvpmodel, systemctl (for nvfancontrol only) and nvfancontrol.

They act on a fixture tree the way the real tools act on a board, as separate programs on PATH:
``python jetson_tools.py ROOT TOOL ARGS...`` (``install`` writes one wrapper per tool into a bin dir).
The conf parser here is deliberately separate from jetfleet's, so a parsing bug there cannot hide.
Every call is appended to ROOT.calls.log (beside the tree, so a snapshot of the tree ignores it).

Modelled behaviour (from NVIDIA's documentation and jetson-stats' emulators; not checked on a board):
- ``nvpmodel -m ID [-f CONF]`` writes every ``PARAM ARG VALUE`` of block ID to the file the PARAM
  section names (``-1``/2^31-1 = the table's highest value, CPU ``MIN_FREQ 0`` = the lowest, ``EMC
  MAX_FREQ 0`` = the highest rate; a cluster's value goes to all its cores, which share a policy),
  records ``pmode:%04d`` in var/lib/nvpmodel/status, and, as the kernel would, runs each cpufreq
  policy, the GPU and (unless its rate is locked) the EMC at the highest table value not above their
  new caps. IDs in $FAKE_NVPMODEL_REBOOT answer with NVIDIA's reboot prompt and change nothing.
- ``nvpmodel -q`` prints ``NV Power Mode: NAME`` and the ID.
- ``systemctl is-active|start|stop nvfancontrol``: the daemon's state is a file; starting it applies the
  profile in var/lib/nvfancontrol/status, else the conf's FAN_DEFAULT_PROFILE, to the fan's PWM (the
  table row for 45 °C) and writes the status file.
- ``nvfancontrol -q`` prints ``FAN1:FAN_PROFILE:NAME``.
"""

import os
import re
import sys

NO_LIMIT = 2147483647
FAN_PWM = "sys/devices/platform/pwm-fan/hwmon/hwmon3/pwm1"


def log(root, line):
    with open(calls_log(root), "a") as f:
        f.write(line + "\n")


def calls_log(root):
    return os.path.abspath(root) + ".calls.log"


def under(root, path):
    return os.path.join(root, path.lstrip("/"))


def read(path):
    with open(path) as f:
        return f.read().strip()


def write(path, value):
    with open(path, "w") as f:
        f.write(str(value) + "\n")


def parse(text):
    """(params: name -> {arg: path}, models: id -> (name, [(param, arg, value)]), default id)."""
    params, models, default, current = {}, {}, None, None
    for raw in text.splitlines():
        line = raw.split("#")[0].strip()
        if not line:
            continue
        if line.startswith("<"):
            attrs = dict(re.findall(r"(\w+)=(\S+)", line))
            if line.startswith("< PARAM"):
                current = ("param", attrs["NAME"])
                params[attrs["NAME"]] = {}
            elif line.startswith("< POWER_MODEL"):
                current = ("model", int(attrs["ID"]))
                models[int(attrs["ID"])] = (attrs["NAME"], [])
            elif line.startswith("< PM_CONFIG"):
                default, current = int(attrs["DEFAULT"]), None
            continue
        words = line.split()
        if current and current[0] == "param":
            params[current[1]][words[0]] = words[1]
        elif current and current[0] == "model":
            models[current[1]][1].append((words[0], words[1], words[2]))
    return params, models, default


def table(root, paths):
    if "FREQ_TABLE" not in paths:
        return []
    return sorted(int(x) for x in read(under(root, paths["FREQ_TABLE"])).split())


def resolve(root, param, arg, value, paths):
    if value in ("on", "auto", "off"):
        return value
    v = int(value)
    freqs = table(root, paths)
    if param == "EMC" and v in (0, -1):
        emc = under(root, "sys/kernel/debug/bpmp/debug/clk/emc/possible_rates")
        return max(int(x) for x in read(emc).split()) if os.path.exists(emc) else 0
    if v < 0 or v >= NO_LIMIT:
        return max(freqs) if freqs else v
    if arg == "MIN_FREQ" and v == 0 and freqs:
        return min(freqs)
    return v


def cluster_cpus(params):
    """CPU cluster param -> the CPUs sharing its cpufreq policy (from its first CPU to the next cluster's)."""
    firsts = sorted((int(re.search(r"/cpu(\d+)/", p["MAX_FREQ"]).group(1)), name)
                    for name, p in params.items() if name.startswith("CPU_") and "MAX_FREQ" in p)
    n = len(params.get("CPU_ONLINE", {}))
    return {name: list(range(first, firsts[i + 1][0] if i + 1 < len(firsts) else n))
            for i, (first, name) in enumerate(firsts)}


def apply_mode(root, conf_text, mode_id):
    params, models, _ = parse(conf_text)
    name, settings = models[mode_id]
    clusters = cluster_cpus(params)
    for param, arg, value in settings:
        paths = params.get(param, {})
        if arg not in paths:
            raise SystemExit("NVPM ERROR: %s %s is not defined by a PARAM section" % (param, arg))
        target = under(root, paths[arg])
        if param == "CPU_ONLINE" and not os.path.exists(target):
            continue  # cpu0 has no online file: it cannot go offline
        v = resolve(root, param, arg, value, paths)
        for cpu in clusters.get(param, [None]):  # a cluster's CPUs share one cpufreq policy
            f = target if cpu is None else re.sub(r"/cpu\d+/", "/cpu%d/" % cpu, target)
            if os.path.exists(os.path.dirname(f)):
                write(f, v)
    for param, cpus in clusters.items():  # the kernel runs each policy at most at its maximum
        paths = params[param]
        for cpu in cpus:
            d = under(root, "sys/devices/system/cpu/cpu%d/cpufreq" % cpu)
            if os.path.exists(d):
                cap = int(read(d + "/scaling_max_freq"))
                freqs = [f for f in table(root, paths) if f <= cap] or table(root, paths)
                write(d + "/scaling_cur_freq", max(freqs))
    gpu = params.get("GPU", {})
    if "MAX_FREQ" in gpu and "FREQ_TABLE" in gpu:  # and the GPU at most at its new maximum
        d = os.path.dirname(under(root, gpu["MAX_FREQ"]))
        cap = int(read(d + "/max_freq"))
        write(d + "/cur_freq", max([f for f in table(root, gpu) if f <= cap] or table(root, gpu)))
    emc = under(root, "sys/kernel/debug/bpmp/debug/clk/emc")
    cap_file = under(root, params.get("EMC", {}).get("MAX_FREQ", "/nonexistent"))
    if os.path.exists(cap_file) and os.path.exists(emc + "/possible_rates") and read(emc + "/mrq_rate_locked") == "0":
        rates = sorted(int(x) for x in read(emc + "/possible_rates").split())
        write(emc + "/rate", max([r for r in rates if r <= int(read(cap_file))] or rates))  # unlocked: under its cap
    status = under(root, "var/lib/nvpmodel/status")
    os.makedirs(os.path.dirname(status), exist_ok=True)
    write(status, "pmode:%04d fmode:cool" % mode_id)
    return name


def nvpmodel(root, args):
    conf = under(root, "etc/nvpmodel.conf")
    if "-f" in args:
        conf = args[args.index("-f") + 1]
    text = open(conf).read()
    if "-q" in args:
        status = under(root, "var/lib/nvpmodel/status")
        mode_id = int(re.search(r"pmode:(\d+)", read(status)).group(1)) if os.path.exists(status) else parse(text)[2]
        models = parse(text)[1]
        print("NVPM WARN: fan mode is not set!")
        print("NV Power Mode: %s" % (models[mode_id][0] if mode_id in models else "UNKNOWN"))
        print(mode_id)
        return 0
    if "-m" in args:
        mode_id = int(args[args.index("-m") + 1])
        if mode_id not in parse(text)[1]:
            print("NVPM ERROR: Invalid mode: %d" % mode_id)
            return 1
        if str(mode_id) in os.environ.get("FAKE_NVPMODEL_REBOOT", "").split(","):
            print("NVPM WARN: Reboot required for changing to this power mode: %d" % mode_id)
            print("NVPM WARN: DO YOU WANT TO REBOOT NOW? enter YES/yes to confirm:")
            return 0
        apply_mode(root, text, mode_id)
        return 0
    print("usage: nvpmodel [-q] [-m ID] [-f CONF]")
    return 1


def fan_profile(root):
    status = under(root, "var/lib/nvfancontrol/status")
    if os.path.exists(status):
        return read(status).split(":")[-1]
    conf = read(under(root, "etc/nvfancontrol.conf"))
    return re.search(r"FAN_DEFAULT_PROFILE\s+(\S+)", conf).group(1)


def start_fan_daemon(root):
    conf = read(under(root, "etc/nvfancontrol.conf"))
    profile = fan_profile(root)
    body = re.search(r"FAN_PROFILE\s+%s\s*\{(.*?)\}" % re.escape(profile), conf, re.S).group(1)
    rows = [list(map(int, r.split())) for r in body.splitlines() if re.match(r"^\s*\d", r)]
    pwm = [r[2] for r in rows if r[0] <= 45][-1]
    write(under(root, FAN_PWM), pwm)
    status = under(root, "var/lib/nvfancontrol/status")
    os.makedirs(os.path.dirname(status), exist_ok=True)
    write(status, "FAN1:FAN_PROFILE:%s" % profile)


def systemctl(root, args):
    if len(args) != 2 or args[1] not in ("nvfancontrol", "nvfancontrol.service"):
        print("fake systemctl knows only nvfancontrol: %s" % " ".join(args))
        return 1
    flag = under(root, "run/fake-systemd/nvfancontrol.active")
    if args[0] == "is-active":
        active = os.path.exists(flag)
        print("active" if active else "inactive")
        return 0 if active else 3
    if args[0] == "stop":
        if os.path.exists(flag):
            os.remove(flag)
        return 0
    if args[0] in ("start", "restart"):
        os.makedirs(os.path.dirname(flag), exist_ok=True)
        write(flag, "active")
        start_fan_daemon(root)
        return 0
    return 1


def nvfancontrol(root, args):
    if args == ["-q"]:
        print("FAN1:FAN_PROFILE:%s" % fan_profile(root))
        return 0
    return 1


TOOLS = {"nvpmodel": nvpmodel, "systemctl": systemctl, "nvfancontrol": nvfancontrol}


def install(bin_dir, root, tools=tuple(TOOLS)):
    """Wrappers in ``bin_dir`` running these fakes on ``root``; returns a PATH with them first."""
    os.makedirs(bin_dir, exist_ok=True)
    for tool in tools:
        path = os.path.join(bin_dir, tool)
        with open(path, "w") as f:
            f.write('#!/bin/sh\nexec "%s" -S "%s" "%s" %s "$@"\n' % (sys.executable, os.path.abspath(__file__),
                                                                os.path.abspath(root), tool))
        os.chmod(path, 0o755)
    return bin_dir + os.pathsep + os.environ.get("PATH", "")


def main(argv):
    root, tool, args = argv[1], argv[2], argv[3:]
    log(root, " ".join([tool] + args))
    return TOOLS[tool](root, args)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
