/* ESP-IDF entry point of the blood-pressure sensor: keep a link to the gateway and send every
 * measurement until it is acknowledged; unacknowledged readings survive reconnects. */
#include "freertos/FreeRTOS.h"
#include "freertos/task.h"
#include "nvs_flash.h"
#include "sdkconfig.h"
#include "bp_sensor.h"

void hal_bp_init(void);

void app_main(void)
{
    bp_config_t cfg = {CONFIG_GW_DEVICE_ID, CONFIG_GW_DEVICE_TOKEN, 2000u, 0u};
    bp_outbox_t outbox;
    ESP_ERROR_CHECK(nvs_flash_init());
    hal_bp_init();
    bp_outbox_init(&outbox, hal_seq_load(), cfg.ack_timeout_ms);
    for (;;) {
        if (hal_link_open(CONFIG_GW_URL)) {
            bp_run(&cfg, &outbox); /* returns when the link fails */
        }
        hal_link_close();
        vTaskDelay(pdMS_TO_TICKS(5000));
    }
}
