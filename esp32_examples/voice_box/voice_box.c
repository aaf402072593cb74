/* Voice box application logic, written against hal_link.h and the audio HAL in voice_box.h. */
#include "voice_box.h"

#define CHUNK_MS 20u
#define MAX_CHUNK_SAMPLES 960u /* 20 ms at 48 kHz */
#define RX_BYTES 16384u

static uint8_t tx[2 * MAX_CHUNK_SAMPLES + 64];
static uint8_t rx[RX_BYTES];

static bool send_msg(const fp_msg_t *m)
{
    size_t len;
    fp_err_t e = fp_encode(m, tx, sizeof tx, &len);
    if (e != FP_OK) {
        hal_log("cannot encode message 0x%02x: %s", m->type, fp_err_code(e));
        return false;
    }
    return hal_link_send(tx, len);
}

static fp_msg_t msg_of(uint8_t type)
{
    fp_msg_t m;
    uint8_t *raw = (uint8_t *)&m;
    for (size_t i = 0; i < sizeof m; i++) { raw[i] = 0; }
    m.type = type;
    return m;
}

static fp_str_t str(const char *s)
{
    fp_str_t out = {s, 0};
    while (s && s[out.len] && out.len < 0xFFFFu) { out.len++; }
    return out;
}

static void copy_str(char *dst, size_t cap, fp_str_t s)
{
    size_t n = s.len < cap - 1 ? s.len : cap - 1;
    for (size_t i = 0; i < n; i++) { dst[i] = s.ptr[i]; }
    dst[n] = '\0';
}

uint8_t vb_mouth_level(const uint8_t *pcm, size_t len)
{
    uint64_t sum = 0;
    size_t n = len / 2;
    uint64_t rms, next;
    if (n == 0) { return 0; }
    for (size_t i = 0; i < n; i++) {
        int32_t s = (int16_t)(uint16_t)(pcm[2 * i] | (pcm[2 * i + 1] << 8));
        sum += (uint64_t)(s * s);
    }
    sum /= n;
    rms = sum;
    next = (sum + 1) / 2;
    while (next < rms) { rms = next; next = (rms + sum / rms) / 2; } /* integer sqrt */
    rms = rms * 255u / 8192u; /* -12 dBFS RMS is fully open */
    return (uint8_t)(rms > 255u ? 255u : rms);
}

/* Wait for one message; answers Ping on the way. 1 = message, 0 = timeout, -1 = closed. */
static int next_msg(fp_msg_t *m, uint32_t timeout_ms, vb_result_t *out)
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
            /* bad input: say why, count it, keep going */
            fp_msg_t err = msg_of(FP_MSG_ERROR);
            err.u.error.code = str(fp_err_code(e));
            err.u.error.text = str("voice box could not decode a message");
            hal_log("bad message from the gateway: %s", fp_err_code(e));
            out->errors++;
            send_msg(&err);
            continue;
        }
        if (m->type == FP_MSG_PING) {
            fp_msg_t pong = msg_of(FP_MSG_PONG);
            pong.u.pong.nonce = m->u.ping.nonce;
            send_msg(&pong);
            continue;
        }
        return 1;
    }
}

static bool handshake(const vb_config_t *cfg, vb_result_t *out)
{
    fp_msg_t m = msg_of(FP_MSG_HELLO);
    fp_hello_t *h = &m.u.hello;
    h->device_id = str(cfg->device_id);
    h->token = str(cfg->token);
    h->protocol_version = FP_PROTOCOL_VERSION;
    h->capabilities = FP_CAP_AUDIO_IN | FP_CAP_AUDIO_OUT;
    h->audio_in.codec = FP_CODEC_PCM_S16LE;
    h->audio_in.sample_rate = hal_mic_rate();
    h->audio_in.channels = 1;
    h->audio_out.codec = FP_CODEC_PCM_S16LE;
    h->audio_out.sample_rate = cfg->reply_rate;
    h->audio_out.channels = 1;
    h->firmware = str(cfg->firmware);
    if (!send_msg(&m)) { return false; }
    if (next_msg(&m, 10000u, out) != 1 || m.type != FP_MSG_WELCOME) {
        hal_log("no Welcome from the gateway (got 0x%02x)", m.type);
        return false;
    }
    hal_log("welcome: session %.*s, reply audio %u Hz", (int)m.u.welcome.session_id.len,
            m.u.welcome.session_id.ptr, (unsigned)m.u.welcome.audio_out.sample_rate);
    return hal_speaker_start(m.u.welcome.audio_out.sample_rate);
}

static bool stream_mic(void)
{
    static int16_t pcm[MAX_CHUNK_SAMPLES];
    static uint8_t bytes[2 * MAX_CHUNK_SAMPLES];
    fp_msg_t m = msg_of(FP_MSG_AUDIO_START);
    size_t per_chunk = hal_mic_rate() * CHUNK_MS / 1000u, n;
    uint32_t seq = 0;
    m.u.audio_start.stream_id = 1;
    m.u.audio_start.format.codec = FP_CODEC_PCM_S16LE;
    m.u.audio_start.format.sample_rate = hal_mic_rate();
    m.u.audio_start.format.channels = 1;
    if (per_chunk > MAX_CHUNK_SAMPLES || !send_msg(&m)) { return false; }
    while ((n = hal_mic_read(pcm, per_chunk)) > 0) {
        for (size_t i = 0; i < n; i++) { /* s16le on the wire, whatever the CPU */
            bytes[2 * i] = (uint8_t)((uint16_t)pcm[i] & 0xFFu);
            bytes[2 * i + 1] = (uint8_t)((uint16_t)pcm[i] >> 8);
        }
        m.type = FP_MSG_AUDIO_CHUNK;
        m.u.audio_chunk.stream_id = 1;
        m.u.audio_chunk.seq = seq++;
        m.u.audio_chunk.data.ptr = bytes;
        m.u.audio_chunk.data.len = 2 * n;
        if (!send_msg(&m)) { return false; }
    }
    m.type = FP_MSG_AUDIO_STOP;
    m.u.audio_stop.stream_id = 1;
    m.u.audio_stop.reason = FP_STOP_REASON_END;
    hal_log("sent %u audio chunks", (unsigned)seq);
    return send_msg(&m);
}

static void play_chunk(const fp_bytes_t *data, vb_result_t *out)
{
    static int16_t pcm[RX_BYTES / 2];
    size_t n = data->len / 2;
    for (size_t i = 0; i < n; i++) {
        pcm[i] = (int16_t)(uint16_t)(data->ptr[2 * i] | (data->ptr[2 * i + 1] << 8));
    }
    hal_speaker_write(pcm, n);
    hal_mouth(vb_mouth_level(data->ptr, data->len));
    out->reply_samples += (uint32_t)n;
}

bool vb_talk_once(const vb_config_t *cfg, vb_result_t *out)
{
    fp_msg_t m;
    *out = (vb_result_t){{0}, {0}, 0, 0, false};
    if (!handshake(cfg, out) || !stream_mic()) { return false; }
    while (!out->done && next_msg(&m, cfg->reply_timeout_ms, out) == 1) {
        switch (m.type) {
        case FP_MSG_TRANSCRIPT:
            copy_str(out->transcript, sizeof out->transcript, m.u.transcript.text);
            hal_log("heard: %s", out->transcript);
            break;
        case FP_MSG_REPLY_TEXT:
            if (m.u.reply_text.final) {
                copy_str(out->reply, sizeof out->reply, m.u.reply_text.text);
                hal_log("reply: %s", out->reply);
                out->done = true;
            }
            break;
        case FP_MSG_AUDIO_CHUNK: play_chunk(&m.u.audio_chunk.data, out); break;
        case FP_MSG_AUDIO_STOP:
            hal_mouth(0);
            if (m.u.audio_stop.reason == FP_STOP_REASON_ABORTED) { hal_speaker_stop(true); }
            break;
        case FP_MSG_ERROR:
            hal_log("gateway error %.*s: %.*s", (int)m.u.error.code.len, m.u.error.code.ptr,
                    (int)m.u.error.text.len, m.u.error.text.ptr);
            out->errors++;
            break;
        default: break; /* AudioStart, VadEvent...: nothing to do */
        }
    }
    hal_speaker_stop(false);
    return out->done;
}
