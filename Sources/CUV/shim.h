// libuv (Debian libuv1-dev), the event loop of the listening sources.
// Only Sources/SystemIO/EventLoop.swift talks to it.
#include <uv.h>
#include <sys/prctl.h>

// Names the calling thread (seen in `top -H`; the kernel keeps 15 bytes). prctl is variadic,
// which Swift cannot call, and libuv 1.44 has no uv_thread_setname yet.
static inline void locgate_name_this_thread(const char *name) {
    prctl(PR_SET_NAME, name, 0, 0, 0);
}
