/* Keyframe interpolation for the servo robot. */
#include "servo_motion.h"

static uint8_t clamp(sr_motion_t *s, uint8_t channel, int32_t angle)
{
    const sr_limits_t *l = &s->limits[channel];
    if (angle < l->min || angle > l->max) {
        s->clamped++;
        return angle < l->min ? l->min : l->max;
    }
    return (uint8_t)angle;
}

static void move(sr_motion_t *s, uint8_t channel, uint8_t angle)
{
    if (s->angle[channel] == angle) { return; }
    s->angle[channel] = angle;
    s->writes++;
    hal_servo_write(channel, angle);
}

void sr_init(sr_motion_t *s, const sr_limits_t *limits, uint8_t channels)
{
    sr_motion_t zero = {0};
    *s = zero;
    s->channels = channels < SR_CHANNELS ? channels : (uint8_t)SR_CHANNELS;
    for (uint8_t c = 0; c < s->channels; c++) {
        s->limits[c] = limits[c];
        s->angle[c] = limits[c].neutral;
        hal_servo_write(c, limits[c].neutral);
    }
}

void sr_load(sr_motion_t *s, const fp_servo_keyframes_t *msg)
{
    s->key_count = 0;
    for (size_t i = 0; i < msg->keyframes.count; i++) {
        fp_servo_keyframes_keyframes_t k;
        if (!fp_servo_keyframes_keyframes_get(&msg->keyframes, i, &k)) { break; }
        if (k.channel >= s->channels || s->key_count == SR_MAX_KEYFRAMES) {
            s->ignored++;
            continue;
        }
        s->keys[s->key_count].channel = k.channel;
        s->keys[s->key_count].angle = k.angle;
        s->keys[s->key_count].time_ms = k.time_ms;
        s->key_count++;
    }
    s->stream_id = msg->stream_id;
    s->armed = true;
    s->running = false;
    if (msg->led_rgb) { hal_rgb(msg->led_rgb); }
}

void sr_on_audio_start(sr_motion_t *s, uint16_t stream_id, uint32_t now_ms)
{
    uint16_t last = 0;
    if (!s->armed || stream_id != s->stream_id) { return; }
    for (size_t i = 0; i < s->key_count; i++) {
        if (s->keys[i].time_ms > last) { last = s->keys[i].time_ms; }
    }
    for (uint8_t c = 0; c < s->channels; c++) { s->from[c] = s->angle[c]; }
    s->armed = false;
    s->running = true;
    s->start_ms = now_ms;
    s->end_ms = now_ms + last;
}

/* Angle of one channel t ms into the motion: linear between the keyframes around t. */
static int32_t angle_at(const sr_motion_t *s, uint8_t c, uint32_t t)
{
    uint32_t t0 = 0, t1 = 0;
    int32_t a0 = s->from[c], a1 = -1;
    for (size_t i = 0; i < s->key_count; i++) {
        const sr_key_t *k = &s->keys[i];
        if (k->channel != c) { continue; }
        if (k->time_ms <= t && k->time_ms >= t0) {
            t0 = k->time_ms;
            a0 = k->angle;
        } else if (k->time_ms > t && (a1 < 0 || k->time_ms < t1)) {
            t1 = k->time_ms;
            a1 = k->angle;
        }
    }
    if (a1 < 0) { return a0; }
    return a0 + (a1 - a0) * (int32_t)(t - t0) / (int32_t)(t1 - t0);
}

void sr_tick(sr_motion_t *s, uint32_t now_ms)
{
    uint32_t t;
    if (!s->running) { return; }
    t = now_ms - s->start_ms;
    for (uint8_t c = 0; c < s->channels; c++) { move(s, c, clamp(s, c, angle_at(s, c, t))); }
    if ((int32_t)(now_ms - s->end_ms) >= 0) { s->running = false; }
}

bool sr_busy(const sr_motion_t *s, uint32_t now_ms)
{
    return s->armed || (s->running && (int32_t)(now_ms - s->end_ms) < 0);
}
