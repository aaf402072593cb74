/* Value checks shared by the decoder and the encoder: UTF-8, names, formats, value lists. */
#include "fp_internal.h"

static bool cont(uint8_t b) { return (b & 0xC0u) == 0x80u; }

bool fp_utf8_valid(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t need;
        uint8_t lo = 0x80u, hi = 0xBFu; /* allowed range of the second byte */
        if (c < 0x80u) { i++; continue; }
        if (c >= 0xC2u && c <= 0xDFu) { need = 1; }
        else if (c >= 0xE0u && c <= 0xEFu) {
            need = 2;
            if (c == 0xE0u) { lo = 0xA0u; }      /* no overlong forms */
            if (c == 0xEDu) { hi = 0x9Fu; }      /* no surrogates */
        } else if (c >= 0xF0u && c <= 0xF4u) {
            need = 3;
            if (c == 0xF0u) { lo = 0x90u; }      /* no overlong forms */
            if (c == 0xF4u) { hi = 0x8Fu; }      /* nothing above U+10FFFF */
        } else {
            return false;
        }
        if (n - i <= need) { return false; }
        if (s[i + 1] < lo || s[i + 1] > hi) { return false; }
        for (size_t k = 2; k <= need; k++) {
            if (!cont(s[i + k])) { return false; }
        }
        i += need + 1;
    }
    return true;
}

static bool device_id_char(uint8_t c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == ':' || c == '-';
}

static bool ident_valid(const uint8_t *s, size_t n)
{
    if (n < 1 || n > 32 || s[0] < 'a' || s[0] > 'z') { return false; }
    for (size_t i = 1; i < n; i++) {
        uint8_t c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) { return false; }
    }
    return true;
}

bool fp_str_valid(fp_kind_t kind, const uint8_t *s, size_t n)
{
    if (kind == FP_K_DEVICE_ID) {
        if (n < 1 || n > 64) { return false; }
        for (size_t i = 0; i < n; i++) {
            if (!device_id_char(s[i])) { return false; }
        }
        return true;
    }
    if (kind == FP_K_IDENT) { return ident_valid(s, n); }
    return fp_utf8_valid(s, n);
}

bool fp_format_valid(const fp_audio_format_t *f)
{
    return f->codec < FP_CODEC_COUNT && f->sample_rate >= FP_MIN_SAMPLE_RATE &&
           f->sample_rate <= FP_MAX_SAMPLE_RATE && f->channels >= 1u &&
           f->channels <= FP_MAX_CHANNELS;
}

bool fp_f32_finite(uint32_t bits) { return (bits & 0x7F800000u) != 0x7F800000u; }

uint32_t fp_f32_bits(float value)
{
    union { float f; uint32_t u; } pun;
    pun.f = value;
    return pun.u;
}

float fp_bits_f32(uint32_t bits)
{
    union { float f; uint32_t u; } pun;
    pun.u = bits;
    return pun.f;
}

static bool same_str(fp_str_t a, fp_str_t b)
{
    if (a.len != b.len) { return false; }
    for (size_t i = 0; i < a.len; i++) {
        if (a.ptr[i] != b.ptr[i]) { return false; }
    }
    return true;
}

/* Value names are identifiers and unique within one list. */
bool fp_values_valid(const fp_values_t *v, uint32_t max_count)
{
    if (v->count > max_count || v->count > FP_VALUES_CAP) { return false; }
    for (size_t i = 0; i < v->count; i++) {
        const fp_value_t *it = &v->items[i];
        if (!ident_valid((const uint8_t *)it->name.ptr, it->name.len) ||
            !fp_utf8_valid((const uint8_t *)it->unit.ptr, it->unit.len) ||
            !fp_f32_finite(fp_f32_bits(it->value))) {
            return false;
        }
        for (size_t k = 0; k < i; k++) {
            if (same_str(v->items[k].name, it->name)) { return false; }
        }
    }
    return true;
}

