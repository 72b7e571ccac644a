# accelaes: build, test, speed, install. `make` builds what this machine can build
# (the CUDA plugin only where nvcc is found); missing Debian/PyPI dependencies are
# installed by scripts/dev/install-deps.sh from the targets that need them.
CC      ?= gcc
BUILD   := build
PYTHON  ?= python3
OPENSSL ?= openssl
PREFIX  ?= /usr/local

CFLAGS_BASE := -O2 -g -fPIC -std=gnu11 -pthread -I. \
  -Wall -Wextra -Werror=missing-prototypes -Werror=implicit-function-declaration \
  -fvisibility=hidden -fno-strict-aliasing
LDLIBS := -lcrypto -lpthread -ldl

HAVE_IPSECMB := $(shell test -f /usr/include/intel-ipsec-mb.h && echo 1)
HAVE_NUMA    := $(shell test -f /usr/include/numa.h && echo 1)
NVCC         := $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)

ifeq ($(HAVE_IPSECMB),1)
  CFLAGS_BASE += -DHAVE_IPSECMB=1
  LDLIBS += -lIPSec_MB
endif
ifeq ($(HAVE_NUMA),1)
  CFLAGS_BASE += -DHAVE_NUMA=1
  LDLIBS += -lnuma
endif
# The worker pool is a pthread pool (scheduler/pool.c says why: a forked child hangs in libgomp);
# OpenMP is used only by the seed-style comparison program in bench/.
CFLAGS := $(CFLAGS_BASE) $(EXTRA_CFLAGS)

CORE_SRC := $(wildcard provider/*/*.c accel/cpu/*.c scheduler/*.c)
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/obj/%.o)
# The legacy ENGINE API, for the exit tests' engine (tests/fake_engine.c, tests/c/test_exit_engine.c) only:
# OpenSSL 4.0 removed it (its engine.h is left for source compatibility, with OPENSSL_NO_ENGINE defined and
# nothing to link). Nothing else uses ENGINE; without it those two are not built and tests/system/test_exit.py skips.
HAVE_ENGINE := $(shell printf '\043include <openssl/engine.h>\n\043ifdef OPENSSL_NO_ENGINE\n\043error no ENGINE\n\043endif\n' \
  | $(CC) -E -x c - >/dev/null 2>&1 && echo 1)
TEST_SRC := $(wildcard tests/c/test_*.c)
ifneq ($(HAVE_ENGINE),1)
  TEST_SRC := $(filter-out tests/c/test_exit_engine.c,$(TEST_SRC))
endif
TEST_BIN := $(TEST_SRC:tests/c/%.c=$(BUILD)/tests/%)
TESTLIB_SRC := $(wildcard tests/c/lib/*.c)
TESTLIB_OBJ := $(TESTLIB_SRC:%.c=$(BUILD)/obj/%.o)

# build/bench/evp_small: the small-request harness the README cites (bench/README.md).
# build/accelaes.cnf: the one-program configuration for this build tree (OPENSSL_CONF=$PWD/build/accelaes.cnf, no
# OPENSSL_MODULES), naming build/accelaes.so by its absolute path (accelaes-conf program).
TARGETS := $(BUILD)/accelaes.so $(BUILD)/accelaes-stat $(BUILD)/accelaes-conf $(BUILD)/accelaes.cnf $(TEST_BIN) \
  $(BUILD)/bench/evp_small
ifneq ($(wildcard tools/accelaes-files.c),)
  TARGETS += $(BUILD)/accelaes-files
endif
ifneq ($(wildcard tests/fake_gpu_plugin.c),)
  TARGETS += $(BUILD)/accelaes-fakegpu.so $(BUILD)/tests/fake_gpu_device
endif
# build/bench/gpu_bench: the GPU plugin's end-to-end benchmark (bench/scripts/gpu_issue16.sh, tests/unit/test_gpu_bench_harness.py).
ifneq ($(wildcard bench/src/gpu_bench.c),)
  TARGETS += $(BUILD)/bench/gpu_bench
endif
ifneq ($(wildcard tests/fake_engine.c),)
ifeq ($(HAVE_ENGINE),1)
  TARGETS += $(BUILD)/accelaes-test-engine.so
endif
endif
ifneq ($(NVCC),)
ifneq ($(wildcard accel/cuda/*.cu),)
  TARGETS += $(BUILD)/accelaes-cuda.so
endif
endif

.PHONY: all deps test-deps test speed bench install uninstall clean
all: deps
	@$(MAKE) --no-print-directory build-only
.PHONY: build-only
build-only: $(TARGETS)
ifneq ($(HAVE_IPSECMB),1)
	@echo "note: built without intel-ipsec-mb (HAVE_IPSECMB=$(HAVE_IPSECMB)): no multi-buffer lanes, no ipsec-mb GCM (apt-get install libipsec-mb-dev)"
endif
ifeq ($(NVCC),)
	@echo "note: nvcc not found: the CUDA plugin build/accelaes-cuda.so was not built"
endif

deps:
	@sh scripts/dev/install-deps.sh build
test-deps:
	@sh scripts/dev/install-deps.sh test

$(BUILD)/obj/%.o: %.c $(wildcard */*.h accel/*/*.h provider/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/libaccelaes.a: $(CORE_OBJ)
	@mkdir -p $(BUILD)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/accelaes.so: $(CORE_OBJ) provider/entry/accelaes.map
	$(CC) -shared -Wl,--version-script=provider/entry/accelaes.map -Wl,-z,defs -o $@ $(CORE_OBJ) $(LDLIBS)

$(BUILD)/accelaes-stat: tools/accelaes-stat.c $(wildcard tools/stat_*.c tools/stat.h) $(BUILD)/libaccelaes.a
	$(CC) $(CFLAGS) -fvisibility=default -o $@ $< $(wildcard tools/stat_*.c) $(BUILD)/libaccelaes.a $(LDLIBS)

$(BUILD)/accelaes-files: tools/accelaes-files.c $(wildcard tools/files_*.c tools/files.h) $(BUILD)/libaccelaes.a
	$(CC) $(CFLAGS) -fvisibility=default -o $@ $< $(wildcard tools/files_*.c) $(BUILD)/libaccelaes.a $(LDLIBS)

# accelaes-conf parses and edits configurations only: libcrypto, none of the provider.
$(BUILD)/accelaes-conf: tools/accelaes-conf.c $(wildcard tools/conf_*.c tools/conf_*.h)
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS) -o $@ $< $(wildcard tools/conf_*.c) -lcrypto

$(BUILD)/accelaes.cnf: $(BUILD)/accelaes-conf $(BUILD)/accelaes.so
	$(BUILD)/accelaes-conf program --module "$(abspath $(BUILD))/accelaes.so" > $@.tmp && mv $@.tmp $@

$(BUILD)/accelaes-fakegpu.so: tests/fake_gpu_plugin.c tests/fake_gpu_device.h accel/gpu_plugin.h $(BUILD)/libaccelaes.a
	$(CC) $(CFLAGS) -shared -o $@ $< $(BUILD)/libaccelaes.a $(LDLIBS)

# The fake plugin's device process (ACCELAES_FAKEGPU_DEVICE=process), found beside it in tests/.
$(BUILD)/tests/fake_gpu_device: tests/fake_gpu_device.c tests/fake_gpu_device.h $(BUILD)/libaccelaes.a
	@mkdir -p $(BUILD)/tests
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libaccelaes.a $(LDLIBS)

# A legacy ENGINE for the exit tests (tests/system/test_exit.py); the ENGINE API is deprecated in 3.0.
$(BUILD)/accelaes-test-engine.so: tests/fake_engine.c
	$(CC) $(CFLAGS) -fvisibility=default -Wno-deprecated-declarations -shared -o $@ $< -lcrypto

# tests/c/*.h are the C tests' helpers (test_*_common.h shared, the others a section of one test), not test
# programs of their own.
$(BUILD)/tests/%: tests/c/%.c $(wildcard tests/c/*.h) $(BUILD)/libaccelaes.a $(TESTLIB_OBJ)
	@mkdir -p $(BUILD)/tests
	$(CC) $(CFLAGS) -fopenmp -fvisibility=default -o $@ $< $(TESTLIB_OBJ) $(BUILD)/libaccelaes.a $(LDLIBS) -fopenmp

# The sandbox test installs an OpenSSH-like seccomp filter with libseccomp (libseccomp-dev).
$(BUILD)/tests/test_seccomp_child: LDLIBS += -lseccomp
# The registration cache's test includes the plugin's accel/cuda/regcache.cu (plain C).
$(BUILD)/tests/test_regcache: accel/cuda/regcache.cu $(wildcard accel/cuda/regcache*.h)

# ---- CUDA plugin (accel/cuda/), built only where nvcc exists ----
NVCC_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_90,code=compute_90
NVCCFLAGS := -O3 -std=c++17 -I. -Xcompiler -fPIC,-fvisibility=hidden,-Wall $(NVCC_ARCH)
CUDA_SRC := $(wildcard accel/cuda/*.cu)
$(BUILD)/accelaes-cuda.so: $(CUDA_SRC) $(wildcard accel/cuda/*.h accel/cuda/*.cuh) accel/gpu_plugin.h
	@mkdir -p $(BUILD)
	$(NVCC) $(NVCCFLAGS) -shared -o $@ $(CUDA_SRC) -Xlinker --version-script=accel/cuda/plugin.map

# The pytest suite in tiers (tests/README.md): tests/unit (one component, its C test, the tools), tests/conformance
# (the same bytes and errors as the default provider, on every engine and path this machine has: the `engine`
# fixture, tests/engines.py) and tests/system (TLS, real programs and servers, process models, the package).
# `make test-unit`, `make test-conformance`, `make test-system`: one tier each; `make check`: the fast tiers, unit
# and conformance (under 4 minutes on 2 cores); `make test`: all three, then the sanitizer and fuzzing runs.
# Most tests wait on child processes, so CHECK_JOBS pytest-xdist workers (more than the cores) pay; each takes a
# whole test file at a time, whose tests share module fixtures (servers, the fuzz corpus replay's build). Tests
# marked machine_wide run alone (tests/conftest.py). Without xdist, or CHECK_JOBS=0: one process.
CHECK_JOBS ?= 4
CHECK_TIERS ?= unit conformance
PYTEST_TIERS = par=$$(sh scripts/dev/pytest-jobs.sh $(PYTHON) $(CHECK_JOBS)); \
  echo "ACCELAES_BUILD_DIR=$(BUILD) $(PYTHON) -m pytest -q -ra $$par $(1)"; \
  ACCELAES_BUILD_DIR=$(BUILD) $(PYTHON) -m pytest -q -ra $$par $(1)
.PHONY: check test-unit test-conformance test-system
check: all test-deps
	@$(call PYTEST_TIERS,$(CHECK_TIERS:%=tests/%))
test-unit test-conformance test-system: all test-deps
	@$(call PYTEST_TIERS,tests/$(@:test-%=%))

# `make test`: every tier, in CHECK_JOBS workers as make check runs its two (machine_wide tests still run
# alone), then the same C and pytest suites on an AddressSanitizer+UBSan build, then the committed fuzz
# corpus and a bounded differential fuzzing run (CI runs exactly this). `make test CHECK_JOBS=0` runs the
# tiers in one process, as this target did until CI's 90 minutes ran out (11 of its minutes went here).
test: all test-deps
	@$(MAKE) --no-print-directory check CHECK_TIERS="unit conformance system"
	$(MAKE) --no-print-directory test-asan
	$(MAKE) --no-print-directory fuzz-smoke

# `make style [STYLE_BASE=origin/main]`: clang-format (.clang-format) on the C and CUDA lines changed since
# STYLE_BASE (default HEAD: the uncommitted changes), never on whole existing files (scripts/dev/style-check.sh).
.PHONY: style
style:
	sh scripts/dev/style-check.sh $(STYLE_BASE)

# `make test-compat`: peer projects' suites, each run without and with conf/accelaes.cnf
# (OPENSSL_MODULES=$(BUILD)), and every test case must end the same way in both: OpenSSL's
# evp_test (AES, stitched and DRBG recipes) and ssl_test (test/ssl-tests) from the Debian source of
# the installed libssl3, built against the installed libraries, and pyca/cryptography's AES,
# padding, CMAC and Fernet tests against Debian's python3-cryptography (scripts/ci/compat/run.sh).
# Logs in $(COMPAT_DIR); `make BUILD=build-compat test-compat` tests another build tree.
COMPAT_DIR ?= build/compat
COMPAT_TIMEOUT ?= 1500
.PHONY: test-compat
test-compat: deps
	@sh scripts/dev/install-deps.sh compat
	@$(MAKE) --no-print-directory $(BUILD)/accelaes.so $(BUILD)/accelaes-stat
	COMPAT_MODULES=$(BUILD) COMPAT_DIR=$(COMPAT_DIR) timeout $(COMPAT_TIMEOUT) bash scripts/ci/compat/run.sh

# `make test-release RELEASE=trixie [RELEASE_TEST="check test-compat"]`: this checkout, as a fresh clone has it, built
# and tested in a Debian root of that release kept in build/releases/RELEASE (scripts/ci/release-root.sh: bookworm
# OpenSSL 3.0, trixie 3.5 LTS, forky 3.6, sid-exp sid with experimental's 4.0), through the README's own commands:
# `make` (which installs what it needs), then the targets in RELEASE_TEST. CI runs trixie with the compat suites,
# the real programs and the package, forky and sid-exp with make check.
RELEASE ?= trixie
RELEASE_TEST ?= check
.PHONY: test-release
test-release:
	sh scripts/ci/release-root.sh $(RELEASE) sh -c 'make && make $(RELEASE_TEST)'

# `make test-release-cross RELEASE=trixie`: the module built on this machine's OpenSSL (without lanes, whose
# library's soname differs between releases) loaded by RELEASE's libcrypto must answer as RELEASE's default
# provider: the decisions are taken at run time, not from the headers it was built with.
CROSS_TESTS ?= tests/conformance/test_error_codes.py tests/conformance/test_params.py tests/conformance/test_gcm.py \
  tests/conformance/test_skey.py tests/conformance/test_differential.py tests/system/test_tls_stitched.py \
  tests/conformance/test_pipeline.py
.PHONY: test-release-cross
test-release-cross:
	$(MAKE) --no-print-directory BUILD=build/cross HAVE_IPSECMB= build-only
	ACCELAES_RELEASE_CARRY=build/cross sh scripts/ci/release-root.sh $(RELEASE) sh -c \
	  'make test-deps && ACCELAES_BUILD_DIR=build/cross python3 -m pytest -q -ra -p no:cacheprovider $(CROSS_TESTS)'

# Sanitizer runs (scripts/ci/sanitize.sh): everything rebuilt under build/asan (address+undefined) or
# build/tsan (thread), then the C tests and, for asan, the pytest suite against that build.
# `make valgrind`: memcheck over a whole provider life, both engines (tests/system/test_valgrind.py).
.PHONY: test-asan test-tsan valgrind
test-asan: deps test-deps
	PYTHON=$(PYTHON) sh scripts/ci/sanitize.sh asan
test-tsan: deps test-deps
	PYTHON=$(PYTHON) sh scripts/ci/sanitize.sh tsan
valgrind: all test-deps
	$(PYTHON) -m pytest -q -ra tests/system/test_valgrind.py

# make speed and make bench write under $(BUILD)/results and leave the checkout alone; `make bench-publish`
# copies what is there into bench/results/ on purpose, for a commit (git diff bench/results shows it).
speed: all
	@sh bench/scripts/speed.sh

# `make speed-releases [RELEASES="bookworm trixie forky sid-exp"]`: accelaes / each release's own default in
# thread CPU time (bench/scripts/releases_cpu.sh), here and in the roots of scripts/ci/release-root.sh.
RELEASES ?= bookworm trixie forky sid-exp
.PHONY: speed-releases
speed-releases: all
	@sh bench/scripts/releases_cpu.sh $(RELEASES)

# `make bench`: the whole benchmark (bench/scripts/run.py; BENCH_ARGS=--quick for the ~5 minute version).
# bench/src/*.c are comparison programs and load generators: `make build/bench/NAME` builds any of them;
# make bench builds the two that bench/scripts/run.py runs.
BENCH_BIN := $(BUILD)/bench/seed_files $(BUILD)/bench/reqload
$(BUILD)/bench/%: bench/src/%.c $(BUILD)/libaccelaes.a
	@mkdir -p $(BUILD)/bench
	$(CC) $(CFLAGS) -fopenmp -fvisibility=default -o $@ $< $(BUILD)/libaccelaes.a $(LDLIBS) -fopenmp

# `make bench-gpu`: everything bench/scripts/gpu_issue16.sh runs on a device machine, which builds nothing: the tree,
# and the kernel-only benchmark where nvcc is found.
.PHONY: bench-gpu
bench-gpu: build-only $(if $(NVCC),$(BUILD)/bench/gpu_kbench)
$(BUILD)/bench/gpu_kbench: bench/src/gpu_bench_kernels.cu accel/cuda/kernels.cu $(wildcard accel/cuda/*.h) accel/gpu_plugin.h
	@mkdir -p $(BUILD)/bench
	$(NVCC) -O3 -std=c++17 -I. $(NVCC_ARCH) -o $@ bench/src/gpu_bench_kernels.cu accel/cuda/kernels.cu -lcrypto

bench: all $(BENCH_BIN)
	@sh scripts/dev/install-deps.sh bench
	$(PYTHON) bench/scripts/run.py $(BENCH_ARGS)

.PHONY: bench-publish
bench-publish:
	@set -e; n=0; for f in $(BUILD)/results/speed-latest.md $(BUILD)/results/bench-*.json \
	  $(BUILD)/results/bench-*.md $(BUILD)/results/bench-*.png; do \
	  [ -f "$$f" ] || continue; install -m 0644 "$$f" bench/results/; echo "bench-publish: $$f -> bench/results/"; \
	  n=$$((n + 1)); done; \
	[ $$n -gt 0 ] || { echo "bench-publish: nothing in $(BUILD)/results: run make speed or make bench first" >&2; exit 1; }

# `make fuzz`: the differential libFuzzer target against OpenSSL's default provider (fuzz/README.md)
# for FUZZ_SECONDS, growing build/fuzz/corpus; `make fuzz-smoke`: the committed corpus replayed, then
# FUZZ_SMOKE_SECONDS of fuzzing (the bounded run for CI). clang + libFuzzer come with test-deps.
FUZZ_SECONDS ?= 600
FUZZ_SMOKE_SECONDS ?= 60
.PHONY: fuzz fuzz-smoke
fuzz: test-deps
	HAVE_IPSECMB=$(HAVE_IPSECMB) HAVE_NUMA=$(HAVE_NUMA) sh fuzz/run.sh fuzz $(FUZZ_SECONDS)
fuzz-smoke: test-deps
	HAVE_IPSECMB=$(HAVE_IPSECMB) HAVE_NUMA=$(HAVE_NUMA) sh fuzz/run.sh smoke $(FUZZ_SMOKE_SECONDS)

# `make deb`: build/accelaes_VERSION_ARCH.deb (scripts/pkg/mkdeb.sh: the module in MODULESDIR, the tools in
# /usr/bin, conf/accelaes.cnf in /usr/share/accelaes, man pages; Depends from dpkg-shlibdeps).
# `make test-deb` (root; changes the machine): installs it, checks it with no OPENSSL_MODULES, removes
# it (tests/system/test_deb.py), then installs it again for the real-program and TLS tests
# (tests/system/test_tls*.py) against the package (ACCELAES_INSTALLED=1) and purges it. CI runs it.
DEB_BIN := $(BUILD)/accelaes.so $(BUILD)/accelaes-stat $(BUILD)/accelaes-files $(BUILD)/accelaes-conf
ifneq ($(NVCC),)
ifneq ($(wildcard accel/cuda/*.cu),)
  DEB_BIN += $(BUILD)/accelaes-cuda.so
endif
endif
.PHONY: deb test-deb
deb: deps
	@sh scripts/dev/install-deps.sh deb
	@$(MAKE) --no-print-directory $(DEB_BIN)
	sh scripts/pkg/mkdeb.sh $(BUILD)
test-deb: deb test-deps
	ACCELAES_BUILD_DIR=$(BUILD) ACCELAES_TEST_INSTALLED_DEB=1 $(PYTHON) -m pytest -q -ra -p no:cacheprovider tests/system/test_deb.py
	@if dpkg-query -W accelaes >/dev/null 2>&1; then echo "test-deb: accelaes is installed already: not replacing it" >&2; exit 1; fi
	dpkg -i $(BUILD)/accelaes_*.deb
	ACCELAES_BUILD_DIR=$(BUILD) ACCELAES_INSTALLED=1 $(PYTHON) -m pytest -q -ra -p no:cacheprovider tests/system/test_real_programs.py tests/system/test_tls*.py; \
	  rc=$$?; dpkg --purge accelaes; exit $$rc

# `make install [PREFIX=/usr/local] [DESTDIR=/staging]`: what the package installs (scripts/pkg/mkdeb.sh), under PREFIX: the
# module (and the CUDA plugin) into MODULESDIR, the three tools into bin, man pages, and share/accelaes/accelaes.cnf,
# a one-program configuration naming the installed module by absolute path (accelaes-conf program).
INSTALL_TOOLS := accelaes-conf accelaes-stat accelaes-files
INSTALL_MAN1 := accelaes-conf accelaes-stat accelaes-files
install: all
	@set -e; md="$$($(OPENSSL) version -m | sed 's/.*"\(.*\)"/\1/')"; \
	  install -d "$(DESTDIR)$$md"; \
	  echo "install -m 0755 $(BUILD)/accelaes.so $(DESTDIR)$$md/accelaes.so"; install -m 0755 $(BUILD)/accelaes.so "$(DESTDIR)$$md/accelaes.so"; \
	  if [ -f $(BUILD)/accelaes-cuda.so ]; then install -m 0755 $(BUILD)/accelaes-cuda.so "$(DESTDIR)$$md/accelaes-cuda.so"; fi; \
	  install -d "$(DESTDIR)$(PREFIX)/share/accelaes"; \
	  $(BUILD)/accelaes-conf program --module "$$md/accelaes.so" > "$(DESTDIR)$(PREFIX)/share/accelaes/accelaes.cnf"; \
	  chmod 0644 "$(DESTDIR)$(PREFIX)/share/accelaes/accelaes.cnf"
	for t in $(INSTALL_TOOLS); do install -D -m 0755 $(BUILD)/$$t "$(DESTDIR)$(PREFIX)/bin/$$t" || exit 1; done
	for m in $(INSTALL_MAN1); do install -D -m 0644 docs/man/$$m.1 "$(DESTDIR)$(PREFIX)/share/man/man1/$$m.1" || exit 1; done
	install -D -m 0644 docs/man/accelaes.7 "$(DESTDIR)$(PREFIX)/share/man/man7/accelaes.7"
	@echo "system-wide offload is not enabled by install: run accelaes-conf enable (docs/transparent-offload.md);"
	@echo "for one program: OPENSSL_CONF=$(PREFIX)/share/accelaes/accelaes.cnf program"

uninstall:
	md="$$($(OPENSSL) version -m | sed 's/.*"\(.*\)"/\1/')"; rm -f "$(DESTDIR)$$md/accelaes.so" "$(DESTDIR)$$md/accelaes-cuda.so"
	for t in $(INSTALL_TOOLS); do rm -f "$(DESTDIR)$(PREFIX)/bin/$$t"; done
	for m in $(INSTALL_MAN1); do rm -f "$(DESTDIR)$(PREFIX)/share/man/man1/$$m.1"; done
	rm -f "$(DESTDIR)$(PREFIX)/share/man/man7/accelaes.7" "$(DESTDIR)$(PREFIX)/share/accelaes/accelaes.cnf"
	rmdir "$(DESTDIR)$(PREFIX)/share/accelaes" 2>/dev/null || true

clean:
	rm -rf $(BUILD)
