#!/bin/sh
# Run the agent test subset (pytest -m boards) on a board's Python: `board-python.sh 3.8`.
# The interpreter comes from pyenv (CI machines have 3.8 and 3.10); the venv .venv-py38 (.venv-py310)
# is made once with the `agent` and `test` extras (no torch: a board uses NVIDIA's wheel) and kept
# until pyproject.toml changes. JETFLEET_CONTROLLER_PYTHON names the controller's Python (3.11+) for
# the tests that start a controller process beside an agent of this Python.
set -eu
cd "$(dirname "$0")/.."
want="$1"
venv=".venv-py$(echo "$want" | tr -d .)"

if ! command -v pyenv >/dev/null 2>&1; then
  echo "SKIPPED: agent tests on Python $want: pyenv is not installed here (CI has it; install pyenv and CPython $want to run them)"
  exit 0
fi
root="$(pyenv root)"
interp="$(ls -d "$root"/versions/"$want".* 2>/dev/null | sort -V | tail -n 1)"
if [ -z "$interp" ] || [ ! -x "$interp/bin/python" ]; then
  echo "SKIPPED: agent tests on Python $want: pyenv has no CPython $want (pyenv install $want)"
  exit 0
fi

stamp="$venv/.installed"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  rm -rf "$venv"
  "$interp/bin/python" -m venv "$venv"
  # Editable, so the tests run today's code; the agent extra only: torch is never pulled in here.
  if ! { "$venv/bin/python" -m pip install --quiet --upgrade pip &&
         "$venv/bin/python" -m pip install --quiet -e '.[agent,test]'; } >"$venv/install.log" 2>&1; then
    cat "$venv/install.log" >&2
    echo "error: could not install the agent extra on Python $want (log above)" >&2
    exit 1
  fi
  touch "$stamp"
fi
if "$venv/bin/python" -c "import torch" 2>/dev/null; then
  echo "error: torch is installed in $venv: the agent extra must not pull it in" >&2
  exit 1
fi
echo "== agent tests on $("$venv/bin/python" --version) ($venv)"
# Only the modules that hold board tests are collected: the others import the controller's stack.
files="$(grep -l 'mark\.boards' tests/test_*.py)"
# A board test takes seconds: a tighter limit than the suite's, and a systematic failure stops early.
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider -m "boards and not slow" --timeout 120 --maxfail 5 $files
