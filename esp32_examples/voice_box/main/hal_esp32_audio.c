/* Voice box audio HAL on ESP-IDF 5.x: one full-duplex I2S port (works on ESP32, -S3, -C3, -C6)
 * shared by an INMP441 microphone and a MAX98357A amplifier at 16 kHz, 32-bit slots; a
 * push-to-talk button; a mouth LED on LEDC PWM. Not built in CI (no ESP-IDF there). */
#include "driver/gpio.h"
#include "driver/i2s_std.h"
#include "driver/ledc.h"
#include "sdkconfig.h"
#include "voice_box.h"

#define RATE 16000u
static i2s_chan_handle_t tx, rx;

void hal_audio_init(void)
{
    i2s_chan_config_t chan = I2S_CHANNEL_DEFAULT_CONFIG(I2S_NUM_0, I2S_ROLE_MASTER);
    i2s_std_config_t std = {
        .clk_cfg = I2S_STD_CLK_DEFAULT_CONFIG(RATE),
        .slot_cfg = I2S_STD_PHILIPS_SLOT_DEFAULT_CONFIG(I2S_DATA_BIT_WIDTH_32BIT, I2S_SLOT_MODE_MONO),
        .gpio_cfg = {.mclk = I2S_GPIO_UNUSED, .bclk = CONFIG_VB_PIN_BCLK, .ws = CONFIG_VB_PIN_WS,
                     .dout = CONFIG_VB_PIN_SPK_DIN, .din = CONFIG_VB_PIN_MIC_SD},
    };
    gpio_config_t button = {.pin_bit_mask = 1ULL << CONFIG_VB_PIN_BUTTON, .mode = GPIO_MODE_INPUT,
                            .pull_up_en = GPIO_PULLUP_ENABLE};
    ledc_timer_config_t timer = {.speed_mode = LEDC_LOW_SPEED_MODE, .duty_resolution = LEDC_TIMER_8_BIT,
                                 .timer_num = LEDC_TIMER_0, .freq_hz = 5000, .clk_cfg = LEDC_AUTO_CLK};
    ledc_channel_config_t led = {.gpio_num = CONFIG_VB_PIN_MOUTH_LED, .speed_mode = LEDC_LOW_SPEED_MODE,
                                 .channel = LEDC_CHANNEL_0, .timer_sel = LEDC_TIMER_0, .duty = 0};
    ESP_ERROR_CHECK(i2s_new_channel(&chan, &tx, &rx));
    ESP_ERROR_CHECK(i2s_channel_init_std_mode(tx, &std));
    ESP_ERROR_CHECK(i2s_channel_init_std_mode(rx, &std));
    ESP_ERROR_CHECK(i2s_channel_enable(tx));
    ESP_ERROR_CHECK(i2s_channel_enable(rx));
    ESP_ERROR_CHECK(gpio_config(&button));
    ESP_ERROR_CHECK(ledc_timer_config(&timer));
    ESP_ERROR_CHECK(ledc_channel_config(&led));
}

bool hal_button_pressed(void) { return gpio_get_level(CONFIG_VB_PIN_BUTTON) == 0; }

uint32_t hal_mic_rate(void) { return RATE; }

size_t hal_mic_read(int16_t *pcm, size_t max_samples)
{
    int32_t raw[320];
    size_t got = 0;
    if (!hal_button_pressed()) { return 0; } /* released: the utterance ends */
    if (max_samples > 320) { max_samples = 320; }
    i2s_channel_read(rx, raw, max_samples * sizeof raw[0], &got, portMAX_DELAY);
    got /= sizeof raw[0];
    for (size_t i = 0; i < got; i++) { pcm[i] = (int16_t)(raw[i] >> 14); } /* 24-bit left-justified, +6 dB */
    return got;
}

bool hal_speaker_start(uint32_t sample_rate) { return sample_rate == RATE; }

void hal_speaker_write(const int16_t *pcm, size_t samples)
{
    int32_t out[320];
    while (samples > 0) {
        size_t n = samples < 320 ? samples : 320, written;
        for (size_t i = 0; i < n; i++) { out[i] = (int32_t)pcm[i] << 16; }
        i2s_channel_write(tx, out, n * sizeof out[0], &written, portMAX_DELAY);
        pcm += n;
        samples -= n;
    }
}

void hal_speaker_stop(bool flush)
{
    if (flush) { /* barge-in: drop what the DMA still holds */
        i2s_channel_disable(tx);
        i2s_channel_enable(tx);
    }
}

void hal_mouth(uint8_t level)
{
    ledc_set_duty(LEDC_LOW_SPEED_MODE, LEDC_CHANNEL_0, level);
    ledc_update_duty(LEDC_LOW_SPEED_MODE, LEDC_CHANNEL_0);
}
