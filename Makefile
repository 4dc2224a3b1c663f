# jetfleet: `make demo` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PROTO_SRC := $(shell find proto -name '*.proto' 2>/dev/null)

.PHONY: install system-deps demo test lint fmt proto proto-check bench characterise clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first, pinned to the local CPU build: any other torch pulls gigabytes of CUDA packages
	$(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e '.[agent,controller,dev]'
	touch $(STAMP)

install: $(STAMP)

# Real servers for the tests (redis-server, prometheus + promtool). Installed with apt when missing
# and we are root (CI); otherwise the tests that need them skip and say why. Installing the Debian
# package does not leave a server running that the tests rely on: fixtures start their own.
system-deps:
	@missing=""; command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v prometheus >/dev/null 2>&1 || missing="$$missing prometheus"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null) \
	      || echo "warning: could not install$$missing; the tests that need them will skip"; \
	  else echo "note:$$missing not installed; the tests that need them will skip"; fi; \
	fi

demo: $(STAMP)
	$(VENV)/bin/jetfleet lab demo

test: $(STAMP) system-deps
	$(PY) -m pytest -q -p no:cacheprovider

lint: $(STAMP)
	$(VENV)/bin/ruff check jetfleet tests bench
	$(VENV)/bin/mypy jetfleet

fmt: $(STAMP)
	$(VENV)/bin/ruff check --fix jetfleet tests bench

# Stubs are generated into jetfleet/shared/proto (the .proto tree mirrors the package) and checked in.
proto: $(STAMP)
	$(PY) -m grpc_tools.protoc -Iproto --python_out=. --pyi_out=. --grpc_python_out=. $(PROTO_SRC)

proto-check: $(STAMP)
	@tmp=$$(mktemp -d) && \
	$(PY) -m grpc_tools.protoc -Iproto --python_out=$$tmp --pyi_out=$$tmp --grpc_python_out=$$tmp $(PROTO_SRC) && \
	for f in $$(cd $$tmp && find . -type f); do \
	  cmp -s $$tmp/$$f $$f || { echo "stale generated stub: $$f (run make proto)"; rm -rf $$tmp; exit 1; }; \
	done; rm -rf $$tmp; echo "stubs are fresh"

characterise: $(STAMP)
	$(PY) -m jetfleet.agent.workloads.characterise

bench: $(STAMP)
	$(PY) bench/boards.py
	$(PY) bench/campaign.py
	$(PY) bench/powertrain.py
	$(PY) bench/metrics.py
	$(PY) bench/fleet.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
