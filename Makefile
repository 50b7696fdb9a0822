# colosched — the two set-up commands are `make demo` and `make test`; both install what they need.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
# Every test target (unit tests, integration tests); not the examples, which lint's clippy checks
# and bench/ builds when it runs them, nor colosched-py, which has no Rust tests (`test = false`).
CARGO_TEST := cargo test --release --workspace --tests
export CARGO_TERM_PROGRESS_WHEN = never

.PHONY: demo test lint lint-rust lint-py build venv sysdeps rust-test py-test bench clean agent-static oci-image bench-agent bench-memwatch

demo: build
	$(VENV)/bin/colosched demo --out out

test: build agent-static sysdeps rust-test py-test

# The node agent as one static binary (no shared libraries: it goes into a VM's initramfs as is),
# and memwatch's own static binary beside it (target/x86_64-unknown-linux-gnu/release/memwatch).
AGENT_STATIC := target/x86_64-unknown-linux-gnu/release/colosched-agent
agent-static:
	RUSTFLAGS='-C target-feature=+crt-static' cargo build --release --quiet --target x86_64-unknown-linux-gnu \
		-p colosched-agent --bin colosched-agent -p colosched-memwatch --bin memwatch

# The static agent as an OCI image layout in target/oci-image (deploy/kubernetes; no container
# daemon needed): push it with skopeo or crane.
oci-image: agent-static venv
	strip -o target/colosched-agent.stripped $(AGENT_STATIC)
	rm -rf target/oci-image
	$(PY) scripts/oci_image.py --binary target/colosched-agent.stripped --out target/oci-image

venv: $(VENV)/.deps-ok
$(VENV)/.deps-ok: pyproject.toml Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet "maturin>=1.5,<2" "polars>=1.0" "rich>=13" "matplotlib>=3.7" "numpy>=1.24" \
		"pytest>=8" "pytest-xdist>=3.5" "ruff>=0.5" "ray>=2.9" "kubernetes-validate>=1.30"
	touch $@

# Builds the Rust engine in release mode and installs the package (editable) into .venv.
build: venv
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --release --quiet

# Debian packages the tests use: Chromium checks the HTML report in a real browser.
sysdeps:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }
	@# qemu boots a 4-NUMA-node guest with a busybox initramfs for the agent's end-to-end test.
	@command -v qemu-system-x86_64 >/dev/null && dpkg -s busybox-static >/dev/null 2>&1 || { apt-get update -qq && \
		apt-get install -y -qq -o DPkg::Lock::Timeout=300 qemu-system-x86 busybox-static >/dev/null; }
	@# The host agent under libvirt: the tests start a libvirtd of their own (no systemd here).
	@command -v libvirtd >/dev/null && command -v virsh >/dev/null || { apt-get update -qq && \
		apt-get install -y -qq -o DPkg::Lock::Timeout=300 --no-install-recommends \
		libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients >/dev/null; }
	@# The OCI image's test unpacks it with umoci, a tool independent of ours.
	@command -v umoci >/dev/null || { apt-get update -qq && apt-get install -y -qq -o DPkg::Lock::Timeout=300 umoci >/dev/null; }
	@# memwatch's guest test builds its allocator with `cc -static` (gcc, and libc6-dev's libc.a).
	@command -v cc >/dev/null && dpkg -s libc6-dev >/dev/null 2>&1 || { apt-get update -qq && \
		apt-get install -y -qq -o DPkg::Lock::Timeout=300 gcc libc6-dev >/dev/null; }

rust-test:
	$(CARGO_TEST)

# First the modules marked `parallel` (pyproject.toml: they assert no timing), two at a time
# (pytest-xdist, one module per worker); then every other test one by one, alone on the machine:
# they check real agents' decisions under loads they make themselves. --durations: the CI log
# names the slowest tests (and fixtures, e.g. a guest's boot), to see where the time goes.
py-test: build
	$(VENV)/bin/pytest -q -rs -m parallel -n 2 --dist loadfile --durations=10
	$(VENV)/bin/pytest -q -rs -m "not parallel" --durations=30

# pip fills the venv (mostly unpacking) while clippy compiles: the two at once, then ruff.
lint:
	$(MAKE) --no-print-directory -j2 -Otarget venv lint-rust
	$(MAKE) --no-print-directory lint-py

lint-rust:
	@command -v shellcheck >/dev/null || { apt-get update -qq && apt-get install -y -qq shellcheck >/dev/null; }
	shellcheck $$(git ls-files '*.sh')
	cargo fmt --all --check
	cargo clippy --release --workspace --all-targets -- -D warnings

lint-py: venv
	$(VENV)/bin/ruff check python tests bench scripts conftest.py
	$(VENV)/bin/ruff format --check python tests bench scripts conftest.py

bench: build
	$(PY) bench/run.py

# The node agent's benchmark (cycle CPU, shell baseline ratio, reaction, memory; ~4 min) and the
# thesis's memcached + BE experiment (docs/agent-experiment.md; ~35 min). Root, 2 CPUs.
bench-agent: build agent-static
	@command -v memcached >/dev/null && command -v cc >/dev/null || { apt-get update -qq && \
		apt-get install -y -qq memcached gcc >/dev/null; }
	-@systemctl disable --now memcached >/dev/null 2>&1 || true
	$(PY) bench/agent_perf.py
	$(PY) bench/agent_experiment.py --rounds 6 --duration 40 \
		--configs lc-only be-unmanaged be-pin0 agent-coarse agent-fine --quiet-wait 180

# memwatch (issue 4): notification latency (Python callbacks, then a Rust caller; then both again
# with no vCPU halting) and threshold overhead (~40 min), then the cache-server demo with and without memwatch (~1 min). Root, cgroup
# v1 memory controller, a C compiler.
bench-memwatch: build agent-static
	$(PY) bench/memwatch_perf.py --crossings 1000 --pairs 100 --keep-awake --out bench/results/memwatch/perf.json
	$(PY) examples/memwatch_demo.py --duration 20 --out bench/results/memwatch/demo.json

clean:
	rm -rf target out $(VENV) python/colosched/_native*.so
