# dapo-ops: `make test` is the README's test command (what .ci/run runs); `make deps` installs what is missing.
# Bench targets honour DAPO_BENCH_ID (default 0). Needs root for apt and for the sandbox bench.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
APT_PKGS := openssh-server openssh-client iproute2 docker.io busybox-static tmux util-linux
PYTEST_ARGS ?=
# test files run on this many pytest-xdist workers, each with its own sandbox bench (DAPO_BENCH_ID + worker index)
PYTEST_WORKERS ?= 3
# how the workers get their tests: one at a time, in the order tests/conftest.py gives (the sandbox tests first, round-
# robin over their files; the short pure tests last, so that the workers end together), except that the tests of one
# @pytest.mark.xdist_group go to one worker together (test_multihost_bench.py's group "two-host-run" shares one
# two-host Ray run); loadgroup (xdist's loadscope by group) keeps 2-3 tests pending per worker, largest unit first.
# xdist's plain `--dist load` sends contiguous chunks of up to 1/6 of what is left, which can pin a long sandbox file
# (test_multihost_bench.py: ~450 s of Ray clusters) to one worker while the others run out of tests
PYTEST_DIST ?= --dist loadgroup

.PHONY: deps apt venv verl-config lint test test-pure bench-up bench-down bench-status demo soak

deps: apt venv verl-config

apt:
	@missing=""; \
	for b in /usr/sbin/sshd:openssh-server /usr/bin/ssh:openssh-client /usr/sbin/ip:iproute2 \
	         /usr/sbin/dockerd:docker.io /bin/busybox:busybox-static /usr/bin/tmux:tmux /usr/bin/nsenter:util-linux; do \
	  [ -x "$${b%%:*}" ] || missing="$$missing $${b##*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "apt-get install$$missing"; \
	  apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing >/dev/null; \
	fi

$(VENV)/bin/python:
	$(PY) -m venv $(VENV)

venv: $(VENV)/bin/python
	@if ! $(VENV)/bin/python -c 'import dapo_ops, hydra, swanlab, ray, pyarrow, pandas, pytest, pytest_timeout, xdist, hypothesis, ruff, importlinter, mypy' 2>/dev/null; then \
	  $(VENV)/bin/pip install -q --upgrade pip && $(VENV)/bin/pip install -q -c constraints.txt -e '.[sandbox,test]'; \
	fi

verl-config: venv
	@$(VENV)/bin/python sandbox/fetch_verl_config.py >/dev/null

# the suite's benches are ids DAPO_BENCH_ID+k, default base 1: the demo's bench (id 0) stays up as the README says
test: deps
	DAPO_BENCH_ID=$${DAPO_BENCH_ID:-1} $(VENV)/bin/pytest -n $(PYTEST_WORKERS) $(PYTEST_DIST) $(PYTEST_ARGS)

# the checks .ci/run runs before the tests (the C901 ratchet: .ci/complexity.py against .ci/complexity.txt; mypy:
# [tool.mypy] in pyproject.toml, strict for core/ and agent/, the default level for control/ and cli/)
lint: venv
	$(VENV)/bin/ruff check dapo_ops tests bench tasks.py gpu sandbox .ci/complexity.py
	$(VENV)/bin/ruff format --check dapo_ops tests bench tasks.py gpu sandbox .ci/complexity.py
	$(VENV)/bin/python .ci/complexity.py
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

test-pure: venv
	$(VENV)/bin/pytest -m 'not bench' $(PYTEST_ARGS)

bench-up: deps
	bash sandbox/bench.sh up $${HOSTS:-3}

bench-down:
	bash sandbox/bench.sh down

bench-status:
	bash sandbox/bench.sh status

# the README's end-to-end demo on a local sandbox host (the quickstart task brings the sandbox up itself)
demo: deps
	$(VENV)/bin/inv demo
	@echo "inv is .venv/bin/inv: run \`. .venv/bin/activate\` to have inv and dapo-ops on PATH"

# the chaos soak (bench/soak.py, issue 31): SOAK_MINUTES (default 30) of random faults on a 3-host sandbox of
# DAPO_BENCH_ID (default 0), invariants after each; SOAK_SEED fixes the draw; the report goes to outputs/soak-last.md
# (not tracked: bench/soak.md is the write-up, its tables are pasted from there)
SOAK_MINUTES ?= 30
soak: deps
	mkdir -p outputs && DAPO_BENCH_ID=$${DAPO_BENCH_ID:-0} $(VENV)/bin/python bench/soak.py --minutes $(SOAK_MINUTES) \
	  $${SOAK_SEED:+--seed $$SOAK_SEED} --out outputs/soak-last.md
