"""The ASR evaluation set and its measurement (`gateway bench-asr`).

Built here, deterministically, never committed as audio: held-out sentences (corpus.py, none of
them used by the tests or `gateway bench`) spoken by the gateway's piper voice and Debian
espeak-ng voices at several speeds (render.py), mixed with white, pink and babble noise at
20 / 10 / 5 dB SNR (noise.py), scored by word error rate (wer.py), whole files and through the
gateway's own VAD and endpointing (measure.py).
"""
