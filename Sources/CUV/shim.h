// libuv (Debian libuv1-dev), the event loop of the listening sources.
// Only Sources/SystemIO/EventLoop.swift talks to it.
#include <uv.h>
