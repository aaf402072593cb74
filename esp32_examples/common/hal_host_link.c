/* Host (POSIX) link: a minimal WebSocket client (RFC 6455) over a TCP socket.
 * Enough for the examples: handshake, masked binary frames out, binary/close/ping in. */
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "hal_host.h"
#include "hal_link.h"

static int sock = -1;
static bool send_all(const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send(sock, p, n, MSG_NOSIGNAL);
        if (k <= 0) { return false; }
        p += k;
        n -= (size_t)k;
    }
    return true;
}

/* Read exactly n bytes, waiting at most until `deadline` (hal_millis). */
static int recv_all(uint8_t *p, size_t n, uint32_t deadline)
{
    while (n > 0) {
        struct pollfd pfd = {sock, POLLIN, 0};
        int32_t left = (int32_t)(deadline - hal_millis());
        ssize_t k;
        if (left < 0) { left = 0; }
        if (poll(&pfd, 1, left) <= 0) { return 0; }
        k = recv(sock, p, n, 0);
        if (k <= 0) { return -1; }
        p += k;
        n -= (size_t)k;
    }
    return 1;
}

static bool send_frame(uint8_t opcode, const uint8_t *data, size_t len)
{
    uint8_t head[14], mask[4];
    size_t h = 0;
    head[h++] = (uint8_t)(0x80u | opcode);
    if (len < 126u) {
        head[h++] = (uint8_t)(0x80u | len);
    } else if (len <= 0xFFFFu) {
        head[h++] = 0x80u | 126u;
        head[h++] = (uint8_t)(len >> 8);
        head[h++] = (uint8_t)len;
    } else {
        head[h++] = 0x80u | 127u;
        for (int i = 7; i >= 0; i--) { head[h++] = (uint8_t)((uint64_t)len >> (8 * i)); }
    }
    for (int i = 0; i < 4; i++) { mask[i] = (uint8_t)rand(); head[h++] = mask[i]; }
    if (!send_all(head, h)) { return false; }
    while (len > 0) {
        uint8_t chunk[512];
        size_t n = len < sizeof chunk ? len : sizeof chunk;
        for (size_t i = 0; i < n; i++) { chunk[i] = data[i] ^ mask[i & 3u]; }
        /* the mask index continues across chunks: chunk sizes are multiples of 4 */
        if (!send_all(chunk, n)) { return false; }
        data += n;
        len -= n;
    }
    return true;
}

bool hal_link_send(const uint8_t *msg, size_t len) { return sock >= 0 && send_frame(0x2, msg, len); }

bool hal_link_open(const char *url)
{
    char host[128], path[128] = "/", port[8] = "80", req[512], resp[1024];
    struct addrinfo hints, *res;
    size_t got = 0;
    const char *p = url + 5, *slash, *colon;
    if (strncmp(url, "ws://", 5) != 0) { hal_log("only ws:// URLs are supported"); return false; }
    slash = strchr(p, '/');
    colon = memchr(p, ':', slash ? (size_t)(slash - p) : strlen(p));
    snprintf(host, sizeof host, "%.*s", (int)((colon ? colon : slash ? slash : p + strlen(p)) - p), p);
    if (colon) { snprintf(port, sizeof port, "%.*s", (int)((slash ? slash : colon + strlen(colon)) - colon - 1), colon + 1); }
    if (slash) { snprintf(path, sizeof path, "%s", slash); }
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &res) != 0) { hal_log("cannot resolve %s", host); return false; }
    sock = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
    if (sock < 0 || connect(sock, res->ai_addr, res->ai_addrlen) != 0) {
        freeaddrinfo(res);
        hal_log("cannot connect to %s:%s", host, port);
        hal_link_close();
        return false;
    }
    freeaddrinfo(res);
    srand((unsigned)hal_millis());
    snprintf(req, sizeof req,
             "GET %s HTTP/1.1\r\nHost: %s:%s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
             path, host, port);
    if (!send_all((const uint8_t *)req, strlen(req))) { hal_link_close(); return false; }
    while (got < sizeof resp - 1 && (got < 4 || memcmp(resp + got - 4, "\r\n\r\n", 4) != 0)) {
        if (recv_all((uint8_t *)resp + got, 1, hal_millis() + 5000u) != 1) { break; }
        got++;
    }
    resp[got] = '\0';
    if (strncmp(resp, "HTTP/1.1 101", 12) != 0) {
        hal_log("WebSocket handshake refused: %.60s", resp);
        hal_link_close();
        return false;
    }
    return true;
}

int hal_link_recv(uint8_t *buf, size_t cap, size_t *len, uint32_t timeout_ms)
{
    uint32_t deadline = hal_millis() + timeout_ms;
    *len = 0;
    while (sock >= 0) {
        uint8_t head[2], ext[8];
        uint64_t n;
        int r = recv_all(head, 2, deadline);
        if (r <= 0) { return r; }
        n = head[1] & 0x7Fu;
        if (n >= 126u) {
            size_t k = n == 126u ? 2u : 8u;
            if (recv_all(ext, k, deadline + 5000u) != 1) { return -1; }
            n = 0;
            for (size_t i = 0; i < k; i++) { n = (n << 8) | ext[i]; }
        }
        if ((head[1] & 0x80u) || n > cap - *len) { return -1; } /* servers never mask */
        if (recv_all(buf + *len, (size_t)n, deadline + 5000u) != 1) { return -1; }
        switch (head[0] & 0x0Fu) {
        case 0x0: case 0x2: /* continuation, binary */
            *len += (size_t)n;
            if (!(head[0] & 0x80u)) { break; }
            if (host_link_fault_drops(buf, *len)) {
                *len = 0;
                break;
            }
            return 1;
        case 0x9: send_frame(0xA, buf + *len, (size_t)n); break; /* ping -> pong */
        case 0xA: break;
        case 0x8: send_frame(0x8, NULL, 0); return -1; /* close */
        default: return -1; /* text frames are not part of the protocol */
        }
    }
    return -1;
}

void hal_link_close(void)
{
    static const uint8_t normal[2] = {0x03, 0xE8}; /* close code 1000 */
    if (sock >= 0) {
        send_frame(0x8, normal, sizeof normal);
        close(sock);
    }
    sock = -1;
}
