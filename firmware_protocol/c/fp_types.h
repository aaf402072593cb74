/* Types shared by the generated message tables and the codec (C99, libc headers only). */
#ifndef FP_TYPES_H
#define FP_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A UTF-8 string that points into a caller's buffer (not NUL-terminated). */
typedef struct {
    const char *ptr;
    uint16_t len;
} fp_str_t;

/* Raw bytes that point into a caller's buffer (the last field of a message). */
typedef struct {
    const uint8_t *ptr;
    size_t len;
} fp_bytes_t;

/* AudioFormat: u8 codec, u32 sample_rate, u8 channels (6 bytes on the wire). */
typedef struct {
    uint8_t codec;
    uint32_t sample_rate;
    uint8_t channels;
} fp_audio_format_t;

/* How one field is stored and checked. */
typedef enum {
    FP_K_U8,
    FP_K_U16,
    FP_K_U32,
    FP_K_I8,           /* two's complement */
    FP_K_I16,          /* two's complement, big-endian */
    FP_K_ENUM8,        /* u8 in 0..limit */
    FP_K_BOOL,         /* byte 0 or 1 */
    FP_K_STR,          /* u16 length + strict UTF-8 */
    FP_K_DEVICE_ID,    /* str of 1..64 chars of [A-Za-z0-9._:-] */
    FP_K_IDENT,        /* str of 1..32 chars of [a-z0-9_], starting with a letter */
    FP_K_BYTES_REST,   /* every remaining byte (last field only) */
    FP_K_AUDIO_FORMAT, /* embedded 6-byte AudioFormat */
    FP_K_VALUES,       /* u8 count, then per value: str name (ident), str unit, f32 BE */
    FP_K_RECORDS       /* u8 count, then fixed-size records of integer fields */
} fp_kind_t;

/* FP_K_RECORDS: the records stay in the message bytes (wire layout, `size` bytes each);
 * read and write one with the generated fp_<message>_<field>_get / _put functions. */
typedef struct {
    uint8_t count;
    const uint8_t *raw;
} fp_records_t;

typedef struct fp_field_desc {
    const char *name;
    fp_kind_t kind;
    size_t offset; /* offset of the field in the message's (or record's) struct */
    uint32_t limit; /* FP_K_ENUM8: largest valid value; VALUES/RECORDS: max count; else 0 */
    const struct fp_field_desc *sub; /* FP_K_RECORDS: the record's fields, else NULL */
    size_t sub_count;
    size_t size; /* FP_K_RECORDS: bytes per record on the wire, else 0 */
} fp_field_desc_t;

typedef struct {
    uint8_t type;
    const char *name;
    const fp_field_desc_t *fields;
    size_t field_count;
} fp_msg_desc_t;

#endif
