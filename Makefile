# ccrig: `make deps` installs everything, `make experiment` runs a spec, `make test` runs every tier.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
CCRIG := $(VENV)/bin/ccrig
SPEC ?= experiments/specs/default.yaml
# Debian packages (Debian 12 / Ubuntu 22.04+ names). The kernel image and headers are the distribution's,
# booted under virtme-ng by the vm testbed and test tier; mininet is Debian's (system python).
APT_PACKAGES := iproute2 iperf3 ethtool iputils-ping procps psmisc kmod tcpdump sudo \
	prometheus python3-venv python3-pip python3-dev \
	make gcc libc6-dev clang llvm libbpf-dev bpftool libelf-dev \
	linux-image-amd64 linux-headers-amd64 busybox-static qemu-system-x86 e2fsprogs \
	mininet openvswitch-switch bridge-utils openssh-server openssh-client prometheus-node-exporter

.PHONY: deps deps-apt deps-python experiment test test-unit test-host test-vm test-vm-slow bench soak clean

deps: deps-apt deps-python

deps-apt:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:" $$missing; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi

# --system-site-packages so the environment sees Debian's mininet module
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || /usr/bin/python3 -m venv --system-site-packages $(VENV)
	$(PY) -m pip install -q -U pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

deps-python: $(VENV)/.installed

experiment: deps
	$(CCRIG) run $(SPEC)

# Test files run side by side (pytest-xdist; tests/conftest.py says how they are grouped). The vm tier goes first:
# its guests, one after another on one worker, are the longest path; the unit files next, so the unit of work
# that waits behind the guests on their worker is a short one (--no-loadscope-reorder: xdist would otherwise start
# the groups with the most tests first, and the vm tier's few, longest, last).
TEST_WORKERS ?= 3
test: deps
	$(PY) -m pytest -ra --durations=50 -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder tests/vm tests/unit tests/host

test-unit: deps-python
	$(PY) -m pytest -ra tests/unit

test-host: deps
	$(PY) -m pytest -ra -n $(TEST_WORKERS) --dist loadgroup tests/host

test-vm: deps
	$(PY) -m pytest -ra tests/vm

# what is too slow under TCG for every CI run: the guest tests with SSH hosts on e1000e NICs inside the guest, and
# keshav's quick study with all eight specs (CI runs three: tests/vm/test_studies_quick.py)
test-vm-slow: deps
	CCRIG_GUEST_PYTEST_ARGS="tests/vm/guest -m slow_guest" $(PY) -m pytest -ra tests/vm/test_vm_tier.py
	CCRIG_QUICK_ALL_SPECS=1 $(PY) -m pytest -ra tests/vm/test_studies_quick.py -k keshav

bench: deps
	mkdir -p results/bench
	$(PY) tests/bench/run.py $(BENCH)

# N short runs back to back, a tenth killed (SIGKILL) and cleaned; leftovers -> results/bench/soak.json
N ?= 10
soak: deps
	mkdir -p results/bench
	N=$(N) $(PY) tests/bench/soak.py

clean:
	-$(CCRIG) clean
