// Load for the GT06 benchmarks (the native `gt06` source and a `lua_tracker` running
// Examples/Lua/gt06.lua): CONNECTIONS devices, each logging in, then sending FRAMES 0x22
// GPS/LBS frames, one position each, and waiting for every answer (the serial echoed), as a
// GT06 device does.
//
// C, single-threaded with poll(2), every frame (with its CRC-16/X-25) built before the clock
// starts: the timed part only sends and reads answers, each checked byte for byte.
//
// Usage: gt06_load PORT CONNECTIONS FRAMES
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

static uint16_t crc16_x25(const uint8_t *p, size_t n) {
    uint16_t crc = 0xFFFF;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int b = 0; b < 8; b++) crc = (crc & 1) ? (crc >> 1) ^ 0x8408 : crc >> 1;
    }
    return crc ^ 0xFFFF;
}

// 78 78 | length | protocol | content | serial | CRC | 0D 0A
static size_t build(uint8_t *out, uint8_t protocol, const uint8_t *content, size_t n, uint16_t serial) {
    out[0] = out[1] = 0x78;
    out[2] = (uint8_t)(n + 5);
    out[3] = protocol;
    memcpy(out + 4, content, n);
    out[4 + n] = serial >> 8;
    out[5 + n] = serial & 0xFF;
    uint16_t crc = crc16_x25(out + 2, n + 4);
    out[6 + n] = crc >> 8;
    out[7 + n] = crc & 0xFF;
    out[8 + n] = 0x0D;
    out[9 + n] = 0x0A;
    return n + 10;
}

static size_t position(uint8_t *out, int device, int frame) {
    time_t t = 1700000000 + device * 86400 + frame;
    struct tm tm;
    gmtime_r(&t, &tm);
    uint8_t c[26] = { (uint8_t)(tm.tm_year - 100), (uint8_t)(tm.tm_mon + 1), (uint8_t)tm.tm_mday,
                      (uint8_t)tm.tm_hour, (uint8_t)tm.tm_min, (uint8_t)tm.tm_sec, 0xC9 };
    uint32_t lat = (uint32_t)((22.5 + device * 0.001) * 1800000) + (uint32_t)frame, lon = (uint32_t)(114.05 * 1800000);
    c[7] = lat >> 24; c[8] = lat >> 16; c[9] = lat >> 8; c[10] = lat;
    c[11] = lon >> 24; c[12] = lon >> 16; c[13] = lon >> 8; c[14] = lon;
    c[15] = 42;                                    // km/h
    uint16_t flags = 0x1400 | (uint16_t)(frame % 360);   // positioned, north, east, course
    c[16] = flags >> 8; c[17] = flags & 0xFF;
    uint8_t cell[8] = { 0x01, 0xCC, 0x00, 0x28, 0x7D, 0x00, 0x1F, 0x71 };   // MCC, MNC, LAC, cell id
    memcpy(c + 18, cell, 8);
    return build(out, 0x22, c, sizeof c, (uint16_t)(frame + 2));
}

struct conn { int fd, frame, got; uint8_t answer[10]; int logged_in; struct timespec sent; };

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: gt06_load PORT CONNECTIONS FRAMES\n"); return 2; }
    int port = atoi(argv[1]), n = atoi(argv[2]), frames = atoi(argv[3]);
    if (n < 1 || frames < 1 || frames > 60000) { fprintf(stderr, "bad arguments\n"); return 2; }
    enum { MAX = 40 };
    uint8_t *buf = malloc((size_t)n * frames * MAX);
    size_t *lens = malloc(sizeof(size_t) * (size_t)n * frames);
    if (!buf || !lens) return 1;
    for (int d = 0; d < n; d++)
        for (int f = 0; f < frames; f++)
            lens[(size_t)d * frames + f] = position(buf + ((size_t)d * frames + f) * MAX, d, f);
    struct conn *c = calloc((size_t)n, sizeof *c);
    struct pollfd *pfd = calloc((size_t)n, sizeof *pfd);
    for (int d = 0; d < n; d++) {
        int fd = connect_loopback(port);
        if (fd < 0) { perror("connect"); return 1; }
        uint8_t imei[8], login[18];
        long long id = 860000000000000LL + d;
        for (int k = 7; k >= 0; k--) { imei[k] = (uint8_t)((id % 10) | ((id / 10 % 10) << 4)); id /= 100; }
        size_t len = build(login, 0x01, imei, 8, 1);
        if (write(fd, login, len) != (ssize_t)len) { perror("write"); return 1; }
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
            ssize_t r = read(k->fd, k->answer + k->got, (size_t)(10 - k->got));
            if (r <= 0) { fprintf(stderr, "connection closed: %s\n", r == 0 ? "eof" : strerror(errno)); return 1; }
            k->got += (int)r;
            if (k->got < 10) continue;
            k->got = 0;
            uint16_t serial = (uint16_t)(k->answer[4] << 8 | k->answer[5]);
            if (!k->logged_in) {
                if (k->answer[3] != 0x01 || serial != 1) { fprintf(stderr, "login refused\n"); return 1; }
                k->logged_in = 1;
            } else {
                if (k->answer[3] == 0x22 && serial == (uint16_t)(k->frame + 2)) ok++; else bad++;
                latency_add(&lat, &k->sent);
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
            if (write(k->fd, buf + i * MAX, lens[i]) != (ssize_t)lens[i]) { perror("write"); return 1; }
        }
    }
    double s = seconds_since(&t0);
    printf("records=%ld seconds=%.3f answers_ok=%ld answers_bad=%ld", ok, s, ok, bad);
    latency_print(&lat);
    printf("\n");
    return bad == 0 ? 0 : 1;
}
