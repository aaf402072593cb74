/* Servo robot loop: TextInput out; ServoKeyframes, AudioStart and ReplyText in. */
#include "servo_robot.h"

#define TICK_MS 20u

const sr_limits_t sr_robot_limits[SR_ROBOT_CHANNELS] = {
    {30, 150, 90}, /* 0 head pan */
    {60, 120, 90}, /* 1 head tilt */
    {0, 180, 20},  /* 2 right arm */
    {0, 180, 20},  /* 3 left arm */
};

static void on_message(const fp_msg_t *m, sr_motion_t *motion, sr_result_t *out)
{
    switch (m->type) {
    case FP_MSG_SERVO_KEYFRAMES:
        out->keyframe_messages++;
        hal_log("keyframes for stream %u: %u keyframes, led #%06x", m->u.servo_keyframes.stream_id,
                m->u.servo_keyframes.keyframes.count, (unsigned)m->u.servo_keyframes.led_rgb);
        sr_load(motion, &m->u.servo_keyframes);
        break;
    case FP_MSG_AUDIO_START:
        sr_on_audio_start(motion, m->u.audio_start.stream_id, hal_millis());
        break;
    case FP_MSG_REPLY_TEXT:
        if (m->u.reply_text.final) {
            dev_copy(out->reply, sizeof out->reply, m->u.reply_text.text);
            hal_log("reply: %s", out->reply);
            out->done = true;
        }
        break;
    case FP_MSG_ERROR:
        hal_log("gateway error %.*s: %.*s", (int)m->u.error.code.len, m->u.error.code.ptr,
                (int)m->u.error.text.len, m->u.error.text.ptr);
        break;
    default: break; /* the reply audio would go to a speaker; this robot has none */
    }
}

bool sr_connect(const sr_config_t *cfg)
{
    fp_welcome_t welcome;
    uint32_t errors = 0;
    dev_hello_t hello = {cfg->device_id, cfg->token, "servo_robot example 0.1",
                         FP_CAP_AUDIO_OUT | FP_CAP_TEXT | FP_CAP_SERVO, 16000u, 16000u};
    return dev_handshake(&hello, &welcome, &errors);
}

bool sr_say(const sr_config_t *cfg, const char *text, sr_motion_t *motion, sr_result_t *out)
{
    fp_msg_t m;
    uint32_t errors = 0, start = hal_millis();
    *out = (sr_result_t){0, {0}, false};
    m = dev_msg(FP_MSG_TEXT_INPUT);
    m.u.text_input.text = dev_str(text);
    if (!dev_send(&m)) { return false; }
    while (!out->done || sr_busy(motion, hal_millis())) {
        int r = dev_next(&m, TICK_MS, &errors);
        if (r < 0) { return false; }
        if (r == 1) { on_message(&m, motion, out); }
        sr_tick(motion, hal_millis());
        if (hal_millis() - start > cfg->timeout_ms) {
            hal_log("timeout");
            return false;
        }
    }
    sr_tick(motion, hal_millis());
    return true;
}
