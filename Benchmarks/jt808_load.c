// Load for the `jt808` source's benchmark: CONNECTIONS JT/T 808 terminals, each authenticating
// (0x0102 with its phone digits as the code: the source runs with "auth": "phone"), then sending
// FRAMES 0x0704 batches of RECORDS locations and waiting for each 0x8001 answer (which must name
// the batch's serial and id, result 0), as a terminal does.
//
// Written in C, single-threaded with poll(2), so the load costs the 2-core machine little next
// to locgate (as tracker_load.c). Every frame (escaped, with its check code) is built before the
// clock starts; the timed part sends frames and reads answers.
//
// Usage: jt808_load PORT CONNECTIONS FRAMES RECORDS
// Prints: records=N seconds=S answers_ok=N answers_bad=N p50_ms=L p99_ms=L max_ms=L (answer latency)
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "load_common.h"

static size_t put32(uint8_t *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; return 4; }
static size_t put16(uint8_t *p, uint16_t v) { p[0] = v >> 8; p[1] = v; return 2; }
static uint8_t bcd(int v) { return (uint8_t)((v / 10) << 4 | (v % 10)); }

// Escapes header … body, appends the check code, wraps in 7E marks.
static size_t wrap(uint8_t *out, const uint8_t *data, size_t n) {
    uint8_t check = 0;
    size_t k = 0;
    out[k++] = 0x7E;
    for (size_t i = 0; i <= n; i++) {
        uint8_t b = i < n ? data[i] : check;
        if (i < n) check ^= b;
        if (b == 0x7E) { out[k++] = 0x7D; out[k++] = 0x02; }
        else if (b == 0x7D) { out[k++] = 0x7D; out[k++] = 0x01; }
        else out[k++] = b;
    }
    out[k++] = 0x7E;
    return k;
}

static size_t header(uint8_t *p, uint16_t id, size_t body, const uint8_t phone[6], uint16_t serial) {
    put16(p, id);
    put16(p + 2, (uint16_t)body);
    memcpy(p + 4, phone, 6);
    put16(p + 10, serial);
    return 12;
}

// A 0x0704 batch of `records` locations of terminal `device`, batch `frame`.
static size_t build_batch(uint8_t *out, const uint8_t phone[6], int device, int frame, int records, uint16_t serial) {
    uint8_t data[1100], *body = data + 12, *p = body;
    p += put16(p, (uint16_t)records);
    *p++ = 0;
    for (int r = 0; r < records; r++) {
        p += put16(p, 28 + 6 + 3);
        p += put32(p, 0);                                         // alarm
        p += put32(p, 3);                                         // ACC on, positioned
        p += put32(p, (uint32_t)(22000000 + device * 1000 + r));  // lat * 1e6
        p += put32(p, (uint32_t)(114000000 + frame * 10 + r));    // lon * 1e6
        p += put16(p, 12);                                        // altitude
        p += put16(p, 420);                                       // 42.0 km/h
        p += put16(p, (uint16_t)((frame * 7 + r) % 360));         // course
        long t = 1700000000L + device * 86400L + (long)(frame * records + r) + 8 * 3600;  // GMT+8
        struct tm tm;
        time_t tt = t;
        gmtime_r(&tt, &tm);
        *p++ = bcd(tm.tm_year % 100); *p++ = bcd(tm.tm_mon + 1); *p++ = bcd(tm.tm_mday);
        *p++ = bcd(tm.tm_hour); *p++ = bcd(tm.tm_min); *p++ = bcd(tm.tm_sec);
        *p++ = 0x01; *p++ = 4; p += put32(p, 12345);              // odometer
        *p++ = 0x31; *p++ = 1; *p++ = 9;                          // satellites
    }
    size_t n = (size_t)(p - body);
    header(data, 0x0704, n, phone, serial);
    return wrap(out, data, 12 + n);
}

struct conn {
    int fd;
    int frame;        // next batch to send (-1: authentication in flight)
    uint8_t in[4096]; // bytes of the answer being read
    size_t got;
    uint16_t serial;  // serial of the message in flight
    struct timespec sent;  // when it was written
};

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: jt808_load PORT CONNECTIONS FRAMES RECORDS\n"); return 2; }
    int port = atoi(argv[1]), n = atoi(argv[2]), frames = atoi(argv[3]), records = atoi(argv[4]);
    if (n < 1 || frames < 1 || records < 1 || records > 25) { fprintf(stderr, "bad arguments\n"); return 2; }
    size_t frame_max = 2 * (12 + 3 + (size_t)records * 39 + 1) + 2;
    uint8_t *buf = malloc((size_t)n * frames * frame_max);
    size_t *lens = malloc(sizeof(size_t) * (size_t)n * frames);
    uint8_t (*phones)[6] = malloc(sizeof *phones * (size_t)n);
    if (!buf || !lens || !phones) return 1;
    for (int d = 0; d < n; d++) {
        char digits[13];
        snprintf(digits, sizeof digits, "%012ld", 13900000000L + d);
        for (int k = 0; k < 6; k++) phones[d][k] = (uint8_t)((digits[2 * k] - '0') << 4 | (digits[2 * k + 1] - '0'));
        for (int f = 0; f < frames; f++)
            lens[(size_t)d * frames + f] = build_batch(buf + ((size_t)d * frames + f) * frame_max, phones[d], d, f, records, (uint16_t)(f + 2));
    }

    struct conn *c = calloc((size_t)n, sizeof *c);
    struct pollfd *pfd = calloc((size_t)n, sizeof *pfd);
    for (int d = 0; d < n; d++) {
        int fd = connect_loopback(port);
        if (fd < 0) { perror("connect"); return 1; }
        uint8_t data[64], frame[140];
        char code[13];
        snprintf(code, sizeof code, "%012ld", 13900000000L + d);
        header(data, 0x0102, 12, phones[d], 1);
        memcpy(data + 12, code, 12);
        size_t len = wrap(frame, data, 24);
        if (write(fd, frame, len) != (ssize_t)len) { perror("write"); return 1; }
        c[d].fd = fd;
        c[d].frame = -1;
        c[d].serial = 1;
        pfd[d].fd = fd;
        pfd[d].events = POLLIN;
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long ok = 0, bad = 0;
    struct latencies lat = { 0 };
    int active = n;
    while (active > 0) {
        if (poll(pfd, (nfds_t)n, 30000) <= 0) { fprintf(stderr, "no answer for 30 s\n"); return 1; }
        for (int d = 0; d < n; d++) {
            if (!(pfd[d].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            struct conn *k = &c[d];
            ssize_t r = read(k->fd, k->in + k->got, sizeof k->in - k->got);
            if (r <= 0) { fprintf(stderr, "connection closed: %s\n", r == 0 ? "eof" : strerror(errno)); return 1; }
            k->got += (size_t)r;
            // A whole answer: 7E … 7E. Unescape it and check it names the message in flight.
            if (k->got < 2 || k->in[k->got - 1] != 0x7E) continue;
            uint8_t m[64];
            size_t mn = 0;
            for (size_t i = 1; i + 1 < k->got && mn < sizeof m; i++) {
                if (k->in[i] == 0x7D && i + 2 < k->got) { m[mn++] = k->in[i + 1] == 0x01 ? 0x7D : 0x7E; i++; }
                else m[mn++] = k->in[i];
            }
            k->got = 0;
            int good = mn == 18 && m[0] == 0x80 && m[1] == 0x01 && (m[12] << 8 | m[13]) == k->serial && m[16] == 0;
            if (k->frame < 0) {
                if (!good) { fprintf(stderr, "authentication refused\n"); return 1; }
            } else {
                if (good) ok++; else bad++;
                latency_add(&lat, &k->sent);
            }
            k->frame++;
            if (k->frame == frames) {
                close(k->fd);
                pfd[d].fd = -1;
                active--;
                continue;
            }
            size_t i = (size_t)d * frames + k->frame;
            k->serial = (uint16_t)(k->frame + 2);
            clock_gettime(CLOCK_MONOTONIC, &k->sent);
            if (write(k->fd, buf + i * frame_max, lens[i]) != (ssize_t)lens[i]) { perror("write"); return 1; }
        }
    }
    double s = seconds_since(&t0);
    printf("records=%ld seconds=%.3f answers_ok=%ld answers_bad=%ld", ok * records, s, ok, bad);
    latency_print(&lat);
    printf("\n");
    return bad == 0 ? 0 : 1;
}
