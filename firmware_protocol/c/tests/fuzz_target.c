/* Fuzz target: hostile bytes through every decoder; valid messages must re-encode exactly. */
#include <stdlib.h>
#include <string.h>

#include "fp.h"

#define LIMIT 8192

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok)
{
    if (!ok) { abort(); }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t copy[LIMIT], out[2 * LIMIT], frame_buf[64];
    static fp_msg_t msg, again;
    size_t n, framed;
    fp_deframer_t d;
    if (size > LIMIT) { return 0; }
    /* 1. message decoder: a decoded message re-encodes to exactly the same bytes. */
    if (fp_decode(data, size, &msg) == FP_OK) {
        check(fp_encode(&msg, out, sizeof out, &n) == FP_OK);
        check(n == size && memcmp(out, data, n) == 0);
        /* 2. ...and survives a trip through stream framing. */
        check(fp_stream_frame(data, size, out, sizeof out, &framed) == FP_OK);
        check(framed <= FP_STREAM_FRAME_MAX(size) && out[framed - 1] == 0);
        check(fp_stream_unframe(out, framed - 1, &again) == FP_OK && again.type == msg.type);
    }
    /* 3. one frame decoded in place. */
    memcpy(copy, data, size);
    (void)fp_stream_unframe(copy, size, &msg);
    /* 4. the byte-stream deframer with a small buffer. */
    fp_deframer_init(&d, frame_buf, sizeof frame_buf);
    for (size_t i = 0; i < size; i++) {
        fp_err_t e = fp_deframer_push(&d, data[i], &msg);
        check(d.len <= d.cap);
        if (e == FP_OK) { check(fp_msg_desc(msg.type) != NULL); }
    }
    return 0;
}
