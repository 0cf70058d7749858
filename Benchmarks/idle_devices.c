// Many devices, most of them idle: CONNECTIONS Teltonika devices connect and identify; ACTIVE of
// them send one record a second (each waiting for its answer), for SECONDS seconds. Prints how
// many connected, were refused (closed or never answered the login) and how many answers came.
//
// C with epoll, one thread: holding 10,000 sockets must cost the client nothing next to the
// server being measured.
//
// Usage: idle_devices PORT CONNECTIONS ACTIVE SECONDS
// Prints: connected=N refused=N login_unanswered=N answers=N bad_answers=N
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
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

// A Codec 8 frame with one record at time `ms`.
static size_t frame(uint8_t *out, uint64_t ms, int device) {
    uint8_t *b = out + 8, *p = b;
    *p++ = 0x08; *p++ = 1;
    p += put32(p, (uint32_t)(ms >> 32)); p += put32(p, (uint32_t)ms);
    *p++ = 0;
    p += put32(p, (uint32_t)(100000000 + device)); p += put32(p, 500000000);
    p += put16(p, 10); p += put16(p, 90); *p++ = 8; p += put16(p, 30);
    *p++ = 0; *p++ = 0; *p++ = 0; *p++ = 0; *p++ = 0; *p++ = 0;  // event, total, N1, N2, N4, N8
    *p++ = 1;
    size_t len = (size_t)(p - b);
    memset(out, 0, 4); put32(out + 4, (uint32_t)len); put32(p, crc16_ibm(b, len));
    return 8 + len + 4;
}

enum { LOGIN, IDLE, WAITING, GONE };
struct dev { int fd, state, got; uint8_t answer[4]; uint64_t next_ms; };

static uint64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: idle_devices PORT CONNECTIONS ACTIVE SECONDS\n"); return 2; }
    int port = atoi(argv[1]), n = atoi(argv[2]), active = atoi(argv[3]), seconds = atoi(argv[4]);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) { rl.rlim_cur = rl.rlim_max; setrlimit(RLIMIT_NOFILE, &rl); }
    struct dev *d = calloc((size_t)n, sizeof *d);
    int ep = epoll_create1(0);
    long connected = 0, refused = 0, answers = 0, bad = 0;
    for (int i = 0; i < n; i++) {
        int fd = connect_loopback(port);
        if (fd < 0) { d[i].state = GONE; refused++; continue; }
        uint8_t login[17] = { 0, 15 };
        snprintf((char *)login + 2, 16, "%015d", 350000000 + i);
        if (write(fd, login, 17) != 17) { close(fd); d[i].state = GONE; refused++; continue; }
        d[i].fd = fd;
        d[i].state = LOGIN;
        struct epoll_event e = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
    }
    uint64_t start = now_ms(), end = start + (uint64_t)seconds * 1000;
    uint64_t fix = 1700000000000ULL;
    struct epoll_event ev[256];
    while (now_ms() < end) {
        int k = epoll_wait(ep, ev, 256, 50);
        for (int j = 0; j < k; j++) {
            struct dev *x = &d[ev[j].data.u32];
            if (x->state == LOGIN) {
                uint8_t b;
                if (read(x->fd, &b, 1) != 1 || b != 1) { close(x->fd); x->state = GONE; refused++; continue; }
                x->state = IDLE;
                connected++;
                x->next_ms = now_ms() + (uint64_t)(rand() % 1000);
            } else if (x->state == WAITING) {
                ssize_t r = read(x->fd, x->answer + x->got, (size_t)(4 - x->got));
                if (r <= 0) { close(x->fd); x->state = GONE; continue; }
                x->got += (int)r;
                if (x->got < 4) continue;
                if (x->answer[3] == 1) answers++; else bad++;
                x->got = 0;
                x->state = IDLE;
            } else {
                uint8_t b[16];
                if (read(x->fd, b, sizeof b) <= 0) { close(x->fd); x->state = GONE; }
            }
        }
        uint64_t t = now_ms();
        for (int i = 0; i < active && i < n; i++) {
            if (d[i].state != IDLE || t < d[i].next_ms) continue;
            uint8_t buf[64];
            size_t len = frame(buf, fix + (t - start) + (uint64_t)i, i);
            if (write(d[i].fd, buf, len) != (ssize_t)len) { close(d[i].fd); d[i].state = GONE; continue; }
            d[i].state = WAITING;
            d[i].next_ms += 1000;
        }
    }
    long unanswered = 0;
    for (int i = 0; i < n; i++) if (d[i].state == LOGIN) unanswered++;
    printf("connected=%ld refused=%ld login_unanswered=%ld answers=%ld bad_answers=%ld\n", connected, refused, unanswered, answers, bad);
    return 0;
}
