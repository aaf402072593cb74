/* Readings waiting for their ReadingAck: stop-and-wait with exponential back-off.
 * Pure logic (no I/O, the caller passes the clock), so it is unit-tested on the host. */
#ifndef BP_OUTBOX_H
#define BP_OUTBOX_H

#include "fp.h"

#define BP_OUTBOX_SIZE 8u
#define BP_MAX_BACKOFF_MS 30000u

typedef struct {
    uint16_t systolic;   /* mmHg */
    uint16_t diastolic;  /* mmHg */
    uint16_t pulse;      /* beats per minute, 0 = not measured */
    uint32_t measured_at; /* Unix seconds, 0 = the device has no clock */
} bp_measurement_t;

typedef struct {
    uint32_t seq;
    bp_measurement_t m;
} bp_item_t;

typedef struct {
    bp_item_t items[BP_OUTBOX_SIZE];
    size_t head, count;
    uint32_t next_seq;      /* persisted by the caller, so seq survives a reboot */
    uint32_t ack_timeout_ms; /* first retry delay; doubles up to BP_MAX_BACKOFF_MS */
    uint32_t backoff_ms, due_ms, attempts;
    bool sent;              /* the head went out and waits for its ack */
    uint32_t stored, duplicates, rejected, resent;
} bp_outbox_t;

void bp_outbox_init(bp_outbox_t *o, uint32_t next_seq, uint32_t ack_timeout_ms);

/* Queue a measurement under the next seq; false when the outbox is full (keep it on the
 * monitor and try later: nothing is dropped silently). */
bool bp_outbox_add(bp_outbox_t *o, const bp_measurement_t *m);

/* The SensorReading to send now, if any (first send, or a retry whose time has come). */
bool bp_outbox_due(bp_outbox_t *o, uint32_t now_ms, fp_msg_t *msg);

/* A ReadingAck arrived. STORED and DUPLICATE release the reading; REJECTED drops it (it can
 * never be stored; the reason is logged by the caller). Acks of other seqs are ignored. */
void bp_outbox_on_ack(bp_outbox_t *o, const fp_reading_ack_t *ack);

/* The link dropped: resend the head as soon as it is back. */
void bp_outbox_on_disconnect(bp_outbox_t *o);

/* Fill a SensorReading (kind blood_pressure, mmHg and bpm) for one item. */
void bp_make_reading(const bp_item_t *item, fp_msg_t *msg);

#endif
