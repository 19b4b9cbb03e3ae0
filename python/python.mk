# The fccl Python package (python/), included by the top-level Makefile.
#
#   make             also builds build/python/fccl (when python3-dev is
#                    there): PYTHONPATH=build/python /usr/bin/python3
#   make python      only that
#   make test-python the pytest suites (tests/py/run.sh)
#   make install     also installs the package for Debian's /usr/bin/python3
#                    (into PY_SITE, relinked against $(PREFIX)/lib)
#
# Not built in the sanitized tree (SAN=1): an ASan extension needs the
# ASan runtime preloaded into the interpreter.

PYTHON ?= /usr/bin/python3
PY_INC := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
PY_EXT := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))' 2>/dev/null)
PY_VER := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("py_version_short"))' 2>/dev/null)
PY_HAVE := $(if $(and $(PY_EXT),$(wildcard $(PY_INC)/Python.h)),1,)
ifeq ($(PREFIX),/usr)
PY_SITE ?= /usr/lib/python3/dist-packages
else
PY_SITE ?= $(PREFIX)/lib/python$(PY_VER)/dist-packages
endif

PY_CSRCS := $(sort $(wildcard python/fccl/_fccl/*.c))
PY_HDRS := $(wildcard python/fccl/_fccl/*.h)
PY_MODS := $(sort $(wildcard python/fccl/*.py))
PY_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(PY_CSRCS))
PY_DIR := $(BUILD)/python/fccl
PY_SO := $(PY_DIR)/_fccl$(PY_EXT)
PY_OUT := $(PY_SO) $(patsubst python/fccl/%,$(PY_DIR)/%,$(PY_MODS))

.PHONY: python test-python install-python

ifeq ($(SAN)$(PY_HAVE),01)
all: python
install: install-python
endif

python: $(PY_OUT)

$(BUILD)/obj/python/%.o: INC = include $(PY_INC)
$(BUILD)/obj/python/%.o: python/%.c $(PY_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fno-strict-aliasing $(addprefix -I,$(INC)) -MMD -MP -c $< -o $@

# In the tree: find libfccl.so in build/lib, whatever the tree's path.
$(PY_SO): $(PY_OBJS) $(SHLIB)
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $(PY_OBJS) -L$(BUILD)/lib -lfccl \
	  -Wl,-rpath,'$$ORIGIN/../../lib' -pthread

$(PY_DIR)/%.py: python/fccl/%.py
	@mkdir -p $(dir $@)
	cp $< $@

test-python: all tests
	tests/py/run.sh $(BUILD)

install-python: python
	install -d $(DESTDIR)$(PY_SITE)/fccl
	install -m 0644 $(PY_MODS) $(DESTDIR)$(PY_SITE)/fccl/
	$(CC) -shared -o $(BUILD)/python/_fccl.installed$(PY_EXT) $(PY_OBJS) \
	  -L$(BUILD)/lib -lfccl -Wl,-rpath,$(PREFIX)/lib -pthread
	install -m 0755 $(BUILD)/python/_fccl.installed$(PY_EXT) \
	  $(DESTDIR)$(PY_SITE)/fccl/_fccl$(PY_EXT)

uninstall: uninstall-python
.PHONY: uninstall-python
uninstall-python:
	rm -rf $(DESTDIR)$(PY_SITE)/fccl
