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

# fccl.torch, the torch.distributed backend: its Python modules, and its
# c10d Work in C++ (python/fccl/torch/_work.cpp says why), built when
# libtorch-dev and pybind11-dev are there (else fccl.torch is left out).
CXX ?= g++
TORCH_HDR := /usr/include/torch/csrc/distributed/c10d/Work.hpp
TORCH_HAVE := $(if $(and $(wildcard $(TORCH_HDR)),$(wildcard /usr/include/pybind11/pybind11.h)),1,)
PYT_MODS := $(sort $(wildcard python/fccl/torch/*.py))
PYT_SO := $(PY_DIR)/torch/_work$(PY_EXT)
ifeq ($(TORCH_HAVE),1)
PY_OUT += $(PYT_SO) $(patsubst python/fccl/torch/%,$(PY_DIR)/torch/%,$(PYT_MODS))
endif
# No -g: debug information for torch's templates doubled the compile (53
# against 29 s here), the slowest step of a fresh build; the shim's own code
# is a few dozen lines.
PYT_CXXFLAGS := -std=c++17 -O2 -fPIC -Wall -Wextra -Werror \
  -I$(PY_INC) -I/usr/include/torch/csrc/api/include
PYT_LIBS := -ltorch -ltorch_cpu -lc10 -ltorch_python

$(PYT_SO): python/fccl/torch/_work.cpp python/fccl/_fccl/torchq_abi.h
	@mkdir -p $(dir $@)
	$(CXX) $(PYT_CXXFLAGS) -shared -o $@ $< $(PYT_LIBS)

$(PY_DIR)/torch/%.py: python/fccl/torch/%.py
	@mkdir -p $(dir $@)
	cp $< $@

.PHONY: python test-python install-python torch-first

# `all` names this first (Makefile): the C++ compile, the longest single
# step, then runs beside the C objects instead of after them.
torch-first:
ifeq ($(SAN)$(PY_HAVE)$(TORCH_HAVE),011)
torch-first: $(PYT_SO)
endif

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
ifeq ($(TORCH_HAVE),1)
	install -d $(DESTDIR)$(PY_SITE)/fccl/torch
	install -m 0644 $(PYT_MODS) $(DESTDIR)$(PY_SITE)/fccl/torch/
	install -m 0755 $(PYT_SO) $(DESTDIR)$(PY_SITE)/fccl/torch/
endif

uninstall: uninstall-python
.PHONY: uninstall-python
uninstall-python:
	rm -rf $(DESTDIR)$(PY_SITE)/fccl
