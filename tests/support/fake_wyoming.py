"""A fake Wyoming speech server for Docent's tests, built on the `wyoming` package's own server
classes (the protocol's reference implementation). Recognition answers with how much audio it
heard; synthesis answers with a constant tone at 22050 Hz (piper's rate) whose length follows
the text. `--mode` makes it misbehave instead: `garbage` (a line that is not an event),
`long-header` (a header line without end), `huge-payload` (a payload of a terabyte announced),
`hang` (never answers).

Prints `PORT <n>` once listening on 127.0.0.1, then one JSON line per request it answered.
Exits when its standard input closes (the test that started it is gone)."""

import argparse
import asyncio
import json
import os
import struct
import sys
import threading
from functools import partial

from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event
from wyoming.info import (
    AsrModel,
    AsrProgram,
    Attribution,
    Describe,
    Info,
    TtsProgram,
    TtsVoice,
)
from wyoming.server import AsyncEventHandler, AsyncServer
from wyoming.tts import Synthesize

RATE = 22050
TONE = 1000
SAMPLES_PER_CHAR = 100
CHUNK = 1024

ATTRIBUTION = Attribution(name="Docent tests", url="")
INFO = Info(
    asr=[
        AsrProgram(
            name="fake-whisper",
            attribution=ATTRIBUTION,
            installed=True,
            description="counts samples",
            version="1",
            models=[
                AsrModel(
                    name="tiny",
                    attribution=ATTRIBUTION,
                    installed=True,
                    description=None,
                    version="1",
                    languages=["en"],
                )
            ],
        )
    ],
    tts=[
        TtsProgram(
            name="fake-piper",
            attribution=ATTRIBUTION,
            installed=True,
            description="a constant tone",
            version="1",
            voices=[
                TtsVoice(
                    name="en_US-fake-medium",
                    attribution=ATTRIBUTION,
                    installed=True,
                    description=None,
                    version="1",
                    languages=["en_US"],
                )
            ],
        )
    ],
)


def log(**fields):
    print(json.dumps(fields), flush=True)


class Handler(AsyncEventHandler):
    def __init__(self, mode, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.mode = mode
        self.request = None
        self.rate = None
        self.samples = 0

    async def raw(self, data):
        self.writer.write(data)
        await self.writer.drain()

    async def handle_event(self, event: Event) -> bool:
        if self.mode == "hang":
            return True
        if self.mode == "garbage":
            await self.raw(b"this is not wyoming\n")
            return True
        if self.mode == "long-header":
            await self.raw(b'{"type": "info", "data": {"pad": "' + b"x" * 100_000)
            return True
        if self.mode == "huge-payload":
            await self.raw(b'{"type": "info", "payload_length": 1099511627776}\n')
            return True
        if Describe.is_type(event.type):
            await self.write_event(INFO.event())
        elif Transcribe.is_type(event.type):
            self.request = Transcribe.from_event(event)
            self.samples = 0
        elif AudioStart.is_type(event.type):
            self.rate = AudioStart.from_event(event).rate
        elif AudioChunk.is_type(event.type):
            self.samples += AudioChunk.from_event(event).samples
        elif AudioStop.is_type(event.type):
            language = self.request.language if self.request else None
            log(event="transcribe", rate=self.rate, samples=self.samples, language=language)
            await self.write_event(Transcript(text=f"I said {self.samples} samples").event())
        elif Synthesize.is_type(event.type):
            request = Synthesize.from_event(event)
            voice = request.voice.name if request.voice else None
            samples = len(request.text) * SAMPLES_PER_CHAR
            log(event="synthesize", text=request.text, voice=voice, samples=samples)
            await self.write_event(AudioStart(rate=RATE, width=2, channels=1).event())
            left = samples
            while left > 0:
                n = min(CHUNK, left)
                left -= n
                pcm = struct.pack("<h", TONE) * n
                await self.write_event(
                    AudioChunk(rate=RATE, width=2, channels=1, audio=pcm).event()
                )
            await self.write_event(AudioStop().event())
        return True


def exit_when_stdin_closes():
    sys.stdin.buffer.read()
    os._exit(0)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="normal")
    args = parser.parse_args()
    threading.Thread(target=exit_when_stdin_closes, daemon=True).start()
    # A client that hangs up on a misbehaving mode is expected: no traceback for it.
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: None)
    server = AsyncServer.from_uri("tcp://127.0.0.1:0")
    await server.start(partial(Handler, args.mode))
    port = server._server.sockets[0].getsockname()[1]
    print(f"PORT {port}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
