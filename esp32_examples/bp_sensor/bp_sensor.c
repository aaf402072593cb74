/* Blood-pressure sensor loop: readings in, SensorReading out, ReadingAck back. */
#include "bp_sensor.h"

#define POLL_MS 100u

static void on_message(const fp_msg_t *m, bp_outbox_t *o, uint32_t *errors)
{
    if (m->type == FP_MSG_READING_ACK) {
        const fp_reading_ack_t *a = &m->u.reading_ack;
        static const char *const names[] = {"stored", "duplicate", "rejected"};
        hal_log("ack seq %u %s%s%.*s", (unsigned)a->seq, names[a->status],
                a->text.len ? ": " : "", (int)a->text.len, a->text.ptr);
        bp_outbox_on_ack(o, a);
    } else if (m->type == FP_MSG_ERROR) {
        hal_log("gateway error %.*s: %.*s", (int)m->u.error.code.len, m->u.error.code.ptr,
                (int)m->u.error.text.len, m->u.error.text.ptr);
        (*errors)++;
    }
}

bool bp_run(const bp_config_t *cfg, bp_outbox_t *o)
{
    fp_welcome_t welcome;
    uint32_t errors = 0, start = hal_millis();
    dev_hello_t hello = {cfg->device_id, cfg->token, "bp_sensor example 0.1", FP_CAP_SENSOR,
                         16000u, 16000u};
    if (!dev_handshake(&hello, &welcome, &errors)) { return false; }
    bp_outbox_on_disconnect(o); /* anything unacknowledged from before goes out again */
    for (;;) {
        bp_measurement_t reading;
        fp_msg_t m;
        int r;
        if (hal_bp_read(&reading)) {
            if (bp_outbox_add(o, &reading)) {
                hal_seq_save(o->next_seq);
                hal_log("measured %u/%u mmHg, pulse %u", reading.systolic, reading.diastolic,
                        reading.pulse);
            } else {
                hal_log("outbox full: measurement left on the monitor");
            }
        }
        while (bp_outbox_due(o, hal_millis(), &m)) {
            hal_log("%s seq %u (attempt %u)", o->attempts > 1 ? "resend" : "send",
                    (unsigned)m.u.sensor_reading.seq, (unsigned)o->attempts);
            if (!dev_send(&m)) { bp_outbox_on_disconnect(o); return false; }
        }
        if (!hal_bp_more() && o->count == 0) { return true; }
        if (cfg->run_ms && hal_millis() - start > cfg->run_ms) { return o->count == 0; }
        r = dev_next(&m, POLL_MS, &errors);
        if (r < 0) { bp_outbox_on_disconnect(o); return false; }
        if (r == 1) { on_message(&m, o, &errors); }
    }
}
