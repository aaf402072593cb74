/* Unit tests of the servo motion player, fed with the golden vector servo-keyframes-wave. */
#include <stdio.h>
#include <string.h>

#include "servo_motion.h"

static int failures, checks;
static uint8_t last_angle[SR_CHANNELS];
static unsigned writes[SR_CHANNELS];
static uint32_t led;

#define CHECK(cond) do { checks++; if (!(cond)) { failures++; printf("FAIL line %d: %s\n", __LINE__, #cond); } } while (0)

void hal_servo_write(uint8_t channel, uint8_t angle_deg)
{
    last_angle[channel] = angle_deg;
    writes[channel]++;
}

void hal_rgb(uint32_t rgb) { led = rgb; }

/* vector servo-keyframes-wave: stream 2; channel 2 at 90 (0 ms), 150 (250), 30 (500), 90 (750);
 * led 0xff8800; face "smile" */
static const uint8_t wave[] = {0x34, 0x00, 0x02, 0x04, 0x02, 0x5a, 0x00, 0x00, 0x02, 0x96,
                               0x00, 0xfa, 0x02, 0x1e, 0x01, 0xf4, 0x02, 0x5a, 0x02, 0xee,
                               0x00, 0xff, 0x88, 0x00, 0x00, 0x05, 0x73, 0x6d, 0x69, 0x6c, 0x65};

int main(void)
{
    static const sr_limits_t wide[3] = {{30, 150, 90}, {60, 120, 90}, {0, 180, 20}};
    static const sr_limits_t narrow[3] = {{30, 150, 90}, {60, 120, 90}, {40, 140, 20}};
    static const sr_limits_t two[2] = {{30, 150, 90}, {60, 120, 90}};
    sr_motion_t s;
    fp_msg_t msg;

    CHECK(fp_decode(wave, sizeof wave, &msg) == FP_OK && msg.type == FP_MSG_SERVO_KEYFRAMES);
    sr_init(&s, wide, 3);
    CHECK(last_angle[0] == 90 && last_angle[1] == 90 && last_angle[2] == 20); /* neutral */

    sr_load(&s, &msg.u.servo_keyframes);
    CHECK(led == 0xff8800u && s.key_count == 4 && sr_busy(&s, 0));
    sr_tick(&s, 500); /* armed, not started: nothing moves before the stream's first sample */
    CHECK(last_angle[2] == 20);
    sr_on_audio_start(&s, 7, 1000); /* another stream: still waiting */
    sr_tick(&s, 1000);
    CHECK(last_angle[2] == 20 && !s.running);

    sr_on_audio_start(&s, 2, 1000);
    sr_tick(&s, 1000); CHECK(last_angle[2] == 90);
    sr_tick(&s, 1125); CHECK(last_angle[2] == 120); /* halfway from 90 to 150 */
    sr_tick(&s, 1250); CHECK(last_angle[2] == 150);
    sr_tick(&s, 1375); CHECK(last_angle[2] == 90);
    sr_tick(&s, 1500); CHECK(last_angle[2] == 30);
    CHECK(sr_busy(&s, 1700));
    sr_tick(&s, 1800); CHECK(last_angle[2] == 90 && !sr_busy(&s, 1800));
    CHECK(last_angle[0] == 90 && writes[0] == 1); /* other channels untouched */
    CHECK(s.clamped == 0);

    /* the robot's own limits win over the message */
    sr_init(&s, narrow, 3);
    sr_load(&s, &msg.u.servo_keyframes);
    sr_on_audio_start(&s, 2, 0);
    sr_tick(&s, 250); CHECK(last_angle[2] == 140);
    sr_tick(&s, 500); CHECK(last_angle[2] == 40 && s.clamped == 2);

    /* a robot without channel 2 ignores its keyframes */
    sr_init(&s, two, 2);
    sr_load(&s, &msg.u.servo_keyframes);
    CHECK(s.key_count == 0 && s.ignored == 4);

    /* a new motion replaces the running one and starts from where the servos are */
    sr_init(&s, wide, 3);
    sr_load(&s, &msg.u.servo_keyframes);
    sr_on_audio_start(&s, 2, 0);
    sr_tick(&s, 250); CHECK(last_angle[2] == 150);
    sr_load(&s, &msg.u.servo_keyframes);
    sr_on_audio_start(&s, 2, 300);
    CHECK(s.from[2] == 150);
    sr_tick(&s, 300); CHECK(last_angle[2] == 90);

    printf("servo motion: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
