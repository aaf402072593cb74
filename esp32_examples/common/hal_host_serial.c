/* Host (POSIX) link over a serial line: "serial:///dev/ttyUSB0" (115200 8N1, raw). Messages are
 * framed with the C codec's COBS + CRC stream framing, as a UART device would do it. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "fp.h"
#include "hal_host.h"
#include "hal_link.h"

#define MAX_FRAME 4096u
static int fd = -1;
static uint8_t rx_buf[MAX_FRAME];
static fp_deframer_t deframer;
static bool write_all(const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) { continue; }
        if (k <= 0) { return false; }
        p += k;
        n -= (size_t)k;
    }
    return true;
}

bool hal_link_open(const char *url)
{
    struct termios tio;
    static const uint8_t flush = 0; /* ends any garbage the receiver holds (PROTOCOL.md) */
    if (strncmp(url, "serial://", 9) != 0) { hal_log("only serial:// URLs are supported"); return false; }
    fd = open(url + 9, O_RDWR | O_NOCTTY);
    if (fd < 0 || tcgetattr(fd, &tio) != 0) {
        hal_log("cannot open %s: %s", url + 9, strerror(errno));
        hal_link_close();
        return false;
    }
    cfmakeraw(&tio);
    cfsetispeed(&tio, B115200);
    cfsetospeed(&tio, B115200);
    tcsetattr(fd, TCSANOW, &tio);
    fp_deframer_init(&deframer, rx_buf, sizeof rx_buf);
    return write_all(&flush, 1);
}

bool hal_link_send(const uint8_t *msg, size_t len)
{
    static uint8_t frame[FP_STREAM_FRAME_MAX(MAX_FRAME)];
    size_t n;
    return fd >= 0 && len <= MAX_FRAME && fp_stream_frame(msg, len, frame, sizeof frame, &n) == FP_OK &&
           write_all(frame, n);
}

int hal_link_recv(uint8_t *buf, size_t cap, size_t *len, uint32_t timeout_ms)
{
    uint32_t deadline = hal_millis() + timeout_ms;
    *len = 0;
    while (fd >= 0) {
        struct pollfd pfd = {fd, POLLIN, 0};
        int32_t left = (int32_t)(deadline - hal_millis());
        uint8_t byte;
        const uint8_t *msg;
        size_t n;
        fp_err_t e;
        if (poll(&pfd, 1, left > 0 ? left : 0) <= 0) { return 0; }
        if (read(fd, &byte, 1) != 1) { return -1; }
        e = fp_deframer_next(&deframer, byte, &msg, &n);
        if (e == FP_PENDING) { continue; }
        if (e != FP_OK) { hal_log("serial: frame dropped (%s)", fp_err_code(e)); continue; }
        if (n > cap) { hal_log("serial: message of %u bytes too large", (unsigned)n); continue; }
        if (host_link_fault_drops(msg, n)) { continue; }
        memcpy(buf, msg, n);
        *len = n;
        return 1;
    }
    return -1;
}

void hal_link_close(void)
{
    if (fd >= 0) { close(fd); }
    fd = -1;
}
