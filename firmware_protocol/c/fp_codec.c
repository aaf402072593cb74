/* Table-driven message codec: one decoder and one encoder walk the generated field tables. */
#include "fp_internal.h"

typedef struct {
    const uint8_t *data;
    size_t len;
    size_t pos;
} reader_t;

typedef struct {
    uint8_t *out;
    size_t cap;
    size_t len;
} writer_t;

const char *fp_err_code(fp_err_t err)
{
    switch (err) {
    case FP_OK: return "ok";
    case FP_ERR_MALFORMED: return FP_CODE_MALFORMED_MESSAGE;
    case FP_ERR_UNKNOWN_TYPE: return FP_CODE_UNKNOWN_MESSAGE_TYPE;
    case FP_ERR_FRAME_TOO_LARGE: return FP_CODE_FRAME_TOO_LARGE;
    case FP_ERR_BAD_CRC: return FP_CODE_BAD_CRC;
    case FP_ERR_BAD_FRAMING: return FP_CODE_BAD_FRAMING;
    case FP_ERR_NO_SPACE: return "no-space";
    case FP_PENDING: return "pending";
    }
    return FP_CODE_INTERNAL_ERROR;
}

const fp_msg_desc_t *fp_msg_desc(uint8_t type)
{
    size_t i;
    for (i = 0; i < FP_MESSAGE_COUNT; i++) {
        if (fp_messages[i].type == type) {
            return &fp_messages[i];
        }
    }
    return NULL;
}

/* ---- decoding ---- */

static bool take(reader_t *r, size_t n, const uint8_t **p)
{
    if (n > r->len - r->pos) { return false; }
    *p = r->data + r->pos;
    r->pos += n;
    return true;
}

static bool read_uint(reader_t *r, size_t n, uint32_t *value)
{
    const uint8_t *p;
    uint32_t v = 0;
    if (!take(r, n, &p)) { return false; }
    for (size_t i = 0; i < n; i++) { v = (v << 8) | p[i]; }
    *value = v;
    return true;
}

static fp_err_t read_str(reader_t *r, fp_kind_t kind, fp_str_t *s)
{
    uint32_t n;
    const uint8_t *p;
    if (!read_uint(r, 2, &n) || !take(r, n, &p)) { return FP_ERR_MALFORMED; }
    if (!fp_str_valid(kind, p, n)) { return FP_ERR_MALFORMED; }
    s->ptr = (const char *)p;
    s->len = (uint16_t)n;
    return FP_OK;
}

static fp_err_t read_values(reader_t *r, uint32_t max_count, fp_values_t *v)
{
    uint32_t count, bits;
    if (!read_uint(r, 1, &count) || count > max_count) { return FP_ERR_MALFORMED; }
    if (count > FP_VALUES_CAP) { return FP_ERR_NO_SPACE; }
    v->count = (uint8_t)count;
    for (size_t i = 0; i < count; i++) {
        fp_value_t *it = &v->items[i];
        if (read_str(r, FP_K_IDENT, &it->name) != FP_OK ||
            read_str(r, FP_K_STR, &it->unit) != FP_OK || !read_uint(r, 4, &bits) ||
            !fp_f32_finite(bits)) {
            return FP_ERR_MALFORMED;
        }
        it->value = fp_bits_f32(bits);
    }
    return fp_values_valid(v, max_count) ? FP_OK : FP_ERR_MALFORMED;
}

static fp_err_t read_records(reader_t *r, const fp_field_desc_t *f, fp_records_t *rec)
{
    uint32_t count;
    const uint8_t *p;
    if (!read_uint(r, 1, &count) || count > f->limit || !take(r, count * f->size, &p) ||
        !fp_records_valid(f, count, p)) {
        return FP_ERR_MALFORMED;
    }
    rec->count = (uint8_t)count;
    rec->raw = p;
    return FP_OK;
}

static fp_err_t read_field(reader_t *r, const fp_field_desc_t *f, uint8_t *base)
{
    void *dst = base + f->offset;
    const uint8_t *p;
    switch (f->kind) {
    case FP_K_U8:
    case FP_K_U16:
    case FP_K_U32:
    case FP_K_I8:
    case FP_K_I16:
    case FP_K_ENUM8:
        return take(r, fp_scalar_size(f->kind), &p) && fp_scalar_read(f, p, dst)
                   ? FP_OK : FP_ERR_MALFORMED;
    case FP_K_BOOL:
        if (!take(r, 1, &p) || p[0] > 1u) { return FP_ERR_MALFORMED; }
        *(bool *)dst = p[0] == 1u;
        return FP_OK;
    case FP_K_RECORDS:
        return read_records(r, f, (fp_records_t *)dst);
    case FP_K_STR:
    case FP_K_DEVICE_ID:
    case FP_K_IDENT:
        return read_str(r, f->kind, (fp_str_t *)dst);
    case FP_K_BYTES_REST: {
        fp_bytes_t *b = (fp_bytes_t *)dst;
        b->len = r->len - r->pos;
        b->ptr = r->data + r->pos;
        r->pos = r->len;
        return FP_OK;
    }
    case FP_K_AUDIO_FORMAT: {
        fp_audio_format_t *a = (fp_audio_format_t *)dst;
        uint32_t codec, rate, channels;
        if (!read_uint(r, 1, &codec) || !read_uint(r, 4, &rate) || !read_uint(r, 1, &channels)) {
            return FP_ERR_MALFORMED;
        }
        a->codec = (uint8_t)codec;
        a->sample_rate = rate;
        a->channels = (uint8_t)channels;
        return fp_format_valid(a) ? FP_OK : FP_ERR_MALFORMED;
    }
    case FP_K_VALUES:
        return read_values(r, f->limit, (fp_values_t *)dst);
    }
    return FP_ERR_MALFORMED;
}

fp_err_t fp_decode(const uint8_t *data, size_t len, fp_msg_t *out)
{
    reader_t r;
    const fp_msg_desc_t *desc;
    uint8_t *raw = (uint8_t *)out;
    for (size_t i = 0; i < sizeof *out; i++) { raw[i] = 0; }
    if (data == NULL || len == 0) { return FP_ERR_MALFORMED; }
    desc = fp_msg_desc(data[0]);
    if (desc == NULL) { return FP_ERR_UNKNOWN_TYPE; }
    out->type = data[0];
    r.data = data;
    r.len = len;
    r.pos = 1;
    for (size_t i = 0; i < desc->field_count; i++) {
        fp_err_t err = read_field(&r, &desc->fields[i], (uint8_t *)&out->u);
        if (err != FP_OK) { return err; }
    }
    return r.pos == r.len ? FP_OK : FP_ERR_MALFORMED;
}

/* ---- encoding ---- */

static bool put(writer_t *w, const uint8_t *p, size_t n)
{
    if (n > w->cap - w->len) { return false; }
    for (size_t i = 0; i < n; i++) { w->out[w->len + i] = p[i]; }
    w->len += n;
    return true;
}

static bool put_uint(writer_t *w, size_t n, uint32_t v)
{
    uint8_t b[4];
    for (size_t i = 0; i < n; i++) { b[i] = (uint8_t)(v >> (8u * (n - 1u - i))); }
    return put(w, b, n);
}

static fp_err_t put_str(writer_t *w, fp_kind_t kind, fp_str_t s)
{
    const uint8_t *p = (const uint8_t *)s.ptr;
    if (s.len > 0 && p == NULL) { return FP_ERR_MALFORMED; }
    if (!fp_str_valid(kind, p, s.len)) { return FP_ERR_MALFORMED; }
    return put_uint(w, 2, s.len) && put(w, p, s.len) ? FP_OK : FP_ERR_NO_SPACE;
}

static fp_err_t put_values(writer_t *w, uint32_t max_count, const fp_values_t *v)
{
    for (size_t i = 0; i < v->count && i < FP_VALUES_CAP; i++) {
        if ((v->items[i].name.len && !v->items[i].name.ptr) ||
            (v->items[i].unit.len && !v->items[i].unit.ptr)) {
            return FP_ERR_MALFORMED;
        }
    }
    if (!fp_values_valid(v, max_count)) { return FP_ERR_MALFORMED; }
    if (!put_uint(w, 1, v->count)) { return FP_ERR_NO_SPACE; }
    for (size_t i = 0; i < v->count; i++) {
        const fp_value_t *it = &v->items[i];
        fp_err_t err = put_str(w, FP_K_IDENT, it->name);
        if (err == FP_OK) { err = put_str(w, FP_K_STR, it->unit); }
        if (err != FP_OK) { return err; }
        if (!put_uint(w, 4, fp_f32_bits(it->value))) { return FP_ERR_NO_SPACE; }
    }
    return FP_OK;
}

static fp_err_t put_records(writer_t *w, const fp_field_desc_t *f, const fp_records_t *rec)
{
    size_t n = rec->count * f->size;
    if (rec->count > f->limit || (n > 0 && rec->raw == NULL) ||
        !fp_records_valid(f, rec->count, rec->raw)) {
        return FP_ERR_MALFORMED;
    }
    return put_uint(w, 1, rec->count) && put(w, rec->raw, n) ? FP_OK : FP_ERR_NO_SPACE;
}

static fp_err_t write_field(writer_t *w, const fp_field_desc_t *f, const uint8_t *base)
{
    const void *src = base + f->offset;
    uint8_t tmp[4];
    bool ok;
    switch (f->kind) {
    case FP_K_U8:
    case FP_K_U16:
    case FP_K_U32:
    case FP_K_I8:
    case FP_K_I16:
    case FP_K_ENUM8:
        if (!fp_scalar_write(f, src, tmp)) { return FP_ERR_MALFORMED; }
        ok = put(w, tmp, fp_scalar_size(f->kind));
        break;
    case FP_K_BOOL: ok = put_uint(w, 1, *(const bool *)src ? 1u : 0u); break;
    case FP_K_RECORDS:
        return put_records(w, f, (const fp_records_t *)src);
    case FP_K_STR:
    case FP_K_DEVICE_ID:
    case FP_K_IDENT:
        return put_str(w, f->kind, *(const fp_str_t *)src);
    case FP_K_BYTES_REST: {
        const fp_bytes_t *b = (const fp_bytes_t *)src;
        if (b->len > 0 && b->ptr == NULL) { return FP_ERR_MALFORMED; }
        ok = put(w, b->ptr, b->len);
        break;
    }
    case FP_K_AUDIO_FORMAT: {
        const fp_audio_format_t *a = (const fp_audio_format_t *)src;
        if (!fp_format_valid(a)) { return FP_ERR_MALFORMED; }
        ok = put_uint(w, 1, a->codec) && put_uint(w, 4, a->sample_rate) &&
             put_uint(w, 1, a->channels);
        break;
    }
    case FP_K_VALUES:
        return put_values(w, f->limit, (const fp_values_t *)src);
    default:
        return FP_ERR_MALFORMED;
    }
    return ok ? FP_OK : FP_ERR_NO_SPACE;
}

fp_err_t fp_encode(const fp_msg_t *msg, uint8_t *out, size_t cap, size_t *out_len)
{
    writer_t w;
    const fp_msg_desc_t *desc = fp_msg_desc(msg->type);
    *out_len = 0;
    if (desc == NULL) { return FP_ERR_UNKNOWN_TYPE; }
    w.out = out;
    w.cap = cap;
    w.len = 0;
    if (!put_uint(&w, 1, msg->type)) { return FP_ERR_NO_SPACE; }
    for (size_t i = 0; i < desc->field_count; i++) {
        fp_err_t err = write_field(&w, &desc->fields[i], (const uint8_t *)&msg->u);
        if (err != FP_OK) { return err; }
    }
    *out_len = w.len;
    return FP_OK;
}
