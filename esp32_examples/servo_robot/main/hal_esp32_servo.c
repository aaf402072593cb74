/* Servo robot HAL on ESP-IDF 5.x: four hobby servos on LEDC (50 Hz, 0.5..2.5 ms pulses) and a
 * common-cathode RGB LED on three more LEDC channels. Not built in CI (no ESP-IDF there). */
#include "driver/gpio.h"
#include "driver/ledc.h"
#include "sdkconfig.h"
#include "servo_motion.h"

#define SERVO_BITS 14u /* duty resolution at 50 Hz */
static const int servo_pins[4] = {CONFIG_SR_PIN_SERVO0, CONFIG_SR_PIN_SERVO1,
                                  CONFIG_SR_PIN_SERVO2, CONFIG_SR_PIN_SERVO3};
static const int led_pins[3] = {CONFIG_SR_PIN_LED_R, CONFIG_SR_PIN_LED_G, CONFIG_SR_PIN_LED_B};

void hal_servo_init(void)
{
    ledc_timer_config_t servo_timer = {.speed_mode = LEDC_LOW_SPEED_MODE, .duty_resolution = SERVO_BITS,
                                       .timer_num = LEDC_TIMER_0, .freq_hz = 50, .clk_cfg = LEDC_AUTO_CLK};
    ledc_timer_config_t led_timer = {.speed_mode = LEDC_LOW_SPEED_MODE, .duty_resolution = LEDC_TIMER_8_BIT,
                                     .timer_num = LEDC_TIMER_1, .freq_hz = 5000, .clk_cfg = LEDC_AUTO_CLK};
    gpio_config_t button = {.pin_bit_mask = 1ULL << CONFIG_SR_PIN_BUTTON, .mode = GPIO_MODE_INPUT,
                            .pull_up_en = GPIO_PULLUP_ENABLE};
    ESP_ERROR_CHECK(ledc_timer_config(&servo_timer));
    ESP_ERROR_CHECK(ledc_timer_config(&led_timer));
    for (int i = 0; i < 4; i++) {
        ledc_channel_config_t ch = {.gpio_num = servo_pins[i], .speed_mode = LEDC_LOW_SPEED_MODE,
                                    .channel = (ledc_channel_t)i, .timer_sel = LEDC_TIMER_0};
        ESP_ERROR_CHECK(ledc_channel_config(&ch));
    }
    for (int i = 0; i < 3; i++) {
        ledc_channel_config_t ch = {.gpio_num = led_pins[i], .speed_mode = LEDC_LOW_SPEED_MODE,
                                    .channel = (ledc_channel_t)(4 + i), .timer_sel = LEDC_TIMER_1};
        ESP_ERROR_CHECK(ledc_channel_config(&ch));
    }
    ESP_ERROR_CHECK(gpio_config(&button));
}

bool hal_button_pressed(void) { return gpio_get_level(CONFIG_SR_PIN_BUTTON) == 0; }

void hal_servo_write(uint8_t channel, uint8_t angle_deg)
{
    /* 0 deg = 0.5 ms, 180 deg = 2.5 ms of a 20 ms period */
    uint32_t pulse_us = 500u + (uint32_t)angle_deg * 2000u / 180u;
    uint32_t duty = pulse_us * (1u << SERVO_BITS) / 20000u;
    if (channel >= 4) { return; }
    ledc_set_duty(LEDC_LOW_SPEED_MODE, (ledc_channel_t)channel, duty);
    ledc_update_duty(LEDC_LOW_SPEED_MODE, (ledc_channel_t)channel);
}

void hal_rgb(uint32_t rgb)
{
    for (int i = 0; i < 3; i++) {
        ledc_set_duty(LEDC_LOW_SPEED_MODE, (ledc_channel_t)(4 + i), (rgb >> (16 - 8 * i)) & 0xFFu);
        ledc_update_duty(LEDC_LOW_SPEED_MODE, (ledc_channel_t)(4 + i));
    }
}
