/* ESP-IDF entry point of the servo robot: each button press says the next demo phrase and the
 * robot follows the reply's ServoKeyframes. Add the voice box's microphone streaming to make
 * it a talking robot (the motion code does not change). */
#include "freertos/FreeRTOS.h"
#include "freertos/task.h"
#include "nvs_flash.h"
#include "sdkconfig.h"
#include "servo_robot.h"

void hal_servo_init(void);
bool hal_button_pressed(void);

void app_main(void)
{
    static const char *const phrases[] = {"Hello!", "Thank you!", "Goodbye!"};
    sr_config_t cfg = {CONFIG_GW_DEVICE_ID, CONFIG_GW_DEVICE_TOKEN, 30000u};
    sr_motion_t motion;
    unsigned next = 0;
    ESP_ERROR_CHECK(nvs_flash_init());
    hal_servo_init();
    sr_init(&motion, sr_robot_limits, SR_ROBOT_CHANNELS);
    for (;;) {
        if (!hal_link_open(CONFIG_GW_URL) || !sr_connect(&cfg)) {
            hal_link_close();
            vTaskDelay(pdMS_TO_TICKS(5000));
            continue;
        }
        for (;;) {
            sr_result_t result;
            fp_msg_t idle;
            uint32_t errors = 0;
            while (!hal_button_pressed()) {
                if (dev_next(&idle, 20, &errors) < 0) { break; }
            }
            if (!hal_button_pressed()) { break; }
            if (!sr_say(&cfg, phrases[next++ % 3], &motion, &result)) { break; }
        }
        hal_link_close();
    }
}
