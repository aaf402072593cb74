/* Byte-stream framing: COBS(message || CRC-16/CCITT-FALSE big-endian) || 00. */
#include "fp.h"

uint16_t fp_crc16(const uint8_t *data, size_t len)
{
    uint16_t crc = 0xFFFFu;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((uint16_t)data[i] << 8);
        for (int bit = 0; bit < 8; bit++) {
            crc = (crc & 0x8000u) ? (uint16_t)((crc << 1) ^ 0x1021u) : (uint16_t)(crc << 1);
        }
    }
    return crc;
}

/* COBS-encode msg || crc (two big-endian bytes) without copying them together. */
fp_err_t fp_stream_frame(const uint8_t *msg, size_t len, uint8_t *out, size_t cap,
                         size_t *out_len)
{
    uint16_t crc = fp_crc16(msg, len);
    size_t total = len + 2u, code_at = 0, w = 1;
    uint8_t code = 1;
    *out_len = 0;
    if (cap < 2u) { return FP_ERR_NO_SPACE; }
    for (size_t i = 0; i < total; i++) {
        uint8_t b = i < len ? msg[i] : (uint8_t)(i == len ? crc >> 8 : crc & 0xFFu);
        if (b == 0u) {
            out[code_at] = code;
            code = 1;
            code_at = w++;
        } else {
            if (w >= cap) { return FP_ERR_NO_SPACE; }
            out[w++] = b;
            if (++code == 0xFFu && i + 1u < total) {
                out[code_at] = code;
                code = 1;
                code_at = w++;
            }
        }
        if (w >= cap) { return FP_ERR_NO_SPACE; }
    }
    out[code_at] = code;
    if (w >= cap) { return FP_ERR_NO_SPACE; }
    out[w++] = 0u;
    *out_len = w;
    return FP_OK;
}

/* Decode COBS in place (the output is never longer than the input). */
static fp_err_t cobs_decode(uint8_t *buf, size_t len, size_t *out_len)
{
    size_t r = 0, w = 0;
    while (r < len) {
        uint8_t code = buf[r++];
        if (code == 0u || (size_t)(code - 1u) > len - r) { return FP_ERR_BAD_FRAMING; }
        for (uint8_t k = 1; k < code; k++) {
            if (buf[r] == 0u) { return FP_ERR_BAD_FRAMING; }
            buf[w++] = buf[r++];
        }
        if (code != 0xFFu && r < len) { buf[w++] = 0u; }
    }
    *out_len = w;
    return FP_OK;
}

fp_err_t fp_stream_payload(uint8_t *frame, size_t len, size_t *msg_len)
{
    size_t n;
    uint16_t crc;
    fp_err_t err = cobs_decode(frame, len, &n);
    *msg_len = 0;
    if (err != FP_OK) { return err; }
    if (n < 2u) { return FP_ERR_BAD_FRAMING; }
    crc = (uint16_t)((frame[n - 2u] << 8) | frame[n - 1u]);
    if (crc != fp_crc16(frame, n - 2u)) { return FP_ERR_BAD_CRC; }
    *msg_len = n - 2u;
    return FP_OK;
}

fp_err_t fp_stream_unframe(uint8_t *frame, size_t len, fp_msg_t *out)
{
    size_t n;
    fp_err_t err = fp_stream_payload(frame, len, &n);
    return err != FP_OK ? err : fp_decode(frame, n, out);
}

void fp_deframer_init(fp_deframer_t *d, uint8_t *buf, size_t cap)
{
    d->buf = buf;
    d->cap = cap;
    d->len = 0;
    d->discarding = false;
}

fp_err_t fp_deframer_next(fp_deframer_t *d, uint8_t byte, const uint8_t **msg, size_t *len)
{
    if (byte == 0u) {
        size_t n = d->len;
        bool dropped = d->discarding;
        d->len = 0;
        d->discarding = false;
        if (dropped || n == 0u) { return FP_PENDING; }
        *msg = d->buf;
        return fp_stream_payload(d->buf, n, len);
    }
    if (d->discarding) { return FP_PENDING; }
    if (d->len >= d->cap) {
        d->len = 0;
        d->discarding = true;
        return FP_ERR_FRAME_TOO_LARGE;
    }
    d->buf[d->len++] = byte;
    return FP_PENDING;
}

fp_err_t fp_deframer_push(fp_deframer_t *d, uint8_t byte, fp_msg_t *out)
{
    const uint8_t *msg;
    size_t len;
    fp_err_t err = fp_deframer_next(d, byte, &msg, &len);
    return err != FP_OK ? err : fp_decode(msg, len, out);
}
