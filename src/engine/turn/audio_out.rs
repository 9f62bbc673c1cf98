//! A turn's reply audio on its way to the watchers, in chunks small enough to start playing
//! early, and never published once the turn is no longer current.

use bytes::Bytes;

use super::Turn;
use crate::engine::live::{Event, Status};
use crate::engine::pcm;
use crate::engine::providers::Speech;

/// Reply audio is published in chunks of this many samples (100 ms at 24 kHz).
const AUDIO_CHUNK_SAMPLES: usize = 2_400;

/// The speaking status and `audio_start` with the first samples, then chunks of
/// `AUDIO_CHUNK_SAMPLES` as the samples are synthesised, and `audio_end` once after the last.
pub(super) struct AudioOut<'a> {
    turn: &'a Turn,
    started: bool,
    pending: Vec<i16>,
    /// Samples published so far: where the next sentence's speech starts.
    sent: u64,
    /// Whether the turn is still the current one (it may publish).
    current: bool,
}

impl<'a> AudioOut<'a> {
    pub(super) fn new(turn: &'a Turn) -> AudioOut<'a> {
        AudioOut {
            turn,
            started: false,
            pending: Vec::with_capacity(AUDIO_CHUNK_SAMPLES),
            sent: 0,
            current: true,
        }
    }

    /// Whether the turn may still publish.
    pub(super) fn current(&self) -> bool {
        self.current
    }

    /// The reply's audio starts (once): the turn is speaking.
    pub(super) fn start(&mut self) {
        if !self.started {
            self.started = true;
            self.turn.first_audio();
            self.turn.status(Status::Speaking);
            self.turn.publish(Event::AudioStart {
                turn_seq: self.turn.seq,
            });
        }
    }

    /// Samples published or waiting to be: where speech pushed next starts.
    pub(super) fn position(&self) -> u64 {
        self.sent + self.pending.len() as u64
    }

    /// Captions `text` as the speech from sample `at` on.
    pub(super) fn caption(&self, text: &str, at: u64) {
        if self.current && !text.trim().is_empty() {
            self.turn.publish(Event::Caption {
                text: text.trim().to_string(),
                at,
                turn_seq: self.turn.seq,
            });
        }
    }

    /// Publishes `samples` at once, in chunks (speech that arrives in pieces of its own).
    pub(super) fn send_all(&mut self, samples: &[i16]) {
        for chunk in samples.chunks(AUDIO_CHUNK_SAMPLES) {
            self.send(chunk);
        }
    }

    fn send(&mut self, chunk: &[i16]) {
        self.sent += chunk.len() as u64;
        self.current = self.current
            && self.turn.publish(Event::Audio {
                pcm: Bytes::from(pcm::samples_to_le(chunk)),
                turn_seq: self.turn.seq,
            });
    }

    /// The reply's audio is over.
    pub(super) fn end(&self) {
        if self.started {
            self.turn.publish(Event::AudioEnd {
                turn_seq: self.turn.seq,
            });
        }
    }
}

impl Speech for AudioOut<'_> {
    /// The speech of `text` starts: the turn is speaking, `text` counts as said, and its
    /// caption goes with its first sample.
    fn begin(&mut self, text: &str) {
        self.start();
        self.caption(text, self.position());
        self.turn.said_sentence(text);
    }

    /// Publishes every whole chunk; false once the turn may publish no more.
    fn push(&mut self, samples: &[i16]) -> bool {
        self.pending.extend_from_slice(samples);
        let whole = self.pending.len() / AUDIO_CHUNK_SAMPLES * AUDIO_CHUNK_SAMPLES;
        let pending = std::mem::take(&mut self.pending);
        for chunk in pending[..whole].chunks(AUDIO_CHUNK_SAMPLES) {
            self.send(chunk);
        }
        if self.current {
            self.pending.extend_from_slice(&pending[whole..]);
        }
        self.current
    }

    /// Publishes what is left (the end of a sentence).
    fn flush(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        if !pending.is_empty() {
            self.send(&pending);
        }
    }
}
