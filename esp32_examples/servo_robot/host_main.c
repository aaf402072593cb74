/* Host build of the servo robot: servo_robot_host URL DEVICE_ID "TEXT"
 * Logs every servo angle and LED colour it would set. */
#include <stdio.h>

#include "servo_robot.h"

void hal_servo_write(uint8_t channel, uint8_t angle_deg)
{
    hal_log("servo %u -> %u deg", channel, angle_deg);
}

void hal_rgb(uint32_t rgb) { hal_log("led #%06x", (unsigned)rgb); }

int main(int argc, char **argv)
{
    sr_config_t cfg = {NULL, "", 60000u};
    sr_motion_t motion;
    sr_result_t result;
    bool ok;
    if (argc != 4) {
        fprintf(stderr, "usage: %s ws://HOST:PORT/ws DEVICE_ID TEXT\n", argv[0]);
        return 2;
    }
    cfg.device_id = argv[2];
    sr_init(&motion, sr_robot_limits, SR_ROBOT_CHANNELS);
    if (!hal_link_open(argv[1])) { return 1; }
    ok = sr_connect(&cfg) && sr_say(&cfg, argv[3], &motion, &result);
    hal_link_close();
    hal_log("result: %s, %u keyframe messages, %u servo writes, %u clamped, %u ignored",
            ok ? "done" : "failed", (unsigned)result.keyframe_messages, (unsigned)motion.writes,
            (unsigned)motion.clamped, (unsigned)motion.ignored);
    return ok ? 0 : 1;
}
