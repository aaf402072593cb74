/* What every host (POSIX) link HAL shares: the clock, logging and the fault injection that
 * tests use to drop an incoming message (e.g. a lost ReadingAck). */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "hal_host.h"
#include "hal_link.h"

static uint8_t drop_type;
static unsigned drop_count;

void host_link_drop_incoming(uint8_t type, unsigned count)
{
    drop_type = type;
    drop_count = count;
}

bool host_link_fault_drops(const uint8_t *msg, size_t len)
{
    if (drop_count == 0 || len == 0 || msg[0] != drop_type) { return false; }
    drop_count--;
    hal_log("host link: dropped an incoming message 0x%02x (fault injection)", drop_type);
    return true;
}

uint32_t hal_millis(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint32_t)((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u);
}

void hal_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}
