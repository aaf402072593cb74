/* Blood-pressure sensor application logic (portable): read the monitor, send each reading as
 * a SensorReading and retry until the gateway acknowledges it. */
#ifndef BP_SENSOR_H
#define BP_SENSOR_H

#include "bp_outbox.h"
#include "device.h"

/* Sensor HAL (UART to the monitor and NVS on the ESP32; arguments and a file on the host). */
bool hal_bp_read(bp_measurement_t *out); /* a new measurement, false when there is none */
bool hal_bp_more(void);                  /* false when no measurement will ever come (host) */
uint32_t hal_seq_load(void);             /* the next seq, persisted across reboots */
void hal_seq_save(uint32_t next_seq);

typedef struct {
    const char *device_id;
    const char *token;
    uint32_t ack_timeout_ms;
    uint32_t run_ms; /* stop after this long (host tests); 0 = forever */
} bp_config_t;

/* Connect-to-stop loop on an open link; returns false when the link failed. */
bool bp_run(const bp_config_t *cfg, bp_outbox_t *outbox);

#endif
