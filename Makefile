# obx.h / ibx.h — every entry point. `make demo` and `make test` are the quick
# start; each first installs what is missing (tests/deps.sh, apt-get).
#
#   make demo    build and run the quick start on the embedded SQLite default
#   make test    all tests: pure, fake ODBC, real SQLite, PostgreSQL, MariaDB, fuzz corpus replay
#   make check   test + strict warnings (-Werror, gcc and clang), C++ compile,
#                one/two translation units, OBX_STATIC, exported symbols,
#                ASan+UBSan, ThreadSanitizer (the threaded tests), valgrind,
#                common-core identity (and how little repeats outside it),
#                OBX_NO_THREADS / OBX_NO_POSIX_CLOCK builds, the compile matrix
#                (check-matrix), the portable fallbacks forced (check-fallback),
#                the CMake and pkg-config
#                consumer builds (check-consumers), check-gateway:
#                static (glibc, musl) and aarch64/armhf builds tested under qemu,
#                and check-windows: mingw-w64 builds against odbc32, the
#                fake-ODBC tests under Wine
#   make static  single static executables with the SQLite driver linked in (x86_64 glibc, musl)
#   make cross ARCH=aarch64|armhf   the same for a gateway's CPU
#   make size    .text of each header per architecture and -Os/-O2
#   make size-budget   the size budget alone (docs/GATEWAYS.md), as make size checks it
#   make bench   obx.h against the same SQL issued directly, SQLite, PostgreSQL and MariaDB
#   make bench-peers   PostgreSQL rows beside graphile-worker, pg-boss, pg-transactional-outbox (node/npm; not in CI)
#   make fuzz    libFuzzer on the pure code for FUZZ_SECONDS (default 30), clang
#   make sql     write sql/<dialect>/*.sql from the headers (after a DDL change)
#   make install PREFIX=/usr/local   headers, obx.pc/ibx.pc, CMake packages, obxctl (make uninstall)
#   make deps    install build and test dependencies
#   make clean

CC      ?= cc
CXX     ?= c++
CSTD    = -std=c99 -D_POSIX_C_SOURCE=200809L
WARN    = -Wall -Wextra -Wpedantic -Wconversion -Wsign-conversion -Wshadow -Wstrict-prototypes \
          -Wmissing-prototypes -Wold-style-definition -Wcast-qual -Wcast-align -Wpointer-arith \
          -Wwrite-strings -Wundef -Wformat=2 -Wvla -Wredundant-decls -Wdouble-promotion \
          -Wmissing-declarations -Wnested-externs -Wbad-function-cast -Wnull-dereference
CXXWARN = -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion -Wcast-qual
OPT     ?= -O2 -g -pthread
SAN     = -g -O1 -pthread -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
B       = build
HEADERS = obx.h ibx.h
VALGRIND = valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
# The programs a target needs are compiled JOBS at a time (the compiles are
# the CPU-bound part of make test, check, torture; the tests themselves run
# one at a time, as their timings assume). JOBS=1: one at a time.
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all demo test check bench bench-peers fuzz deps clean sql check-docs check-common check-warnings check-cxx check-link \
        check-nm check-asan check-tsan check-valgrind
.PHONY: static cross check-static check-cross check-gateway check-options size size-budget check-deps
.PHONY: torture wear scale soak install uninstall check-consumers check-matrix check-fallback
.PHONY: check-windows
.DELETE_ON_ERROR:

TESTS   = $(B)/fake_selftest $(B)/test_unit $(B)/test_sqlserver $(B)/test_real $(B)/test_outbox \
          $(B)/test_inbox $(B)/test_multi $(B)/fuzz_replay $(B)/obxctl $(B)/obxctl_fill $(B)/prom_check \
          $(B)/example_protocols $(B)/test_real_sqlite3 $(B)/test_outbox_sqlite3 \
          $(B)/test_inbox_sqlite3 $(B)/test_multi_sqlite3 $(B)/test_native $(B)/obxctl_sqlite3 \
          $(B)/test_native_sqlite3 \
          $(B)/obxctl_fill_sqlite3

all: $(TESTS) $(B)/quickstart $(B)/webhook_inbox $(B)/multi_tenant $(B)/forwarder $(B)/obxctl \
     $(B)/native_sqlite $(B)/native_libpq

deps:
	@tests/deps.sh build pg mariadb tsql check static cross bench native consumers windows

$(B) $(B)/asan:
	@mkdir -p $@

# ---- programs -------------------------------------------------------------------
$(B)/test_unit: tests/test_unit.c tests/fake_odbc.c tests/fake_odbc.h tests/tt.h $(HEADERS) | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) tests/test_unit.c tests/fake_odbc.c -o $@

$(B)/test_sqlserver: tests/test_sqlserver.c tests/fake_odbc.c tests/fake_odbc.h tests/tt.h $(HEADERS) | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) tests/test_sqlserver.c tests/fake_odbc.c -o $@

# The examples' callbacks against the protocols they follow (fake ODBC).
$(B)/example_protocols: tests/example_protocols.c examples/multi_tenant.c tests/fake_odbc.c tests/fake_odbc.h \
                        tests/tt.h obx.h | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) tests/example_protocols.c tests/fake_odbc.c -o $@

$(B)/fake_selftest: tests/fake_selftest.c tests/fake_odbc.c tests/fake_odbc.h | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) tests/fake_selftest.c tests/fake_odbc.c -o $@

$(B)/test_real: tests/test_real.c tests/tt.h $(HEADERS) | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) tests/test_real.c -o $@ -lodbc

# The same tests on SQLite through its own C API (OBX_SQLITE3_API): backend sqlite3.
$(B)/test_real_sqlite3: tests/test_real.c tests/tt.h $(HEADERS) | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) -DOBX_SQLITE3_API tests/test_real.c -o $@ -lsqlite3

$(B)/test_outbox: tests/test_outbox.c tests/tt.h tests/plans.h tests/schema_v0.h obx.h | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) tests/test_outbox.c -o $@ -lodbc

$(B)/test_outbox_sqlite3: tests/test_outbox.c tests/tt.h tests/plans.h tests/schema_v0.h obx.h | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) -DOBX_SQLITE3_API tests/test_outbox.c -o $@ -lsqlite3 -lodbc

$(B)/test_inbox: tests/test_inbox.c tests/tt.h tests/plans.h tests/schema_v0.h ibx.h | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) tests/test_inbox.c -o $@ -lodbc

$(B)/test_inbox_sqlite3: tests/test_inbox.c tests/tt.h tests/plans.h tests/schema_v0.h ibx.h | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) -DIBX_SQLITE3_API tests/test_inbox.c -o $@ -lsqlite3 -lodbc

$(B)/test_multi: tests/test_multi.c tests/tt.h $(HEADERS) | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) tests/test_multi.c -o $@ -lodbc

$(B)/test_multi_sqlite3: tests/test_multi.c tests/tt.h $(HEADERS) | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) -DOBX_SQLITE3_API -DIBX_SQLITE3_API tests/test_multi.c -o $@ -lsqlite3

$(B)/fuzz_replay: tests/fuzz_replay.c tests/fuzz_core.c tests/fake_odbc.c tests/fake_odbc.h $(HEADERS) | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) tests/fuzz_replay.c tests/fuzz_core.c tests/fake_odbc.c -o $@

# The outbox in a transaction of the program's own driver: sqlite3, libpq,
# MariaDB Connector/C (tests/deps.sh native).
NATIVE_INC = -I$(shell pg_config --includedir 2>/dev/null || echo /usr/include/postgresql) \
             $(shell mariadb_config --include 2>/dev/null || echo -I/usr/include/mariadb)
NATIVE_LIBS = -lsqlite3 -lpq -lmariadb
$(B)/test_native: tests/test_native.c tests/tt.h $(HEADERS) | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) $(NATIVE_INC) tests/test_native.c -o $@ -lodbc $(NATIVE_LIBS)

# The same on SQLite's C API (OBX_SQLITE3_API): backend sqlite3, no ODBC.
$(B)/test_native_sqlite3: tests/test_native.c tests/tt.h $(HEADERS) | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) $(NATIVE_INC) -DOBX_SQLITE3_API -DIBX_SQLITE3_API tests/test_native.c -o $@ \
	  $(NATIVE_LIBS)

$(B)/native_sqlite: examples/native_sqlite.c obx.h | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) examples/native_sqlite.c -o $@ -lsqlite3 -lodbc

$(B)/native_libpq: examples/native_libpq.c obx.h | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) $(NATIVE_INC) examples/native_libpq.c -o $@ -lpq -lodbc

$(B)/quickstart: examples/quickstart.c obx.h | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) examples/quickstart.c -o $@ -lodbc

$(B)/multi_tenant: examples/multi_tenant.c obx.h | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) examples/multi_tenant.c -o $@ -lodbc

$(B)/forwarder: examples/forwarder.c obx.h | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) examples/forwarder.c -o $@ -lodbc

$(B)/webhook_inbox: examples/webhook_inbox.c ibx.h | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) examples/webhook_inbox.c -o $@ -lodbc

# The operator's tool (tools/obxctl.c): installed by make install.
$(B)/obxctl: tools/obxctl.c $(HEADERS) | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) tools/obxctl.c -o $@ -lodbc

# obxctl on SQLite's C API (OBX_SQLITE3_API): no driver manager, -c FILE only.
$(B)/obxctl_sqlite3: tools/obxctl.c $(HEADERS) | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) -DOBX_SQLITE3_API -DIBX_SQLITE3_API tools/obxctl.c -o $@ -lsqlite3

# obxctl's tests (tests/obxctl.sh): a queue in a known state, and a strict
# Prometheus text checker (in place of promtool).
$(B)/obxctl_fill: tests/obxctl_fill.c $(HEADERS) | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) tests/obxctl_fill.c -o $@ -lodbc

$(B)/obxctl_fill_sqlite3: tests/obxctl_fill.c $(HEADERS) | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) -DOBX_SQLITE3_API -DIBX_SQLITE3_API tests/obxctl_fill.c -o $@ -lsqlite3

$(B)/prom_check: tests/prom_check.c | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) tests/prom_check.c -o $@ -lm

# sql/<dialect>/*.sql are what the headers deploy: regenerate after a DDL change.
$(B)/schema_dump: tests/schema_dump.c tests/fake_odbc.c $(HEADERS) | $(B)
	$(CC) $(CSTD) $(WARN) $(OPT) tests/schema_dump.c tests/fake_odbc.c -o $@

sql: $(B)/schema_dump
	$(B)/schema_dump
	@echo "sql: sql/<dialect>/outbox.sql and inbox.sql written from the headers"

# ---- quick start ------------------------------------------------------------------
demo:
	@tests/deps.sh build native
	@$(MAKE) --no-print-directory $(B)/quickstart $(B)/webhook_inbox $(B)/multi_tenant $(B)/forwarder $(B)/native_sqlite
	@echo "== outbox: examples/quickstart.c =="
	@cd $(B) && rm -f quickstart.db quickstart.db-wal quickstart.db-shm && ./quickstart
	@echo "== inbox: examples/webhook_inbox.c =="
	@cd $(B) && rm -f webhook.db webhook.db-wal webhook.db-shm && ./webhook_inbox --sample | ./webhook_inbox
	@echo "== many databases: examples/multi_tenant.c =="
	@cd $(B) && rm -f tenant-*.db* && ./multi_tenant
	@echo "== a gateway's batched, ordered, paused, replayed forwarding: examples/forwarder.c =="
	@cd $(B) && rm -f gateway.db gateway.db-wal gateway.db-shm && ./forwarder
	@echo "== the outbox in a transaction of the sqlite3 C API: examples/native_sqlite.c =="
	@cd $(B) && rm -f native.db native.db-wal native.db-shm && ./native_sqlite

test:
	@tests/deps.sh build pg mariadb tsql clients native
	@$(MAKE) --no-print-directory -j$(JOBS) $(TESTS)
	tests/run.sh $(B)

# ---- bench: not a test; prints a table of rates and ratios ----------------------
# The library against the physical limit: a minimal ideal outbox through raw
# ODBC, libpq and the sqlite3 C API (bench-only dependencies: deps.sh bench).
# BENCH_HDR: the directory whose obx.h/ibx.h are measured (a patched copy, to
# measure a change before it goes into the headers).
BENCH_N ?= 20000
BENCH_HDR ?= .
# BENCH_CFLAGS="-DOBX_SQLITE3_API -DIBX_SQLITE3_API" BENCH_BACKENDS=sqlite: the
# library on SQLite's own C API against the same ideal.
BENCH_CFLAGS ?=
BENCH_PQ_INC = $(shell pg_config --includedir 2>/dev/null || echo /usr/include/postgresql)
$(B)/bench: tests/bench.c tests/bench_api.c $(BENCH_HDR)/obx.h $(BENCH_HDR)/ibx.h | $(B)
	$(CC) $(CSTD) $(WARN) -O2 -g -pthread $(BENCH_CFLAGS) -I$(BENCH_HDR) -I$(BENCH_PQ_INC) tests/bench.c -o $@ \
	  -lodbc -lpq -lsqlite3

$(B)/malloc_count.so: tests/malloc_count.c | $(B)
	$(CC) -O2 -shared -fPIC tests/malloc_count.c -o $@

bench:
	@tests/deps.sh build pg mariadb bench
	@$(MAKE) --no-print-directory -B $(B)/bench  # -B: BENCH_HDR may name other headers than last time
	@$(MAKE) --no-print-directory $(B)/malloc_count.so
	tests/bench.sh $(B)/bench $(BENCH_N)

# bench-peers: the PostgreSQL rows of make bench beside graphile-worker, pg-boss
# and pg-transactional-outbox on the same cluster, ratios from one run. Not in
# CI: it needs node/npm and the npm registry (the versions pinned in
# tests/peers/package-lock.json, installed under $(B)/peers).
bench-peers:
	@tests/deps.sh build pg bench
	@$(MAKE) --no-print-directory -B $(B)/bench
	tests/peers/bench_peers.sh $(B)/bench $(BENCH_N)

# ---- fuzz: libFuzzer over the pure code (clang); new inputs go to build/fuzz-corpus ----
FUZZ_SECONDS ?= 30
FUZZ_SAN      = -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
$(B)/fuzz_core: tests/fuzz_core.c tests/fake_odbc.c tests/fake_odbc.h $(HEADERS) | $(B)
	clang $(CSTD) $(FUZZ_SAN) -pthread tests/fuzz_core.c tests/fake_odbc.c -o $@

fuzz:
	@tests/deps.sh build check
	@$(MAKE) --no-print-directory $(B)/fuzz_core
	@mkdir -p $(B)/fuzz-corpus
	$(B)/fuzz_core -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	  -artifact_prefix=$(B)/fuzz- $(B)/fuzz-corpus tests/fuzz/corpus

# ---- check ----------------------------------------------------------------------
# CHECK_TEST= leaves out the requirement tests (.ci/run has just run them).
CHECK_TEST ?= test
check:
	@tests/deps.sh build pg mariadb tsql check static cross bench native consumers windows
	@$(MAKE) --no-print-directory check-common check-docs check-warnings check-cxx check-link check-nm \
	  check-deps check-options check-consumers check-matrix
	@$(MAKE) --no-print-directory $(CHECK_TEST) check-fallback
	@$(MAKE) --no-print-directory check-asan check-tsan check-valgrind
	@$(MAKE) --no-print-directory check-gateway check-windows size
	@echo "check: all passed"

check-common:
	tests/check_common.sh
	tests/core_measure.sh

# Every C example of the docs compiles; the quick starts run and end by themselves.
check-docs: | $(B)
	tests/doc_blocks.sh $(B)

# Strict warnings as errors, with both compilers and C99 and C11: one compiler and
# standard per sub-target (check-warnings-gcc-c99 ...), JOBS at a time.
WARN_SETS = gcc-c99 gcc-c11 clang-c99 clang-c11
check-warnings: | $(B)
	@$(MAKE) --no-print-directory -j$(JOBS) $(addprefix check-warnings-,$(WARN_SETS))
	@echo "check-warnings: ok (gcc, clang; c99, c11; and OBX_SQLITE3_API; torture on ODBC and on sqlite3)"
check-warnings-%:
	@cc=$(word 1,$(subst -, ,$*)); std=$(word 2,$(subst -, ,$*)); \
	  $$cc -std=$$std -D_POSIX_C_SOURCE=200809L $(WARN) -Werror -fsyntax-only tests/test_unit.c tests/test_sqlserver.c tests/fake_odbc.c tests/fake_selftest.c tests/fuzz_core.c tests/fuzz_replay.c tests/example_protocols.c \
	    tests/torture/odbcfault.c || exit 1; \
	  $$cc -std=$$std -D_POSIX_C_SOURCE=200809L $(WARN) -Werror -fsyntax-only tests/torture/oom.c tests/torture/crash.c \
	    tests/torture/diskfull.c tests/torture/wear.c tests/scale/scale.c || exit 1; \
	  $$cc -std=$$std -D_POSIX_C_SOURCE=200809L $(WARN) -Werror -fsyntax-only tests/test_real.c tests/test_outbox.c tests/test_inbox.c tests/test_multi.c examples/quickstart.c examples/webhook_inbox.c examples/multi_tenant.c examples/forwarder.c || exit 1; \
	  $$cc -std=$$std -D_POSIX_C_SOURCE=200809L $(WARN) -Werror -fsyntax-only tools/obxctl.c tests/obxctl_fill.c tests/prom_check.c tests/consumer/main.c -I. || exit 1; \
	  $$cc -std=$$std -D_POSIX_C_SOURCE=200809L $(WARN) -Werror -fsyntax-only tests/soak/soak.c tests/soak/check.c || exit 1; \
	  $$cc -std=$$std -D_POSIX_C_SOURCE=200809L $(WARN) -Werror -fsyntax-only -I. -I$(BENCH_PQ_INC) tests/bench.c || exit 1; \
	  $$cc -std=$$std -D_POSIX_C_SOURCE=200809L $(WARN) -Werror -fsyntax-only -DOBX_SQLITE3_API -DIBX_SQLITE3_API \
	    tests/impl_both.c tests/test_real.c tests/test_outbox.c tests/test_inbox.c tests/test_multi.c || exit 1; \
	  $$cc -std=$$std -D_POSIX_C_SOURCE=200809L $(WARN) -Werror -fsyntax-only -DOBX_SQLITE3_API -DIBX_SQLITE3_API -I. \
	    $(NATIVE_INC) tools/obxctl.c tests/obxctl_fill.c tests/test_native.c tests/torture/crash.c tests/torture/oom.c \
	    tests/torture/diskfull.c examples/webhook_inbox.c examples/native_sqlite.c || exit 1; \
	  $$cc -std=$$std -D_POSIX_C_SOURCE=200809L $(WARN) -Werror -fsyntax-only $(NATIVE_INC) tests/test_native.c tests/impl_native.c examples/native_sqlite.c examples/native_libpq.c

# Other people's builds (tests/compile_matrix.sh): gcc and clang, C99..C2x
# strict and GNU, with and without -pthread and each feature-test macro,
# C++11/17/20, -Werror -pedantic; and the #error when a system header comes
# first in strict mode. About a minute; MATRIX_QUICK=1 tries gcc only.
check-matrix: | $(B)
	tests/compile_matrix.sh $(B)

# Both headers, declarations and implementations, compiled as C++.
check-cxx: | $(B)
	@for cxx in g++ clang++; do for std in c++11 c++17; do \
	  $$cxx -x c++ -std=$$std $(CXXWARN) -Werror -c tests/impl_both.c -o $(B)/impl_both_cxx.o || exit 1; \
	  $$cxx -x c++ -std=$$std $(CXXWARN) -Werror -DOBX_SQLITE3_API -DIBX_SQLITE3_API -c tests/impl_both.c \
	    -o $(B)/impl_both_cxx.o || exit 1; \
	  $$cxx -x c++ -std=$$std $(CXXWARN) -Werror -fsyntax-only $(NATIVE_INC) tests/impl_native.c || exit 1; \
	done; done
	@echo "check-cxx: ok (g++, clang++; c++11, c++17; and OBX_SQLITE3_API)"

# Both implementations in one translation unit, in two, and as OBX_STATIC.
check-link: | $(B)
	$(CC) $(CSTD) $(WARN) -Werror -c tests/impl_both.c -o $(B)/impl_both.o
	$(CC) $(CSTD) $(WARN) -Werror -c tests/impl_obx.c -o $(B)/impl_obx.o
	$(CC) $(CSTD) $(WARN) -Werror -c tests/impl_ibx.c -o $(B)/impl_ibx.o
	$(CC) $(CSTD) $(WARN) -Werror tests/link_main.c $(B)/impl_both.o tests/fake_odbc.c -o $(B)/link_one
	$(CC) $(CSTD) $(WARN) -Werror tests/link_main.c $(B)/impl_obx.o $(B)/impl_ibx.o tests/fake_odbc.c -o $(B)/link_two
	$(CC) $(CSTD) $(WARN) -Werror -DOBX_STATIC -DIBX_STATIC tests/test_unit.c tests/fake_odbc.c -o $(B)/test_unit_static
	./$(B)/link_one && ./$(B)/link_two && ./$(B)/test_unit_static > /dev/null
	@echo "check-link: ok (one TU, two TUs, OBX_STATIC)"

# Only obx_/ibx_ symbols may leave an implementation object.
check-nm: check-link
	@bad=$$(nm -g --defined-only $(B)/impl_both.o $(B)/impl_obx.o $(B)/impl_ibx.o | awk 'NF==3 {print $$3}' | grep -v -E '^(obx|ibx)_' || true); \
	if [ -n "$$bad" ]; then echo "check-nm: FAIL exported symbols without the obx_/ibx_ prefix:"; echo "$$bad"; exit 1; fi
	@echo "check-nm: ok (only obx_/ibx_ symbols exported)"

$(B)/asan/test_unit: tests/test_unit.c tests/fake_odbc.c tests/fake_odbc.h tests/tt.h $(HEADERS) | $(B)/asan
	$(CC) $(CSTD) $(WARN) $(SAN) tests/test_unit.c tests/fake_odbc.c -o $@
$(B)/asan/test_sqlserver: tests/test_sqlserver.c tests/fake_odbc.c tests/fake_odbc.h tests/tt.h $(HEADERS) | $(B)/asan
	$(CC) $(CSTD) $(WARN) $(SAN) tests/test_sqlserver.c tests/fake_odbc.c -o $@
$(B)/asan/test_real: tests/test_real.c tests/tt.h $(HEADERS) | $(B)/asan
	$(CC) $(CSTD) $(WARN) $(SAN) tests/test_real.c -o $@ -lodbc
$(B)/asan/test_outbox: tests/test_outbox.c tests/tt.h tests/plans.h tests/schema_v0.h obx.h | $(B)/asan
	$(CC) $(CSTD) $(WARN) $(SAN) tests/test_outbox.c -o $@ -lodbc
$(B)/asan/test_inbox: tests/test_inbox.c tests/tt.h tests/plans.h tests/schema_v0.h ibx.h | $(B)/asan
	$(CC) $(CSTD) $(WARN) $(SAN) tests/test_inbox.c -o $@ -lodbc
$(B)/asan/test_multi: tests/test_multi.c tests/tt.h $(HEADERS) | $(B)/asan
	$(CC) $(CSTD) $(WARN) $(SAN) tests/test_multi.c -o $@ -lodbc
# The sqlite3 backend's programs and test_native: tests/run.sh runs them too.
$(B)/asan/test_real_sqlite3: tests/test_real.c tests/tt.h $(HEADERS) | $(B)/asan
	$(CC) $(CSTD) $(WARN) $(SAN) -DOBX_SQLITE3_API tests/test_real.c -o $@ -lsqlite3
$(B)/asan/test_outbox_sqlite3: tests/test_outbox.c tests/tt.h tests/plans.h tests/schema_v0.h obx.h | $(B)/asan
	$(CC) $(CSTD) $(WARN) $(SAN) -DOBX_SQLITE3_API tests/test_outbox.c -o $@ -lsqlite3 -lodbc
$(B)/asan/test_inbox_sqlite3: tests/test_inbox.c tests/tt.h tests/plans.h tests/schema_v0.h ibx.h | $(B)/asan
	$(CC) $(CSTD) $(WARN) $(SAN) -DIBX_SQLITE3_API tests/test_inbox.c -o $@ -lsqlite3 -lodbc
$(B)/asan/test_multi_sqlite3: tests/test_multi.c tests/tt.h $(HEADERS) | $(B)/asan
	$(CC) $(CSTD) $(WARN) $(SAN) -DOBX_SQLITE3_API -DIBX_SQLITE3_API tests/test_multi.c -o $@ -lsqlite3
$(B)/asan/test_native: tests/test_native.c tests/tt.h $(HEADERS) | $(B)/asan
	$(CC) $(CSTD) $(WARN) $(SAN) $(NATIVE_INC) tests/test_native.c -o $@ -lodbc $(NATIVE_LIBS)
$(B)/asan/test_native_sqlite3: tests/test_native.c tests/tt.h $(HEADERS) | $(B)/asan
	$(CC) $(CSTD) $(WARN) $(SAN) $(NATIVE_INC) -DOBX_SQLITE3_API -DIBX_SQLITE3_API tests/test_native.c -o $@ \
	  $(NATIVE_LIBS)
$(B)/asan/fuzz_replay: tests/fuzz_replay.c tests/fuzz_core.c tests/fake_odbc.c tests/fake_odbc.h $(HEADERS) | $(B)/asan
	$(CC) $(CSTD) $(WARN) $(SAN) tests/fuzz_replay.c tests/fuzz_core.c tests/fake_odbc.c -o $@
$(B)/asan/fake_selftest: tests/fake_selftest.c tests/fake_odbc.c tests/fake_odbc.h | $(B)/asan
	$(CC) $(CSTD) $(WARN) $(SAN) tests/fake_selftest.c tests/fake_odbc.c -o $@

$(B)/asan/example_protocols: tests/example_protocols.c examples/multi_tenant.c tests/fake_odbc.c tests/fake_odbc.h \
                             tests/tt.h obx.h | $(B)/asan
	$(CC) $(CSTD) $(WARN) $(SAN) tests/example_protocols.c tests/fake_odbc.c -o $@
$(B)/asan/obxctl: tools/obxctl.c $(HEADERS) | $(B)/asan
	$(CC) $(CSTD) $(WARN) $(SAN) tools/obxctl.c -o $@ -lodbc
$(B)/asan/obxctl_fill: tests/obxctl_fill.c $(HEADERS) | $(B)/asan
	$(CC) $(CSTD) $(WARN) $(SAN) tests/obxctl_fill.c -o $@ -lodbc
$(B)/asan/obxctl_sqlite3: tools/obxctl.c $(HEADERS) | $(B)/asan
	$(CC) $(CSTD) $(WARN) $(SAN) -DOBX_SQLITE3_API -DIBX_SQLITE3_API tools/obxctl.c -o $@ -lsqlite3
$(B)/asan/obxctl_fill_sqlite3: tests/obxctl_fill.c $(HEADERS) | $(B)/asan
	$(CC) $(CSTD) $(WARN) $(SAN) -DOBX_SQLITE3_API -DIBX_SQLITE3_API tests/obxctl_fill.c -o $@ -lsqlite3
$(B)/asan/prom_check: tests/prom_check.c | $(B)/asan
	$(CC) $(CSTD) $(WARN) $(SAN) tests/prom_check.c -o $@ -lm

ASAN_BINS = $(B)/asan/fake_selftest $(B)/asan/test_unit $(B)/asan/test_sqlserver $(B)/asan/test_real $(B)/asan/test_outbox \
            $(B)/asan/test_inbox $(B)/asan/test_multi $(B)/asan/fuzz_replay $(B)/asan/obxctl $(B)/asan/obxctl_fill \
            $(B)/asan/prom_check $(B)/asan/example_protocols $(B)/asan/test_native $(B)/asan/test_real_sqlite3 \
            $(B)/asan/test_outbox_sqlite3 $(B)/asan/test_inbox_sqlite3 $(B)/asan/test_multi_sqlite3 \
            $(B)/asan/obxctl_sqlite3 $(B)/asan/obxctl_fill_sqlite3 $(B)/asan/test_native_sqlite3
check-asan:
	@$(MAKE) --no-print-directory -j$(JOBS) $(ASAN_BINS)
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp tests/run.sh $(B)/asan

# ThreadSanitizer on the threaded real-database tests (tests/tsan.sh): the
# lease renewer, the wake listener, two dispatchers, a provider's refresh.
TSAN    = -g -O1 -pthread -fno-omit-frame-pointer -fsanitize=thread
$(B)/tsan:
	@mkdir -p $@
$(B)/tsan/test_unit: tests/test_unit.c tests/fake_odbc.c tests/fake_odbc.h tests/tt.h $(HEADERS) | $(B)/tsan
	$(CC) $(CSTD) $(WARN) $(TSAN) tests/test_unit.c tests/fake_odbc.c -o $@
$(B)/tsan/test_outbox: tests/test_outbox.c tests/tt.h tests/plans.h tests/schema_v0.h obx.h | $(B)/tsan
	$(CC) $(CSTD) $(WARN) $(TSAN) tests/test_outbox.c -o $@ -lodbc
$(B)/tsan/test_inbox: tests/test_inbox.c tests/tt.h tests/plans.h tests/schema_v0.h ibx.h | $(B)/tsan
	$(CC) $(CSTD) $(WARN) $(TSAN) tests/test_inbox.c -o $@ -lodbc
$(B)/tsan/test_multi: tests/test_multi.c tests/tt.h $(HEADERS) | $(B)/tsan
	$(CC) $(CSTD) $(WARN) $(TSAN) tests/test_multi.c -o $@ -lodbc

check-tsan:
	@$(MAKE) --no-print-directory -j$(JOBS) $(B)/tsan/test_unit $(B)/tsan/test_outbox $(B)/tsan/test_inbox \
	  $(B)/tsan/test_multi
	tests/tsan.sh $(B)/tsan

check-valgrind:
	@$(MAKE) --no-print-directory -j$(JOBS) $(TESTS)
	OBX_TEST_WRAP="$(VALGRIND)" OBX_TEST_BACKENDS=sqlite tests/run.sh $(B)

# The portable fallbacks (what macOS takes: CLOCK_REALTIME condition-variable
# deadlines, arc4random_buf seeds), forced on this system: the objects are
# checked for the calls they swap (CORE-FALLBACK-SELECTED), then the pure,
# fake-ODBC and real-SQLite suites run. A few minutes.
FALLBACK = -DOBX_PORTABLE_FALLBACKS -DIBX_PORTABLE_FALLBACKS
FB_TESTS = fake_selftest test_unit example_protocols test_sqlserver fuzz_replay test_real test_outbox test_inbox test_multi \
           test_native
$(B)/fallback:
	@mkdir -p $@
FB_FAKE = tests/fake_odbc.c
FB_SRC_fake_selftest = tests/fake_selftest.c $(FB_FAKE)
FB_SRC_test_unit = tests/test_unit.c $(FB_FAKE)
FB_SRC_example_protocols = tests/example_protocols.c $(FB_FAKE)
FB_SRC_test_sqlserver = tests/test_sqlserver.c $(FB_FAKE)
FB_SRC_fuzz_replay = tests/fuzz_replay.c tests/fuzz_core.c $(FB_FAKE)
FB_SRC_test_real = tests/test_real.c -lodbc
FB_SRC_test_outbox = tests/test_outbox.c -lodbc
FB_SRC_test_inbox = tests/test_inbox.c -lodbc
FB_SRC_test_multi = tests/test_multi.c -lodbc
FB_SRC_test_native = $(NATIVE_INC) tests/test_native.c -lodbc $(NATIVE_LIBS)
$(B)/fallback/%: $(HEADERS) tests/tt.h tests/plans.h tests/schema_v0.h tests/fake_odbc.c tests/fake_odbc.h | $(B)/fallback
	$(CC) $(CSTD) $(WARN) -Werror $(OPT) $(FALLBACK) $(FB_SRC_$*) -o $@
check-fallback:
	@$(MAKE) --no-print-directory -j$(JOBS) $(addprefix $(B)/fallback/,$(FB_TESTS))
	@for t in test_unit test_outbox test_inbox; do \
	  syms=$$(nm -u $(B)/fallback/$$t); \
	  if echo "$$syms" | grep -q pthread_condattr_setclock || ! echo "$$syms" | grep -q arc4random_buf; then \
	    echo "FAIL CORE-FALLBACK-SELECTED build $$t: still calls pthread_condattr_setclock, or not arc4random_buf"; exit 1; fi; \
	done; echo "PASS CORE-FALLBACK-SELECTED build OBX_PORTABLE_FALLBACKS swaps pthread_condattr_setclock and /dev/urandom for CLOCK_REALTIME deadlines and arc4random_buf"
	OBX_TEST_BACKENDS=sqlite tests/run.sh $(B)/fallback

# ---- static and cross builds ----------------------------------------------------
# Gateways: quickstart and webhook_inbox as single static executables with the
# SQLite ODBC driver compiled in (no driver manager, no .so, no odbcinst.ini),
# for the host (glibc, musl) and for aarch64/armhf. Debian's sqliteodbc and
# sqlite3 sources are fetched into build/gw/src (tests/cross.sh).
#   make static                 build/gw/{glibc,musl}/{quickstart,webhook_inbox}
#   make cross ARCH=armhf       build/gw/armhf/... (ARCH: aarch64 or armhf)
#   make check-static           the host ones in an empty root, plus the fake-ODBC
#                               and real-SQLite tests built the same way
#   make check-cross ARCH=...   the same under qemu-user
#   make check-gateway          all four targets (test_outbox and test_inbox each in
#                               both builds on a host target and under qemu on one
#                               architecture, tests/cross.sh; GW_ALL=1: both, in both
#                               builds, on every target; minutes more)
# Not ?=: an ARCH in the environment (some CI images set one) must not pick it.
ARCH = aarch64
GW_ENV = WARN="$(WARN)"

static:
	@tests/deps.sh build static
	@tests/cross.sh sources
	@$(GW_ENV) tests/cross.sh build glibc musl

cross:
	@tests/deps.sh build static cross
	@tests/cross.sh sources
	@$(GW_ENV) tests/cross.sh build $(ARCH)

check-static: static
	@tests/cross.sh run glibc musl
	@$(GW_ENV) tests/cross.sh test glibc musl

check-cross: cross
	@tests/cross.sh run $(ARCH)
	@$(GW_ENV) tests/cross.sh test $(ARCH)

check-gateway:
	@tests/deps.sh build static cross
	@tests/cross.sh sources
	@$(GW_ENV) tests/cross.sh build glibc musl aarch64 armhf
	@tests/cross.sh run glibc musl aarch64 armhf
	@$(GW_ENV) tests/cross.sh test glibc musl aarch64 armhf
	@echo "check-gateway: ok (static glibc and musl, aarch64 and armhf under qemu)"

# Windows: both headers built with mingw-w64 (Win32 threads and clocks, no
# winpthreads) against odbc32 with -Werror, the programs' DLL imports checked
# (CORE-WIN32-IMPORTS), and the fake-ODBC tests run under 64-bit Wine, its
# prefix in build/win/prefix (tests/windows.sh). About a minute: 35-95 s of
# compiling (by load), 6 s for a new Wine prefix, 10 s of tests under Wine.
check-windows:
	@tests/deps.sh windows
	@WARN="$(WARN)" tests/windows.sh

# Builds a gateway may need, never built otherwise: no pthreads, no POSIX
# clock; built with -Werror, run on the fake-ODBC tests (host, and armhf under
# qemu), and the objects checked for the calls each option leaves out
# (tests/options.sh).
check-options: | $(B)
	@tests/deps.sh build cross
	@WARN="$(WARN)" GW_PROFILE="$(GW_PROFILE)" tests/options.sh
	@$(CC) $(CSTD) $(WARN) -Werror -pthread tests/dialects_out.c tests/fake_odbc.c -o $(B)/dialects_out
	@$(B)/dialects_out > $(B)/dialects_out.log || { cat $(B)/dialects_out.log; exit 1; }
	@echo "check-options: ok (only the SQLite dialect built in: $$(tail -n 1 $(B)/dialects_out.log))"

# ---- install: what a project that uses the headers finds --------------------------
# PREFIX/include/{obx,ibx}.h, PREFIX/share/pkgconfig/{obx,ibx}.pc,
# PREFIX/share/cmake/obx/ (find_package(obx): obx::obx, ibx::ibx), PREFIX/bin/obxctl.
# DESTDIR is prepended to every path (packaging); the .pc files name PREFIX.
PREFIX ?= /usr/local
VERSION = $(shell sed -n 's/^\#define OBX_VERSION_STRING "\(.*\)"/\1/p' obx.h)
MAJOR = $(word 1,$(subst ., ,$(VERSION)))
MINOR = $(word 2,$(subst ., ,$(VERSION)))
INSTALLED = include/obx.h include/ibx.h share/pkgconfig/obx.pc share/pkgconfig/ibx.pc \
            share/cmake/obx/obxConfig.cmake share/cmake/obx/obxConfigVersion.cmake \
            share/cmake/ibx/ibxConfig.cmake share/cmake/ibx/ibxConfigVersion.cmake bin/obxctl
install: $(B)/obxctl
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/share/pkgconfig \
	  $(DESTDIR)$(PREFIX)/share/cmake/obx $(DESTDIR)$(PREFIX)/share/cmake/ibx $(DESTDIR)$(PREFIX)/bin
	install -m 644 obx.h ibx.h $(DESTDIR)$(PREFIX)/include/
	for lib in obx ibx; do sed -e 's|@prefix@|$(PREFIX)|' -e 's|@includedir@|$${prefix}/include|' \
	  -e 's|@version@|$(VERSION)|' $$lib.pc.in \
	  > $(DESTDIR)$(PREFIX)/share/pkgconfig/$$lib.pc || exit 1; \
	  sed -e 's|@OBX_CONFIG_INCLUDEDIR@|../../../include|' cmake/obxConfig.cmake.in \
	  > $(DESTDIR)$(PREFIX)/share/cmake/$$lib/$${lib}Config.cmake || exit 1; \
	  sed -e 's|@version@|$(VERSION)|' -e 's|@major@|$(MAJOR)|' -e 's|@minor@|$(MINOR)|' \
	  cmake/obxConfigVersion.cmake.in > $(DESTDIR)$(PREFIX)/share/cmake/$$lib/$${lib}ConfigVersion.cmake || exit 1; done
	install -m 755 $(B)/obxctl $(DESTDIR)$(PREFIX)/bin/

# Removes exactly what install wrote (and the package directories, when empty).
uninstall:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/,$(INSTALLED))
	-rmdir $(DESTDIR)$(PREFIX)/share/cmake/obx $(DESTDIR)$(PREFIX)/share/cmake/ibx 2>/dev/null

# A tiny consumer project built and run three ways: add_subdirectory,
# find_package of an installed copy, pkg-config (tests/consumers.sh).
check-consumers: | $(B)
	@tests/deps.sh build consumers
	tests/consumers.sh $(B)

# ---- deps.sh -------------------------------------------------------------------
# tests/deps.sh against stand-ins for apt-get and dpkg-query: a partly failed
# update still installs; a failed install fails with one clear line.
check-deps:
	@tests/deps_test.sh

# ---- size -------------------------------------------------------------------------
# What one header adds to a program, per architecture and -Os/-O2; each
# SIZE_SETS entry is "label=defines", one row pair per entry (tests/size.sh).
# The gateway profile: SQLite only, and none of the features a single-store
# gateway does without (docs/GATEWAYS.md); tests/options.sh builds it.
SQLITE_ONLY = -DOBX_NO_POSTGRESQL -DOBX_NO_MARIADB -DOBX_NO_SQLSERVER \
              -DIBX_NO_POSTGRESQL -DIBX_NO_MARIADB -DIBX_NO_SQLSERVER
GW_PROFILE = $(SQLITE_ONLY) -DOBX_NO_JOIN -DOBX_NO_MULTI_STORE -DOBX_NO_METRICS_TEXT \
             -DOBX_NO_DEAD_LETTERS -DOBX_NO_WAKE_SOCKET -DOBX_NO_ENVELOPE -DOBX_NO_ORDERING_KEYS \
             -DIBX_NO_MULTI_STORE -DIBX_NO_METRICS_TEXT -DIBX_NO_DEAD_LETTERS -DIBX_NO_WAKE_SOCKET \
             -DIBX_NO_ENVELOPE
# Shorter error and log texts, measured on top of the profile (a trade, not
# part of it: docs/GATEWAYS.md, "Size").
GW_TERSE = -DOBX_TERSE_MESSAGES -DIBX_TERSE_MESSAGES
# Flags a gateway build uses anyway (docs/GATEWAYS.md, "Size"): no unwind tables (a C
# program does not unwind; aarch64 GCC emits them by default), and no
# position-independent code (Debian's GCC makes it by default, for PIE; a
# program linked with -static is not one). The programs' table links with
# -ffunction-sections -fdata-sections --gc-sections always.
GW_CFLAGS = -fno-asynchronous-unwind-tables -fno-unwind-tables -fno-pie
SIZE_SETS ?= "all dialects=" "sqlite only=$(SQLITE_ONLY)" "gateway profile=$(GW_PROFILE)" \
             "profile, gateway flags=$(GW_PROFILE) $(GW_CFLAGS)" \
             $(SIZE_BUDGET_SET) \
             "... and no threads=$(GW_PROFILE) $(GW_CFLAGS) $(GW_TERSE) -DOBX_NO_THREADS -DIBX_NO_THREADS" \
             "profile, flags, sqlite3 API=$(GW_PROFILE) $(GW_CFLAGS) -DOBX_SQLITE3_API -DIBX_SQLITE3_API"
# The size budget (docs/GATEWAYS.md, "The size budget"): KB that quickstart
# (obx.h) and webhook_inbox (ibx.h) keep of the header in the row set named
# first, per HEADER:ARCH. make size (and so make check) fails when one is
# exceeded and prints each margin when met; SIZE_BUDGET= turns it off.
# make size-budget checks it alone (that row set only). The target is
# obx:armhf=40 obx:aarch64=48 ibx:armhf=36 (met at 025f9b6, exceeded since by
# the features merged after it); until it is met again, the ceiling checked
# is the size measured on 2026-11-28 plus 1.5 KB, so that nothing more grows
# unnoticed. Lower it as the gap closes.
SIZE_BUDGET_SET = "profile, flags, terse=$(GW_PROFILE) $(GW_CFLAGS) $(GW_TERSE)"
SIZE_BUDGET ?= profile, flags, terse:obx:armhf=47.3 obx:aarch64=61.3 ibx:armhf=47.8
size:
	@tests/deps.sh build cross
	@tests/cross.sh sources
	@tests/cross.sh objects aarch64 armhf
	@SIZE_BUDGET='$(SIZE_BUDGET)' tests/size.sh $(SIZE_SETS)

# Only the budget's row set: about a minute once the driver objects exist.
size-budget:
	@$(MAKE) --no-print-directory size SIZE_SETS='$(SIZE_BUDGET_SET)'


clean:
	rm -rf $(B)

# ---- torture: kill -9, database faults, disk full, allocation and ODBC failure at every
# point (issue 11); prints one "torture:" line of figures per scenario. About 10 minutes
# on 2 cores, and 2 more for the sqlite3 build's (OBX_SQLITE3_API) oom, crash and
# durability runs (short kill phases, every 10th allocation failed: TORTURE_SQLITE3_SECONDS,
# TORTURE_SQLITE3_OOM_STRIDE in tests/torture/run.sh for bigger runs);
# TORTURE_SCALE=N runs the kill phases N times longer. Own server ports. CI (.ci/run)
# runs every scenario at smaller sizes (its kill phases about half; the knobs are in
# tests/torture/run.sh).
TORTURE_BINS = $(B)/torture/torture_odbcfault $(B)/torture/torture_oom $(B)/torture/torture_crash \
               $(B)/torture/torture_diskfull $(B)/torture/torture_oom_sqlite3 $(B)/torture/torture_crash_sqlite3 \
               $(B)/torture/torture_diskfull_sqlite3
TORTURE_DEPS = tests/torture/tort.h tests/tt.h $(HEADERS)
$(B)/torture:
	@mkdir -p $@
# Failure at every point runs under ASan+UBSan: LeakSanitizer checks what the hooks cannot see.
$(B)/torture/torture_odbcfault: tests/torture/odbcfault.c tests/fake_odbc.c tests/fake_odbc.h $(TORTURE_DEPS) | $(B)/torture
	$(CC) $(CSTD) $(WARN) $(SAN) tests/torture/odbcfault.c tests/fake_odbc.c -o $@
$(B)/torture/torture_oom: tests/torture/oom.c $(TORTURE_DEPS) | $(B)/torture
	$(CC) $(CSTD) $(WARN) $(SAN) tests/torture/oom.c -o $@ -lodbc
$(B)/torture/torture_crash: tests/torture/crash.c $(TORTURE_DEPS) | $(B)/torture
	$(CC) $(CSTD) $(WARN) $(OPT) tests/torture/crash.c -o $@ -lodbc
$(B)/torture/torture_diskfull: tests/torture/diskfull.c $(TORTURE_DEPS) | $(B)/torture
	$(CC) $(CSTD) $(WARN) $(OPT) tests/torture/diskfull.c -o $@ -lodbc

# Flash wear and table growth on SQLite (docs/GATEWAYS.md): steady enqueue,
# dispatch and cleanup through one file, its size and bytes written per
# message at 20 points. Seconds by default; the figures of docs/GATEWAYS.md are
# WEAR_MESSAGES=1000000 (and WEAR_BACKLOG=100000, WEAR_BATCH=1, WEAR_VACUUM=incremental,
# WEAR_SYNC=FULL).
WEAR_MESSAGES ?= 30000
WEAR_BATCH ?= 100
WEAR_BACKLOG ?= 0
WEAR_VACUUM ?= none
WEAR_SYNC ?= NORMAL
# The same drivers built with OBX_SQLITE3_API / IBX_SQLITE3_API (scenarios
# oom, crash, durability on backend sqlite3): SQLite through its C API, the
# drivers' own connections too.
$(B)/torture/torture_oom_sqlite3: tests/torture/oom.c $(TORTURE_DEPS) | $(B)/torture
	$(CC) $(CSTD) $(WARN) $(SAN) -DOBX_SQLITE3_API -DIBX_SQLITE3_API tests/torture/oom.c -o $@ -lsqlite3
$(B)/torture/torture_crash_sqlite3: tests/torture/crash.c $(TORTURE_DEPS) | $(B)/torture
	$(CC) $(CSTD) $(WARN) $(OPT) -DOBX_SQLITE3_API -DIBX_SQLITE3_API tests/torture/crash.c -o $@ -lsqlite3
$(B)/torture/torture_diskfull_sqlite3: tests/torture/diskfull.c $(TORTURE_DEPS) | $(B)/torture
	$(CC) $(CSTD) $(WARN) $(OPT) -DOBX_SQLITE3_API -DIBX_SQLITE3_API tests/torture/diskfull.c -o $@ -lsqlite3
$(B)/torture/torture_wear: tests/torture/wear.c $(TORTURE_DEPS) | $(B)/torture
	$(CC) $(CSTD) $(WARN) $(OPT) tests/torture/wear.c -o $@ -lodbc
wear: $(B)/torture/torture_wear
	@mkdir -p $(B)/wear
	$(B)/torture/torture_wear $(B)/wear/wear.db $(WEAR_MESSAGES) $(WEAR_BATCH) $(WEAR_BACKLOG) $(WEAR_VACUUM) $(WEAR_SYNC)

torture:
	@tests/deps.sh build pg mariadb
	@$(MAKE) --no-print-directory -j$(JOBS) $(TORTURE_BINS)
	tests/torture/run.sh $(B)/torture

# ---- soak: the whole product at once under kills, checked against a reference model
# (issue 26; tests/soak/run.sh; CI: SOAK_SECONDS=12). SOAK_MINUTES=N for a long run by hand, SOAK_SIZE=N more
# processes, SOAK_SEED=N replays a schedule. Own server ports (SOAK_PG_PORT, SOAK_MY_PORT).
SOAK_BINS = $(B)/soak/soak $(B)/soak/soak_check
$(B)/soak:
	@mkdir -p $@
$(B)/soak/soak: tests/soak/soak.c tests/soak/soak.h $(TORTURE_DEPS) | $(B)/soak
	$(CC) $(CSTD) $(WARN) $(OPT) tests/soak/soak.c -o $@ -lodbc
$(B)/soak/soak_check: tests/soak/check.c tests/soak/soak.h tests/torture/tort.h | $(B)/soak
	$(CC) $(CSTD) $(WARN) $(OPT) tests/soak/check.c -o $@ -lodbc
soak:
	@tests/deps.sh build pg mariadb
	@$(MAKE) --no-print-directory -j$(JOBS) $(SOAK_BINS) $(B)/obxctl
	tests/soak/selftest.sh $(B)/soak
	tests/soak/run.sh $(B)/soak

# ---- scale: high availability and scale-out on real engines (issue 16): PostgreSQL
# failover, PgBouncer, a 3-node Galera cluster, 50 tenants; prints "scale:" figures.
# SCALE_SIZE=1 (default) fits in about 8 minutes on 2 cores; SCALE_SIZE=5 is the full size.
# Own ports (SCALE_PG_PORT, SCALE_MY_PORT, SCALE_GALERA_PORT); see tests/scale/run.sh.
scale:
	@tests/deps.sh build pg mariadb scale
	@$(MAKE) --no-print-directory -j$(JOBS) $(B)/torture/torture_crash $(B)/torture/scale_load $(TESTS)
	tests/scale/run.sh $(B)
$(B)/torture/scale_load: tests/scale/scale.c $(TORTURE_DEPS) | $(B)/torture
	$(CC) $(CSTD) $(WARN) $(OPT) tests/scale/scale.c -o $@ -lodbc
