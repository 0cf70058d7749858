// Test-only LD_PRELOAD library: lets libserialport 0.1.1 open pseudo-terminals (socat pty pairs).
//
// libserialport refuses ptys for two reasons, both answered here so its real code opens,
// configures and reads the pty:
//  1. sp_get_port_by_name looks the device up in sysfs with lstat/readlink of
//     /sys/class/tty/<name> (and .../device); /sys/class/tty/pts/N does not exist, so those
//     paths are redirected to /sys/class/tty/ptmx (a virtual tty: transport "native").
//  2. sp_open/sp_set_config use TIOCMGET/TIOCMSET/TIOCMBIS/TIOCMBIC (modem lines), which ptys do
//     not implement (ENOTTY); on a pty those succeed with no modem bits.
// libserialport 0.1.1 calls __lxstat (glibc's old stat entry point) and readlink; stat/lstat/
// __xstat are covered too in case a rebuild of the library calls those instead.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>
#include <fcntl.h>

static const char *redirect(const char *path, char *buf, size_t size) {
    static const char prefix[] = "/sys/class/tty/pts/";
    if (path == NULL || strncmp(path, prefix, sizeof(prefix) - 1) != 0) return path;
    const char *rest = path + sizeof(prefix) - 1;
    while (*rest >= '0' && *rest <= '9') rest++;
    // "/sys/class/tty/pts/3" -> "/sys/class/tty/ptmx", "/sys/class/tty/pts/3/device" -> ".../ptmx/device"
    snprintf(buf, size, "/sys/class/tty/ptmx%s", rest);
    return buf;
}

static int raw_stat(const char *path, struct stat *st, int follow) {
    return (int)syscall(SYS_newfstatat, AT_FDCWD, path, st, follow ? 0 : AT_SYMLINK_NOFOLLOW);
}

int __lxstat(int ver, const char *path, struct stat *st) {
    (void)ver;
    char buf[4096];
    return raw_stat(redirect(path, buf, sizeof buf), st, 0);
}

int __xstat(int ver, const char *path, struct stat *st) {
    (void)ver;
    char buf[4096];
    return raw_stat(redirect(path, buf, sizeof buf), st, 1);
}

int lstat(const char *path, struct stat *st) {
    char buf[4096];
    return raw_stat(redirect(path, buf, sizeof buf), st, 0);
}

int stat(const char *path, struct stat *st) {
    char buf[4096];
    return raw_stat(redirect(path, buf, sizeof buf), st, 1);
}

ssize_t readlink(const char *path, char *out, size_t size) {
    char buf[4096];
    return syscall(SYS_readlink, redirect(path, buf, sizeof buf), out, size);
}

/// True for a pty slave (major 136-143) or the master multiplexer.
static int is_pty(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISCHR(st.st_mode)) return 0;
    unsigned int m = major(st.st_rdev);
    return (m >= 136 && m <= 143) || (m == 5 && minor(st.st_rdev) == 2);
}

int ioctl(int fd, unsigned long request, ...) {
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    long r = syscall(SYS_ioctl, fd, request, arg);
    if (r == -1 && errno == ENOTTY && is_pty(fd)) {
        switch (request) {
        case TIOCMGET:
            if (arg) *(int *)arg = 0;
            return 0;
        case TIOCMSET:
        case TIOCMBIS:
        case TIOCMBIC:
            return 0;
        default:
            break;
        }
    }
    return (int)r;
}
