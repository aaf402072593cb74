/* Host audio HAL: the microphone is a WAV file, the speaker writes a WAV file, the mouth LED
 * is a log line per reply stream. 16-bit mono PCM WAV only. */
#include <stdio.h>
#include <string.h>

#include "voice_box.h"

static FILE *mic, *spk;
static uint32_t mic_rate, spk_rate, spk_samples;
static const char *spk_path;
static unsigned mouth_moves, mouth_max;

static uint32_t le32(const uint8_t *p) { return p[0] | p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

bool host_mic_open(const char *path)
{
    uint8_t head[12], chunk[8], fmt[16];
    mic = fopen(path, "rb");
    if (!mic || fread(head, 1, 12, mic) != 12 || memcmp(head, "RIFF", 4) || memcmp(head + 8, "WAVE", 4)) {
        hal_log("%s is not a WAV file", path);
        return false;
    }
    while (fread(chunk, 1, 8, mic) == 8) {
        uint32_t size = le32(chunk + 4);
        if (memcmp(chunk, "fmt ", 4) == 0 && size >= 16 && fread(fmt, 1, 16, mic) == 16) {
            if (fmt[0] != 1 || fmt[2] != 1 || fmt[14] != 16) { hal_log("need 16-bit mono PCM"); return false; }
            mic_rate = le32(fmt + 4);
            fseek(mic, (long)(size - 16 + (size & 1)), SEEK_CUR);
        } else if (memcmp(chunk, "data", 4) == 0) {
            return mic_rate != 0;
        } else {
            fseek(mic, (long)(size + (size & 1)), SEEK_CUR);
        }
    }
    return false;
}

void host_speaker_path(const char *path) { spk_path = path; }

uint32_t hal_mic_rate(void) { return mic_rate; }

size_t hal_mic_read(int16_t *pcm, size_t max_samples)
{
    uint8_t raw[4096];
    size_t n = max_samples * 2 < sizeof raw ? max_samples : sizeof raw / 2;
    n = fread(raw, 2, n, mic);
    for (size_t i = 0; i < n; i++) { pcm[i] = (int16_t)(uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8); }
    return n;
}

static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) { p[i] = (uint8_t)(v >> (8 * i)); } }

static void write_header(void)
{
    uint8_t h[44];
    memcpy(h, "RIFF", 4); put32(h + 4, 36 + spk_samples * 2); memcpy(h + 8, "WAVEfmt ", 8);
    put32(h + 16, 16); h[20] = 1; h[21] = 0; h[22] = 1; h[23] = 0;
    put32(h + 24, spk_rate); put32(h + 28, spk_rate * 2); h[32] = 2; h[33] = 0; h[34] = 16; h[35] = 0;
    memcpy(h + 36, "data", 4); put32(h + 40, spk_samples * 2);
    fseek(spk, 0, SEEK_SET);
    fwrite(h, 1, sizeof h, spk);
    fseek(spk, 0, SEEK_END);
}

bool hal_speaker_start(uint32_t sample_rate)
{
    spk_rate = sample_rate;
    spk = fopen(spk_path, "wb");
    if (spk) { write_header(); }
    return spk != NULL;
}

void hal_speaker_write(const int16_t *pcm, size_t samples)
{
    for (size_t i = 0; i < samples; i++) {
        uint8_t b[2] = {(uint8_t)((uint16_t)pcm[i] & 0xFFu), (uint8_t)((uint16_t)pcm[i] >> 8)};
        fwrite(b, 1, 2, spk);
    }
    spk_samples += (uint32_t)samples;
}

void hal_speaker_stop(bool flush)
{
    (void)flush; /* a file has no playback buffer to drop */
    if (spk) { write_header(); fclose(spk); spk = NULL; }
    if (mouth_moves) { hal_log("mouth: %u level changes, max %u", mouth_moves, mouth_max); }
}

void hal_mouth(uint8_t level)
{
    static uint8_t last;
    if (level != last) { mouth_moves++; }
    if (level > mouth_max) { mouth_max = level; }
    last = level;
}
