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

# API docs with formulas rendered offline: KaTeX (npm package, fetched once) is copied
# next to the pages.
KATEX_VERSION := 0.16.47
doc: target/katex/package/dist/katex.min.js
	RUSTDOCFLAGS="--html-in-header $(CURDIR)/docs/katex-header.html" $(CARGO) doc --no-deps
	rm -rf target/doc/katex && cp -r target/katex/package/dist target/doc/katex
	@echo "docs: target/doc/posenc/index.html"

target/katex/package/dist/katex.min.js:
	mkdir -p target/katex
	cd target/katex && npm pack --silent katex@$(KATEX_VERSION) >/dev/null && tar xzf katex-$(KATEX_VERSION).tgz

