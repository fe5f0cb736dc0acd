# diagport - one Makefile. Targets a newcomer guesses:
#   make            build ./diagport (installs missing Debian packages first)
#   make test       build, install test prerequisites, run every test; ends "N passed, N failed"
#   make demo       inject the example workloads and show what changed
#   make bench      run the benchmarks under bench/ (they measure, they do not gate)
#   make lint       clang-tidy and cppcheck over the sources
#   make fuzz       build the libFuzzer targets under tests/fuzz/ and run each briefly
#   make image      the agent's image; make webhook-image, the webhook's (docs/image.md)
#   make lambda     the CloudFormation macro's Lambda artefact (build/lambda/diagport-macro.zip)
#   make cdk        the CDK construct library under cdk/ (rules in WebAssembly, TypeScript, asset)
#   make install    ./diagport into $(DESTDIR)$(PREFIX)/bin (PREFIX=/usr/local), with kubectl-diagport
#   make clean
# Switches: SANITIZER=address|undefined|address,undefined   WERROR=1 (on in CI)

comma    := ,
CC       ?= cc
PKGS     := jansson yaml-0.1 zlib libcurl libseccomp libmicrohttpd gnutls openssl
BUILD    := build
VERSION  := $(shell cat VERSION 2>/dev/null || echo 0.0.0)

WARN     := -Wall -Wextra -Wshadow -Wformat=2 -Wstrict-prototypes -Wmissing-prototypes \
            -Wno-unused-parameter -Wvla
ifeq ($(CI),true)
WERROR   ?= 1
endif
ifeq ($(WERROR),1)
WARN     += -Werror
endif

# libcurl: headers only; common/hclient.c loads it on demand, so the agent never maps it.
# libmicrohttpd and GnuTLS: installed (bench/mhd_file.c is the reference server), not linked:
# the agent's HTTP server is http/httpd.c.
# zlib: linked (libz.a in the static build): the agent gzips pprof profiles (launcher/pprof.c).
# OpenSSL: headers only in the dynamic build (common/tlsbase.c loads libssl on demand); linked
# into the static one (below).
LINKED   := $(filter-out libcurl libmicrohttpd gnutls openssl,$(PKGS))
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(LINKED) 2>/dev/null) -lpthread

CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 -D_GNU_SOURCE -DDP_VERSION='"$(VERSION)"' $(WARN) -I. -Icommon \
            -fstack-protector-strong -D_FORTIFY_SOURCE=2 -fPIE
LDFLAGS  += -pie -Wl,-z,relro,-z,now
ifneq ($(SANITIZER),)
# a report fails the run (UBSan would otherwise print it and go on)
CFLAGS   += -fsanitize=$(SANITIZER) -fno-sanitize-recover=all -fno-omit-frame-pointer -O1
LDFLAGS  += -fsanitize=$(SANITIZER)
BUILD    := build-$(subst $(comma),-,$(SANITIZER))
endif

COMMON_SRC := $(wildcard common/*.c cloud/*.c)
LIBS_SRC   := $(wildcard http/*.c eventpipe/*.c)
COMP_SRC   := $(LIBS_SRC) $(wildcard injector/*.c webhook/*.c launcher/*.c launcher/*/*.c fleet/*.c fleet/*/*.c egress/*.c)
COMMON_OBJ := $(COMMON_SRC:%.c=$(BUILD)/%.o)
COMP_OBJ   := $(COMP_SRC:%.c=$(BUILD)/%.o)
UNIT_SRC   := $(wildcard tests/unit/test_*.c)
UNIT_BIN   := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
LIBDP      := $(BUILD)/libdiagport.a

PREREQ_STAMP := $(BUILD)/.prereqs-$(shell cat scripts/prereqs.sh 2>/dev/null | cksum | cut -d' ' -f1)

.PHONY: all prereqs test demo bench lint fuzz clean unit lambda cdk image webhook-image install FORCE
all: diagport

$(PREREQ_STAMP):
	@mkdir -p $(BUILD)
	@scripts/prereqs.sh build
	@touch $@

prereqs:
	@scripts/prereqs.sh build

# Objects depend on the prerequisites having been checked (order-only).
$(BUILD)/%.o: %.c | $(PREREQ_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -MMD -MP -c $< -o $@

# The page of `diagport ui` (fleet/ui/assets/), embedded into the binary as C arrays (scripts/embed-assets.py);
# the folder itself is a prerequisite, so that adding or removing a file remakes it.
UI_ASSETS   := $(sort $(wildcard fleet/ui/assets/*))
UI_ASSETS_C := $(BUILD)/fleet/ui/ui_assets.c
$(UI_ASSETS_C): scripts/embed-assets.py $(UI_ASSETS) $(wildcard fleet/ui/assets) | $(PREREQ_STAMP)
	@mkdir -p $(dir $@)
	python3 scripts/embed-assets.py $@ $(UI_ASSETS)
$(BUILD)/fleet/ui/ui_assets.o: $(UI_ASSETS_C)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -c $< -o $@

$(LIBDP): $(COMMON_OBJ) $(COMP_OBJ) $(BUILD)/fleet/ui/ui_assets.o
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/diagport: $(BUILD)/main.o $(LIBDP)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBDP) $(PKG_LIBS)

# copy, then rename: works while an agent started from ./diagport is still running. Compared, not
# timestamped: after `make SANITIZER=...` (another BUILD), a plain `make` puts the plain binary back.
diagport: $(BUILD)/diagport FORCE
	@cmp -s $< $@ || { cp $< $@.tmp && mv -f $@.tmp $@; }

FORCE:

# The CloudFormation macro's Lambda artefact (issue 16): the same program, linked statically so that
# it needs nothing from provided.al2023's glibc (2.34, older than ours), stripped (1.6 MB, not 2.9:
# the zip Lambda fetches at a cold start), named bootstrap, zipped.
# libcurl, libmicrohttpd and GnuTLS are loaded with dlopen and unused by the macro; the static
# link warns about dlopen, which the macro never reaches.
# The whole binary linked statically and stripped: the agent's image (FROM scratch: nothing but this
# file and a CA bundle) and, without OpenSSL, the Lambda macro's bootstrap (provided.al2023's glibc is
# older than Debian's).
# It cannot dlopen, so OpenSSL's table of functions (common/tlsbase.c, which both the egress client's
# TLS, cloud/webc_tls.c, and the agent's https server, http/httpd_tls.c, go through) is compiled a
# second time with TLSBASE_LINKED, which fills it with libssl.a's and libcrypto.a's functions, and
# that object goes before the archive, whose dlopen variant is then never pulled in (docs/BENCHMARKS.md:
# what it costs the image and the agent's RSS).
STATIC_TLS := $(BUILD)/static/tlsbase_linked.o
STATIC_LIBS = $(shell pkg-config --static --libs $(LINKED) openssl 2>/dev/null) -lpthread
$(BUILD)/static/tlsbase_linked.o: common/tlsbase.c | $(PREREQ_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -DTLSBASE_LINKED -MMD -MP -c $< -o $@

$(BUILD)/static/diagport: $(BUILD)/main.o $(STATIC_TLS) $(LIBDP)
	@mkdir -p $(dir $@)
	$(CC) -static -s -o $@ $< $(STATIC_TLS) $(LIBDP) $(STATIC_LIBS) 2> $@.log || \
		{ cat $@.log; exit 1; }

# The Lambda's bootstrap is the same static link without OpenSSL: the macro never egresses, and its
# zip is what a cold start fetches (1.8 MB, not 5.8; webc's TLS there would say DP_ENOLIB).
$(BUILD)/lambda/bootstrap: $(BUILD)/main.o $(LIBDP)
	@mkdir -p $(dir $@)
	$(CC) -static -s -o $@.tmp $< $(LIBDP) $(shell pkg-config --static --libs $(LINKED) 2>/dev/null) -lpthread \
		2> $@.log || { cat $@.log; exit 1; }
	mv -f $@.tmp $@

# The agent's image (Containerfile), built with podman, buildah or docker, whichever is here:
# IMAGE=ghcr.io/diagport/diagport:VERSION by default. docs/image.md.
IMAGE ?= ghcr.io/diagport/diagport:$(VERSION)
image: $(BUILD)/static/diagport
	scripts/build-image.sh "$(IMAGE)" $(BUILD)/static/diagport "$(VERSION)"

# The webhook's image (Containerfile.webhook): the dynamic build and the shared libraries it loads
# (libmicrohttpd has no static library in Debian, and a static program cannot load one).
WEBHOOK_IMAGE ?= ghcr.io/diagport/diagport-webhook:$(VERSION)
webhook-image: $(BUILD)/diagport
	scripts/build-image.sh --webhook "$(WEBHOOK_IMAGE)" $(BUILD)/diagport "$(VERSION)"

lambda: $(BUILD)/lambda/bootstrap
	@rm -f $(BUILD)/lambda/diagport-macro.zip
	cd $(BUILD)/lambda && python3 -m zipfile -c diagport-macro.zip bootstrap
	@echo "$(BUILD)/lambda/diagport-macro.zip"

# The CDK construct library (cdk/, issue 16). Its Aspect runs these very rules: the injector alone
# (no jansson, no libyaml: the macro contract reads and writes JSON with our own reader and
# writer) compiled to WebAssembly by Debian's emscripten into one CommonJS file with the module
# inlined, loaded synchronously (Aspects are synchronous), so the npm package needs no native
# binary and synthesizes on any machine Node runs on. Debian's emscripten finds acorn through
# NODE_PATH (its JavaScript passes assume Debian's node, whose search path has it). The module
# leaves the process's exception and rejection handlers alone: they are the user's CDK app's.
WASM_SRC := common/buf.c common/doc.c common/htab.c common/doc_journal.c common/doc_json.c common/doc_json_write.c common/errors.c \
            common/mem.c common/size.c injector/agent.c injector/cfn.c injector/ecs.c injector/macro.c \
            injector/opts.c injector/opts_map.c injector/opts_policy.c injector/opts_text.c injector/rules.c \
            injector/status.c injector/util.c cdk/native/rules.c
CDK_STAMP := cdk/node_modules/.diagport-stamp

$(CDK_STAMP): cdk/package.json scripts/prereqs.sh
	@scripts/prereqs.sh cdk
	@touch $@

cdk/lib/rules-wasm.cjs: $(WASM_SRC) $(wildcard common/*.h injector/*.h) VERSION | $(CDK_STAMP)
	@mkdir -p $(dir $@)
	NODE_PATH=/usr/share/nodejs emcc -O2 -std=c11 -D_GNU_SOURCE -DDP_VERSION='"$(VERSION)"' -DDP_NO_JANSSON -I. -Icommon \
		-Iinjector $(WASM_SRC) -o $@.tmp.cjs -sMODULARIZE=1 -sEXPORT_NAME=diagportRules \
		-sEXPORTED_FUNCTIONS=_dp_rules,_malloc,_free -sEXPORTED_RUNTIME_METHODS=UTF8ToString,stringToUTF8 \
		-sALLOW_MEMORY_GROWTH=1 -sWASM_ASYNC_COMPILATION=0 -sSINGLE_FILE=1 -sENVIRONMENT=node \
		-sNODEJS_CATCH_EXIT=0 -sNODEJS_CATCH_REJECTION=0
	mv -f $@.tmp.cjs $@

cdk/lib/index.js: $(wildcard cdk/src/*.ts) cdk/tsconfig.json | $(CDK_STAMP)
	cd cdk && node_modules/.bin/tsc -p .

cdk/lambda/bootstrap: $(BUILD)/lambda/bootstrap
	@mkdir -p $(dir $@)
	cp $< $@.tmp && mv -f $@.tmp $@

cdk/examples/fargate-api/build/app.js: $(wildcard cdk/examples/fargate-api/*.ts) \
		cdk/examples/fargate-api/tsconfig.json cdk/lib/index.js
	cd cdk && node_modules/.bin/tsc -p examples/fargate-api

cdk: cdk/lib/rules-wasm.cjs cdk/lib/index.js cdk/lambda/bootstrap cdk/examples/fargate-api/build/app.js

$(BUILD)/tests/%: tests/unit/%.c tests/unit/t.h $(LIBDP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -Itests/unit $(LDFLAGS) -o $@ $< $(LIBDP) $(PKG_LIBS)

unit: $(UNIT_BIN)

test: diagport $(UNIT_BIN) cdk
	@scripts/prereqs.sh test
	@BUILD=$(BUILD) tests/run

# The one binary, and kubectl-diagport, a link to it: `kubectl diagport ps` runs it (docs/fleet.md).
# DESTDIR stages it for a package. Microsoft's .NET tools are not ours to install (README, "Install").
PREFIX  ?= /usr/local
install: diagport
	install -d "$(DESTDIR)$(PREFIX)/bin"
	install -m 0755 diagport "$(DESTDIR)$(PREFIX)/bin/diagport"
	ln -sf diagport "$(DESTDIR)$(PREFIX)/bin/kubectl-diagport"

demo: diagport
	@scripts/prereqs.sh demo
	@scripts/demo.sh

bench: diagport
	@scripts/prereqs.sh bench
	@bench/run.sh

lint:
	@scripts/prereqs.sh lint
	cppcheck --quiet --error-exitcode=1 --enable=warning,portability --inline-suppr \
		-I common $(COMMON_SRC) $(COMP_SRC) main.c
	clang-tidy --quiet $(COMMON_SRC) $(COMP_SRC) main.c -- $(CFLAGS) $(PKG_CFLAGS)

FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=build-fuzz/%)
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -DDP_VERSION='"$(VERSION)"' -g -O1 -I. -Icommon -fsanitize=fuzzer,address,undefined
build-fuzz/%: tests/fuzz/%.c $(COMMON_SRC) $(COMP_SRC) $(UI_ASSETS_C) | $(PREREQ_STAMP)
	@scripts/prereqs.sh fuzz
	@mkdir -p build-fuzz
	clang-14 $(FUZZ_CFLAGS) $(PKG_CFLAGS) -o $@ $< $(COMMON_SRC) $(COMP_SRC) $(UI_ASSETS_C) $(PKG_LIBS)
fuzz: $(FUZZ_BIN)
	@for f in $(FUZZ_BIN); do echo "== $$f"; mkdir -p build-fuzz/corpus-$$(basename $$f); \
		seeds=tests/fuzz/seeds; [ -d tests/fuzz/seeds-$${f##*fuzz_} ] && seeds=tests/fuzz/seeds-$${f##*fuzz_}; \
		$$f -max_total_time=$${FUZZ_SECONDS:-30} -max_len=65536 -rss_limit_mb=$${FUZZ_RSS_MB:-512} \
			build-fuzz/corpus-$$(basename $$f) $$seeds || exit 1; done

clean:
	rm -rf build build-* diagport cdk/lib cdk/lambda cdk/examples/fargate-api/build cdk/examples/fargate-api/cdk.out

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
