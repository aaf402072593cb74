/* Line filter for differential tests against the Python codec: each input line is a message
 * in hex; each output line is `ok TYPE_NAME REENCODED_HEX` or `err ERROR_CODE`. */
#include <stdio.h>
#include <string.h>

#include "fp.h"

static char line[1 << 17];
static uint8_t in[1 << 16], out[1 << 16];

int main(void)
{
    while (fgets(line, sizeof line, stdin)) {
        size_t n = 0, len;
        unsigned v;
        fp_msg_t m;
        fp_err_t e;
        for (char *p = line; n < sizeof in && sscanf(p, "%2x", &v) == 1 && p[0] != '\n'; p += 2) {
            in[n++] = (uint8_t)v;
        }
        e = fp_decode(in, n, &m);
        if (e != FP_OK) {
            printf("err %s\n", fp_err_code(e));
            continue;
        }
        if (fp_encode(&m, out, sizeof out, &len) != FP_OK) {
            printf("err re-encode-failed\n");
            continue;
        }
        printf("ok %s ", fp_msg_desc(m.type)->name);
        for (size_t i = 0; i < len; i++) { printf("%02x", out[i]); }
        printf("\n");
    }
    return 0;
}
