# taskforge: the two commands that matter are `make demo` and `make test`.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DEMO_SOURCE ?= pypi:inflection==0.5.1
DEMO_OUT    ?= datasets/out/demo
PYTEST_ARGS ?=

.PHONY: demo test test-fast check venv host confine clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade 'pip>=24'
	$(PY) -m pip install -q -e '.[rl,ray,report,dev]'
	$(PY) -m pip install -q -e '.[agents]'
	$(PY) -m pip install -q --no-deps 'verl>=0.9,<0.10'  # see the agents extra in pyproject.toml
	# verl's wheel ships its own top-level `tests` package, which hides this repository's tests/ package
	rm -rf $(VENV)/lib/python*/site-packages/tests
	touch $(STAMP)

venv: $(STAMP)

# Host services the full suite needs: Docker engine (+ a locally built base image), chromium.
host:
	bash sandboxes/scripts/setup_host.sh

# The local sandbox confines every test run with bubblewrap (Debian: bubblewrap); install it when missing.
confine:
	@command -v bwrap >/dev/null || { [ "$$(id -u)" -eq 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null 2>&1; } \
		|| { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; } \
		|| echo "make: bubblewrap is missing and could not be installed: install it (apt-get install bubblewrap) or run with TASKFORGE_SANDBOX=local-unsafe"

demo: venv confine
	$(VENV)/bin/taskforge generate $(DEMO_SOURCE) --out $(DEMO_OUT) --sandbox local --max-tasks 6
	@echo "demo dataset written to $(DEMO_OUT) (open $(DEMO_OUT)/README.md)"

# The whole suite, slow/real-repo/docker/ray/browser tests included. Most of its time is spent in test
# subprocesses (sandboxed pytest runs), so two workers keep both cores busy; a file stays on one
# worker and all docker tests share one (tests/conftest.py).
TEST_WORKERS ?= 2
test: venv host
	$(PY) -m pytest -m "" -p no:cacheprovider -n $(TEST_WORKERS) --dist loadgroup --durations=40 $(PYTEST_ARGS)

# Unit tests only: no network, no docker, seconds.
test-fast: venv
	$(PY) -m pytest -m "not slow and not realrepo and not docker and not ray and not browser" $(PYTEST_ARGS)

check: venv
	$(VENV)/bin/ruff check taskforge generators sandboxes tests
	$(VENV)/bin/mypy taskforge generators sandboxes

clean:
	rm -rf $(VENV) .taskforge datasets/out
