/* fp: the device wire protocol v1 in portable C99 (see firmware_protocol/PROTOCOL.md).
 *
 * No allocation: every function works on caller-provided buffers. Decoded strings and bytes
 * point into the input buffer, so they live as long as it does. Every decoder is safe on
 * truncated or hostile input: it returns an error and never reads or writes out of bounds.
 */
#ifndef FP_H
#define FP_H

#include "fp_messages.h"

typedef enum {
    FP_OK = 0,
    FP_ERR_MALFORMED,      /* "malformed-message" */
    FP_ERR_UNKNOWN_TYPE,   /* "unknown-message-type" */
    FP_ERR_FRAME_TOO_LARGE,/* "frame-too-large" */
    FP_ERR_BAD_CRC,        /* "bad-crc" */
    FP_ERR_BAD_FRAMING,    /* "bad-framing" */
    FP_ERR_NO_SPACE,       /* local only: the caller's buffer or FP_VALUES_CAP is too small */
    FP_PENDING             /* deframer: no complete frame yet */
} fp_err_t;

/* The stable wire error code of an error ("malformed-message", ...), for Error messages. */
const char *fp_err_code(fp_err_t err);

/* The description (name, field table) of a message type, or NULL when it is unknown. */
const fp_msg_desc_t *fp_msg_desc(uint8_t type);

/* Parse exactly one message (a WebSocket binary frame or MQTT payload). `out` borrows from
 * `data`. Returns FP_OK, FP_ERR_MALFORMED, FP_ERR_UNKNOWN_TYPE or FP_ERR_NO_SPACE. */
fp_err_t fp_decode(const uint8_t *data, size_t len, fp_msg_t *out);

/* Write one message into out[0..cap); *out_len gets its size. The message is checked like a
 * decoded one (UTF-8, device id, enums, audio format...) so only valid bytes are produced.
 * Returns FP_OK, FP_ERR_MALFORMED, FP_ERR_UNKNOWN_TYPE or FP_ERR_NO_SPACE. */
fp_err_t fp_encode(const fp_msg_t *msg, uint8_t *out, size_t cap, size_t *out_len);

/* Generic record access behind the generated fp_<message>_<field>_get / _put functions. */
bool fp_record_get(const fp_field_desc_t *fields, size_t count, const fp_records_t *r, size_t i,
                   void *out);
bool fp_record_put(const fp_field_desc_t *fields, size_t count, uint8_t *raw, size_t cap,
                   size_t i, const void *in);

/* Strict UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF). */
bool fp_utf8_valid(const uint8_t *text, size_t len);

/* ---- byte streams (UART, USB serial): COBS(message || CRC16 BE) || 00 ---- */

/* CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF); check value of "123456789" is 0x29B1. */
uint16_t fp_crc16(const uint8_t *data, size_t len);

/* The largest stream frame (with its 00 delimiter) of a message of n bytes. */
#define FP_STREAM_FRAME_MAX(n) ((n) + 2u + ((n) + 2u) / 254u + 2u)

/* Frame message bytes for a byte stream; out must not overlap msg. */
fp_err_t fp_stream_frame(const uint8_t *msg, size_t len, uint8_t *out, size_t cap,
                         size_t *out_len);

/* Check one frame given without its 00 delimiter, in place: COBS-decode it and check the
 * CRC; the message bytes are then frame[0..*msg_len). FP_ERR_BAD_FRAMING or FP_ERR_BAD_CRC. */
fp_err_t fp_stream_payload(uint8_t *frame, size_t len, size_t *msg_len);

/* Decode one frame given without its 00 delimiter, in place: COBS, CRC, then fp_decode.
 * Returns FP_ERR_BAD_FRAMING, FP_ERR_BAD_CRC or what fp_decode returns. */
fp_err_t fp_stream_unframe(uint8_t *frame, size_t len, fp_msg_t *out);

/* Splits a byte stream into messages, one byte at a time, in a caller-provided buffer whose
 * size is the largest accepted encoded frame (PROTOCOL.md: 4096 by default). */
typedef struct {
    uint8_t *buf;
    size_t cap;
    size_t len;
    bool discarding;
} fp_deframer_t;

void fp_deframer_init(fp_deframer_t *d, uint8_t *buf, size_t cap);

/* Feed one byte. Returns FP_PENDING (frame not complete or empty), FP_OK (*out holds a
 * message that borrows the deframer's buffer until the next call) or an error for the frame
 * just ended (FP_ERR_FRAME_TOO_LARGE is returned once, as soon as the limit is passed, and
 * the rest of that frame is dropped up to the next 00). */
fp_err_t fp_deframer_push(fp_deframer_t *d, uint8_t byte, fp_msg_t *out);

/* Like fp_deframer_push, without decoding: on FP_OK *msg and *len are the message bytes (CRC
 * checked, in the deframer's buffer until the next call), e.g. for a link layer that hands
 * whole messages to the application. */
fp_err_t fp_deframer_next(fp_deframer_t *d, uint8_t byte, const uint8_t **msg, size_t *len);

#endif
