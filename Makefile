# The two commands of the README: `make lab` and `make test`.
SHELL := /bin/bash
CARGO ?= cargo

.PHONY: lab test test-rust build fmt-check clippy doc

# Set up and open the notebooks (extended by the notebook toolchain).
lab: build

# The release binary used by notebooks and the CLI.
build:
	$(CARGO) build --release --bin posenc

# Every test.
test: test-rust

test-rust: fmt-check clippy
	$(CARGO) test --all-targets
	$(CARGO) test --doc

fmt-check:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --all-targets -- -D warnings

doc:
	RUSTDOCFLAGS="--html-in-header docs/katex-header.html" $(CARGO) doc --no-deps
