/* Host sensor HAL: measurements come from the command line ("128/82/71" = systolic/diastolic
 * /pulse), the seq is kept in a file, as NVS keeps it on the ESP32. */
#include <stdio.h>
#include <stdlib.h>

#include "bp_sensor.h"

static char **pending;
static int pending_count;
static const char *seq_path;

void host_bp_setup(char **readings, int count, const char *seq_file)
{
    pending = readings;
    pending_count = count;
    seq_path = seq_file;
}

bool hal_bp_more(void) { return pending_count > 0; }

bool hal_bp_read(bp_measurement_t *out)
{
    unsigned sys = 0, dia = 0, pulse = 0;
    if (pending_count == 0) { return false; }
    if (sscanf(pending[0], "%u/%u/%u", &sys, &dia, &pulse) < 2) {
        hal_log("stand-in monitor: cannot parse %s (want SYS/DIA[/PULSE])", pending[0]);
    }
    pending++;
    pending_count--;
    out->systolic = (uint16_t)sys;
    out->diastolic = (uint16_t)dia;
    out->pulse = (uint16_t)pulse;
    out->measured_at = 0; /* no real-time clock: the gateway stamps the reading */
    return true;
}

uint32_t hal_seq_load(void)
{
    unsigned long seq = 1;
    FILE *f = fopen(seq_path, "r");
    if (f) {
        if (fscanf(f, "%lu", &seq) != 1) { seq = 1; }
        fclose(f);
    }
    return (uint32_t)seq;
}

void hal_seq_save(uint32_t next_seq)
{
    FILE *f = fopen(seq_path, "w");
    if (f) {
        fprintf(f, "%lu\n", (unsigned long)next_seq);
        fclose(f);
    }
}
