/* What every example device does on the link: encode and send, receive and decode (answering
 * Ping and reporting undecodable messages with an Error), and the Hello/Welcome handshake. */
#ifndef DEVICE_H
#define DEVICE_H

#include "fp.h"
#include "hal_link.h"

#define DEV_RX_BYTES 16384u

typedef struct {
    const char *device_id;
    const char *token;     /* empty when the gateway trusts the network */
    const char *firmware;
    uint32_t capabilities; /* FP_CAP_* */
    uint32_t mic_rate;     /* audio_in sample rate (16000 when the device has no microphone) */
    uint32_t reply_rate;   /* audio_out sample rate asked for */
} dev_hello_t;

/* A zeroed message of a type. */
fp_msg_t dev_msg(uint8_t type);

/* A NUL-terminated C string as a protocol string (borrowed, not copied). */
fp_str_t dev_str(const char *s);

/* Copy a protocol string into a NUL-terminated buffer (truncated to cap - 1 bytes). */
void dev_copy(char *dst, size_t cap, fp_str_t s);

bool dev_send(const fp_msg_t *m);

/* Wait for one message: 1 = *m (valid until the next call), 0 = timeout, -1 = link closed.
 * Ping is answered with Pong; a message that does not decode is logged, answered with an
 * Error naming the reason, counted in *errors, and skipped. */
int dev_next(fp_msg_t *m, uint32_t timeout_ms, uint32_t *errors);

/* Send Hello and wait for Welcome (10 s); false on Error, timeout or a closed link. */
bool dev_handshake(const dev_hello_t *hello, fp_welcome_t *welcome, uint32_t *errors);

#endif
