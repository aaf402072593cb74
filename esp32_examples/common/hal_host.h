/* Host-only extras of the POSIX HAL (not available on the ESP32). */
#ifndef HAL_HOST_H
#define HAL_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Fault injection for tests: silently drop the next `count` incoming messages of `type`,
 * as a lossy link would (e.g. lose a ReadingAck to exercise the device's retry). */
void host_link_drop_incoming(uint8_t type, unsigned count);

/* For the link HALs: true (and logged) when fault injection drops this incoming message. */
bool host_link_fault_drops(const uint8_t *msg, size_t len);

#endif
