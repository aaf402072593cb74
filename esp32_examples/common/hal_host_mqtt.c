/* Host (POSIX) link over MQTT 3.1.1: "mqtt://DEVICE_ID:TOKEN@HOST:PORT[/PREFIX]".
 * As PROTOCOL.md ("MQTT") asks: client id = username = device id, token as password (no
 * token: no username either, an anonymous login that open enrolment confines to the client
 * id's topics), persistent session, last will "offline" on P/D/status, subscribe P/D/down at
 * QoS 1, publish "online", then one message per publish on P/D/up (QoS 0 for AudioChunk, else
 * 1). Only a PUBLISH on P/D/down is decoded; one on any other topic is acknowledged and ignored
 * with a log line. On the ESP32 use esp-mqtt with the same settings. */
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fp.h"
#include "hal_host.h"
#include "hal_link.h"

static int sock = -1;
static char up[160], down[160], status[160];
static uint16_t next_id = 1;
static uint32_t last_tx;
static uint8_t pkt[70000];
static size_t put_str(uint8_t *p, const char *s, size_t n)
{
    p[0] = (uint8_t)(n >> 8);
    p[1] = (uint8_t)n;
    memcpy(p + 2, s, n);
    return n + 2;
}

/* Send fixed header + body (body already in pkt + 5). */
static bool send_packet(uint8_t head, size_t body_len)
{
    uint8_t hdr[5];
    size_t h = 0, n = body_len;
    const uint8_t *p;
    hdr[h++] = head;
    do {
        hdr[h] = (uint8_t)(n % 128u);
        n /= 128u;
        if (n) { hdr[h] |= 0x80u; }
        h++;
    } while (n);
    p = pkt + 5 - h;
    memcpy(pkt + 5 - h, hdr, h);
    last_tx = hal_millis();
    for (size_t left = h + body_len; left > 0;) {
        ssize_t k = send(sock, p, left, MSG_NOSIGNAL);
        if (k <= 0) { return false; }
        p += k;
        left -= (size_t)k;
    }
    return true;
}

static int recv_all(uint8_t *p, size_t n, uint32_t deadline)
{
    while (n > 0) {
        struct pollfd pfd = {sock, POLLIN, 0};
        int32_t left = (int32_t)(deadline - hal_millis());
        ssize_t k;
        if (poll(&pfd, 1, left > 0 ? left : 0) <= 0) { return 0; }
        k = recv(sock, p, n, 0);
        if (k <= 0) { return -1; }
        p += k;
        n -= (size_t)k;
    }
    return 1;
}

/* One packet: its first byte in *head, its body in pkt[0..*len). 1, 0 (timeout), -1. */
static int recv_packet(uint8_t *head, size_t *len, uint32_t deadline)
{
    size_t n = 0, mult = 1;
    uint8_t b;
    int r = recv_all(head, 1, deadline);
    if (r <= 0) { return r; }
    do {
        if (recv_all(&b, 1, deadline + 5000u) != 1 || mult > 128u * 128u * 128u) { return -1; }
        n += (b & 0x7Fu) * mult;
        mult *= 128u;
    } while (b & 0x80u);
    if (n > sizeof pkt || recv_all(pkt, n, deadline + 5000u) != 1) { return -1; }
    *len = n;
    return 1;
}

static bool publish(const char *topic, const uint8_t *data, size_t len, int qos, bool retain)
{
    uint8_t *p = pkt + 5;
    if (len > sizeof pkt - 200u) { return false; }
    p += put_str(p, topic, strlen(topic));
    if (qos) {
        *p++ = (uint8_t)(next_id >> 8);
        *p++ = (uint8_t)next_id;
        next_id = (uint16_t)(next_id == 0xFFFFu ? 1u : next_id + 1u);
    }
    memcpy(p, data, len);
    return send_packet((uint8_t)(0x30u | (qos << 1) | (retain ? 1u : 0u)), (size_t)(p - pkt - 5) + len);
}

bool hal_link_open(const char *url)
{
    char id[80] = "", token[128] = "", host[128] = "", port[8] = "1883", prefix[32] = "gw";
    struct addrinfo hints, *res;
    uint8_t *p = pkt + 5, head;
    size_t len;
    if (sscanf(url, "mqtt://%79[^:@]:%127[^@]@%127[^:/]:%7[0-9]/%31s", id, token, host, port, prefix) < 3 &&
        sscanf(url, "mqtt://%79[^:@]@%127[^:/]:%7[0-9]/%31s", id, host, port, prefix) < 2) {
        hal_log("want mqtt://DEVICE_ID[:TOKEN]@HOST:PORT[/PREFIX], got %s", url);
        return false;
    }
    snprintf(up, sizeof up, "%s/%s/up", prefix, id);
    snprintf(down, sizeof down, "%s/%s/down", prefix, id);
    snprintf(status, sizeof status, "%s/%s/status", prefix, id);
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &res) != 0) { hal_log("cannot resolve %s", host); return false; }
    sock = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
    if (sock < 0 || connect(sock, res->ai_addr, res->ai_addrlen) != 0) {
        freeaddrinfo(res);
        hal_log("cannot connect to the broker %s:%s", host, port);
        hal_link_close();
        return false;
    }
    freeaddrinfo(res);
    /* CONNECT: MQTT 3.1.1, username + password, will "offline" retained QoS 1, persistent */
    p += put_str(p, "MQTT", 4);
    *p++ = 4;
    *p++ = (uint8_t)((token[0] ? 0xC0u : 0u) | 0x20u | 0x08u | 0x04u);
    *p++ = 0;
    *p++ = 60; /* keep-alive seconds */
    p += put_str(p, id, strlen(id));
    p += put_str(p, status, strlen(status));
    p += put_str(p, "offline", 7);
    if (token[0]) {
        p += put_str(p, id, strlen(id));
        p += put_str(p, token, strlen(token));
    }
    if (!send_packet(0x10, (size_t)(p - pkt - 5)) || recv_packet(&head, &len, hal_millis() + 5000u) != 1 ||
        head != 0x20 || len != 2 || pkt[1] != 0) {
        hal_log("the broker refused the login of %s", id);
        hal_link_close();
        return false;
    }
    p = pkt + 5; /* SUBSCRIBE P/D/down QoS 1 */
    *p++ = 0;
    *p++ = 1;
    p += put_str(p, down, strlen(down));
    *p++ = 1;
    if (!send_packet(0x82, (size_t)(p - pkt - 5)) || recv_packet(&head, &len, hal_millis() + 5000u) != 1 ||
        head != 0x90 || len < 3 || pkt[2] > 1) {
        hal_log("cannot subscribe %s", down);
        hal_link_close();
        return false;
    }
    return publish(status, (const uint8_t *)"online", 6, 1, true);
}

bool hal_link_send(const uint8_t *msg, size_t len)
{
    return sock >= 0 && len > 0 && publish(up, msg, len, msg[0] == FP_MSG_AUDIO_CHUNK ? 0 : 1, false);
}

int hal_link_recv(uint8_t *buf, size_t cap, size_t *len, uint32_t timeout_ms)
{
    uint32_t deadline = hal_millis() + timeout_ms;
    if (sock >= 0 && hal_millis() - last_tx > 30000u && !send_packet(0xC0, 0)) { return -1; } /* PINGREQ */
    while (sock >= 0) {
        uint8_t head;
        size_t n, topic_len, at;
        bool mine;
        int r = recv_packet(&head, &n, deadline);
        if (r <= 0) { return r; }
        if ((head & 0xF0u) != 0x30u || n < 2) { continue; } /* PUBACK, PINGRESP...: nothing to do */
        topic_len = (size_t)(pkt[0] << 8 | pkt[1]);
        at = 2 + topic_len;
        if (at > n) { return -1; }
        mine = topic_len == strlen(down) && memcmp(pkt + 2, down, topic_len) == 0;
        if (!mine) { /* not our downlink (another device's retained status...): never decoded as ours */
            hal_log("ignored a publish on %.*s: not %s", (int)(topic_len < 100u ? topic_len : 100u), (const char *)(pkt + 2), down);
            if ((head & 0x06u) && at + 2 <= n) { /* still acknowledged, or the broker resends it */
                pkt[5] = pkt[at];
                pkt[6] = pkt[at + 1];
                if (!send_packet(0x40, 2)) { return -1; }
            }
            continue;
        }
        if ((head & 0x06u) && at + 2 <= n) { /* QoS 1: acknowledge */
            uint8_t id_hi = pkt[at], id_lo = pkt[at + 1];
            at += 2;
            *len = n - at;
            if (*len > cap) { return -1; }
            memcpy(buf, pkt + at, *len);
            pkt[5] = id_hi;
            pkt[6] = id_lo;
            if (!send_packet(0x40, 2)) { return -1; }
        } else {
            if (at > n || n - at > cap) { return -1; }
            *len = n - at;
            memcpy(buf, pkt + at, *len);
        }
        if (host_link_fault_drops(buf, *len)) { continue; }
        return 1;
    }
    return -1;
}

void hal_link_close(void)
{
    if (sock >= 0) {
        publish(status, (const uint8_t *)"offline", 7, 1, true);
        pkt[5] = 0;
        send_packet(0xE0, 0); /* DISCONNECT */
        close(sock);
    }
    sock = -1;
}
