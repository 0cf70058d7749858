// The system zlib (Debian zlib1g-dev), used to gzip HTTP request bodies.
#include <zlib.h>

// deflateInit2 is a macro (it passes the library version and struct size), which Swift cannot
// call; windowBits 15 + 16 selects the gzip wrapper instead of raw zlib.
static inline int czlib_deflate_init_gzip(z_streamp stream, int level) {
    return deflateInit2(stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
}
