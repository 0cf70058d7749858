// Exists only so the module map has one header to point at: libserialport's own header
// (Debian libserialport-dev) is the whole API the SerialInput plugin uses.
#include <libserialport.h>
