/* ESP32 link HAL: Wi-Fi station and esp_websocket_client; received binary frames go through
 * a FreeRTOS message buffer so hal_link_recv can wait with a timeout like the host HAL.
 * Written for ESP-IDF 5.x; not built in CI (no ESP-IDF toolchain there). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "esp_event.h"
#include "esp_log.h"
#include "esp_timer.h"
#include "esp_websocket_client.h"
#include "esp_wifi.h"
#include "freertos/FreeRTOS.h"
#include "freertos/event_groups.h"
#include "freertos/message_buffer.h"
#include "hal_link.h"
#include "sdkconfig.h"

#define RX_BUFFER_BYTES 32768
#define CONNECTED_BIT BIT0
#define CLOSED_BIT BIT1
#define WIFI_BIT BIT2

static const char *TAG = "gateway_link";
static esp_websocket_client_handle_t client;
static MessageBufferHandle_t rx;
static EventGroupHandle_t events;
static uint8_t partial[8192];
static size_t partial_len;

uint32_t hal_millis(void) { return (uint32_t)(esp_timer_get_time() / 1000); }

void hal_log(const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    ESP_LOGI(TAG, "%s", line);
}

static void on_ws(void *arg, esp_event_base_t base, int32_t id, void *data)
{
    esp_websocket_event_data_t *ev = data;
    (void)arg;
    (void)base;
    if (id == WEBSOCKET_EVENT_CONNECTED) {
        xEventGroupSetBits(events, CONNECTED_BIT);
    } else if (id == WEBSOCKET_EVENT_DISCONNECTED || id == WEBSOCKET_EVENT_CLOSED) {
        xEventGroupSetBits(events, CLOSED_BIT);
    } else if (id == WEBSOCKET_EVENT_DATA && (ev->op_code == 0x2 || ev->op_code == 0x0)) {
        /* a frame may arrive in pieces: payload_offset/payload_len give its total size */
        if (ev->payload_offset + ev->data_len > sizeof partial) { partial_len = 0; return; }
        memcpy(partial + ev->payload_offset, ev->data_ptr, ev->data_len);
        partial_len = ev->payload_offset + ev->data_len;
        if (partial_len == (size_t)ev->payload_len &&
            xMessageBufferSend(rx, partial, partial_len, 0) != partial_len) {
            ESP_LOGW(TAG, "receive buffer full: message of %u bytes dropped", (unsigned)partial_len);
        }
    }
}

static void on_wifi(void *arg, esp_event_base_t base, int32_t id, void *data)
{
    (void)arg;
    (void)data;
    if (base == WIFI_EVENT && id == WIFI_EVENT_STA_DISCONNECTED) {
        xEventGroupClearBits(events, WIFI_BIT);
        esp_wifi_connect(); /* keep trying; the link HAL reports the outage meanwhile */
    } else if (base == IP_EVENT && id == IP_EVENT_STA_GOT_IP) {
        xEventGroupSetBits(events, WIFI_BIT);
    }
}

static void wifi_connect(void)
{
    static bool started;
    wifi_init_config_t init = WIFI_INIT_CONFIG_DEFAULT();
    wifi_config_t sta = {0};
    if (started) { return; }
    started = true;
    ESP_ERROR_CHECK(esp_netif_init());
    ESP_ERROR_CHECK(esp_event_loop_create_default());
    esp_netif_create_default_wifi_sta();
    ESP_ERROR_CHECK(esp_wifi_init(&init));
    esp_event_handler_register(WIFI_EVENT, WIFI_EVENT_STA_DISCONNECTED, on_wifi, NULL);
    esp_event_handler_register(IP_EVENT, IP_EVENT_STA_GOT_IP, on_wifi, NULL);
    strncpy((char *)sta.sta.ssid, CONFIG_GW_WIFI_SSID, sizeof sta.sta.ssid);
    strncpy((char *)sta.sta.password, CONFIG_GW_WIFI_PASSWORD, sizeof sta.sta.password);
    ESP_ERROR_CHECK(esp_wifi_set_mode(WIFI_MODE_STA));
    ESP_ERROR_CHECK(esp_wifi_set_config(WIFI_IF_STA, &sta));
    ESP_ERROR_CHECK(esp_wifi_start());
    ESP_ERROR_CHECK(esp_wifi_connect());
    esp_wifi_set_ps(WIFI_PS_NONE); /* audio needs low latency */
}

bool hal_link_open(const char *url)
{
    esp_websocket_client_config_t cfg = {.uri = url, .buffer_size = 4096,
                                         .disable_auto_reconnect = true};
    if (!rx) { rx = xMessageBufferCreate(RX_BUFFER_BYTES); }
    if (!events) { events = xEventGroupCreate(); }
    wifi_connect();
    if (!(xEventGroupWaitBits(events, WIFI_BIT, pdFALSE, pdFALSE, pdMS_TO_TICKS(30000)) & WIFI_BIT)) {
        hal_log("no Wi-Fi connection to %s", CONFIG_GW_WIFI_SSID);
        return false;
    }
    xMessageBufferReset(rx);
    xEventGroupClearBits(events, CONNECTED_BIT | CLOSED_BIT);
    client = esp_websocket_client_init(&cfg);
    esp_websocket_register_events(client, WEBSOCKET_EVENT_ANY, on_ws, NULL);
    esp_websocket_client_start(client);
    return xEventGroupWaitBits(events, CONNECTED_BIT | CLOSED_BIT, pdFALSE, pdFALSE,
                               pdMS_TO_TICKS(15000)) & CONNECTED_BIT;
}

bool hal_link_send(const uint8_t *msg, size_t len)
{
    return client && esp_websocket_client_send_bin(client, (const char *)msg, (int)len,
                                                   pdMS_TO_TICKS(5000)) == (int)len;
}

int hal_link_recv(uint8_t *buf, size_t cap, size_t *len, uint32_t timeout_ms)
{
    *len = xMessageBufferReceive(rx, buf, cap, pdMS_TO_TICKS(timeout_ms));
    if (*len > 0) { return 1; }
    return (xEventGroupGetBits(events) & CLOSED_BIT) ? -1 : 0;
}

void hal_link_close(void)
{
    if (client) {
        esp_websocket_client_close(client, pdMS_TO_TICKS(1000));
        esp_websocket_client_destroy(client);
        client = NULL;
    }
}
