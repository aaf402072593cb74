/* The thin hardware abstraction every example is written against: a message link, a clock
 * and a log. The ESP-IDF build implements it with esp_websocket_client (main/hal_esp32.c);
 * the host build with POSIX sockets (hal_host_link.c), so the same application logic runs in
 * CI against a real gateway. One call of hal_link_send / hal_link_recv is one whole message
 * (one binary WebSocket frame), as in firmware_protocol/PROTOCOL.md. */
#ifndef HAL_LINK_H
#define HAL_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Connect to the gateway, e.g. "ws://192.168.1.10:8765/ws". */
bool hal_link_open(const char *url);

/* Send one message as one binary frame. */
bool hal_link_send(const uint8_t *msg, size_t len);

/* Wait up to timeout_ms for one message: 1 = *len bytes in buf, 0 = timeout,
 * -1 = the connection closed or failed (a message larger than cap also fails). */
int hal_link_recv(uint8_t *buf, size_t cap, size_t *len, uint32_t timeout_ms);

void hal_link_close(void);

/* Milliseconds since start (wraps after 49 days). */
uint32_t hal_millis(void);

/* printf-style log line (a newline is added). */
void hal_log(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

#endif
