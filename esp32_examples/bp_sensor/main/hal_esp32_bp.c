/* Sensor HAL on ESP-IDF 5.x: read "SYS,DIA,PULSE\n" lines from a monitor's UART (adapt
 * parse_line to your monitor's protocol), or a stand-in button that makes a fixed reading;
 * the next seq is kept in NVS. Not built in CI (no ESP-IDF there). */
#include <stdio.h>

#include "driver/gpio.h"
#include "driver/uart.h"
#include "nvs.h"
#include "sdkconfig.h"
#include "bp_sensor.h"

static char line[64];
static size_t line_len;

void hal_bp_init(void)
{
    uart_config_t uart = {.baud_rate = CONFIG_BP_BAUD, .data_bits = UART_DATA_8_BITS,
                          .parity = UART_PARITY_DISABLE, .stop_bits = UART_STOP_BITS_1,
                          .flow_ctrl = UART_HW_FLOWCTRL_DISABLE, .source_clk = UART_SCLK_DEFAULT};
    gpio_config_t button = {.pin_bit_mask = 1ULL << CONFIG_BP_PIN_BUTTON, .mode = GPIO_MODE_INPUT,
                            .pull_up_en = GPIO_PULLUP_ENABLE};
    ESP_ERROR_CHECK(uart_driver_install(CONFIG_BP_UART_NUM, 1024, 0, 0, NULL, 0));
    ESP_ERROR_CHECK(uart_param_config(CONFIG_BP_UART_NUM, &uart));
    ESP_ERROR_CHECK(uart_set_pin(CONFIG_BP_UART_NUM, CONFIG_BP_PIN_TX, CONFIG_BP_PIN_RX,
                                 UART_PIN_NO_CHANGE, UART_PIN_NO_CHANGE));
    ESP_ERROR_CHECK(gpio_config(&button));
}

static bool parse_line(const char *text, bp_measurement_t *out)
{
    unsigned sys, dia, pulse = 0;
    if (sscanf(text, "%u,%u,%u", &sys, &dia, &pulse) < 2) { return false; }
    out->systolic = (uint16_t)sys;
    out->diastolic = (uint16_t)dia;
    out->pulse = (uint16_t)pulse;
    out->measured_at = 0; /* set it from SNTP if the board keeps time */
    return true;
}

bool hal_bp_more(void) { return true; }

bool hal_bp_read(bp_measurement_t *out)
{
    uint8_t byte;
#if CONFIG_BP_STANDIN
    static bool was_down;
    bool down = gpio_get_level(CONFIG_BP_PIN_BUTTON) == 0;
    if (down && !was_down) {
        was_down = down;
        return parse_line("121,79,64", out);
    }
    was_down = down;
#endif
    while (uart_read_bytes(CONFIG_BP_UART_NUM, &byte, 1, 0) == 1) {
        if (byte == '\n' || line_len == sizeof line - 1) {
            line[line_len] = '\0';
            line_len = 0;
            if (parse_line(line, out)) { return true; }
            hal_log("monitor line not understood: %s", line);
        } else if (byte != '\r') {
            line[line_len++] = (char)byte;
        }
    }
    return false;
}

uint32_t hal_seq_load(void)
{
    nvs_handle_t h;
    uint32_t seq = 1;
    if (nvs_open("bp", NVS_READONLY, &h) == ESP_OK) {
        nvs_get_u32(h, "next_seq", &seq);
        nvs_close(h);
    }
    return seq;
}

void hal_seq_save(uint32_t next_seq)
{
    nvs_handle_t h;
    if (nvs_open("bp", NVS_READWRITE, &h) == ESP_OK) {
        nvs_set_u32(h, "next_seq", next_seq);
        nvs_commit(h);
        nvs_close(h);
    }
}
