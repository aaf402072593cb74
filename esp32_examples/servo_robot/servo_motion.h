/* Servo motion player (portable, pure logic): ServoKeyframes in, servo angles out through the
 * HAL, interpolated linearly, always inside the robot's own limits. */
#ifndef SERVO_MOTION_H
#define SERVO_MOTION_H

#include "fp.h"

#define SR_CHANNELS 8u
#define SR_MAX_KEYFRAMES 48u

/* Servo HAL (LEDC PWM on the ESP32, log lines on the host). */
void hal_servo_write(uint8_t channel, uint8_t angle_deg);
void hal_rgb(uint32_t rgb); /* 0xRRGGBB */

typedef struct {
    uint8_t min, max, neutral; /* degrees; the robot's mechanical limits win over any message */
} sr_limits_t;

typedef struct {
    uint8_t channel, angle;
    uint16_t time_ms;
} sr_key_t;

typedef struct {
    sr_limits_t limits[SR_CHANNELS];
    uint8_t channels;
    uint8_t angle[SR_CHANNELS]; /* last angle written */
    uint8_t from[SR_CHANNELS];  /* angle when the running motion started */
    sr_key_t keys[SR_MAX_KEYFRAMES];
    size_t key_count;
    uint16_t stream_id;
    bool armed;   /* loaded, waiting for its stream's first sample */
    bool running;
    uint32_t start_ms, end_ms;
    uint32_t writes, clamped, ignored;
} sr_motion_t;

/* Set the limits and move every servo to neutral. */
void sr_init(sr_motion_t *s, const sr_limits_t *limits, uint8_t channels);

/* Load a ServoKeyframes: it starts with its stream's first sample (sr_on_audio_start) and
 * replaces the running motion. Keyframes beyond SR_MAX_KEYFRAMES or for channels the robot
 * does not have are ignored (counted). The LED colour is applied at once. */
void sr_load(sr_motion_t *s, const fp_servo_keyframes_t *msg);

/* A stream started (AudioStart): start the motion armed for it. */
void sr_on_audio_start(sr_motion_t *s, uint16_t stream_id, uint32_t now_ms);

/* Move the servos to where the motion says they are at now_ms. */
void sr_tick(sr_motion_t *s, uint32_t now_ms);

/* True while a motion is armed or running. */
bool sr_busy(const sr_motion_t *s, uint32_t now_ms);

#endif
