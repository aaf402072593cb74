/* Host build of the voice box: voice_box_host URL IN.wav OUT.wav [DEVICE_ID]
 * Streams IN.wav as one push-to-talk utterance and writes the spoken reply to OUT.wav. */
#include <stdio.h>

#include "voice_box.h"

bool host_mic_open(const char *path);
void host_speaker_path(const char *path);

int main(int argc, char **argv)
{
    vb_config_t cfg = {"voice-box-host", "", "voice_box example (host) 0.1", 16000u, 60000u};
    vb_result_t result;
    bool ok;
    if (argc < 4) {
        fprintf(stderr, "usage: %s ws://HOST:PORT/ws IN.wav OUT.wav [DEVICE_ID]\n", argv[0]);
        return 2;
    }
    if (argc > 4) { cfg.device_id = argv[4]; }
    host_speaker_path(argv[3]);
    if (!host_mic_open(argv[2]) || !hal_link_open(argv[1])) { return 1; }
    ok = vb_talk_once(&cfg, &result);
    hal_link_close();
    hal_log("result: %s, %u reply samples, %u errors", ok ? "done" : "failed",
            (unsigned)result.reply_samples, (unsigned)result.errors);
    return ok ? 0 : 1;
}
