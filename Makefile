# `make demo` and `make test` each set up their own virtual environment first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet $(if $(wildcard /opt/wheels),--find-links /opt/wheels,)
# torchvision's wheel pins another torch; install it beside the CPU torch without its deps.
TORCHVISION := torchvision==0.28.0

.PHONY: demo test test-fast bench clean

$(VENV)/.core: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) -e .
	touch $@

$(VENV)/.test: $(VENV)/.core
	$(PIP) -e '.[test]'
	$(PIP) --no-deps $(TORCHVISION)
	touch $@

demo: $(VENV)/.core
	$(VENV)/bin/ge demo

test: $(VENV)/.test
	$(VENV)/bin/lit tests/filecheck -q
	$(PY) -m pytest -n 2 -q

test-fast: $(VENV)/.test
	$(VENV)/bin/lit tests/filecheck -q
	$(PY) -m pytest -n 2 -q -m "not slow"

bench: $(VENV)/.test
	for b in import_and_print fusion precision_accuracy compile simulate; do $(PY) benchmarks/$$b.py || exit 1; done

clean:
	rm -rf $(VENV)
