# The two commands of the README: `make lab` and `make test`.
SHELL := /bin/bash
CARGO ?= cargo
# The release build: the language model (burn) and, through `train`, the command line (`cli`).
TRAIN := --features train
# Every heavy command runs as a named stage: scripts/stage prints its wall time and, under
# .ci/run, records it for the table printed at the end.
STAGE := scripts/stage

# Clippy lints the release build itself: clippy-driver is cargo's RUSTC_WORKSPACE_WRAPPER for
# every release command below, so tests, lints and the binary share one build of burn (a
# separate `cargo clippy` would check burn again). Under `make test` (and its parts) lint
# warnings are errors; CLIPPY_ARGS is part of the build's fingerprint, so every command of one
# make run passes the same value and the binary built after the tests is not rebuilt.
CLIPPY_DRIVER := $(shell rustup which clippy-driver 2>/dev/null || command -v clippy-driver)
CLIPPY_ARGS ?=
DENY_WARNINGS := -D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
RELEASE_CARGO = env RUSTC_WORKSPACE_WRAPPER="$(or $(CLIPPY_DRIVER),$(error clippy-driver not found: \
	rustup component add clippy))" CLIPPY_ARGS="$(CLIPPY_ARGS)" $(CARGO)
test test-rust test-train model-tests smoke-sweep test-notebooks test-notebook-helpers: \
	CLIPPY_ARGS := $(DENY_WARNINGS)

.PHONY: lab test venv-background test-rust test-train model-tests smoke-sweep test-notebooks notebook-setup \
	notebooks-check-clean notebooks-strip notebooks-prewarm html browser-check \
	test-notebook-helpers notebook-timings sweep bench bench-long build fmt-check check-cli doc lab-check

# Install what the notebooks need (only what is missing) and build the notebooks' dependencies,
# then open JupyterLab on notebooks/00_quickstart.ipynb (NO_BROWSER=1 on headless machines).
# The release binary (burn, which only notebook 11 runs) builds in the background meanwhile;
# scripts/binary prints its log file.
lab: notebook-setup notebooks-prewarm
	scripts/binary background
	scripts/lab

# The release binary used by notebook 11 and the CLI, with training (burn): target/release/posenc.
build:
	$(STAGE) build-binary $(RELEASE_CARGO) build --release $(TRAIN) --bin posenc

# Every test: the Rust tests (model tests included), the smoke sweep, the notebooks. The
# notebooks' Python environment installs in the background meanwhile (`notebook-setup` waits
# for it).
test: venv-background test-rust smoke-sweep test-notebooks

venv-background:
	scripts/setup venv-background

# Every Rust test in one release build with the `train` feature (unit, golden, property, CLI
# and model tests, linted by clippy as they compile), then the doc tests; formatting; and the
# command line without `train` (clippy only: no burn there).
test-rust: fmt-check check-cli
	$(STAGE) rust-tests $(RELEASE_CARGO) test --release $(TRAIN) --all-targets
	$(STAGE) doc-tests $(RELEASE_CARGO) test --release $(TRAIN) --doc
	$(STAGE) api-docs env RUSTDOCFLAGS="-D warnings" $(CARGO) doc --release --no-deps --lib $(TRAIN)

fmt-check:
	$(STAGE) fmt $(CARGO) fmt --all -- --check

check-cli:
	$(STAGE) clippy-cli $(CARGO) clippy --release --features cli --all-targets -- -D warnings

# The byte LM alone (feature `train`, burn): burn-vs-reference attention for every scheme,
# finite-difference gradients, causality, one-pass evaluation, resume, f16, export; then the
# smoke sweep. (`make test` runs these tests among all the others in `test-rust`.)
test-train: model-tests smoke-sweep

model-tests:
	$(STAGE) model-tests $(RELEASE_CARGO) test --release $(TRAIN) --lib --test train -- --nocapture

# Every scheme trained for 3 steps (tiny model) and evaluated: the results table's shape.
SMOKE_CSV := target/smoke/results/ppl_vs_length.csv
smoke-sweep:
	$(STAGE) smoke-sweep $(RELEASE_CARGO) run --release $(TRAIN) --bin posenc -- \
		sweep --config data/configs/smoke.json --quiet
	@test "$$(wc -l < $(SMOKE_CSV))" -eq 511 || { echo "smoke sweep: expected 510 rows in $(SMOKE_CSV)"; exit 1; }
	@echo "smoke sweep: 510 rows (2 seeds x (20 schemes, 16 RoPE methods at inference, 6 fine-tunes), NoPE's budget control at 1 seed; 3 lengths; 2 modes) in $(SMOKE_CSV)"

# The shipped results: every scheme trained and evaluated (data/checkpoints, data/results: the
# folders that data/configs/sweep.json names).
sweep:
	$(RELEASE_CARGO) run --release $(TRAIN) --bin posenc -- sweep --config data/configs/sweep.json

# Training throughput against PyTorch (installs torch into target/bench-venv on first use).
bench:
	bench/run.sh

# Evaluation at long lengths (4,096 to 65,536 bytes) of every shipped checkpoint: time per window
# and peak memory, against NoPE's; BEFORE=<binary> adds an older build's side by side.
bench-long:
	bench/long.sh

# API docs of the whole library (the `train` and `notebook` features too; release profile, so
# burn is the build of `make build`), warnings denied, with formulas rendered offline: KaTeX
# (npm package, fetched once) is copied next to the pages. The exported notebooks (`make html`)
# embed the same KaTeX. `make test` checks the same docs (stages api-docs, notebook-api-docs).
KATEX_VERSION := 0.16.47
KATEX := target/katex/package/dist/katex.min.js
doc: $(KATEX)
	RUSTDOCFLAGS="-D warnings --html-in-header $(CURDIR)/docs/katex-header.html" \
		$(CARGO) doc --release --no-deps --lib --features train,notebook
	rm -rf target/doc/katex && cp -r target/katex/package/dist target/doc/katex
	@echo "docs: target/doc/posenc/index.html"

$(KATEX):
	mkdir -p target/katex
	cd target/katex && npm pack --silent katex@$(KATEX_VERSION) >/dev/null && tar xzf katex-$(KATEX_VERSION).tgz


# --- Notebooks (scripts/, notebooks/, src/notebook/) -----------------------------------------
NB := .venv/bin/python scripts/notebooks.py
# Seconds per notebook, and for the first build of the notebook dependencies.
NOTEBOOK_TIMEOUT ?= 600
PREWARM_TIMEOUT ?= 2400
# Notebooks executed at once, each by its own kernel in its own warm build slot (2 on 2 cores).
NOTEBOOK_JOBS ?= 2
# Build slots the prewarm fills: one per notebook run at once (`make lab` fills one and serves).
PREWARM_SLOTS ?= $(NOTEBOOK_JOBS)
lab: PREWARM_SLOTS := 1
NOTEBOOK_HTML := target/notebooks-html
# Pages whose figures the headless-Chromium check must see drawn.
BROWSER_PAGES := $(NOTEBOOK_HTML)/00_quickstart.html $(NOTEBOOK_HTML)/11_perplexity_vs_length.html
# Notebooks the JupyterLab check opens and runs with Run All Cells: the quickstart's figures and
# table prove JupyterLab's rendering; every notebook has already run under `notebooks` (running
# notebook 11 there again would add about 80 s).
LAB_PAGES := 00_quickstart.ipynb

# venv (.venv/), evcxr_jupyter, the "rust" kernel; each step skips what is already there. The
# venv installs in the background while evcxr_jupyter builds.
notebook-setup:
	$(STAGE) notebook-setup scripts/setup venv-background evcxr venv kernel

# Executes every notebook in notebooks/ (NOTEBOOK_JOBS at a time, each with a fresh kernel;
# fails on any error, on output written to stderr, or past NOTEBOOK_TIMEOUT), writes them as
# HTML; then, in one headless Chromium, checks that the exported figures draw offline and runs
# the LAB_PAGES inside JupyterLab itself.
# The `notebook` feature's tests run last: when cargo has to compile polars again in slot 0
# (`scripts/notebook-cargo` warns), the kernels' build there can be left unusable ("can't find
# crate for `ndarray`" in every notebook's first cell, seen on a warm machine), so no kernel
# may start after them.
test-notebooks: notebook-setup notebooks-check-clean notebooks-prewarm build $(KATEX)
	$(STAGE) browser-setup scripts/setup browser
	$(STAGE) notebooks $(NB) run --jobs $(NOTEBOOK_JOBS) --timeout $(NOTEBOOK_TIMEOUT) \
		--html-dir $(NOTEBOOK_HTML)
	$(STAGE) browser-checks scripts/browser-check $(BROWSER_PAGES) --lab $(LAB_PAGES)
	$(MAKE) --no-print-directory test-notebook-helpers

# Committed notebooks carry no outputs (nbstripout --verify; clear them with `make notebooks-strip`).
notebooks-check-clean: notebook-setup
	$(NB) check-clean

notebooks-strip: notebook-setup
	$(NB) strip

# Builds the notebook dependencies once into the shared evcxr build directory (.evcxr/).
notebooks-prewarm: notebook-setup
	$(STAGE) notebooks-prewarm $(NB) prewarm --slots $(PREWARM_SLOTS) --timeout $(PREWARM_TIMEOUT)

# Executed notebooks as HTML, in target/notebooks-html/.
html: notebook-setup notebooks-prewarm build $(KATEX)
	$(NB) run --jobs $(NOTEBOOK_JOBS) --timeout $(NOTEBOOK_TIMEOUT) --html-dir $(NOTEBOOK_HTML)

# The headless-Chromium plot check alone, on the HTML of `make html`.
browser-check:
	scripts/setup browser
	scripts/browser-check $(BROWSER_PAGES)

# JupyterLab as `make lab` starts it, driven by headless Chromium: opens each of LAB_PAGES,
# runs all its cells with the Rust kernel, and checks errors, figures and tables.
lab-check: notebook-setup notebooks-prewarm build
	scripts/setup browser
	scripts/browser-check --lab $(LAB_PAGES)

# The `notebook` feature's tests and lints, compiled where and as evcxr compiles the notebooks'
# dependencies (scripts/notebook-cargo: same profile and flags, in .evcxr/slot0/target), so
# polars and plotly are built once, by the prewarm, for the notebooks and for these.
test-notebook-helpers: notebooks-prewarm
	$(STAGE) notebook-helper-tests scripts/notebook-cargo test --features notebook --all-targets \
		notebook::
	$(STAGE) notebook-doc-tests scripts/notebook-cargo test --features notebook --doc notebook
	$(STAGE) notebook-api-docs env RUSTDOCFLAGS="-D warnings" scripts/notebook-cargo doc \
		--features notebook --no-deps --lib

# The notebook performance figures of docs/performance.md (--cold: also a build from nothing, minutes).
notebook-timings: notebook-setup notebooks-prewarm
	$(NB) timings --collection --jobs $(NOTEBOOK_JOBS) $(TIMINGS_ARGS)
