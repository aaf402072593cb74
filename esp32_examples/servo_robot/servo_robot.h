/* Servo robot application logic (portable): follow the gateway's ServoKeyframes in time with
 * the reply audio, show the affect colour on an RGB LED. */
#ifndef SERVO_ROBOT_H
#define SERVO_ROBOT_H

#include "device.h"
#include "servo_motion.h"

/* The robot of config/servo_map.yaml: head pan, head tilt, right arm, left arm. */
#define SR_ROBOT_CHANNELS 4u
extern const sr_limits_t sr_robot_limits[SR_ROBOT_CHANNELS];

typedef struct {
    const char *device_id;
    const char *token;
    uint32_t timeout_ms;
} sr_config_t;

typedef struct {
    uint32_t keyframe_messages;
    char reply[512];
    bool done;
} sr_result_t;

/* Hello/Welcome on an open link, announcing AUDIO_OUT, TEXT and SERVO. */
bool sr_connect(const sr_config_t *cfg);

/* Say `text` (TextInput) and follow the reply's motion until it and the reply have ended. */
bool sr_say(const sr_config_t *cfg, const char *text, sr_motion_t *motion, sr_result_t *out);

#endif
