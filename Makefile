# locgate — build, run, test and benchmark on Debian 12 with the Swift toolchain.
# `make run` and `make test` install what they need first (apt, as root or through sudo).

# What building and running the binary needs: the -dev packages of every C library it links
# (libserialport, SQLite, PROJ, zlib, libcurl, libnats, libmosquitto, libmicrohttpd, libsystemd, libuv, libpq), PROJ's CRS database, Leaflet
# for `locgate map`, and pkg-config to find them. `make run` installs only these.
RUN_PACKAGES := pkg-config libserialport-dev libsqlite3-dev libproj-dev proj-data zlib1g-dev libcurl4-openssl-dev \
                libnats-dev libmosquitto-dev libmicrohttpd-dev libsystemd-dev libuv1-dev libpq-dev libjs-leaflet liblua5.4-dev
# The peers and tools the tests and benchmarks start: gpsd, and gpsd-clients for gpsfake and
# gpsdecode (Debian 12's gpsd-clients depends on GTK and matplotlib; no smaller package has
# gpsfake), socat pseudo-terminals, the brokers, openssl for test certificates, cs2cs, sqlite3,
# promtool/prometheus, systemd-analyze, headless chromium for the map pages, gcc for the
# replay benchmark's C checksum scan, and PostgreSQL 15 with PostGIS 3 (the postgres sink's tests
# and benchmark run their own server with initdb/pg_ctl in a temporary directory on a free port;
# the package's own cluster is left alone), and RTKLIB's str2str as the NTRIP 1 caster of the
# NTRIP client's tests and the reference relay of the RTCM port benchmark.
TEST_PACKAGES := proj-bin openssl gpsd gpsd-clients socat python3 procps bc util-linux sqlite3 \
                 nats-server mosquitto mosquitto-clients prometheus curl systemd \
                 chromium gcc postgresql-15 postgresql-client-15 postgresql-15-postgis-3 rtklib
# Everything `make test` installs (CI runs it on a fresh Debian 12).
APT_PACKAGES := $(RUN_PACKAGES) $(TEST_PACKAGES)
SWIFT_FLAGS ?=
CONFIG ?=
# make install: PREFIX for the binary, units and docs; DESTDIR to stage into a directory;
# BINARY to install a binary built elsewhere (else the release build, built when missing).
PREFIX ?= /usr/local
DESTDIR ?=
SYSCONFDIR ?= /etc
BINARY ?= .build/release/locgate
UNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
DOCDIR ?= $(PREFIX)/share/doc/locgate

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps deps-run build release run test bench bench-nmea clean install fuzz fuzz-build fuzz-smoke proof tsan asan chaos

# $(call install,PACKAGES): apt-get installs those not installed yet, without recommends.
# Debian starts a package's service as it installs it (gpsd on 2947, nats-server on 4222,
# mosquitto on 1883, prometheus on 9090, a PostgreSQL cluster on 5432). The tests never need
# those: they start their own peers on free loopback ports. So for the install step only, and only
# when the machine has no policy of its own, a policy-rc.d refuses service starts; it is removed
# again at once. Services already installed, running or enabled are never touched.
define install
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  policy=""; \
	  if [ ! -e /usr/sbin/policy-rc.d ]; then \
	    printf '#!/bin/sh\n# locgate make deps: no service starts while it installs packages\nexit 101\n' | $(SUDO) tee /usr/sbin/policy-rc.d >/dev/null && \
	    $(SUDO) chmod 755 /usr/sbin/policy-rc.d && policy=yes; \
	  fi; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	  status=$$?; \
	  [ -z "$$policy" ] || $(SUDO) rm -f /usr/sbin/policy-rc.d; \
	  exit $$status; \
	fi
endef

deps-run:
	$(call install,$(RUN_PACKAGES))

deps:
	$(call install,$(APT_PACKAGES))

build: deps-run
	swift build $(SWIFT_FLAGS)

# The Swift runtime and Foundation are linked statically (--static-swift-stdlib): the installed
# binary needs only the Debian libraries above, not the toolchain's, and it starts with fewer
# symbols to bind. The benchmarks build the same way.
release: deps-run
	swift build -c release --static-swift-stdlib --product locgate

run: build
	.build/debug/locgate run $(CONFIG)

# Lays out the binary, the systemd unit, the sysusers.d entry, a default pipeline (kept if one
# exists) and the docs; Docs/Operations.md, "Running as a service". Under DESTDIR nothing is
# activated; installed for real on a systemd host, the user is created and systemd reloaded.
install:
	@[ -x "$(BINARY)" ] || $(MAKE) release
	install -D -m 0755 "$(BINARY)" "$(DESTDIR)$(PREFIX)/bin/locgate"
	install -d -m 0755 "$(DESTDIR)$(UNITDIR)" "$(DESTDIR)$(SYSUSERSDIR)" "$(DESTDIR)$(DOCDIR)" "$(DESTDIR)$(SYSCONFDIR)/locgate"
	sed -e 's#@BINDIR@#$(PREFIX)/bin#g' -e 's#@DOCDIR@#$(DOCDIR)#g' -e 's#/etc/locgate#$(SYSCONFDIR)/locgate#g' \
	  Packaging/locgate.service > "$(DESTDIR)$(UNITDIR)/locgate.service"
	chmod 0644 "$(DESTDIR)$(UNITDIR)/locgate.service"
	install -m 0644 Packaging/locgate.sysusers "$(DESTDIR)$(SYSUSERSDIR)/locgate.conf"
	@# The operator's pipeline is theirs: never overwritten.
	[ -e "$(DESTDIR)$(SYSCONFDIR)/locgate/pipeline.json" ] || install -m 0644 Packaging/pipeline.json "$(DESTDIR)$(SYSCONFDIR)/locgate/pipeline.json"
	install -m 0644 README.md Docs/*.md "$(DESTDIR)$(DOCDIR)/"
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then \
	  systemd-sysusers "$(SYSUSERSDIR)/locgate.conf" && systemctl daemon-reload && \
	  echo "installed: edit $(SYSCONFDIR)/locgate/pipeline.json, then systemctl enable --now locgate"; \
	fi

# Suites run one after another: many start real peers (gpsd, socat, HTTP receivers, child
# processes) whose timing a 2-core machine cannot keep when they all run at once.
# Then the fuzz smoke (FUZZ_SMOKE=0 skips it): every fuzz target 5 s on its corpus, so a decoder
# change that traps on a known input fails CI. Measured on 2 busy cores: the instrumented build
# from nothing 2 min 19 s, the 14 runs 91 s; the suite itself 8 to 10 minutes.
FUZZ_SMOKE ?= 1
test: deps build
	@# Edges run down the layers (C wrappers → base → engines → runtime → plugins → catalog → CLI), no dependency is declared unused and no import undeclared.
	python3 Tests/Support/module_graph.py
	swift test --disable-xctest --no-parallel $(SWIFT_FLAGS)
	@if [ "$(FUZZ_SMOKE)" = 1 ]; then $(MAKE) --no-print-directory fuzz-smoke; fi

# Each benchmark prints its figures beside a reference run in the same process tree
# (gpsdecode, cs2cs, 10 vs 10,000 fences, disk vs memory queue, psql \copy, str2str). Compare ratios, not seconds.
bench: deps
	LOCGATE_BENCH=1 python3 Tests/Support/module_graph.py
	bash Benchmarks/nmea_replay.sh
	bash Benchmarks/motion.sh
	sh Benchmarks/coordinates.sh
	bash Benchmarks/geofence.sh
	bash Benchmarks/http_sink.sh
	bash Benchmarks/nats_sink.sh
	bash Benchmarks/nats_source.sh
	bash Benchmarks/mqtt_sink.sh
	bash Benchmarks/postgres_sink.sh
	bash Benchmarks/trackers.sh
	bash Benchmarks/lua.sh
	bash Benchmarks/http_serving.sh
	sh Benchmarks/receiver_stream.sh
	bash Benchmarks/rtcm_port.sh

bench-nmea: deps
	bash Benchmarks/nmea_replay.sh

# Fuzzing (Fuzz/README.md): every decoder of device and network bytes under libFuzzer with
# AddressSanitizer. The targets are built only here (LOCGATE_FUZZ=1, in .build/fuzz), never by
# `swift build` or `make test`. Each runs FUZZ_SECONDS, one after another, on its corpus and
# dictionary; any crash, leak or input slower than a second fails the run. New inputs go to
# .build/fuzz/corpus; FUZZ_MERGE=1 merges them into Fuzz/corpus. FUZZ_TARGETS picks targets.
FUZZ_SECONDS ?= 60
FUZZ_MERGE ?= 0
FUZZ_TARGETS ?= TeltonikaTCP TeltonikaUDP GT06 H02 JT808 GPS103 Watch GL200 Meitrack Suntech LuaProtocol NMEA JSON Configuration GpsdReports GPX JSONLines \
                OwnTracks MQTTMessages NATSMessages GeoJSONFences HTTPRequests StateSnapshots \
                ReceiverStream UBX RTCM NTRIP

fuzz-build: deps-run
	@# The fuzz targets' declared dependencies are checked as the package's are (see `test`).
	LOCGATE_FUZZ=1 python3 Tests/Support/module_graph.py
	bash Fuzz/run.sh build $(FUZZ_TARGETS)

fuzz: fuzz-build
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_MERGE=$(FUZZ_MERGE) bash Fuzz/run.sh run $(FUZZ_TARGETS)

# A few seconds per target: the CI smoke (see `test`) and a quick check after changing a decoder.
fuzz-smoke:
	$(MAKE) fuzz FUZZ_SECONDS=5 FUZZ_MERGE=0

# Sanitizers, each in a scratch path of its own (a sanitized build shares nothing with the plain
# one). ThreadSanitizer over the suites where threads meet: the runtime (buffers, acknowledgements,
# pipeline threads), the outbox and its delivery loops, the broker and HTTP sinks and sources, the
# event loop and the device intake. AddressSanitizer over the suites that cross into C: every
# libserialport, libcurl, libmosquitto, libnats, libmicrohttpd, libuv, libpq, SQLite and PROJ
# caller. A report fails the run. ThreadSanitizer runs to the end and counts its reports.
# Shared state is guarded by Locking.Locked (a pthread mutex TSan intercepts), never by
# Synchronization.Mutex: on Linux Mutex hands a contended lock over through futexes inside the
# uninstrumented standard library, and TSan reported every access it guards as a race (99 false
# reports in the first 33 of its 59 suites before the change; 0 after). No suppressions: no report
# came from inside a C library, so there is no suppressions file. Tests that run the binary (crash
# tests) use .build/debug/locgate, built when missing and never rebuilt, so it is built first
# rather than from inside a test or stale. Measured on 2 cores shared with other builds: the TSan
# build from nothing 26 min (14 min when a change reaches every module), its run 13 to 17 min
# (267 tests); the ASan build from nothing 15 min, its run 7 min (343 tests). Under ASan and a
# loaded machine the serial duty-cycle test's 300 ms timing bound can miss (675 ms seen once).
TSAN_SUITES ?= LockingTests|GatewayRuntimeTests|DeliveryEngineTests|OutboxProofTests|HTTPOutputTests|MQTTOutputTests|MQTTInputTests|NATSOutputTests|NATSInputTests|SystemIOTests|DeviceIntakeTests|HTTPServingTests
ASAN_SUITES ?= SerialInputTests|HTTPOutputTests|MQTTOutputTests|MQTTInputTests|NATSOutputTests|NATSInputTests|HTTPServingTests|HTTPInputTests|SystemIOTests|DeviceIntakeTests|TrackerInputTests|PostgresOutputTests|DeliveryEngineTests|CoordinatesTests|GeodesyTests

tsan: deps
	swift build --product locgate $(SWIFT_FLAGS)
	swift build --build-tests --sanitize=thread --scratch-path .build/tsan $(SWIFT_FLAGS)
	@status=0; TSAN_OPTIONS="second_deadlock_stack=1" swift test --skip-build --sanitize=thread --scratch-path .build/tsan \
	  --disable-xctest --no-parallel --filter '$(TSAN_SUITES)' $(SWIFT_FLAGS) > .build/tsan/report.log 2>&1 || status=$$?; \
	  grep -E '^(✔|✘) Test run' .build/tsan/report.log; n=$$(grep -c 'WARNING: ThreadSanitizer' .build/tsan/report.log); \
	  echo "tsan: $$n report(s), tests exit $$status; the log: .build/tsan/report.log"; [ $$status = 0 ] && [ $$n = 0 ]

asan: deps
	swift build --product locgate $(SWIFT_FLAGS)
	swift build --build-tests --sanitize=address --scratch-path .build/asan $(SWIFT_FLAGS)
	ASAN_OPTIONS="halt_on_error=1 detect_leaks=0" swift test --skip-build --sanitize=address --scratch-path .build/asan \
	  --disable-xctest --no-parallel --filter '$(ASAN_SUITES)' $(SWIFT_FLAGS)

# The outbox's proofs (Tests/OutboxProofTests) at PROOF_SCALE times the size `make test` runs
# them at: the model-based test (more seeded sequences) and the simulated power cuts (a longer
# run, so more cut points). They print what they ran and measured: 23 minutes at scale 20 on two
# cores shared with other builds, 35 s at scale 1.
PROOF_SCALE ?= 20
proof: deps-run
	swift build --build-tests $(SWIFT_FLAGS)
	LOCGATE_PROOF_SCALE=$(PROOF_SCALE) swift test --skip-build --disable-xctest --no-parallel --filter OutboxProofTests $(SWIFT_FLAGS)

# The chaos run (Chaos/README.md): the fleet of Docs/examples/fleet — a 3-node JetStream cluster,
# mosquitto, an HTTP receiver, two gateways, two aggregators, all on free loopback ports in a
# temporary directory — under rolling kill -9 and restarts for about CHAOS_SECONDS (faults and
# drain), then every position id is classified per output path and device; any loss fails.
# Not part of `test`. CHAOS_BINARY runs a binary built elsewhere (else the release build,
# incremental); CHAOS_SEED picks another fault schedule. 2 minutes here at the default.
CHAOS_SECONDS ?= 180
CHAOS_SEED ?= 1
CHAOS_BINARY ?=
CHAOS_PACKAGES := nats-server mosquitto mosquitto-clients python3
chaos: deps-run
	$(call install,$(CHAOS_PACKAGES))
	CHAOS_SECONDS=$(CHAOS_SECONDS) CHAOS_SEED=$(CHAOS_SEED) python3 Chaos/chaos.py $(CHAOS_BINARY)

clean:
	rm -rf .build
