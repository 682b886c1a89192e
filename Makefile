# make demo         run notebooks/quickstart.ipynb headless (scripted model unless a key is set or stored), say how to open it
# make dist         build the wheel and the sdist into dist/ (with the built JupyterLab extension)
# make test         run the whole test suite (the browser tests drive JupyterLab in Debian's Chromium)
# make docs         build the documentation site into docs/_build/html (Sphinx, MyST, PyData theme)
# make typecheck    run mypy over the package ([tool.mypy] in pyproject.toml; make test runs it)
# make style        check the Python with ruff (lint and format; make test runs it); make format applies it
# make lint-ts      check the extension's TypeScript and widget JS (eslint, prettier, tsc; make test runs it)
# make screenshots  run the browser tests and copy their screenshots into docs/screenshots
# make bench        run every benchmark in full and print one table of figures, baselines and goals
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The browser tests use the system's Chromium; Playwright never downloads a browser here.
CHROMIUM ?= /usr/bin/chromium
# Most tests wait on kernels, subprocesses and clocks: 3 workers keep 2 cores busy.
TEST_WORKERS ?= 3
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

.PHONY: install nodejs chromium bubblewrap tmux demo dist layers typecheck style format lint-ts test docs docs-check screenshots bench clean

install: nodejs $(STAMP) chromium bubblewrap tmux

# Node.js: the package build compiles the JupyterLab extension (labextension/) with jlpm.
nodejs:
	@command -v node > /dev/null || { \
		echo "Installing Debian's nodejs to build the JupyterLab extension"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends nodejs > /dev/null; }

# Debian's chromium, and an emoji font so the cells' status icons render in screenshots.
chromium:
	@test -x $(CHROMIUM) || { \
		echo "Installing Debian's chromium for the browser tests"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
			chromium fonts-liberation fonts-noto-color-emoji > /dev/null; }

# bubblewrap: run_code's isolated runs use it as their sandbox where user namespaces are allowed.
bubblewrap:
	@command -v bwrap > /dev/null || { \
		echo "Installing Debian's bubblewrap for isolated code runs"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends bubblewrap > /dev/null; }

# tmux: tests/test_console.py drives jupyter console and terminal IPython in a terminal.
tmux:
	@command -v tmux > /dev/null || { \
		echo "Installing Debian's tmux for the console tests"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends tmux > /dev/null; }

# The package build also builds the JupyterLab extension and installs it (and the server
# extension's switch) into the venv's share/jupyter and etc/jupyter. The comments stand here,
# outside the recipe, where make does not echo them. In the order of the recipe's steps:
# - installing again (after a `git pull`): the link `develop` made below would let the
#   install write install.json into the built extension, which the build then packs twice;
# - uv installs what pip would, from PyPI, in about two thirds of pip's time. Compiled
#   bytecode as pip leaves it: where PYTHONDONTWRITEBYTECODE is set, every kernel would
#   otherwise compile its imports again;
# - jupyter-collaboration beside the venv, not in it (in it, every JupyterLab server the
#   tests start would share its notebooks in real time): tests/browser/test_collaboration.py
#   appends this folder to its one server's import path. About 2 s with uv's cache;
# - JupyterLab loads the extension from agent_kernel/labextension: `jlpm build:prod` in
#   labextension/ updates it.
$(STAMP): pyproject.toml labextension/package.json
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip uv
	rm -f agent_kernel/labextension/install.json
	[ ! -L $(VENV)/share/jupyter/labextensions/agent-kernel ] || rm $(VENV)/share/jupyter/labextensions/agent-kernel
	$(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY) -e '.[test,docs]'
	rm -rf $(VENV)/collaboration
	$(VENV)/bin/uv pip install --quiet --python $(PY) --target $(VENV)/collaboration 'jupyter-collaboration>=4.4'
	PATH="$(abspath $(VENV))/bin:$$PATH" $(VENV)/bin/jupyter-builder develop --overwrite . > /dev/null
	touch $@

demo: nodejs $(STAMP)
	$(PY) -m agent_kernel.demo notebooks/quickstart.ipynb --out out

# `pip install dist/agent_kernel-*.whl` (or `'...whl[lab]'`, with JupyterLab) installs it
# anywhere; the wheel packages the extension `make install` built.
dist: nodejs $(STAMP)
	rm -rf dist
	$(VENV)/bin/uv build --quiet -o dist .
	@ls dist/*

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# Lint and format check (ruff, [tool.ruff] in pyproject.toml); `make format` applies both.
STYLED = agent_kernel tests benchmarks docs/_ext notebooks
style: $(STAMP)
	$(VENV)/bin/ruff check $(STYLED)
	$(VENV)/bin/ruff format --check $(STYLED)

format: $(STAMP)
	$(VENV)/bin/ruff check --fix $(STYLED)
	$(VENV)/bin/ruff format $(STYLED)

# The JupyterLab extension's lint and format check (eslint, prettier; `jlpm lint` in labextension/
# applies them) and tsc's check of the widgets' scripts (agent_kernel/display/js). Its dev
# dependencies are installed first when package.json is newer than them.
lint-ts: nodejs $(STAMP)
	cd labextension && export PATH="$(abspath $(VENV))/bin:$$PATH" && \
		{ [ node_modules/.yarn-state.yml -nt package.json ] || jlpm install > /dev/null; } && \
		jlpm lint:check

layers: $(STAMP)
	$(VENV)/bin/lint-imports

# The layers, the types and the docs side by side (each target's output kept together),
# then the tests.
test: nodejs $(STAMP) chromium bubblewrap
	$(MAKE) --jobs=3 --output-sync=target layers typecheck style docs-check lint-ts
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup

# The site; the notebooks in notebooks/ are executed offline (scripted model) on the way.
docs: nodejs $(STAMP)
	$(VENV)/bin/sphinx-build -q -b html docs docs/_build/html
	@echo "The documentation: $(abspath docs/_build/html/index.html)"

# As `make test` builds it: every warning an error, every cross-reference and link between
# pages checked (-n), all problems listed (--keep-going), every page read again (-E: an
# incremental build would not repeat the warnings of pages it skips). No external link is fetched.
docs-check: nodejs $(STAMP)
	$(VENV)/bin/sphinx-build -q -E -n -W --keep-going -b html docs docs/_build/html

screenshots: nodejs $(STAMP) chromium
	AGENT_KERNEL_UPDATE_SCREENSHOTS=1 $(PY) -m pytest tests/browser/test_jupyterlab.py tests/browser/test_labextension.py

# Every benchmark runs to its end, whatever the others did; each writes its figures to
# $(BENCH_RESULTS)/NAME.json, and benchmarks/summary.py prints them as one table (exit
# status 1 if a benchmark failed). `make bench BENCH_ARGS=--quick` runs the small sizes
# that `make test` runs (tests/test_benchmarks.py).
BENCHMARKS := load_ext loop_overhead cold_turn scheduler_overhead sql_dataframe blocks redaction context delegation completion chat_latency store_scale
BENCH_RESULTS ?= build/bench
BENCH_ARGS ?=

bench: nodejs $(STAMP)
	@rm -rf $(BENCH_RESULTS) && mkdir -p $(BENCH_RESULTS)
	@for name in $(BENCHMARKS); do \
		echo; echo "== benchmarks/$$name.py $(BENCH_ARGS)"; \
		$(PY) benchmarks/$$name.py $(BENCH_ARGS) --json $(BENCH_RESULTS)/$$name.json \
			|| echo "benchmarks/$$name.py FAILED (exit status $$?)"; \
	done
	$(PY) benchmarks/summary.py $(BENCH_RESULTS) $(BENCHMARKS)

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache docs/_build docs/examples agent_kernel/labextension labextension/lib labextension/node_modules
