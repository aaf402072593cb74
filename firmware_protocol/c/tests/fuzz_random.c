/* Without clang/libFuzzer: mutate the golden vectors at random for N seconds (under ASan/UBSan).
 *   fuzz_random SECONDS build/vectors.txt */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_SEEDS 256
#define SEED_BYTES 4096
static uint8_t seeds[MAX_SEEDS][SEED_BYTES];
static size_t seed_len[MAX_SEEDS];
static char line[1 << 16];
static uint32_t rng = 0x12345678u;

static uint32_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

int main(int argc, char **argv)
{
    static uint8_t buf[SEED_BYTES + 64];
    size_t count = 0;
    unsigned long runs = 0;
    FILE *fh;
    clock_t end;
    if (argc != 3 || (fh = fopen(argv[2], "r")) == NULL) { return 2; }
    while (fgets(line, sizeof line, fh) && count < MAX_SEEDS) {
        char *p = strchr(line, 'x');
        size_t n = 0;
        unsigned v;
        if (strncmp(line, "valid ", 6) != 0 || p == NULL) { continue; }
        for (p++; n < SEED_BYTES && sscanf(p, "%2x", &v) == 1 && p[0] != ' '; p += 2) {
            seeds[count][n++] = (uint8_t)v;
        }
        seed_len[count++] = n;
    }
    fclose(fh);
    end = clock() + (clock_t)(atof(argv[1]) * CLOCKS_PER_SEC);
    while (clock() < end) {
        for (int k = 0; k < 1000; k++, runs++) {
            size_t s = next() % (count ? count : 1), n = count ? seed_len[s] : 0;
            memcpy(buf, seeds[s], n);
            for (uint32_t m = next() % 4; m-- > 0;) {
                uint32_t op = next() % 3;
                if (op == 0 && n) { buf[next() % n] = (uint8_t)next(); }
                else if (op == 1 && n) { n = next() % n; }
                else if (n < sizeof buf) { buf[n++] = (uint8_t)next(); }
            }
            LLVMFuzzerTestOneInput(buf, n);
        }
    }
    printf("Done %lu runs (random mutations of %zu vectors), no crash\n", runs, count);
    return 0;
}
