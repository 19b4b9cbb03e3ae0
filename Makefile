# fccl: build, install, test.  `make` builds libfccl (shared + static) and
# the programs into build/; `make check` runs the quick tier of the tests,
# `make test` every test (plain, then a sanitized build); `make install
# PREFIX=/usr/local DESTDIR=`.
#
# Every program of ours that users or benchmarks run lives under cli/
# (test helper programs are in tests/, fuzz targets in fuzz/), and where
# it lives says whether it is installed:
#   cli/NAME.c         a program users run: build/bin/NAME, `make install`
#                      puts it in PREFIX/bin
#   cli/NAME/*.c       the same, for a program in several files (one job
#                      each); a header there with a "Module map" is held
#                      to it (scripts/check-calls.sh) when NAME is linked
#   cli/bench/NAME.c   a benchmark helper the bench/ scripts run:
#                      build/bench/NAME, never installed;
#                      cli/bench/mpi_*.c are built by those scripts with
#                      mpicc, not here
# bench/ holds only the scripts, Python drivers and recorded results.
#
# Sources are picked up by directory, so adding a file needs no edit here:
#   common/ store/ coll/ bootstrap/ moe/  **/*.c (any depth) -> libfccl
#   cli/NAME.c                            -> build/bin/NAME
#   cli/NAME/*.c                          -> build/bin/NAME
#   cli/bench/NAME.c                      -> build/bench/NAME
#   tests/test_NAME.c                     -> build/tests/test_NAME (Criterion)
#   tests/*.c without test_ prefix        -> helper programs build/tests/NAME
#   man/NAME.SECTION.in (man(7) roff)     -> build/man/NAME.SECTION
#   tests/lib/*.c                         -> build/tests/libtesthelp.a, the
#                                            helpers both of those link

PREFIX ?= /usr/local
DESTDIR ?=
SAN ?= 0
CC ?= cc

ifeq ($(SAN),1)
BUILD ?= build-san
OPT := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
       -fno-sanitize-recover=undefined
SANLD := -fsanitize=address,undefined
else
BUILD ?= build
OPT := -O2 -g
SANLD :=
endif

PKGS := libevent_core libevent_extra libevent_pthreads libevent_openssl \
  libfabric openssl libcurl json-c
# A missing dependency is installed before anything else is computed, so
# the flags below see it.  Building (a plain `make`, whose MAKECMDGOALS is
# empty, `make demo`, `make install`) installs only what building needs
# (scripts/install-deps.sh --build, run when pkg-config misses one); a
# goal that runs or builds tests installs the test tools too (etcd, torch,
# chromium, ...: scripts/install-deps.sh, a no-op when all is present).
TEST_GOALS := test check check-san check-lines tests test-multihost \
  check-embed test-python
ifneq ($(filter-out clean uninstall,$(or $(MAKECMDGOALS),all)),)
ifneq ($(filter $(TEST_GOALS),$(MAKECMDGOALS)),)
DEPS_RC := $(shell scripts/install-deps.sh >&2; echo $$?)
else
DEPS_OK := $(shell pkg-config --exists $(PKGS) python3 2>/dev/null && echo 1)
ifneq ($(DEPS_OK),1)
$(info make: build dependencies missing, running scripts/install-deps.sh --build)
DEPS_RC := $(shell scripts/install-deps.sh --build >&2; echo $$?)
endif
endif
ifneq ($(or $(DEPS_RC),0),0)
$(error scripts/install-deps.sh failed)
endif
endif

# A plain `make` (and the test tiers, some 50 test programs) builds in
# parallel even when typed without -j: serial, a fresh build takes twice as
# long.  A -jN on the command line still wins over this line (make 4.3 and
# 4.4 alike), so `make -j1` stays serial.
ifeq ($(filter-out all check test demo,$(or $(MAKECMDGOALS),all)),)
MAKEFLAGS += -j$(shell nproc)
endif

VERSION := 0.1.0
SOMAJOR := 0

# Everything is hidden unless marked FCCL_API (the public headers), so the
# shared library exports only fccl_* names.
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -pthread -fPIC \
  -fvisibility=hidden $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
ALL_CFLAGS := $(CFLAGS_BASE) $(OPT) $(CFLAGS)
LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lm -pthread

# The floors, bottom up.  Each folder is compiled with the include paths
# of itself and of the floors below it only, and headers are included by
# bare name ("tp.h", not "transport/tp.h"), so an #include that reaches
# up a floor does not compile.  Programs, tests and benchmarks see all.
#   include/fccl    the public headers (every floor sees them)
#   common          errors, logs, clocks, sockets, environment
#   store/proto     the wire codec, token and private files   (on common)
#   store/etcd      etcd's JSON gateway: addresses, requests and replies,
#                   one HTTP attempt, the key space   (on proto)
#   store/client    the TCPStore and etcd clients         (on etcd, proto)
#   store/server    the libevent server, its table and journal, its etcd
#                   back end                          (on etcd, proto)
#                   (the client and the server are side by side: neither
#                   sees the other)
#   coll            the collective engine, itself in floors   (on common):
#     reduce        data types and the reduction kernels
#     transport     libfabric: endpoints, point-to-point, liveness
#     run           the group, one call's execution and its point-to-point
#                   primitives                       (on reduce, transport)
#     shm           the one-host shared segment                  (on run)
#     algo          the algorithms, one per file            (on shm, run)
#     select        the algorithm tables and the selector       (on algo)
#     api           the public collective and point-to-point calls
#                                                             (on select)
#   bootstrap       init, topology, groups   (on all of coll, the store's
#                   public calls and etcd's addresses)
#   moe             the MoE operators, on the public collective and group
#                   API (so above the bootstrap) and common only
INC_common := include common
INC_proto := $(INC_common) store/proto
INC_etcd := $(INC_proto) store/etcd
INC_client := $(INC_etcd) store/client
INC_server := $(INC_etcd) store/server
INC_reduce := $(INC_common) coll/reduce
INC_transport := $(INC_common) coll/transport
INC_run := $(INC_common) coll/reduce coll/transport coll/run
INC_shm := $(INC_run) coll/shm
INC_algo := $(INC_shm) coll/algo
INC_select := $(INC_algo) coll/select
INC_api := $(INC_select) coll/api
# all of coll (api sees every floor below it)
INC_coll := $(INC_api)
# (the store's client and server it reaches through the public headers,
# fccl/store.h and fccl/server.h; of store/ it includes etcd_addr.h only)
INC_bootstrap := $(INC_coll) store/etcd bootstrap
INC_moe := include common moe
INC_all := $(INC_coll) store/proto store/etcd store/client store/server \
  bootstrap moe

$(BUILD)/obj/%.o: INC = $(INC_all)
$(BUILD)/obj/common/%.o: INC = $(INC_common)
# (a file of store/ outside its three floors gets the lowest one)
$(BUILD)/obj/store/%.o: INC = $(INC_proto)
$(BUILD)/obj/store/proto/%.o: INC = $(INC_proto)
$(BUILD)/obj/store/etcd/%.o: INC = $(INC_etcd)
$(BUILD)/obj/store/client/%.o: INC = $(INC_client)
$(BUILD)/obj/store/server/%.o: INC = $(INC_server)
# A coll folder without a line here sees common only, until it is given
# its floor (here, and in the order check below).
$(BUILD)/obj/coll/%.o: INC = $(INC_common)
$(BUILD)/obj/coll/reduce/%.o: INC = $(INC_reduce)
$(BUILD)/obj/coll/transport/%.o: INC = $(INC_transport)
$(BUILD)/obj/coll/run/%.o: INC = $(INC_run)
$(BUILD)/obj/coll/shm/%.o: INC = $(INC_shm)
$(BUILD)/obj/coll/algo/%.o: INC = $(INC_algo)
$(BUILD)/obj/coll/select/%.o: INC = $(INC_select)
$(BUILD)/obj/coll/api/%.o: INC = $(INC_api)
$(BUILD)/obj/bootstrap/%.o: INC = $(INC_bootstrap)
$(BUILD)/obj/moe/%.o: INC = $(INC_moe)
$(BUILD)/obj/examples/%.o: INC = include

PUB_HDRS := $(sort $(wildcard include/fccl/*.h))

LIB_SRCS := $(sort $(shell find common store coll bootstrap moe -name '*.c'))
LIB_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRCS))
CLI_SRCS := $(sort $(wildcard cli/*.c))
# Programs in a folder of their own (cli/bench/ holds helpers instead).
CLI_DIRS := $(filter-out bench,$(patsubst cli/%/,%,$(sort $(dir \
  $(wildcard cli/*/*.c)))))
PROGS := $(patsubst cli/%.c,$(BUILD)/bin/%,$(CLI_SRCS)) \
  $(addprefix $(BUILD)/bin/,$(CLI_DIRS))
TEST_SRCS := $(sort $(wildcard tests/test_*.c))
TESTS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRCS))
THELP_SRCS := $(filter-out tests/test_%.c,$(sort $(wildcard tests/*.c)))
THELPERS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(THELP_SRCS))
# The helper library every test binary and test helper program links.
TLIB_SRCS := $(sort $(wildcard tests/lib/*.c))
TLIB_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(TLIB_SRCS))
TLIB := $(BUILD)/tests/libtesthelp.a
# cli/bench/mpi_*.c are built by the bench scripts with mpicc, not here.
BENCH_SRCS := $(filter-out cli/bench/mpi_%.c,$(sort $(wildcard cli/bench/*.c)))
BENCHES := $(patsubst cli/bench/%.c,$(BUILD)/bench/%,$(BENCH_SRCS))
# examples/*.c: programs on the public API alone (include/ only).
EXAMPLE_SRCS := $(sort $(wildcard examples/*.c))
EXAMPLES := $(patsubst examples/%.c,$(BUILD)/examples/%,$(EXAMPLE_SRCS))

# The one-way call orders the headers state, checked on the objects
# before any library is made (scripts/check-calls.sh): the top floors,
# the store's floors (its client and server side by side: neither calls
# the other), coll's floors, and the files of store/client, store/server,
# the transport and the API in the order of their module maps
# (store_vt.h, server_int.h, tp.h, request.h), with the etcd back end's
# own (backend_etcd.h) inside the server's.  Include paths cannot see a
# call through a public header (fccl_dtype_size from an algorithm); the
# symbols do.
CALLS_OK := $(BUILD)/obj/.calls-ok
LIB_ORDER := moe bootstrap coll store common
STORE_ORDER := client,server etcd proto
COLL_ORDER := api select algo shm run transport reduce

SHLIB := $(BUILD)/lib/libfccl.so.$(VERSION)
# The installed static library is one prelinked object whose internal
# (hidden) symbols are made local, so a user's own `boot` or `kv_find`
# cannot collide with ours; programs, tests and benchmarks that use
# internal calls link the internal archive of plain objects instead.
STLIB := $(BUILD)/lib/libfccl.a
INTLIB := $(BUILD)/lib/libfccl_internal.a
# fccl-run's LD_PRELOAD for its ranks (preload/kallsyms.c); not built for
# the sanitized tree, where ASan's runtime must come first.
ifeq ($(SAN),1)
PRELOAD :=
else
PRELOAD := $(BUILD)/lib/libfccl-preload.so
endif

# Manual pages: man(7) sources with @VERSION@, @DATE@ (the last commit's,
# or SOURCE_DATE_EPOCH, so a rebuild gives the same bytes) and @PREFIX@
# filled in; tests/test_man checks that each renders without warnings and
# names every option its program's --help prints.
MAN_SRCS := $(sort $(wildcard man/*.[1-9].in))
MANPAGES := $(patsubst man/%.in,$(BUILD)/man/%,$(MAN_SRCS))
MAN_DATE := $(shell t=$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct 2>/dev/null)}; \
  date -u -d "@$${t:-$$(date +%s)}" +%Y-%m-%d)
MAN_SED = sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@DATE@|$(MAN_DATE)|g' \
  -e 's|@PREFIX@|$(PREFIX)|g'

.SECONDARY:
.PHONY: check-embed all lib progs benches examples tests test check check-san install uninstall clean demo bench \
  test-multihost man check-lines soak-ft

all: torch-first lib progs benches examples man
examples: $(EXAMPLES)
man: $(MANPAGES)

$(BUILD)/man/%: man/%.in Makefile
	@mkdir -p $(dir $@)
	$(MAN_SED) $< > $@.tmp && mv $@.tmp $@
benches: $(BENCHES)

lib: $(SHLIB) $(STLIB) $(INTLIB) $(PRELOAD)
progs: $(PROGS)
tests: $(TESTS) $(THELPERS) $(EXAMPLES)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(addprefix -I,$(INC)) -MMD -MP -c $< -o $@

$(CALLS_OK): $(LIB_OBJS) scripts/check-calls.sh coll/transport/tp.h \
  coll/api/request.h store/client/store_vt.h store/server/server_int.h \
  store/server/backend_etcd.h
	@scripts/check-calls.sh $(BUILD)/obj $(LIB_ORDER) -- $(LIB_OBJS)
	@scripts/check-calls.sh $(BUILD)/obj/store $(STORE_ORDER) -- $(LIB_OBJS)
	@scripts/check-calls.sh $(BUILD)/obj/store/client \
	  --map store/client/store_vt.h -- $(LIB_OBJS)
	@scripts/check-calls.sh $(BUILD)/obj/store/server \
	  --map store/server/server_int.h -- $(LIB_OBJS)
	@scripts/check-calls.sh $(BUILD)/obj/store/server \
	  --map store/server/backend_etcd.h -- $(filter \
	  $(BUILD)/obj/store/server/backend_%,$(LIB_OBJS))
	@scripts/check-calls.sh $(BUILD)/obj/coll $(COLL_ORDER) -- $(LIB_OBJS)
	@scripts/check-calls.sh $(BUILD)/obj/coll/transport \
	  --map coll/transport/tp.h -- $(LIB_OBJS)
	@scripts/check-calls.sh $(BUILD)/obj/coll/api \
	  --map coll/api/request.h -- $(LIB_OBJS)
	touch $@

# Linking fails when the library would export or define anything but
# fccl_* names (scripts/check-symbols.sh).
$(SHLIB): $(LIB_OBJS) $(CALLS_OK) scripts/check-symbols.sh
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libfccl.so.$(SOMAJOR) $(SANLD) -o $@.tmp \
	  $(LIB_OBJS) $(LIBS)
	FCCL_PUBLIC_HEADER=include/fccl/fccl.h CC=$(CC) \
	  scripts/check-symbols.sh shared $@.tmp
	mv $@.tmp $@
	ln -sf libfccl.so.$(VERSION) $(BUILD)/lib/libfccl.so.$(SOMAJOR)
	ln -sf libfccl.so.$(SOMAJOR) $(BUILD)/lib/libfccl.so

$(STLIB): $(LIB_OBJS) $(CALLS_OK) scripts/check-symbols.sh
	@mkdir -p $(dir $@)
	rm -f $@ $(BUILD)/lib/fccl.o
	$(LD) -r -o $(BUILD)/lib/fccl.o $(LIB_OBJS)
	objcopy --localize-hidden $(BUILD)/lib/fccl.o
	scripts/check-symbols.sh static $(BUILD)/lib/fccl.o
	ar rcs $@ $(BUILD)/lib/fccl.o
	rm -f $(BUILD)/lib/fccl.o

$(INTLIB): $(LIB_OBJS) $(CALLS_OK)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $(LIB_OBJS)

$(BUILD)/lib/libfccl-preload.so: preload/kallsyms.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -shared -o $@ $< -ldl

# Programs link statically (no rpath games, one file to copy), from the
# internal archive: some use internal calls (the server, the transport).
$(BUILD)/bin/%: $(BUILD)/obj/cli/%.o $(INTLIB)
	@mkdir -p $(dir $@)
	$(CC) $(SANLD) -o $@ $< $(INTLIB) $(LIBS)

# A program of several files, cli/NAME/*.c; its module map (the header
# there that has one) is checked on its objects before it is linked.
define CLI_DIR_PROG
$(BUILD)/bin/$(1): $(patsubst %.c,$(BUILD)/obj/%.o,$(sort $(wildcard \
  cli/$(1)/*.c))) $(INTLIB) scripts/check-calls.sh $(wildcard cli/$(1)/*.h)
	@mkdir -p $$(dir $$@)
	$(foreach h,$(shell grep -l 'Module map' cli/$(1)/*.h 2>/dev/null),
	@scripts/check-calls.sh $(BUILD)/obj/cli/$(1) --map $(h) -- \
	  $$(filter %.o,$$^))
	$$(CC) $$(SANLD) -o $$@ $$(filter %.o,$$^) $$(INTLIB) $$(LIBS)
endef
$(foreach p,$(CLI_DIRS),$(eval $(call CLI_DIR_PROG,$(p))))

# The test helper library is an archive, so a program takes only the
# members it uses: the helper programs, which have no Criterion, never
# pull in the files that assert (srv.c, wire.c, store_suite.c, expect.c,
# envcheck.c).
$(TLIB): $(TLIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/tests/test_%: $(BUILD)/obj/tests/test_%.o $(TLIB) $(INTLIB)
	@mkdir -p $(dir $@)
	$(CC) $(SANLD) -o $@ $< $(TLIB) $(INTLIB) $(LIBS) -lcriterion

$(BUILD)/examples/%: $(BUILD)/obj/examples/%.o $(INTLIB)
	@mkdir -p $(dir $@)
	$(CC) $(SANLD) -o $@ $< $(INTLIB) $(LIBS)

$(BUILD)/bench/%: $(BUILD)/obj/cli/bench/%.o $(INTLIB)
	@mkdir -p $(dir $@)
	$(CC) $(SANLD) -o $@ $< $(INTLIB) $(LIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(TLIB) $(INTLIB)
	@mkdir -p $(dir $@)
	$(CC) $(SANLD) -o $@ $< $(TLIB) $(INTLIB) $(LIBS)

# Two tiers (docs/testing.md):
#   make check  the quick one, for the edit-build-test loop: the plain
#               build, the file-size check, every C suite with its long
#               cases left out and the reduced collective matrix, and the
#               Python suites' fast cases (FCCL_TEST_QUICK=1; a few
#               minutes after `make -j2`)
#   make test   everything, the README's test command and CI's: every
#               case of the plain build (8-rank matrices, soaks, CPU
#               measurements, kill loops), the multi-host suite, then the
#               sanitized build's unit/store tests and a reduced
#               collective matrix (FCCL_TEST_REDUCED=1)
test: all tests
	scripts/check-lines.sh
	$(MAKE) check-embed
	scripts/run-tests.sh $(BUILD)
	tests/py/run.sh $(BUILD)
	tests/multihost/run.sh $(BUILD)
	$(MAKE) SAN=1 all tests
	FCCL_TEST_REDUCED=1 scripts/run-tests.sh build-san
	tests/multihost/run.sh build-san

# (the C suites, three binaries at a time, and the Python suites run side
# by side, the Python report printed after the C one: both mostly wait)
check: all tests
	scripts/check-lines.sh
	@FCCL_TEST_QUICK=1 tests/py/run.sh $(BUILD) > $(BUILD)/check-py.log 2>&1 & \
	py=$$!; FCCL_TEST_QUICK=1 scripts/run-tests.sh $(BUILD); c=$$?; \
	wait $$py; p=$$?; cat $(BUILD)/check-py.log; rm -f $(BUILD)/check-py.log; \
	[ $$c = 0 ] && [ $$p = 0 ]

# No .c or .cpp file of the library, the programs or the bindings over
# 900 lines (scripts/check-lines.sh; part of both tiers).
check-lines:
	scripts/check-lines.sh

# Jobs across network-namespace hosts (root only; prints SKIPPED and
# passes otherwise): tests/multihost/.
test-multihost: progs tests
	tests/multihost/run.sh $(BUILD)

# Issue 36's randomized kills (bench/ft_soak.sh): SOAK_ROUNDS jobs of 6
# ranks under fccl-run --no-kill, shm and tcp;ofi_rxm alternating, a random
# rank (in a quarter of the rounds a second one 0-50 ms later, into the
# shrink) SIGKILLed at a random moment of an all_reduce loop, the survivors
# shrinking until an all_reduce is right; fails on a hang, a wrong sum, a
# survivor that did not go on, or a file left in /dev/shm.  Not part of
# make test (about 3 s a round here); test_ft keeps a few cases of each
# kind (in a collective, in a shrink, two at once) on both providers.
# Then issue 37's kills during a torch reconfiguration
# (bench/reconf_soak.py, RECONF_ROUNDS rounds; test_torch_reconf.py keeps
# three fixed moments).
SOAK_ROUNDS ?= 100
RECONF_ROUNDS ?= 20
soak-ft: progs benches
	ROUNDS=$(SOAK_ROUNDS) bench/ft_soak.sh $(BUILD)
	PYTHONPATH=$(BUILD)/python /usr/bin/python3 bench/reconf_soak.py \
	  --rounds $(RECONF_ROUNDS) --build $(BUILD)

# A program defining names libfccl uses inside links against the static
# and the shared library and runs (tests/embed/user.c); part of make test.
check-embed: lib
	@mkdir -p $(BUILD)/tests
	$(CC) -std=c11 -Wall -Wextra -Werror -Iinclude -o \
	  $(BUILD)/tests/embed-static tests/embed/user.c $(STLIB) $(LIBS) $(SANLD)
	$(CC) -std=c11 -Wall -Wextra -Werror -Iinclude -o \
	  $(BUILD)/tests/embed-shared tests/embed/user.c -L$(BUILD)/lib -lfccl \
	  -Wl,-rpath,$(abspath $(BUILD)/lib) $(SANLD)
	timeout 60 $(BUILD)/tests/embed-static $$((20000 + $$$$ % 20000))
	timeout 60 $(BUILD)/tests/embed-shared $$((20001 + $$$$ % 20000))

check-san:
	$(MAKE) SAN=1 all tests
	FCCL_TEST_REDUCED=1 scripts/run-tests.sh build-san

# The README's main job: a local store plus a 4-rank job doing checked
# collectives.
demo: all
	$(BUILD)/bin/fccl-run -n 4 $(BUILD)/bin/fccl-demo

# The systemd unit and tcpstore-server's config, with this PREFIX's paths
# (conf/tcpstore-server.service.in); an existing config is kept.
SYSCONFDIR ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
UNITDIR ?= $(PREFIX)/lib/systemd/system
CONF_SED = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' \
  -e 's|@UNITDIR@|$(UNITDIR)|g'

# The README's performance plots: `make plots` draws docs/img/*.png from
# the data in bench/data/ (matplotlib installed if missing); `make
# plot-data` first measures that data again (slow; a quiet machine, the
# MPIs of FCCL_BENCH_DEPS=1 scripts/install-deps.sh).
.PHONY: plots plot-data
plots:
	FCCL_PLOT_DEPS=1 scripts/install-deps.sh
	/usr/bin/python3 bench/plot.py bench/data docs/img

plot-data: all
	FCCL_BENCH_DEPS=1 scripts/install-deps.sh
	bench/plot_data.sh $(BUILD)
	$(MAKE) plots

# The manual pages are made again from their sources, for this PREFIX
# (the paths they name), into share/man/manSECTION.
install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include/fccl \
	  $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	  $(DESTDIR)$(PREFIX)/share/fccl
	install -m 0755 $(SHLIB) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libfccl.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libfccl.so.$(SOMAJOR)
	ln -sf libfccl.so.$(SOMAJOR) $(DESTDIR)$(PREFIX)/lib/libfccl.so
	install -m 0644 $(STLIB) $(DESTDIR)$(PREFIX)/lib/
	install -d $(DESTDIR)$(PREFIX)/lib/fccl
	install -m 0755 $(PRELOAD) $(DESTDIR)$(PREFIX)/lib/fccl/
	install -m 0644 $(PUB_HDRS) $(DESTDIR)$(PREFIX)/include/fccl/
	install -m 0755 $(PROGS) $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 conf/tcpstore-server.conf $(DESTDIR)$(PREFIX)/share/fccl/
	install -d $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR)/fccl
	$(CONF_SED) conf/tcpstore-server.service.in > \
	  $(DESTDIR)$(UNITDIR)/tcpstore-server.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/tcpstore-server.service
	[ -e $(DESTDIR)$(SYSCONFDIR)/fccl/tcpstore-server.conf ] || install -m 0644 \
	  conf/tcpstore-server.conf $(DESTDIR)$(SYSCONFDIR)/fccl/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' \
	  conf/fccl.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/fccl.pc
	for src in $(MAN_SRCS); do page=$${src#man/}; page=$${page%.in}; \
	  sec=$${page##*.}; install -d $(DESTDIR)$(PREFIX)/share/man/man$$sec && \
	  $(MAN_SED) $$src > $(DESTDIR)$(PREFIX)/share/man/man$$sec/$$page && \
	  chmod 0644 $(DESTDIR)$(PREFIX)/share/man/man$$sec/$$page || exit 1; done
	# A real install (not a staging tree) refreshes the linker cache, or
	# programs built against the new libfccl.so.0 would not find it.
	if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then \
	  ldconfig; fi

uninstall:
	rm -rf $(DESTDIR)$(PREFIX)/include/fccl $(DESTDIR)$(PREFIX)/share/fccl
	rm -rf $(DESTDIR)$(PREFIX)/lib/fccl
	rm -f $(DESTDIR)$(UNITDIR)/tcpstore-server.service
	rm -f $(DESTDIR)$(PREFIX)/lib/libfccl.* \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig/fccl.pc \
	  $(addprefix $(DESTDIR)$(PREFIX)/bin/,$(notdir $(PROGS)))
	for src in $(MAN_SRCS); do page=$${src#man/}; page=$${page%.in}; \
	  rm -f $(DESTDIR)$(PREFIX)/share/man/man$${page##*.}/$$page; done

clean:
	rm -rf build build-san build-fuzz

# The Python package: build/python (python/python.mk).
include python/python.mk

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# ---- fuzzing (not part of `make test`) ----
# `make fuzz FUZZ_S=N` builds the libFuzzer targets fuzz/fuzz_*.c with
# clang (ASan + UBSan) over the store and common sources, and runs each for
# N seconds from its seed corpus fuzz/corpus/NAME; new inputs go to
# build-fuzz/corpus/NAME, crashes to build-fuzz/.  clang and its fuzzer
# runtime are installed (Debian packages) only when this is asked for.
FUZZ_S ?= 60
FUZZ_CC ?= clang
FUZZ_BUILD := build-fuzz
FUZZ_FLAGS := -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
  -fno-sanitize-recover=undefined \
  $(addprefix -I,$(sort $(INC_client) $(INC_server)))
FUZZ_SRCS := $(sort $(wildcard common/*.c store/*/*.c))
FUZZ_OBJS := $(patsubst %.c,$(FUZZ_BUILD)/obj/%.o,$(FUZZ_SRCS))
FUZZ_TARGETS := $(patsubst fuzz/%.c,$(FUZZ_BUILD)/%,$(sort $(wildcard fuzz/fuzz_*.c)))

.PHONY: fuzz fuzz-build fuzz-deps
fuzz-deps:
	@command -v $(FUZZ_CC) >/dev/null 2>&1 && \
	  echo 'int LLVMFuzzerTestOneInput(const char *d, long n){(void)d;(void)n;return 0;}' | \
	  $(FUZZ_CC) -fsanitize=fuzzer -x c - -o /dev/null 2>/dev/null || \
	  FCCL_FUZZ_DEPS=1 scripts/install-deps.sh

fuzz-build: fuzz-deps
	$(MAKE) $(FUZZ_TARGETS)

$(FUZZ_BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CFLAGS_BASE) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/fuzz_%: fuzz/fuzz_%.c $(FUZZ_OBJS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CFLAGS_BASE) $(FUZZ_FLAGS) -fsanitize=fuzzer -MMD -MP -o $@ $(filter %.c %.o,$^) $(LIBS)

-include $(shell find $(FUZZ_BUILD) -name '*.d' 2>/dev/null)

fuzz: fuzz-build
	@for t in $(FUZZ_TARGETS); do n=$${t##*/fuzz_}; \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$n $(FUZZ_BUILD)/crash/$$n; \
	  echo "fuzz: $$n for $(FUZZ_S) s"; \
	  $$t -max_total_time=$(FUZZ_S) -timeout=10 -rss_limit_mb=2048 \
	    -artifact_prefix=$(FUZZ_BUILD)/crash/$$n/ -print_final_stats=1 \
	    $(FUZZ_BUILD)/corpus/$$n fuzz/corpus/$$n || exit 1; done
