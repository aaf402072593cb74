/* ESP-IDF entry point of the voice box: connect, then one utterance per button press. */
#include "freertos/FreeRTOS.h"
#include "freertos/task.h"
#include "nvs_flash.h"
#include "sdkconfig.h"
#include "device.h"
#include "voice_box.h"

void hal_audio_init(void);
bool hal_button_pressed(void);

void app_main(void)
{
    vb_config_t cfg = {CONFIG_GW_DEVICE_ID, CONFIG_GW_DEVICE_TOKEN, "voice_box esp32 0.1",
                       16000u, 30000u};
    ESP_ERROR_CHECK(nvs_flash_init());
    hal_audio_init();
    for (;;) {
        uint32_t rate;
        if (!hal_link_open(CONFIG_GW_URL) || !vb_connect(&cfg, &rate)) {
            hal_link_close();
            vTaskDelay(pdMS_TO_TICKS(5000)); /* gateway away: try again */
            continue;
        }
        for (;;) {
            vb_result_t result;
            fp_msg_t idle;
            uint32_t errors = 0;
            /* wait for the button; dev_next answers Ping meanwhile and notices a lost link */
            while (!hal_button_pressed()) {
                if (dev_next(&idle, 20, &errors) < 0) { break; }
            }
            if (!hal_button_pressed() || !vb_talk(&cfg, rate, &result)) { break; }
        }
        hal_link_close();
    }
}
