/* Link helpers shared by the examples (portable: only hal_link.h and fp.h). */
#include "device.h"

static uint8_t tx[4096];
static uint8_t rx[DEV_RX_BYTES];

fp_msg_t dev_msg(uint8_t type)
{
    fp_msg_t m;
    uint8_t *raw = (uint8_t *)&m;
    for (size_t i = 0; i < sizeof m; i++) { raw[i] = 0; }
    m.type = type;
    return m;
}

fp_str_t dev_str(const char *s)
{
    fp_str_t out = {s, 0};
    while (s && s[out.len] && out.len < 0xFFFFu) { out.len++; }
    return out;
}

void dev_copy(char *dst, size_t cap, fp_str_t s)
{
    size_t n = s.len < cap - 1 ? s.len : cap - 1;
    for (size_t i = 0; i < n; i++) { dst[i] = s.ptr[i]; }
    dst[n] = '\0';
}

bool dev_send(const fp_msg_t *m)
{
    size_t len;
    fp_err_t e = fp_encode(m, tx, sizeof tx, &len);
    if (e != FP_OK) {
        hal_log("cannot encode message 0x%02x: %s", m->type, fp_err_code(e));
        return false;
    }
    return hal_link_send(tx, len);
}

int dev_next(fp_msg_t *m, uint32_t timeout_ms, uint32_t *errors)
{
    uint32_t deadline = hal_millis() + timeout_ms;
    for (;;) {
        size_t len;
        int32_t left = (int32_t)(deadline - hal_millis());
        int r = hal_link_recv(rx, sizeof rx, &len, left > 0 ? (uint32_t)left : 0u);
        fp_err_t e;
        if (r <= 0) { return r; }
        e = fp_decode(rx, len, m);
        if (e != FP_OK) {
            fp_msg_t err = dev_msg(FP_MSG_ERROR);
            err.u.error.code = dev_str(fp_err_code(e));
            err.u.error.text = dev_str("the device could not decode a message");
            hal_log("bad message from the gateway (type 0x%02x, %u bytes): %s",
                    len ? rx[0] : 0u, (unsigned)len, fp_err_code(e));
            (*errors)++;
            dev_send(&err);
            continue;
        }
        if (m->type == FP_MSG_PING) {
            fp_msg_t pong = dev_msg(FP_MSG_PONG);
            pong.u.pong.nonce = m->u.ping.nonce;
            dev_send(&pong);
            continue;
        }
        return 1;
    }
}

bool dev_handshake(const dev_hello_t *hello, fp_welcome_t *welcome, uint32_t *errors)
{
    fp_msg_t m = dev_msg(FP_MSG_HELLO);
    fp_hello_t *h = &m.u.hello;
    h->device_id = dev_str(hello->device_id);
    h->token = dev_str(hello->token);
    h->protocol_version = FP_PROTOCOL_VERSION;
    h->capabilities = hello->capabilities;
    h->audio_in.codec = FP_CODEC_PCM_S16LE;
    h->audio_in.sample_rate = hello->mic_rate;
    h->audio_in.channels = 1;
    h->audio_out.codec = FP_CODEC_PCM_S16LE;
    h->audio_out.sample_rate = hello->reply_rate;
    h->audio_out.channels = 1;
    h->firmware = dev_str(hello->firmware);
    if (!dev_send(&m)) { return false; }
    if (dev_next(&m, 10000u, errors) != 1) {
        hal_log("no answer to Hello");
        return false;
    }
    if (m.type == FP_MSG_ERROR) {
        hal_log("gateway refused Hello: %.*s: %.*s", (int)m.u.error.code.len, m.u.error.code.ptr,
                (int)m.u.error.text.len, m.u.error.text.ptr);
        return false;
    }
    if (m.type != FP_MSG_WELCOME) {
        hal_log("expected Welcome, got message 0x%02x", m.type);
        return false;
    }
    *welcome = m.u.welcome;
    hal_log("welcome: session %.*s, reply audio %u Hz", (int)welcome->session_id.len,
            welcome->session_id.ptr, (unsigned)welcome->audio_out.sample_rate);
    return true;
}
