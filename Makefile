# locgate — build, run, test and benchmark on Debian 12 with the Swift toolchain.
# `make run` and `make test` install what they need first (apt, as root or through sudo).

APT_PACKAGES := libserialport-dev libsqlite3-dev libproj-dev proj-bin proj-data zlib1g-dev libcurl4-openssl-dev openssl \
                gpsd gpsd-clients socat python3 procps bc util-linux sqlite3 \
                libnats-dev nats-server \
                libmosquitto-dev mosquitto mosquitto-clients \
                libjs-leaflet
# Only `make test` needs a browser: the map tests load `locgate map` pages in headless chromium.
TEST_APT_PACKAGES := chromium
SWIFT_FLAGS ?=
CONFIG ?=

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps build release run test bench bench-nmea clean

# $(call apt_install,PACKAGES): installs those of PACKAGES that are missing.
define apt_install
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

deps:
	$(call apt_install,$(APT_PACKAGES))
	@# gpsd's package enables a system service on a socket; the tests run their own gpsd through gpsfake.
	@command -v systemctl >/dev/null 2>&1 && $(SUDO) systemctl disable --now gpsd.socket gpsd.service >/dev/null 2>&1 || true
	@# nats-server's package enables a system service on port 4222; the tests run their own cluster on free ports.
	@command -v systemctl >/dev/null 2>&1 && $(SUDO) systemctl disable --now nats-server.service >/dev/null 2>&1 || true
	@# The same for mosquitto: the mqtt tests start their own brokers on free loopback ports.
	@command -v systemctl >/dev/null 2>&1 && $(SUDO) systemctl disable --now mosquitto.service >/dev/null 2>&1 || true

build: deps
	swift build $(SWIFT_FLAGS)

release: deps
	swift build -c release --product locgate

run: build
	.build/debug/locgate run $(CONFIG)

# Suites run one after another: many start real peers (gpsd, socat, HTTP receivers, child
# processes) whose timing a 2-core machine cannot keep when they all run at once. ~2.5 minutes.
test: build
	$(call apt_install,$(TEST_APT_PACKAGES))
	swift test --disable-xctest --no-parallel $(SWIFT_FLAGS)

# Each benchmark prints its figures beside a reference run in the same process tree
# (gpsdecode, cs2cs, 10 vs 10,000 fences, disk vs memory queue). Compare ratios, not seconds.
bench: deps
	bash Benchmarks/nmea_replay.sh
	sh Benchmarks/coordinates.sh
	bash Benchmarks/geofence.sh
	bash Benchmarks/http_sink.sh
	bash Benchmarks/nats_sink.sh
	bash Benchmarks/nats_source.sh
	bash Benchmarks/mqtt_sink.sh

bench-nmea: deps
	bash Benchmarks/nmea_replay.sh

clean:
	rm -rf .build
