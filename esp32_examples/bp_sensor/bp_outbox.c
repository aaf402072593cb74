/* Retry-until-acknowledged outbox for sensor readings. */
#include "bp_outbox.h"

static fp_str_t lit(const char *s)
{
    fp_str_t out = {s, 0};
    while (s[out.len]) { out.len++; }
    return out;
}

void bp_outbox_init(bp_outbox_t *o, uint32_t next_seq, uint32_t ack_timeout_ms)
{
    bp_outbox_t zero = {0};
    *o = zero;
    o->next_seq = next_seq;
    o->ack_timeout_ms = ack_timeout_ms;
}

bool bp_outbox_add(bp_outbox_t *o, const bp_measurement_t *m)
{
    bp_item_t *item;
    if (o->count == BP_OUTBOX_SIZE) { return false; }
    item = &o->items[(o->head + o->count) % BP_OUTBOX_SIZE];
    item->seq = o->next_seq++;
    item->m = *m;
    o->count++;
    return true;
}

void bp_make_reading(const bp_item_t *item, fp_msg_t *msg)
{
    fp_sensor_reading_t *r = &msg->u.sensor_reading;
    uint8_t *raw = (uint8_t *)msg;
    for (size_t i = 0; i < sizeof *msg; i++) { raw[i] = 0; }
    msg->type = FP_MSG_SENSOR_READING;
    r->seq = item->seq;
    r->kind = lit("blood_pressure");
    r->measured_at = item->m.measured_at;
    r->values.items[0].name = lit("systolic");
    r->values.items[0].unit = lit("mmHg");
    r->values.items[0].value = (float)item->m.systolic;
    r->values.items[1].name = lit("diastolic");
    r->values.items[1].unit = lit("mmHg");
    r->values.items[1].value = (float)item->m.diastolic;
    r->values.count = 2;
    if (item->m.pulse) {
        r->values.items[2].name = lit("pulse");
        r->values.items[2].unit = lit("bpm");
        r->values.items[2].value = (float)item->m.pulse;
        r->values.count = 3;
    }
}

bool bp_outbox_due(bp_outbox_t *o, uint32_t now_ms, fp_msg_t *msg)
{
    if (o->count == 0) { return false; }
    if (o->sent && (int32_t)(now_ms - o->due_ms) < 0) { return false; }
    if (o->sent) {
        o->resent++;
        o->backoff_ms = o->backoff_ms * 2u > BP_MAX_BACKOFF_MS ? BP_MAX_BACKOFF_MS : o->backoff_ms * 2u;
    } else {
        o->backoff_ms = o->ack_timeout_ms;
    }
    o->sent = true;
    o->attempts++;
    o->due_ms = now_ms + o->backoff_ms;
    bp_make_reading(&o->items[o->head], msg);
    return true;
}

void bp_outbox_on_ack(bp_outbox_t *o, const fp_reading_ack_t *ack)
{
    if (o->count == 0 || !o->sent || ack->seq != o->items[o->head].seq) { return; }
    if (ack->status == FP_READING_STATUS_STORED) { o->stored++; }
    else if (ack->status == FP_READING_STATUS_DUPLICATE) { o->duplicates++; }
    else { o->rejected++; }
    o->head = (o->head + 1u) % BP_OUTBOX_SIZE;
    o->count--;
    o->sent = false;
    o->attempts = 0;
}

void bp_outbox_on_disconnect(bp_outbox_t *o)
{
    o->sent = false; /* due at once, with the same seq */
    o->attempts = 0;
}
