// libsystemd (Debian libsystemd-dev, 252): sd_notify and sd_watchdog_enabled for Type=notify units.
// Only Sources/LocgateCLI/SystemdNotifier.swift talks to it.
#include <systemd/sd-daemon.h>
