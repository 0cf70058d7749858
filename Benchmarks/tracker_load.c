// Load for the `teltonika` source's benchmark: CONNECTIONS devices, each sending FRAMES Codec 8
// Extended frames of RECORDS records and waiting for every answer, as a Teltonika device does.
//
// Written in C, single-threaded with poll(2), so the load costs the 2-core machine little next
// to locgate: a Python client would measure itself. Every frame (with its CRC-16/IBM) is built
// before the clock starts; the timed part only sends and reads answers.
//
// Usage: tracker_load PORT CONNECTIONS FRAMES RECORDS
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

static uint16_t crc16_ibm(const uint8_t *p, size_t n) {
    uint16_t crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int b = 0; b < 8; b++) crc = (crc & 1) ? (crc >> 1) ^ 0xA001 : crc >> 1;
    }
    return crc;
}

static size_t put32(uint8_t *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; return 4; }
static size_t put16(uint8_t *p, uint16_t v) { p[0] = v >> 8; p[1] = v; return 2; }
static size_t put64(uint8_t *p, uint64_t v) { put32(p, v >> 32); put32(p + 4, (uint32_t)v); return 8; }

// One Codec 8E frame of `records` records of device `device`, frame number `frame`.
static size_t build_frame(uint8_t *out, int device, int frame, int records) {
    uint8_t *body = out + 8, *p = body;
    *p++ = 0x8E;
    *p++ = (uint8_t)records;
    for (int r = 0; r < records; r++) {
        uint64_t t = 1700000000000ULL + (uint64_t)device * 86400000ULL + ((uint64_t)frame * records + r) * 1000ULL;
        p += put64(p, t);
        *p++ = 0;                                                   // priority
        p += put32(p, (uint32_t)(int32_t)(100000000 + device * 1000 + r));  // lon * 1e7
        p += put32(p, (uint32_t)(int32_t)(500000000 + frame * 10 + r));      // lat * 1e7
        p += put16(p, 120);                                         // altitude
        p += put16(p, (uint16_t)((frame * 7 + r) % 360));           // angle
        *p++ = 9;                                                   // satellites
        p += put16(p, 42);                                          // speed km/h
        p += put16(p, 0);                                           // event io
        p += put16(p, 3);                                           // io count
        p += put16(p, 2);                                           // one-byte values
        p += put16(p, 239); *p++ = 1;
        p += put16(p, 240); *p++ = 1;
        p += put16(p, 1);                                           // two-byte values
        p += put16(p, 66); p += put16(p, 12345);
        p += put16(p, 0); p += put16(p, 0); p += put16(p, 0);       // 4-, 8-byte, variable
    }
    *p++ = (uint8_t)records;
    size_t len = (size_t)(p - body);
    memset(out, 0, 4);
    put32(out + 4, (uint32_t)len);
    put32(p, crc16_ibm(body, len));
    return 8 + len + 4;
}

struct conn {
    int fd;
    int frame;       // next frame to send
    int got;         // answer bytes read for the frame in flight
    uint8_t answer[4];
    int logged_in;
    struct timespec sent;  // when the frame in flight was written
};

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: tracker_load PORT CONNECTIONS FRAMES RECORDS\n"); return 2; }
    int port = atoi(argv[1]), n = atoi(argv[2]), frames = atoi(argv[3]), records = atoi(argv[4]);
    if (n < 1 || frames < 1 || records < 1 || records > 255) { fprintf(stderr, "bad arguments\n"); return 2; }
    size_t frame_max = 12 + 2 + (size_t)records * 60 + 1;
    uint8_t *buf = malloc((size_t)n * frames * frame_max);
    size_t *lens = malloc(sizeof(size_t) * (size_t)n * frames);
    if (!buf || !lens) return 1;
    for (int d = 0; d < n; d++)
        for (int f = 0; f < frames; f++)
            lens[(size_t)d * frames + f] = build_frame(buf + ((size_t)d * frames + f) * frame_max, d, f, records);

    struct conn *c = calloc((size_t)n, sizeof *c);
    struct pollfd *pfd = calloc((size_t)n, sizeof *pfd);
    for (int d = 0; d < n; d++) {
        int fd = connect_loopback(port);
        if (fd < 0) { perror("connect"); return 1; }
        char imei[16];
        snprintf(imei, sizeof imei, "%015d", 350000000 + d);
        uint8_t login[17] = { 0, 15 };
        memcpy(login + 2, imei, 15);
        if (write(fd, login, 17) != 17) { perror("write"); return 1; }
        c[d].fd = fd;
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
            if (!k->logged_in) {
                uint8_t b;
                if (read(k->fd, &b, 1) != 1 || b != 1) { fprintf(stderr, "login refused\n"); return 1; }
                k->logged_in = 1;
            } else {
                ssize_t r = read(k->fd, k->answer + k->got, (size_t)(4 - k->got));
                if (r <= 0) { fprintf(stderr, "connection closed: %s\n", r == 0 ? "eof" : strerror(errno)); return 1; }
                k->got += (int)r;
                if (k->got < 4) continue;
                uint32_t count = (uint32_t)k->answer[0] << 24 | k->answer[1] << 16 | k->answer[2] << 8 | k->answer[3];
                if (count == (uint32_t)records) ok++; else bad++;
                latency_add(&lat, &k->sent);
                k->got = 0;
                k->frame++;
            }
            if (k->frame == frames) {
                close(k->fd);
                pfd[d].fd = -1;
                active--;
                continue;
            }
            size_t i = (size_t)d * frames + k->frame;
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
