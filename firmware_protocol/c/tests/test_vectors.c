/* Runs every golden vector through the C codec both ways (see vectors_to_lines.py).
 *   test_vectors build/vectors.txt
 * Prints one FAIL line per failed check and a summary; exits 1 on any failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp.h"

#define MAX_BYTES 70000
static char file_text[4 * 1024 * 1024];
static uint8_t hex_bytes[MAX_BYTES], stream_bytes[MAX_BYTES], out_buf[2 * MAX_BYTES];
static uint8_t pool[MAX_BYTES * 4]; /* decoded strings and records of the expected message */
static size_t pool_used;
static int failures;
static char current[128];

static void fail(const char *what)
{
    failures++;
    printf("FAIL %s: %s\n", current, what);
}

/* "x<hex>" -> bytes; returns the length or -1. */
static long unhex(const char *tok, uint8_t *out, size_t cap)
{
    size_t n, i;
    if (tok == NULL || tok[0] != 'x') { return -1; }
    tok++;
    n = strlen(tok);
    if (n % 2 || n / 2 > cap) { return -1; }
    for (i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(tok + 2 * i, "%2x", &v) != 1) { return -1; }
        out[i] = (uint8_t)v;
    }
    return (long)(n / 2);
}

static uint8_t *pool_hex(const char *tok, size_t *len)
{
    uint8_t *p = pool + pool_used;
    long n = unhex(tok, p, sizeof pool - pool_used);
    if (n < 0) { fail("bad hex in vector file"); n = 0; }
    pool_used += (size_t)n;
    *len = (size_t)n;
    return p;
}

static long next_long(char **save)
{
    char *tok = strtok_r(NULL, " ", save);
    return tok ? strtol(tok, NULL, 10) : 0;
}

/* Fill one field of `base` from its line of the vector file. */
static void parse_field(const fp_field_desc_t *f, char *line, uint8_t *base)
{
    char *save = NULL;
    char *tok = strtok_r(line, " ", &save);
    void *dst = base + f->offset;
    size_t len;
    switch (f->kind) {
    case FP_K_U8: case FP_K_ENUM8: *(uint8_t *)dst = (uint8_t)strtol(tok, NULL, 10); break;
    case FP_K_U16: *(uint16_t *)dst = (uint16_t)strtol(tok, NULL, 10); break;
    case FP_K_U32: *(uint32_t *)dst = (uint32_t)strtoul(tok, NULL, 10); break;
    case FP_K_I8: *(int8_t *)dst = (int8_t)strtol(tok, NULL, 10); break;
    case FP_K_I16: *(int16_t *)dst = (int16_t)strtol(tok, NULL, 10); break;
    case FP_K_BOOL: *(bool *)dst = strtol(tok, NULL, 10) != 0; break;
    case FP_K_STR: case FP_K_DEVICE_ID: case FP_K_IDENT: {
        fp_str_t *s = dst;
        s->ptr = (const char *)pool_hex(tok, &len);
        s->len = (uint16_t)len;
        break;
    }
    case FP_K_BYTES_REST: {
        fp_bytes_t *b = dst;
        b->ptr = pool_hex(tok, &b->len);
        break;
    }
    case FP_K_AUDIO_FORMAT: {
        fp_audio_format_t *a = dst;
        a->codec = (uint8_t)strtol(tok, NULL, 10);
        a->sample_rate = (uint32_t)next_long(&save);
        a->channels = (uint8_t)next_long(&save);
        break;
    }
    case FP_K_VALUES: {
        fp_values_t *v = dst;
        v->count = (uint8_t)strtol(tok, NULL, 10);
        for (size_t i = 0; i < v->count && i < FP_VALUES_CAP; i++) {
            union { uint32_t u; float f; } pun;
            v->items[i].name.ptr = (const char *)pool_hex(strtok_r(NULL, " ", &save), &len);
            v->items[i].name.len = (uint16_t)len;
            v->items[i].unit.ptr = (const char *)pool_hex(strtok_r(NULL, " ", &save), &len);
            v->items[i].unit.len = (uint16_t)len;
            pun.u = (uint32_t)strtoul(strtok_r(NULL, " ", &save), NULL, 16);
            v->items[i].value = pun.f;
        }
        break;
    }
    case FP_K_RECORDS: {
        fp_records_t *r = dst;
        uint8_t *raw = pool + pool_used;
        uint8_t rec[64];
        r->count = (uint8_t)strtol(tok, NULL, 10);
        for (size_t i = 0; i < r->count; i++) {
            memset(rec, 0, sizeof rec);
            for (size_t k = 0; k < f->sub_count; k++) {
                char num[32];
                char *t = strtok_r(NULL, " ", &save);
                const fp_field_desc_t *sub = &f->sub[k];
                snprintf(num, sizeof num, "%s", t ? t : "0");
                parse_field(sub, num, rec);
            }
            if (!fp_record_put(f->sub, f->sub_count, raw, sizeof pool - pool_used, i, rec)) {
                fail("record does not fit");
            }
        }
        r->raw = raw;
        pool_used += r->count * f->size;
        break;
    }
    }
}

static bool same(const void *a, const void *b, size_t n)
{
    return n == 0 || memcmp(a, b, n) == 0;
}

static bool field_equal(const fp_field_desc_t *f, const uint8_t *a, const uint8_t *b)
{
    const void *x = a + f->offset, *y = b + f->offset;
    switch (f->kind) {
    case FP_K_U8: case FP_K_ENUM8: case FP_K_I8: return *(const uint8_t *)x == *(const uint8_t *)y;
    case FP_K_U16: case FP_K_I16: return *(const uint16_t *)x == *(const uint16_t *)y;
    case FP_K_U32: return *(const uint32_t *)x == *(const uint32_t *)y;
    case FP_K_BOOL: return *(const bool *)x == *(const bool *)y;
    case FP_K_STR: case FP_K_DEVICE_ID: case FP_K_IDENT: {
        const fp_str_t *s = x, *t = y;
        return s->len == t->len && same(s->ptr, t->ptr, s->len);
    }
    case FP_K_BYTES_REST: {
        const fp_bytes_t *s = x, *t = y;
        return s->len == t->len && same(s->ptr, t->ptr, s->len);
    }
    case FP_K_AUDIO_FORMAT: {
        const fp_audio_format_t *s = x, *t = y;
        return s->codec == t->codec && s->sample_rate == t->sample_rate && s->channels == t->channels;
    }
    case FP_K_VALUES: {
        const fp_values_t *s = x, *t = y;
        if (s->count != t->count) { return false; }
        for (size_t i = 0; i < s->count; i++) {
            const fp_value_t *p = &s->items[i], *q = &t->items[i];
            if (p->name.len != q->name.len || !same(p->name.ptr, q->name.ptr, p->name.len) ||
                p->unit.len != q->unit.len || !same(p->unit.ptr, q->unit.ptr, p->unit.len) ||
                memcmp(&p->value, &q->value, sizeof p->value) != 0) {
                return false;
            }
        }
        return true;
    }
    case FP_K_RECORDS: {
        const fp_records_t *s = x, *t = y;
        return s->count == t->count && same(s->raw, t->raw, s->count * f->size);
    }
    }
    return false;
}

static bool msg_equal(const fp_msg_desc_t *d, const fp_msg_t *a, const fp_msg_t *b)
{
    if (a->type != b->type) { return false; }
    for (size_t i = 0; i < d->field_count; i++) {
        if (!field_equal(&d->fields[i], (const uint8_t *)&a->u, (const uint8_t *)&b->u)) {
            printf("  field %s differs\n", d->fields[i].name);
            return false;
        }
    }
    return true;
}

/* Feed bytes to a fresh deframer; count messages and errors, keep the last of each. */
static void feed(const uint8_t *data, size_t n, size_t max_frame, int *msgs, int *errs,
                 fp_err_t *last_err, fp_msg_t *last_msg)
{
    static uint8_t frame_buf[MAX_BYTES * 2];
    fp_deframer_t d;
    fp_deframer_init(&d, frame_buf, max_frame < sizeof frame_buf ? max_frame : sizeof frame_buf);
    *msgs = *errs = 0;
    for (size_t i = 0; i < n; i++) {
        fp_msg_t m;
        fp_err_t e = fp_deframer_push(&d, data[i], &m);
        if (e == FP_OK) { (*msgs)++; *last_msg = m; }
        else if (e != FP_PENDING) { (*errs)++; *last_err = e; }
    }
}

static char *next_line(char **cursor)
{
    char *line = *cursor, *nl;
    if (line == NULL || *line == '\0') { return NULL; }
    nl = strchr(line, '\n');
    if (nl) { *nl = '\0'; *cursor = nl + 1; } else { *cursor = line + strlen(line); }
    return line;
}

static void run_valid(char *header, char **cursor)
{
    static fp_msg_t expected, decoded, from_stream;
    char *save = NULL, *type, *hex, *stream;
    const fp_msg_desc_t *d = NULL;
    long n, sn;
    size_t out_len, i;
    int msgs, errs;
    fp_err_t e, last_err = FP_OK;
    strtok_r(header, " ", &save);
    snprintf(current, sizeof current, "%s", strtok_r(NULL, " ", &save));
    type = strtok_r(NULL, " ", &save);
    hex = strtok_r(NULL, " ", &save);
    stream = strtok_r(NULL, " ", &save);
    n = unhex(hex, hex_bytes, sizeof hex_bytes);
    sn = unhex(stream, stream_bytes, sizeof stream_bytes);
    if (n < 1 || sn < 1) { fail("bad vector line"); return; }
    for (i = 0; i < FP_MESSAGE_COUNT; i++) {
        if (strcmp(fp_messages[i].name, type) == 0) { d = &fp_messages[i]; }
    }
    if (d == NULL) { fail("message type missing from the C tables (run gen_tables.py --write)"); return; }
    memset(&expected, 0, sizeof expected);
    expected.type = d->type;
    for (i = 0; i < d->field_count; i++) {
        parse_field(&d->fields[i], next_line(cursor), (uint8_t *)&expected.u);
    }
    e = fp_decode(hex_bytes, (size_t)n, &decoded);
    if (e != FP_OK) { fail(fp_err_code(e)); return; }
    if (!msg_equal(d, &decoded, &expected)) { fail("decode(hex) differs from the message"); }
    e = fp_encode(&expected, out_buf, sizeof out_buf, &out_len);
    if (e != FP_OK || out_len != (size_t)n || memcmp(out_buf, hex_bytes, out_len) != 0) {
        fail("encode(message) differs from hex");
    }
    for (i = 0; i < (size_t)n; i++) { /* every smaller buffer is refused, nothing overflows */
        if (fp_encode(&expected, out_buf, i, &out_len) != FP_ERR_NO_SPACE) { fail("no-space"); break; }
    }
    for (i = 0; i < (size_t)n; i++) { /* every truncation is malformed (or still valid) */
        e = fp_decode(hex_bytes, i, &decoded);
        if (e == FP_ERR_UNKNOWN_TYPE || (e == FP_OK && d->fields[d->field_count - 1].kind != FP_K_BYTES_REST)) {
            fail("a truncated message decoded");
            break;
        }
    }
    e = fp_stream_frame(hex_bytes, (size_t)n, out_buf, sizeof out_buf, &out_len);
    if (e != FP_OK || out_len != (size_t)sn || memcmp(out_buf, stream_bytes, out_len) != 0) {
        fail("stream frame differs from stream_hex");
    }
    if (out_len > FP_STREAM_FRAME_MAX((size_t)n)) { fail("FP_STREAM_FRAME_MAX too small"); }
    feed(stream_bytes, (size_t)sn, 4096, &msgs, &errs, &last_err, &from_stream);
    if (msgs != 1 || errs != 0 || !msg_equal(d, &from_stream, &expected)) {
        fail("deframing stream_hex does not give the message");
    }
}

static fp_err_t err_of(const char *code)
{
    for (int e = FP_ERR_MALFORMED; e <= FP_ERR_BAD_FRAMING; e++) {
        if (strcmp(fp_err_code((fp_err_t)e), code) == 0) { return (fp_err_t)e; }
    }
    return FP_OK;
}

static void run_invalid(char *line)
{
    static fp_msg_t m;
    char *save = NULL, *hex, *stream, *code;
    long limit;
    strtok_r(line, " ", &save);
    snprintf(current, sizeof current, "%s", strtok_r(NULL, " ", &save));
    hex = strtok_r(NULL, " ", &save);
    stream = strtok_r(NULL, " ", &save);
    limit = next_long(&save);
    code = strtok_r(NULL, " ", &save);
    if (err_of(code) == FP_OK) { fail("unknown error code in vector"); return; }
    if (strcmp(hex, "none") != 0) {
        long n = unhex(hex, hex_bytes, sizeof hex_bytes);
        fp_err_t e = fp_decode(hex_bytes, n < 0 ? 0 : (size_t)n, &m);
        if (e != err_of(code)) { printf("  got %s\n", fp_err_code(e)); fail("wrong decode error"); }
    }
    if (strcmp(stream, "none") != 0) {
        int msgs, errs;
        fp_err_t last = FP_OK;
        long n = unhex(stream, stream_bytes, sizeof stream_bytes);
        feed(stream_bytes, n < 0 ? 0 : (size_t)n, (size_t)limit, &msgs, &errs, &last, &m);
        if (errs != 1 || last != err_of(code)) {
            printf("  got %d errors, last %s\n", errs, fp_err_code(last));
            fail("wrong stream error");
        }
    }
}

int main(int argc, char **argv)
{
    FILE *fh;
    size_t size;
    char *cursor = file_text, *line;
    int valid = 0, invalid = 0;
    static const uint8_t check[] = "123456789";
    if (argc != 2 || (fh = fopen(argv[1], "rb")) == NULL) {
        fprintf(stderr, "usage: test_vectors VECTORS.txt\n");
        return 2;
    }
    size = fread(file_text, 1, sizeof file_text - 1, fh);
    fclose(fh);
    file_text[size] = '\0';
    snprintf(current, sizeof current, "crc16");
    if (fp_crc16(check, 9) != 0x29B1u) { fail("CRC-16 check value"); }
    while ((line = next_line(&cursor)) != NULL) {
        pool_used = 0;
        if (strncmp(line, "valid ", 6) == 0) { run_valid(line, &cursor); valid++; }
        else if (strncmp(line, "invalid ", 8) == 0) { run_invalid(line); invalid++; }
        else if (line[0] != '\0') { snprintf(current, sizeof current, "file"); fail(line); }
    }
    printf("C codec: %d valid and %d invalid vectors, %d failures\n", valid, invalid, failures);
    if (failures == 0) { printf("all vectors passed\n"); }
    return failures ? 1 : 0;
}
