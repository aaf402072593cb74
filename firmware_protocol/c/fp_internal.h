/* Helpers shared by the codec's source files (not part of the public API). */
#ifndef FP_INTERNAL_H
#define FP_INTERNAL_H

#include "fp.h"

/* Wire size of an integer kind (u8, u16, u32, i8, i16, enum8), 0 for any other kind. */
size_t fp_scalar_size(fp_kind_t kind);

/* Read an integer field from its wire bytes p into dst; false when an enum is out of range. */
bool fp_scalar_read(const fp_field_desc_t *f, const uint8_t *p, void *dst);

/* Write an integer field from src as wire bytes into p; false when an enum is out of range. */
bool fp_scalar_write(const fp_field_desc_t *f, const void *src, uint8_t *p);

/* Wire size of one record of a FP_K_RECORDS field. */
size_t fp_record_size(const fp_field_desc_t *fields, size_t count);

/* True when every record in raw (count records) holds valid values. */
bool fp_records_valid(const fp_field_desc_t *f, size_t count, const uint8_t *raw);

/* Checks of fp_check.c (the same rules decoding and encoding). */
bool fp_str_valid(fp_kind_t kind, const uint8_t *s, size_t n);
bool fp_format_valid(const fp_audio_format_t *f);
bool fp_f32_finite(uint32_t bits);
uint32_t fp_f32_bits(float value);
float fp_bits_f32(uint32_t bits);
bool fp_values_valid(const fp_values_t *v, uint32_t max_count);

#endif
