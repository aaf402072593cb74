/* Unit tests of the retry-until-acknowledged outbox (pure logic, fake clock). */
#include <stdio.h>

#include "bp_outbox.h"

static int failures, checks;

#define CHECK(cond) do { checks++; if (!(cond)) { failures++; printf("FAIL line %d: %s\n", __LINE__, #cond); } } while (0)

static fp_reading_ack_t ack(uint32_t seq, uint8_t status)
{
    fp_reading_ack_t a = {seq, status, {0, 0}, {0, 0}};
    return a;
}

int main(void)
{
    bp_outbox_t o;
    fp_msg_t msg;
    uint8_t wire[256];
    size_t len;
    fp_reading_ack_t a;
    bp_measurement_t m = {128, 82, 71, 1700000000u};
    bp_measurement_t no_pulse = {118, 76, 0, 0};

    bp_outbox_init(&o, 41, 1000);
    CHECK(!bp_outbox_due(&o, 0, &msg)); /* nothing queued, nothing sent */
    CHECK(bp_outbox_add(&o, &m) && bp_outbox_add(&o, &no_pulse));

    /* first send at once, as a valid SensorReading */
    CHECK(bp_outbox_due(&o, 0, &msg) && msg.type == FP_MSG_SENSOR_READING);
    CHECK(msg.u.sensor_reading.seq == 41 && msg.u.sensor_reading.values.count == 3);
    CHECK(fp_encode(&msg, wire, sizeof wire, &len) == FP_OK);
    CHECK(!bp_outbox_due(&o, 999, &msg)); /* waiting for the ack */

    /* no ack: resent with the same seq after 1 s, then after 2 s, 4 s ... */
    CHECK(bp_outbox_due(&o, 1000, &msg) && msg.u.sensor_reading.seq == 41 && o.resent == 1);
    CHECK(!bp_outbox_due(&o, 2999, &msg));
    CHECK(bp_outbox_due(&o, 3000, &msg) && o.resent == 2);
    CHECK(!bp_outbox_due(&o, 6999, &msg) && bp_outbox_due(&o, 7000, &msg));

    /* an ack for another seq changes nothing; the right one releases the reading */
    a = ack(40, FP_READING_STATUS_STORED);
    bp_outbox_on_ack(&o, &a);
    CHECK(o.count == 2 && o.stored == 0);
    a = ack(41, FP_READING_STATUS_DUPLICATE); /* the first send was stored, its ack was lost */
    bp_outbox_on_ack(&o, &a);
    CHECK(o.count == 1 && o.duplicates == 1);

    /* the next reading goes out at once, without a pulse value */
    CHECK(bp_outbox_due(&o, 7001, &msg) && msg.u.sensor_reading.seq == 42);
    CHECK(msg.u.sensor_reading.values.count == 2);

    /* after a disconnect the head is resent as soon as the link is back */
    bp_outbox_on_disconnect(&o);
    CHECK(bp_outbox_due(&o, 7002, &msg) && msg.u.sensor_reading.seq == 42);
    a = ack(42, FP_READING_STATUS_REJECTED); /* never storable: dropped, not retried */
    bp_outbox_on_ack(&o, &a);
    CHECK(o.count == 0 && o.rejected == 1 && !bp_outbox_due(&o, 100000, &msg));

    /* a full outbox refuses new readings instead of dropping old ones */
    for (unsigned i = 0; i < BP_OUTBOX_SIZE; i++) { CHECK(bp_outbox_add(&o, &m)); }
    CHECK(!bp_outbox_add(&o, &m) && o.count == BP_OUTBOX_SIZE && o.next_seq == 43 + BP_OUTBOX_SIZE);

    /* the back-off stops growing at BP_MAX_BACKOFF_MS */
    bp_outbox_init(&o, 1, 20000);
    CHECK(bp_outbox_add(&o, &m) && bp_outbox_due(&o, 0, &msg));
    CHECK(bp_outbox_due(&o, 20000, &msg) && o.due_ms == 20000 + BP_MAX_BACKOFF_MS);

    printf("bp outbox: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
