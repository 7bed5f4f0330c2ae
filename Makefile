# The two commands of the README: `make lab` and `make test`.
SHELL := /bin/bash
CARGO ?= cargo
# The feature that adds the language model, training, evaluation and export (burn).
TRAIN := --features train

.PHONY: lab test test-rust test-notebooks notebook-setup notebooks-check-clean notebooks-strip \
	notebooks-prewarm html browser-check test-notebook-helpers clippy-notebook \
	notebook-timings test-train sweep bench build fmt-check clippy doc lab-check

# Install what the notebooks need (only what is missing), build the binary and the notebook
# dependencies, then open JupyterLab on notebooks/ (NO_BROWSER=1 on headless machines).
lab: notebook-setup build notebooks-prewarm
	scripts/lab

# The release binary used by notebooks and the CLI, with training (burn): target/release/posenc.
build:
	$(CARGO) build --release $(TRAIN) --bin posenc

# Every test.
test: test-rust test-train test-notebooks

test-rust: fmt-check clippy
	$(CARGO) test --all-targets
	$(CARGO) test --doc

fmt-check:
	$(CARGO) fmt --all -- --check

# With the `train` feature, so the model, training and sweep code is linted too (the notebook
# helpers have their own target below).
clippy:
	$(CARGO) clippy --release $(TRAIN) --all-targets -- -D warnings

# The byte LM (feature `train`, burn): burn-vs-reference attention for every scheme, finite-
# difference gradients, causality, one-pass evaluation, resume, f16, export; then a smoke
# sweep (tiny model, 3 steps per scheme). Tests and binary share the release profile, so burn
# is built once.
SMOKE_CSV := target/smoke/results/ppl_vs_length.csv
test-train:
	$(CARGO) test --release $(TRAIN) --lib --test train_equivalence --test train_gradients --test train_eval --test train_cli -- --nocapture
	$(CARGO) run --release $(TRAIN) --bin posenc -- sweep --config data/configs/smoke.json --quiet
	@test "$$(wc -l < $(SMOKE_CSV))" -eq 121 || { echo "smoke sweep: expected 120 rows in $(SMOKE_CSV)"; exit 1; }
	@echo "smoke sweep: 120 rows (13 schemes, 5 RoPE scalings, 2 fine-tunes; 3 lengths; 2 modes) in $(SMOKE_CSV)"

# The shipped results: every scheme trained and evaluated (data/checkpoints, data/results).
sweep:
	$(CARGO) run --release $(TRAIN) --bin posenc -- sweep

# Training throughput against PyTorch (installs torch into target/bench-venv on first use).
bench:
	bench/run.sh

# API docs with formulas rendered offline: KaTeX (npm package, fetched once) is copied
# next to the pages. The exported notebooks (`make html`) embed the same KaTeX.
KATEX_VERSION := 0.16.47
KATEX := target/katex/package/dist/katex.min.js
doc: $(KATEX)
	RUSTDOCFLAGS="--html-in-header $(CURDIR)/docs/katex-header.html" $(CARGO) doc --no-deps
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
NOTEBOOK_HTML := target/notebooks-html
# Pages whose figures the headless-Chromium check must see drawn.
BROWSER_PAGES := $(NOTEBOOK_HTML)/00_quickstart.html $(NOTEBOOK_HTML)/11_perplexity_vs_length.html
# Notebooks the JupyterLab check opens and runs with Run All Cells.
LAB_PAGES := 00_quickstart.ipynb 11_perplexity_vs_length.ipynb
# The `notebook` feature's own tests build polars and plotly at opt-level 0, as the notebooks
# do (the dev profile's opt-level 3 for dependencies would take about 25 minutes here), in a
# target directory of their own: none of these artifacts is shared with the other builds.
NOTEBOOK_CARGO := $(CARGO) --config 'profile.dev.package."*".opt-level=0' \
	--config 'build.target-dir="target/notebook-feature"'

# venv (.venv/), evcxr_jupyter, the "rust" kernel; each step skips what is already there.
notebook-setup:
	scripts/setup venv evcxr kernel

# Executes every notebook in notebooks/ with a fresh kernel (fails on any error, on output
# written to stderr, or past NOTEBOOK_TIMEOUT), writes them as HTML, and checks in headless
# Chromium that their figures draw offline; then runs the quickstart inside JupyterLab itself.
test-notebooks: notebook-setup notebooks-check-clean test-notebook-helpers clippy-notebook \
		notebooks-prewarm build $(KATEX)
	scripts/setup browser
	$(NB) run --timeout $(NOTEBOOK_TIMEOUT) --html-dir $(NOTEBOOK_HTML)
	scripts/browser-check $(BROWSER_PAGES)
	scripts/lab-check $(LAB_PAGES)

# Committed notebooks carry no outputs (clear them with `make notebooks-strip`).
notebooks-check-clean: notebook-setup
	$(NB) check-clean

notebooks-strip: notebook-setup
	$(NB) strip

# Builds the notebook dependencies once into the shared evcxr build directory (.evcxr/).
notebooks-prewarm: notebook-setup
	$(NB) prewarm --timeout $(PREWARM_TIMEOUT)

# Executed notebooks as HTML, in target/notebooks-html/.
html: notebook-setup notebooks-prewarm build $(KATEX)
	$(NB) run --timeout $(NOTEBOOK_TIMEOUT) --html-dir $(NOTEBOOK_HTML)

# The headless-Chromium plot check alone, on the HTML of `make html`.
browser-check:
	scripts/setup browser
	scripts/browser-check $(BROWSER_PAGES)

# JupyterLab as `make lab` starts it, driven by headless Chromium: opens each of LAB_PAGES,
# runs all its cells with the Rust kernel, and checks errors, figures and tables.
lab-check: notebook-setup notebooks-prewarm build
	scripts/setup browser
	scripts/lab-check $(LAB_PAGES)

test-notebook-helpers:
	$(NOTEBOOK_CARGO) test --features notebook --lib notebook::
	$(NOTEBOOK_CARGO) test --features notebook --doc notebook

clippy-notebook:
	$(NOTEBOOK_CARGO) clippy --all-targets --features notebook -- -D warnings

# The README's notebook performance figures (--cold: also a build from nothing, minutes).
notebook-timings: notebook-setup notebooks-prewarm
	$(NB) timings --collection $(TIMINGS_ARGS)
