/* Host build of the blood-pressure sensor:
 *   bp_sensor_host URL DEVICE_ID SEQ_FILE [--token T] [--lose-acks N] SYS/DIA/PULSE...
 * Sends each measurement and retries until it is acknowledged; --lose-acks drops the first N
 * ReadingAcks on the host link to show the retry against a real gateway. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bp_sensor.h"
#include "hal_host.h"

void host_bp_setup(char **readings, int count, const char *seq_file);

int main(int argc, char **argv)
{
    bp_config_t cfg = {NULL, "", 300u, 30000u};
    bp_outbox_t outbox;
    int first = 4;
    bool ok;
    if (argc < 4) {
        fprintf(stderr, "usage: %s URL DEVICE_ID SEQ_FILE [--token T] [--lose-acks N] SYS/DIA/PULSE...\n",
                argv[0]);
        return 2;
    }
    cfg.device_id = argv[2];
    while (first + 1 < argc && strncmp(argv[first], "--", 2) == 0) {
        if (strcmp(argv[first], "--token") == 0) {
            cfg.token = argv[first + 1];
        } else if (strcmp(argv[first], "--lose-acks") == 0) {
            host_link_drop_incoming(FP_MSG_READING_ACK, (unsigned)atoi(argv[first + 1]));
        } else {
            fprintf(stderr, "unknown option %s\n", argv[first]);
            return 2;
        }
        first += 2;
    }
    host_bp_setup(argv + first, argc - first, argv[3]);
    bp_outbox_init(&outbox, hal_seq_load(), cfg.ack_timeout_ms);
    if (!hal_link_open(argv[1])) { return 1; }
    ok = bp_run(&cfg, &outbox);
    hal_link_close();
    hal_log("result: %s, %u stored, %u duplicate, %u rejected, %u resent, next seq %u",
            ok ? "all acknowledged" : "failed", (unsigned)outbox.stored,
            (unsigned)outbox.duplicates, (unsigned)outbox.rejected, (unsigned)outbox.resent,
            (unsigned)outbox.next_seq);
    return ok ? 0 : 1;
}
