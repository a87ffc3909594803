# llamapi — one Makefile for the server, the CLI, tools, tests and benchmarks.
# Sources are discovered by wildcard: a new module is a new .c/.h pair under src/<layer>/,
# a new unit test is tests/unit/<layer>/test_<module>.c (the folders mirror src/; the binary is
# $(O)/tests/test_<module>), a new tool is tools/<name>.c.
#
#   make            release build (build/release)
#   make test       deps, unit tests under ASan+UBSan, e2e tests on the release build
#   make asan|tsan  sanitizer builds (build/asan, build/tsan)
#   make run        build and start the server on 127.0.0.1:9265
#   make ARCH=aarch64 [BUILD=asan]   cross build for 64-bit ARM (build/aarch64-$(BUILD)), with
#                   Debian's gcc-aarch64-linux-gnu and the arm64 -dev packages (multiarch)
#   make test-aarch64  that build's unit tests and a server smoke test under qemu-user
#   make deb        Debian packages in build/deb (the host's, and arm64 cross-built on amd64)

BUILD   ?= release
HOST_ARCH := $(shell uname -m)
ARCH    ?= $(HOST_ARCH)
ifeq ($(ARCH),$(HOST_ARCH))
O       := build/$(BUILD)
CC      ?= cc
PKG_CONFIG ?= pkg-config
else ifeq ($(ARCH),aarch64)
# Cross build: its own folder, the cross compiler, pkg-config reading only the arm64 .pc files.
O       := build/aarch64-$(BUILD)
CC      := aarch64-linux-gnu-gcc
PKG_CONFIG := PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig pkg-config
else
$(error ARCH=$(ARCH): only the host architecture or aarch64)
endif
PKGS    := libmicrohttpd jansson libpcre2-8 libutf8proc libcurl libpng libjpeg libwebp sndfile libmpg123 nettle
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null)
CMOCKA_LIBS := $(shell $(PKG_CONFIG) --libs cmocka 2>/dev/null)

WARN := -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wpointer-arith -Wcast-qual -Wformat=2 -Wundef -Wvla \
        -Werror=implicit-function-declaration -Werror=incompatible-pointer-types
ifeq ($(CI),true)
WARN += -Werror
endif

CPPFLAGS := -Isrc -D_POSIX_C_SOURCE=200809L $(PKG_CFLAGS) -MMD -MP
CFLAGS_release := -O2 -g
CFLAGS_asan    := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
                  -fno-sanitize-recover=undefined
CFLAGS_tsan    := -O1 -g -fsanitize=thread
CFLAGS_fuzz    := -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined
CFLAGS   := -std=c11 $(WARN) $(CFLAGS_$(BUILD)) $(EXTRA_CFLAGS)
LDFLAGS  := $(filter -fsanitize=%,$(CFLAGS_$(BUILD))) $(EXTRA_LDFLAGS)
LDLIBS   := $(PKG_LIBS) -lm -lpthread

MAIN_SRC := src/server/main.c src/cli/main.c
# Kernel files of one ISA are compiled only for their architecture: x86 ones are *_avx2.c /
# *_avx512.c or under an x86/ folder, ARM ones *_neon.c or under an arm/ folder.
X86_SRC  := $(shell find src -name '*_avx2.c' -o -name '*_avx512*.c' -o -path '*/x86/*.c')
ARM_SRC  := $(shell find src -name '*_neon.c' -o -path '*/arm/*.c')
ifeq ($(ARCH),aarch64)
ISA_SKIP := $(X86_SRC)
else
ISA_SKIP := $(ARM_SRC)
endif
LIB_SRC  := $(filter-out $(MAIN_SRC) $(ISA_SKIP),$(shell find src -name '*.c' | sort))
LIB_OBJ  := $(LIB_SRC:%.c=$(O)/%.o)
LIB      := $(O)/libllamapi.a
TEST_SRC := $(sort $(wildcard tests/unit/*/test_*.c))
TEST_NAMES := $(basename $(notdir $(TEST_SRC)))
TEST_BIN := $(addprefix $(O)/tests/,$(TEST_NAMES))
TEST_HELPER_SRC := $(wildcard tests/unit/support/*.c)
TEST_HELPER_OBJ := $(TEST_HELPER_SRC:%.c=$(O)/%.o)
TOOL_SRC := $(wildcard tools/*.c)
TOOL_BIN := $(TOOL_SRC:tools/%.c=$(O)/bin/%)
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(O)/fuzz/%)
BENCH_SRC := $(wildcard bench/*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(O)/bench/%)
SERVER   := $(O)/bin/llamapi-server
CLI      := $(O)/bin/llamapi

# Fake vendor runtimes for the e2e tests: tests/fakes/fake_<name>.c → $(O)/fakes/lib<name>_fake.so
# (rkllm also as librkllm_fake_1_2.so, its 1.2 ABI, and librkllm_fake_1_2_0.so, a 1.2.0/1.2.1b1
# look-alike the server must refuse). The server opens them with dlopen like the
# real ones (--rkllm-lib …); they are built with the build's flags, so the ASan server checks
# them too.
FAKE_SRC  := $(wildcard tests/fakes/fake_*.c)
FAKE_LIBS := $(FAKE_SRC:tests/fakes/fake_%.c=$(O)/fakes/lib%_fake.so) \
             $(if $(filter tests/fakes/fake_rkllm.c,$(FAKE_SRC)),$(O)/fakes/librkllm_fake_1_2.so $(O)/fakes/librkllm_fake_1_2_0.so)

# Objects stay after a build (bench, fuzz and tool objects are intermediate otherwise), and
# a missing one is rebuilt: a bare .SECONDARY made every target secondary, so a new source
# file was never compiled while the library was newer than it.
.PRECIOUS: $(O)/%.o
.PHONY: test-aarch64 test-after-deps fuzz fuzzers demo-model all fakes lib tests tools benches test unit asan tsan run clean format format-check deps \
        e2e bench check-headers check-layers compat deb
all: $(SERVER) $(CLI) $(TOOL_BIN) $(FAKE_LIBS)
fakes: $(FAKE_LIBS)
ifeq ($(ARCH),aarch64)
# the cross build builds everything it can run under emulation (benches in release only)
all: $(TEST_BIN) $(if $(filter release,$(BUILD)),$(BENCH_BIN))
endif
lib: $(LIB)
tests: $(TEST_BIN) $(FAKE_LIBS)
tools: $(TOOL_BIN)
benches: $(BENCH_BIN)

# Kernels: -O3, and per-file ISA flags only for *_avx2.c (AVX-VNNI too for *_vnni_avx2.c) and
# *_avx512.c (src/engine/quants/x86/); dispatch happens at run time (engine/quants/quants.c).
$(O)/src/engine/%_avx2.o: CFLAGS += -O3 -mavx2 -mfma -mf16c
$(O)/src/engine/%_avx512.o: CFLAGS += -O3 -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl \
                                      -mavx512dq -mavx512vnni -mavx512bf16
$(O)/src/engine/quants/%.o: CFLAGS += -O3
$(O)/src/engine/quants/%_vnni_avx2.o: CFLAGS += -mavxvnni
# ARM: the baseline (ARMv8.0 + NEON) everywhere; the dotprod (sdot) and i8mm (smmla) files get
# their extension each, and run only when getauxval says the core has it.
$(O)/src/engine/quants/arm/%.o: CFLAGS += -O3
$(O)/src/engine/arm/%.o: CFLAGS += -O3
$(O)/%_dotprod.o: CFLAGS += -march=armv8.2-a+dotprod
$(O)/%_i8mm.o: CFLAGS += -march=armv8.2-a+dotprod+i8mm
ifeq ($(ARCH),aarch64)
# Debian 12's aarch64 gcc 12 stops with an internal error vectorizing a reduction in this test.
$(O)/tests/unit/engine/test_quants.o: CFLAGS += -fno-tree-vectorize
endif

# Unit tests include their shared helpers (fakes, fixtures, JSON asserts) by name.
$(O)/tests/unit/%.o: CPPFLAGS += -Itests/unit/support

$(O)/%.o: %.c
	@mkdir -p $(@D)
	@echo "  CC  $<"
	@$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(@D)
	@rm -f $@ && ar rcs $@ $^

$(SERVER): $(O)/src/server/main.o $(LIB)
	@mkdir -p $(@D)
	@echo "  LD  $@"
	@$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(CLI): $(O)/src/cli/main.o $(LIB)
	@mkdir -p $(@D)
	@echo "  LD  $@"
	@$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(O)/bin/%: $(O)/tools/%.o $(LIB)
	@mkdir -p $(@D)
	@echo "  LD  $@"
	@$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(O)/bench/%: $(O)/bench/%.o $(LIB)
	@mkdir -p $(@D)
	@echo "  LD  $@"
	@$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(O)/fuzz/%: $(O)/tests/fuzz/%.o $(LIB)
	@mkdir -p $(@D)
	@echo "  LD  $@"
	@$(CC) -fsanitize=fuzzer,address,undefined $^ $(LDLIBS) -o $@

# A test binary from its source in whichever layer folder holds it.
define TEST_LINK
$(O)/tests/$(basename $(notdir $(1))): $(O)/$(1:.c=.o) $(TEST_HELPER_OBJ) $(LIB)
	@mkdir -p $$(@D)
	@echo "  LD  $$@"
	@$$(CC) $$(LDFLAGS) $$^ $$(LDLIBS) $$(CMOCKA_LIBS) -o $$@
endef
$(foreach t,$(TEST_SRC),$(eval $(call TEST_LINK,$(t))))

$(O)/fakes/lib%_fake.so: tests/fakes/fake_%.c
	@mkdir -p $(@D)
	@echo "  SO  $@"
	@$(CC) $(CPPFLAGS) -Itests/fakes $(CFLAGS) -fPIC -shared $(LDFLAGS) $< -lpthread -o $@

$(O)/fakes/librkllm_fake_1_2.so: tests/fakes/fake_rkllm.c
	@mkdir -p $(@D)
	@echo "  SO  $@"
	@$(CC) $(CPPFLAGS) -Itests/fakes -DFAKE_RKLLM_ABI=12 $(CFLAGS) -fPIC -shared $(LDFLAGS) $< -lpthread -o $@

$(O)/fakes/librkllm_fake_1_2_0.so: tests/fakes/fake_rkllm.c
	@mkdir -p $(@D)
	@echo "  SO  $@"
	@$(CC) $(CPPFLAGS) -Itests/fakes -DFAKE_RKLLM_ABI=120 $(CFLAGS) -fPIC -shared $(LDFLAGS) $< -lpthread -o $@

deps:
	@scripts/install-deps.sh

# Whether the aarch64 cross build and its emulated tests can run here; defined before the
# test rule, whose ifeq is read when make parses it.
AARCH64_READY := $(shell command -v aarch64-linux-gnu-gcc >/dev/null && \
                   { command -v qemu-aarch64-static || command -v qemu-aarch64; } >/dev/null && echo yes)
# Unit tests under ASan+UBSan, the threaded ones again under TSan, each fuzzer over its seeds
# plus a fixed-seed run of mutations, then e2e against the release build and again against the
# ASan+UBSan one (every server must exit cleanly, with no sanitizer report); one summary line.
TSAN_TESTS ?= test_core test_cpu_model test_cpu_embed test_instances test_bert test_threadpool test_model test_content test_tokenizer test_workers
TEST_FUZZ_RUNS ?= 30000 # per fuzzer, fixed seed: the same inputs on every run
# deps first, then a fresh make: AARCH64_READY and the pkg-config flags are read when make
# parses this file, which must be after deps installed what they look for.
test: deps
	@$(MAKE) --no-print-directory test-after-deps
# Each variant builds with one job per core (JOBS): the variants one after another, the files
# of each in parallel.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
SUBMAKE = $(MAKE) --no-print-directory -j$(JOBS)
test-after-deps: check-layers
	@$(SUBMAKE) BUILD=asan all tests tools
	@$(SUBMAKE) BUILD=tsan $(addprefix build/tsan/tests/,$(filter $(TSAN_TESTS),$(TEST_NAMES)))
	@$(SUBMAKE) BUILD=fuzz CC=clang fuzzers
	@$(SUBMAKE) BUILD=release all benches
ifeq ($(AARCH64_READY),yes)
	@$(SUBMAKE) ARCH=aarch64 BUILD=release all tests benches
endif
	@$(if $(AARCH64_READY),LLAMAPI_AARCH64_DIR=build/aarch64-release) LLAMAPI_TSAN_DIR=build/tsan LLAMAPI_FUZZ_DIR=build/fuzz LLAMAPI_FUZZ_RUNS=$(TEST_FUZZ_RUNS) \
	  LLAMAPI_E2E_ASAN_DIR=build/asan scripts/run-tests.sh build/asan build/release

# The aarch64 cross build under qemu-user: unit tests on two emulated CPU models and a server
# smoke test (scripts/test-aarch64.sh); BUILD=asan for the ASan+UBSan build (no leak check). `make test` runs it when the cross compiler
# and qemu are installed (scripts/install-deps.sh installs them on x86-64).
test-aarch64:
	@$(MAKE) --no-print-directory ARCH=aarch64 BUILD=$(BUILD) all
	@scripts/test-aarch64.sh build/aarch64-$(BUILD)

unit: tests tools
	@scripts/run-tests.sh --unit-only $(O) $(O)

e2e: all
	@scripts/run-tests.sh --e2e-only $(O) $(O)

asan:
	@$(MAKE) --no-print-directory BUILD=asan all tests

tsan:
	@$(MAKE) --no-print-directory BUILD=tsan all tests

# libFuzzer targets (clang), each run for FUZZ_SECONDS from its seed corpus.
FUZZ_SECONDS ?= 30
fuzzers: $(FUZZ_BIN)
fuzz:
	@$(MAKE) --no-print-directory BUILD=fuzz CC=clang fuzzers
	@scripts/run-fuzz.sh build/fuzz $(FUZZ_SECONDS)

# The demo model `make run` serves when no other is given: a small qwen2-shaped model with
# random weights and a ChatML template, written by our own gguf-synth (it answers gibberish;
# it is there so the API works on a fresh machine). Its output matrix is its own: with random
# weights tied to the embeddings, the last prompt token ("\n" after ChatML's assistant tag)
# wins every step and the demo answered nothing but newlines.
DEMO_MODEL := $(O)/models/demo.gguf
$(DEMO_MODEL): $(O)/bin/gguf-synth Makefile
	@mkdir -p $(@D)
	@$(O)/bin/gguf-synth --arch qwen2 --layers 4 --embd 256 --heads 4 --heads-kv 2 --ffn 512 \
	  --ctx 2048 --type q8_0 --seed 42 --words -o $@
demo-model: $(DEMO_MODEL)

# deps first, then a fresh make: pkg-config flags are read when make parses this file.
RUN_ARGS ?= -m $(DEMO_MODEL) --alias demo
# Serving needs no cross toolchain nor the browser test's chromium: only the host's build
# dependencies are installed here.
run:
	@LLAMAPI_DEPS_AARCH64=0 LLAMAPI_DEPS_TESTS=0 scripts/install-deps.sh
	@$(MAKE) --no-print-directory all demo-model
	$(SERVER) $(RUN_ARGS) $(ARGS)

bench: benches
ifeq ($(ARCH)-$(filter aarch64,$(HOST_ARCH)),aarch64-)
	@scripts/bench-aarch64.sh $(O) # cross build: under qemu-user, small models
else
	@scripts/run-bench.sh $(O)
endif

# llama.cpp's own server test suite against our server and the reference llama-server (needs
# the reference checkout and python3-pytest; not part of `make test`).
compat: all
	@scripts/run-peer-suite.sh $(SERVER)

# Debian packages with dpkg-deb (scripts/build-deb.sh): the host architecture's from the release
# build and, on amd64 with the cross toolchain, arm64's from the aarch64 release build (its man
# pages generated from the host binary's --help). Output: build/deb/llamapi_VERSION_ARCH.deb.
DEB_ARCH := $(shell dpkg --print-architecture 2>/dev/null)
deb:
	@$(MAKE) --no-print-directory BUILD=release build/release/bin/llamapi-server build/release/bin/llamapi
	@scripts/build-deb.sh build/release $(DEB_ARCH) build/deb
ifeq ($(DEB_ARCH)-$(shell command -v aarch64-linux-gnu-gcc >/dev/null && echo cross),amd64-cross)
	@$(MAKE) --no-print-directory ARCH=aarch64 BUILD=release build/aarch64-release/bin/llamapi-server \
	  build/aarch64-release/bin/llamapi
	@scripts/build-deb.sh build/aarch64-release arm64 build/deb build/release
endif

# Every include points down the layers (scripts/check-layers.sh holds the table).
check-layers:
	@scripts/check-layers.sh

# Each header must compile on its own.
check-headers:
	@for h in $$(find src -name '*.h' ! -name '*_internal.h'); do \
	  printf "#include \"%s\"\nint check_headers_tu;\n" "$${h#src/}" | $(CC) $(filter-out -MMD -MP,$(CPPFLAGS)) -std=c11 $(WARN) -fsyntax-only -x c - \
	  || exit 1; done; echo "headers: ok"

FORMAT_FILES = $(shell find src tests/unit tests/fuzz tools bench -name '*.[ch]' 2>/dev/null)
format:
	clang-format -i $(FORMAT_FILES)

format-check:
	@clang-format --dry-run --Werror $(FORMAT_FILES) && echo "format: ok"

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)

# The chat page (web/) compiled into the server: tools/embed-web.sh turns the files into C
# arrays (portable C, so cross and sanitizer builds need nothing more; no xxd, no ld -b binary).
WEB_FILES := $(sort $(wildcard web/*.html web/*.css web/*.js web/*.svg))
$(O)/gen/webui_assets.c: tools/embed-web.sh web $(WEB_FILES) # web: a file removed
	@mkdir -p $(@D)
	@echo "  GEN $@"
	@sh tools/embed-web.sh $@ $(WEB_FILES)
$(O)/gen/webui_assets.o: $(O)/gen/webui_assets.c
	@echo "  CC  $<"
	@$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@
$(LIB): $(O)/gen/webui_assets.o
