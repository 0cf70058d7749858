// Load for the `http_server` source's benchmark: CONNECTIONS Traccar Client phones on kept-alive
// connections, each sending REQUESTS OsmAnd position requests (GET /?id=…&lat=…&lon=…&timestamp=…)
// one at a time and waiting for every answer, as the app does.
//
// C, one thread with poll(2): the client must cost little next to the server on this 2-core
// machine. Every request text is built before the clock starts.
//
// Usage: osmand_load PORT CONNECTIONS REQUESTS
// Prints: requests=N seconds=S ok=N bad=N p50_ms=L p99_ms=L max_ms=L (answer latency)
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "load_common.h"

struct conn { int fd, sent, done; char in[4096]; size_t have; struct timespec at; /* the request in flight written */ };

// Complete responses at the start of c->in: counts them, keeps the rest. Returns -1 on a status
// other than 200.
static int responses(struct conn *c, long *ok, struct latencies *lat) {
    for (;;) {
        char *end = memmem(c->in, c->have, "\r\n\r\n", 4);
        if (!end) return 0;
        size_t head = (size_t)(end - c->in) + 4;
        size_t body = 0;
        char *cl = memmem(c->in, head, "Content-Length:", 15);
        if (!cl) cl = memmem(c->in, head, "content-length:", 15);
        if (cl) body = (size_t)strtoul(cl + 15, NULL, 10);
        if (c->have < head + body) return 0;
        if (strncmp(c->in, "HTTP/1.1 200", 12) != 0) return -1;
        (*ok)++;
        c->done++;
        latency_add(lat, &c->at);
        memmove(c->in, c->in + head + body, c->have - head - body);
        c->have -= head + body;
    }
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: osmand_load PORT CONNECTIONS REQUESTS\n"); return 2; }
    int port = atoi(argv[1]), n = atoi(argv[2]), requests = atoi(argv[3]);
    char **text = malloc(sizeof(char *) * (size_t)n * requests);
    size_t *len = malloc(sizeof(size_t) * (size_t)n * requests);
    for (int d = 0; d < n; d++)
        for (int r = 0; r < requests; r++) {
            char *t = malloc(256);
            long ts = 1700000000L + (long)r;
            int k = snprintf(t, 256, "GET /?id=%d&lat=%.6f&lon=%.6f&timestamp=%ld&speed=12.5&bearing=%d&altitude=40&accuracy=5&batt=80 HTTP/1.1\r\n"
                             "Host: 127.0.0.1\r\nUser-Agent: TraccarClient\r\n\r\n",
                             100000 + d, 52.0 + r * 1e-5, 4.9 + d * 1e-4, ts, r % 360);
            text[(size_t)d * requests + r] = t;
            len[(size_t)d * requests + r] = (size_t)k;
        }
    struct conn *c = calloc((size_t)n, sizeof *c);
    struct pollfd *p = calloc((size_t)n, sizeof *p);
    for (int d = 0; d < n; d++) {
        int fd = connect_loopback(port);
        if (fd < 0) { perror("connect"); return 1; }
        c[d].fd = fd;
        p[d].fd = fd;
        p[d].events = POLLIN;
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long ok = 0, bad = 0;
    struct latencies lat = { 0 };
    for (int d = 0; d < n; d++) {
        size_t i = (size_t)d * requests;
        clock_gettime(CLOCK_MONOTONIC, &c[d].at);
        if (write(c[d].fd, text[i], len[i]) != (ssize_t)len[i]) { perror("write"); return 1; }
        c[d].sent = 1;
    }
    int active = n;
    while (active > 0) {
        if (poll(p, (nfds_t)n, 30000) <= 0) { fprintf(stderr, "no answer for 30 s\n"); return 1; }
        for (int d = 0; d < n; d++) {
            if (!(p[d].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t got = read(c[d].fd, c[d].in + c[d].have, sizeof c[d].in - c[d].have);
            if (got <= 0) { fprintf(stderr, "connection %d closed after %d answers: %s\n", d, c[d].done, got ? strerror(errno) : "eof"); return 1; }
            c[d].have += (size_t)got;
            if (responses(&c[d], &ok, &lat) < 0) { bad++; fprintf(stderr, "%.*s\n", 40, c[d].in); return 1; }
            if (c[d].done == requests) { close(c[d].fd); p[d].fd = -1; active--; continue; }
            if (c[d].sent == c[d].done) {
                size_t i = (size_t)d * requests + c[d].sent;
                clock_gettime(CLOCK_MONOTONIC, &c[d].at);
                if (write(c[d].fd, text[i], len[i]) != (ssize_t)len[i]) { perror("write"); return 1; }
                c[d].sent++;
            }
        }
    }
    printf("requests=%ld seconds=%.3f ok=%ld bad=%ld", ok, seconds_since(&t0), ok, bad);
    latency_print(&lat);
    printf("\n");
    return bad == 0 ? 0 : 1;
}
