#!/usr/bin/env python3
"""Writes the audio test inputs of tests/data/mtmd/ (16-bit PCM WAV, 16 kHz mono): audio-a.wav
(1 s of a 440 Hz tone), audio-b.wav (1.5 s of a rising sweep over a 3 kHz tone) and
audio-silent.wav (1 s of zeros) and audio-long.wav (31 s, two 30 s windows: a 300 Hz tone, then
1 s of a 2 kHz tone). Deterministic; run from tests/data/mtmd/."""
import math
import struct
import wave

RATE = 16000


def write(name, samples):
    with wave.open(name, "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(RATE)
        f.writeframes(b"".join(
            struct.pack("<h", max(-32767, min(32767, int(round(s * 32767)))))
            for s in samples))


write("audio-a.wav", [0.5 * math.sin(2 * math.pi * 440 * i / RATE) for i in range(RATE)])
write("audio-b.wav", [
    0.4 * math.sin(2 * math.pi * (200 + 1800 * i / (3 * RATE)) * i / RATE) +
    0.1 * math.sin(2 * math.pi * 3000 * i / RATE) for i in range(int(1.5 * RATE))
])
write("audio-silent.wav", [0.0] * RATE)
write("audio-long.wav", [
    (0.3 * math.sin(2 * math.pi * 300 * i / RATE)) if i < 30 * RATE else
    (0.5 * math.sin(2 * math.pi * 2000 * i / RATE)) for i in range(31 * RATE)
])
