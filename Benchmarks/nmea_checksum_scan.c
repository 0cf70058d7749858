/* The floor for the NMEA replay benchmark: reads a file (or stdin) in 1 MiB blocks and checks
 * each line's NMEA checksum, nothing else. Prints "<lines> lines, <valid> valid checksums". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Line without its terminator: valid when it is "$body*HH" with HH the XOR of body. */
static int valid(const unsigned char *s, size_t n) {
    if (n < 4 || s[0] != '$') return 0;
    unsigned char sum = 0;
    size_t i = 1;
    while (i < n && s[i] != '*') sum ^= s[i++];
    if (i + 3 > n) return 0;
    int hi = hexval(s[i + 1]), lo = hexval(s[i + 2]);
    return hi >= 0 && lo >= 0 && ((hi << 4) | lo) == sum;
}

int main(int argc, char **argv) {
    int fd = argc > 1 ? open(argv[1], O_RDONLY) : 0;
    if (fd < 0) { perror(argv[1]); return 1; }
    size_t cap = 1 << 20, len = 0;
    unsigned char *buf = malloc(cap * 2);
    if (!buf) return 1;
    unsigned long lines = 0, ok = 0;
    for (;;) {
        ssize_t r = read(fd, buf + len, cap);
        if (r < 0) { perror("read"); return 1; }
        len += (size_t)r;
        size_t start = 0;
        for (size_t i = 0; i < len; i++) {
            if (buf[i] != '\n') continue;
            size_t end = i;
            if (end > start && buf[end - 1] == '\r') end--;
            lines++;
            ok += valid(buf + start, end - start);
            start = i + 1;
        }
        if (r == 0) {
            if (start < len) { lines++; ok += valid(buf + start, len - start); }
            break;
        }
        memmove(buf, buf + start, len - start);
        len -= start;
    }
    printf("%lu lines, %lu valid checksums\n", lines, ok);
    return 0;
}
