// What the device load generators (gt06_load, tracker_load, jt808_load, osmand_load,
// idle_devices) share: a TCP connection to locgate on loopback with Nagle off, so each frame
// leaves at once as a device's does, and the seconds since a monotonic start.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

// A connected socket to 127.0.0.1:port, or -1 with errno set (nothing left open).
static inline int connect_loopback(int port) {
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    a.sin_addr.s_addr = htonl(0x7f000001);
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { close(fd); return -1; }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

// Seconds from t0 (CLOCK_MONOTONIC) to now.
static inline double seconds_since(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}
