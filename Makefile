# make demo   run notebooks/quickstart.ipynb headless (scripted model unless ANTHROPIC_API_KEY is set)
# make test   run the whole test suite
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

demo: $(STAMP)
	$(PY) -m agent_kernel.demo notebooks/quickstart.ipynb

test: $(STAMP)
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) benchmarks/load_ext.py
	$(PY) benchmarks/loop_overhead.py
	$(PY) benchmarks/scheduler_overhead.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
