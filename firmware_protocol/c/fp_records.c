/* Integer fields and fixed-size records (FP_K_RECORDS), read in place from the wire bytes. */
#include "fp_internal.h"

size_t fp_scalar_size(fp_kind_t kind)
{
    switch (kind) {
    case FP_K_U8: case FP_K_I8: case FP_K_ENUM8: return 1;
    case FP_K_U16: case FP_K_I16: return 2;
    case FP_K_U32: return 4;
    default: return 0;
    }
}

bool fp_scalar_read(const fp_field_desc_t *f, const uint8_t *p, void *dst)
{
    uint32_t v = 0;
    size_t n = fp_scalar_size(f->kind);
    for (size_t i = 0; i < n; i++) { v = (v << 8) | p[i]; }
    switch (f->kind) {
    case FP_K_ENUM8:
        if (v > f->limit) { return false; }
        *(uint8_t *)dst = (uint8_t)v;
        return true;
    case FP_K_U8: *(uint8_t *)dst = (uint8_t)v; return true;
    case FP_K_U16: *(uint16_t *)dst = (uint16_t)v; return true;
    case FP_K_U32: *(uint32_t *)dst = v; return true;
    case FP_K_I8: *(int8_t *)dst = (int8_t)(v >= 0x80u ? (int32_t)v - 0x100 : (int32_t)v); return true;
    case FP_K_I16:
        *(int16_t *)dst = (int16_t)(v >= 0x8000u ? (int32_t)v - 0x10000 : (int32_t)v);
        return true;
    default: return false;
    }
}

bool fp_scalar_write(const fp_field_desc_t *f, const void *src, uint8_t *p)
{
    uint32_t v;
    size_t n = fp_scalar_size(f->kind);
    switch (f->kind) {
    case FP_K_ENUM8:
        v = *(const uint8_t *)src;
        if (v > f->limit) { return false; }
        break;
    case FP_K_U8: v = *(const uint8_t *)src; break;
    case FP_K_U16: v = *(const uint16_t *)src; break;
    case FP_K_U32: v = *(const uint32_t *)src; break;
    case FP_K_I8: v = (uint32_t)(uint8_t)*(const int8_t *)src; break;
    case FP_K_I16: v = (uint32_t)(uint16_t)*(const int16_t *)src; break;
    default: return false;
    }
    for (size_t i = 0; i < n; i++) { p[i] = (uint8_t)(v >> (8u * (n - 1u - i))); }
    return true;
}

size_t fp_record_size(const fp_field_desc_t *fields, size_t count)
{
    size_t size = 0;
    for (size_t i = 0; i < count; i++) { size += fp_scalar_size(fields[i].kind); }
    return size;
}

static bool record_read(const fp_field_desc_t *fields, size_t count, const uint8_t *p, void *out)
{
    for (size_t i = 0; i < count; i++) {
        if (!fp_scalar_read(&fields[i], p, (uint8_t *)out + fields[i].offset)) { return false; }
        p += fp_scalar_size(fields[i].kind);
    }
    return true;
}

bool fp_records_valid(const fp_field_desc_t *f, size_t count, const uint8_t *raw)
{
    uint8_t scratch[64]; /* large enough for any record struct of integers */
    for (size_t i = 0; i < count; i++) {
        if (!record_read(f->sub, f->sub_count, raw + i * f->size, scratch)) { return false; }
    }
    return true;
}

bool fp_record_get(const fp_field_desc_t *fields, size_t count, const fp_records_t *r, size_t i,
                   void *out)
{
    size_t size = fp_record_size(fields, count);
    if (r->raw == NULL || i >= r->count) { return false; }
    return record_read(fields, count, r->raw + i * size, out);
}

bool fp_record_put(const fp_field_desc_t *fields, size_t count, uint8_t *raw, size_t cap,
                   size_t i, const void *in)
{
    size_t size = fp_record_size(fields, count);
    uint8_t *p;
    if (raw == NULL || i >= cap / size) { return false; }
    p = raw + i * size;
    for (size_t k = 0; k < count; k++) {
        if (!fp_scalar_write(&fields[k], (const uint8_t *)in + fields[k].offset, p)) {
            return false;
        }
        p += fp_scalar_size(fields[k].kind);
    }
    return true;
}
