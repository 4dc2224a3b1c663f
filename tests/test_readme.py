"""Issue 29: the README and docs true to the letter. Every shell block of README.md and docs/*.md is either run here,
as written, against a lab of emulated boards started the way the README says (`jetfleet lab up --boards
agx-orin,agx-xavier,orin-nano,nano`), or marked in the markdown as an illustration with why, on the line before it:

    <!-- readme-test: illustration: REASON -->

What a block may not do here is said by the marker, never by this file: the runner only puts the lab's address
where a block names the README's 127.0.0.1:50051 (the test binds port 0) and runs in a scratch HOME and folder."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from . import procs

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!-- readme-test: illustration: (.+) -->$")
SHELL = ("sh", "bash", "shell", "console")
README_ADDRESS = "127.0.0.1:50051"
LAB_BOARDS = "agx-orin,agx-xavier,orin-nano,nano"   # the README's lab with the Nano its roofline examples use


@dataclass(frozen=True)
class Block:
    """A fenced block of a markdown file: where it starts, its language, its text and, if marked, why it is only an
    illustration."""

    path: Path
    line: int
    lang: str
    text: str
    illustration: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    out = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("```"):
            lang = lines[i][3:].strip()
            start = i
            i += 1
            body = []
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            m = MARKER.match(lines[start - 1]) if start > 0 else None
            out.append(Block(path, start + 1, lang, "\n".join(body) + "\n", m.group(1) if m else ""))
        i += 1
    return out


def all_blocks() -> list[Block]:
    return [b for p in DOCS for b in blocks(p)]


def test_every_shell_block_is_either_run_or_marked_as_an_illustration_with_why():
    found = all_blocks()
    shell = [b for b in found if b.lang in SHELL]
    assert len(shell) >= 20
    # a block of commands must say it is shell (else it would escape this test)
    unlabelled = [b.where for b in found if not b.lang and re.search(r"^\s*(jetfleet|sudo|pip|make|python) ", b.text, re.M)]
    assert unlabelled == [], f"shell blocks without ```sh: {unlabelled}"
    # every marker stands right before a shell block, and says why
    for path in DOCS:
        lines = path.read_text().splitlines()
        for n, line in enumerate(lines):
            if "readme-test:" in line:
                assert MARKER.match(line) and n + 1 < len(lines) and lines[n + 1][3:].strip() in SHELL, (
                    f"{path.name}:{n + 1}: a marker must be `<!-- readme-test: illustration: WHY -->` right above "
                    "a ```sh block")
    assert all(len(b.illustration) > 10 for b in shell if b.illustration)
    run = [b for b in shell if not b.illustration]
    assert len(run) >= 10, [b.where for b in run]


def lab_address(lab: procs.Child) -> str:
    """The address `jetfleet lab up` prints once its boards are online (`lab up on HOST:PORT with ...`)."""
    assert lab.stdout is not None
    for line in lab.stdout:
        m = re.match(r"lab up on (\S+) with", line)
        if m:
            return m.group(1)
    raise AssertionError(f"jetfleet lab up ended: {lab.stderr.read() if lab.stderr else ''}")


@pytest.mark.slow   # one lab, ~20 blocks, a 50-mode campaign at the lab's 100x: one to two minutes
@pytest.mark.timeout(900)
def test_the_runnable_blocks_run_as_written_against_the_lab_the_readme_starts(tmp_path):
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    venv_bin = str(Path(sys.executable).parent)
    env = {**os.environ, "HOME": str(home), "PATH": f"{venv_bin}:{os.environ['PATH']}", "MPLBACKEND": "Agg"}
    env.pop("JETFLEET_OUTPUT", None)
    lab = procs.spawn([f"{venv_bin}/jetfleet", "lab", "up", "--listen", "127.0.0.1:0", "--data-dir",
                       str(tmp_path / "lab"), "--boards", LAB_BOARDS], env=env, cwd=work)
    try:
        address = lab_address(lab)
        env["JETFLEET_CONTROLLER"] = address   # what the README's `export JETFLEET_CONTROLLER=...` gives a terminal
        failures, ran = [], []
        for b in (b for b in all_blocks() if b.lang in SHELL and not b.illustration):
            script = ("set -o pipefail\ntrap 'echo \"README-TEST-FAILED (exit $?): $BASH_COMMAND\" >&2' ERR\n"
                      + b.text.replace(README_ADDRESS, address))
            out = procs.run(["bash", "-c", script], env=env, cwd=work, timeout=600)
            ran.append(b.where)
            if out.returncode != 0 or "README-TEST-FAILED" in out.stderr:
                failures.append(f"{b.where} (exit {out.returncode}):\n{out.stderr[-2500:]}\n{out.stdout[-1000:]}")
        print(f"\nREADME and docs blocks run: {len(ran)}: {', '.join(ran)}")
        assert not failures, "\n\n".join(failures)
        # what some blocks leave behind, as the README says
        assert (work / "nano.png").stat().st_size > 0 and (work / "nano-energy.png").stat().st_size > 0
        assert (work / "targets" / "agents.json").exists()
        assert oct((home / ".local/share/jetfleet/pki").stat().st_mode & 0o777) == "0o700"
    finally:
        lab.terminate()
        lab.wait(60)
