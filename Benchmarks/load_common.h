// What the device load generators (gt06_load, tracker_load, jt808_load, osmand_load,
// idle_devices) share: a TCP connection to locgate on loopback with Nagle off, so each frame
// leaves at once as a device's does, the seconds since a monotonic start, and the answer
// latencies of the loads whose devices wait for each answer.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
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

// Milliseconds from each frame's write to the end of its answer, one sample per answer. A device
// that waits for its answer sends nothing meanwhile, so this is the latency that bounds its rate;
// the throughput alone hides whether a change made every answer a little quicker or a few far slower.
struct latencies {
    double *ms;
    size_t n, cap;
};

// Notes the sample of an answer to a frame written at `sent`.
static inline void latency_add(struct latencies *l, const struct timespec *sent) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 4096;
        l->ms = realloc(l->ms, l->cap * sizeof *l->ms);
        if (!l->ms) { perror("realloc"); exit(1); }
    }
    l->ms[l->n++] = seconds_since(sent) * 1000;
}

static inline int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Prints " p50_ms=… p99_ms=… max_ms=…" (nearest rank), to end the load's line of figures.
static inline void latency_print(struct latencies *l) {
    if (l->n == 0) { printf(" p50_ms=0 p99_ms=0 max_ms=0"); return; }
    qsort(l->ms, l->n, sizeof *l->ms, compare_doubles);
    size_t p50 = (l->n * 50 + 99) / 100, p99 = (l->n * 99 + 99) / 100;
    printf(" p50_ms=%.3f p99_ms=%.3f max_ms=%.3f", l->ms[p50 - 1], l->ms[p99 - 1], l->ms[l->n - 1]);
}
