/* Voice box application logic (portable): push-to-talk, stream the microphone to the gateway,
 * play the spoken reply and move a mouth LED with its loudness. */
#ifndef VOICE_BOX_H
#define VOICE_BOX_H

#include "fp.h"
#include "hal_link.h"

/* Audio HAL of the voice box (I2S on the ESP32, WAV files on the host). */
uint32_t hal_mic_rate(void);
size_t hal_mic_read(int16_t *pcm, size_t max_samples); /* 0 = the utterance ended */
bool hal_speaker_start(uint32_t sample_rate);
void hal_speaker_write(const int16_t *pcm, size_t samples);
void hal_speaker_stop(bool flush); /* flush = drop what is buffered (barge-in) */
void hal_mouth(uint8_t level);     /* 0..255, e.g. LED brightness or a display's mouth */

typedef struct {
    const char *device_id;
    const char *token;
    const char *firmware;
    uint32_t reply_rate; /* sample rate asked for the reply audio */
    uint32_t reply_timeout_ms;
} vb_config_t;

typedef struct {
    char transcript[256];
    char reply[512];
    uint32_t reply_samples;
    uint32_t errors;
    bool done;
} vb_result_t;

/* Mouth level 0..255 of s16le PCM bytes (RMS, clipped). */
uint8_t vb_mouth_level(const uint8_t *pcm, size_t len);

/* Hello/Welcome on an open link; *reply_rate gets the sample rate the gateway will send. */
bool vb_connect(const vb_config_t *cfg, uint32_t *reply_rate);

/* One utterance from the microphone (until hal_mic_read returns 0), then the whole reply.
 * Returns true when the closing ReplyText arrived. */
bool vb_talk(const vb_config_t *cfg, uint32_t reply_rate, vb_result_t *out);

/* vb_connect, then vb_talk. */
bool vb_talk_once(const vb_config_t *cfg, vb_result_t *out);

#endif
