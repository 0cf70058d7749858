// Exists only so the module map has one header to point at: nats.c's own header (Debian
// libnats-dev, nats.c 3.4) is the whole API the NATS connection module uses.
#include <nats/nats.h>
