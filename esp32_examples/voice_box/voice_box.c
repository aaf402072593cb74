/* Voice box application logic, written against hal_link.h and the audio HAL in voice_box.h. */
#include "voice_box.h"

#include "device.h"

#define CHUNK_MS 20u
#define MAX_CHUNK_SAMPLES 960u /* 20 ms at 48 kHz */

uint8_t vb_mouth_level(const uint8_t *pcm, size_t len)
{
    uint64_t sum = 0, rms, next;
    size_t n = len / 2;
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

static bool stream_mic(void)
{
    static int16_t pcm[MAX_CHUNK_SAMPLES];
    static uint8_t bytes[2 * MAX_CHUNK_SAMPLES];
    fp_msg_t m = dev_msg(FP_MSG_AUDIO_START);
    size_t per_chunk = hal_mic_rate() * CHUNK_MS / 1000u, n;
    uint32_t seq = 0;
    m.u.audio_start.stream_id = 1;
    m.u.audio_start.format.codec = FP_CODEC_PCM_S16LE;
    m.u.audio_start.format.sample_rate = hal_mic_rate();
    m.u.audio_start.format.channels = 1;
    if (per_chunk > MAX_CHUNK_SAMPLES || !dev_send(&m)) { return false; }
    m = dev_msg(FP_MSG_AUDIO_CHUNK);
    m.u.audio_chunk.stream_id = 1;
    m.u.audio_chunk.data.ptr = bytes;
    while ((n = hal_mic_read(pcm, per_chunk)) > 0) {
        for (size_t i = 0; i < n; i++) { /* s16le on the wire, whatever the CPU */
            bytes[2 * i] = (uint8_t)((uint16_t)pcm[i] & 0xFFu);
            bytes[2 * i + 1] = (uint8_t)((uint16_t)pcm[i] >> 8);
        }
        m.u.audio_chunk.seq = seq++;
        m.u.audio_chunk.data.len = 2 * n;
        if (!dev_send(&m)) { return false; }
    }
    m = dev_msg(FP_MSG_AUDIO_STOP);
    m.u.audio_stop.stream_id = 1;
    m.u.audio_stop.reason = FP_STOP_REASON_END;
    hal_log("sent %u audio chunks", (unsigned)seq);
    return dev_send(&m);
}

static void play_chunk(const fp_bytes_t *data, vb_result_t *out)
{
    int16_t pcm[256]; /* converted in pieces: s16le bytes to native samples */
    size_t n = data->len / 2;
    for (size_t done = 0; done < n;) {
        size_t k = n - done < 256u ? n - done : 256u;
        const uint8_t *p = data->ptr + 2 * done;
        for (size_t i = 0; i < k; i++) { pcm[i] = (int16_t)(uint16_t)(p[2 * i] | (p[2 * i + 1] << 8)); }
        hal_speaker_write(pcm, k);
        done += k;
    }
    hal_mouth(vb_mouth_level(data->ptr, data->len));
    out->reply_samples += (uint32_t)n;
}

bool vb_connect(const vb_config_t *cfg, uint32_t *reply_rate)
{
    fp_welcome_t welcome;
    uint32_t errors = 0;
    dev_hello_t hello = {cfg->device_id, cfg->token, cfg->firmware,
                         FP_CAP_AUDIO_IN | FP_CAP_AUDIO_OUT, hal_mic_rate(), cfg->reply_rate};
    if (!dev_handshake(&hello, &welcome, &errors)) { return false; }
    *reply_rate = welcome.audio_out.sample_rate;
    return true;
}

bool vb_talk(const vb_config_t *cfg, uint32_t reply_rate, vb_result_t *out)
{
    fp_msg_t m;
    *out = (vb_result_t){{0}, {0}, 0, 0, false};
    if (!hal_speaker_start(reply_rate) || !stream_mic()) { return false; }
    while (!out->done && dev_next(&m, cfg->reply_timeout_ms, &out->errors) == 1) {
        switch (m.type) {
        case FP_MSG_TRANSCRIPT:
            dev_copy(out->transcript, sizeof out->transcript, m.u.transcript.text);
            hal_log("heard: %s", out->transcript);
            break;
        case FP_MSG_REPLY_TEXT:
            if (m.u.reply_text.final) {
                dev_copy(out->reply, sizeof out->reply, m.u.reply_text.text);
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

bool vb_talk_once(const vb_config_t *cfg, vb_result_t *out)
{
    uint32_t rate;
    *out = (vb_result_t){{0}, {0}, 0, 0, false};
    return vb_connect(cfg, &rate) && vb_talk(cfg, rate, out);
}
