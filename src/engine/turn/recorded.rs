//! A recorded answer in place of a generated one: the curator's voice, read from its blob in
//! pieces and published a little ahead of the speaker, captioned sentence by sentence with the
//! FAQ's text.

use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::Turn;
use super::audio_out::AudioOut;
use super::sentences::Sentences;
use crate::engine::knowledge::recordings::Recorded;
use crate::engine::live::Event;
use crate::engine::pcm::{OUTPUT_RATE, samples_from_le};
use crate::engine::providers::{Provider, Speech};

/// Speech read from the blob at a time (half a second).
const PIECE_BYTES: usize = OUTPUT_RATE as usize;
/// How far ahead of the speaker the speech is published at most: a watcher's queue holds a
/// few seconds, not a two-minute recording.
const LEAD: Duration = Duration::from_secs(3);

impl Turn {
    /// The recorded answer to `question` in the visit's language, if the curator recorded
    /// one (see `Engine::recorded_answer`).
    pub(super) async fn recorded(&self, question: &str) -> Option<Recorded> {
        if self.plan.character.recordings.is_empty() {
            return None;
        }
        let offline = self.plan.llm != Provider::Openai;
        let (engine, character) = (self.engine.clone(), self.plan.character.clone());
        let (question, language) = (question.to_string(), self.plan.language.clone());
        tokio::task::spawn_blocking(move || {
            engine.recorded_answer(&character, &question, &language, offline)
        })
        .await
        .ok()
        .flatten()
    }

    /// Plays a recorded answer; returns its text (what was said).
    pub(super) async fn play_recorded(&self, recorded: Recorded) -> String {
        let text = recorded.text.clone();
        self.publish(Event::Transcript {
            speaker: "assistant",
            text: text.clone(),
            is_final: false,
            turn_seq: self.seq,
        });
        if !self.live.audio_wanted() {
            self.said_delta(&text);
            return text;
        }
        let (tx, mut rx) = mpsc::channel::<Vec<i16>>(4);
        let file = self.engine.blobs().open_file(&recorded.blob);
        let total = recorded.blob.size / 2;
        std::thread::spawn(move || {
            use std::io::Read;
            let Ok(mut file) = file else { return };
            let mut piece = vec![0u8; PIECE_BYTES];
            loop {
                match file.read(&mut piece) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if tx.blocking_send(samples_from_le(&piece[..n & !1])).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        // Each sentence is captioned where its share of the text falls in the speech.
        let mut splitter = Sentences::default();
        let mut sentences = splitter.push(&text);
        sentences.extend(splitter.finish());
        let chars: usize = sentences
            .iter()
            .map(|s| s.chars().count())
            .sum::<usize>()
            .max(1);
        let mut marks = Vec::new();
        let mut before = 0;
        for s in &sentences {
            marks.push((s.clone(), total * before as u64 / chars as u64));
            before += s.chars().count();
        }
        let mut out = AudioOut::new(self);
        out.start();
        let started = Instant::now();
        let mut marks = marks.into_iter().peekable();
        while let Some(samples) = rx.recv().await {
            let at = out.position();
            let upto = at + samples.len() as u64;
            while let Some((s, mark)) = marks.next_if(|(_, mark)| *mark < upto) {
                out.caption(&s, mark.max(at));
                self.said_sentence(&s);
            }
            if !out.push(&samples) {
                break;
            }
            let ahead = Duration::from_secs_f64(upto as f64 / f64::from(OUTPUT_RATE));
            if let Some(wait) = ahead.checked_sub(started.elapsed() + LEAD) {
                tokio::time::sleep(wait).await;
            }
        }
        out.flush();
        out.end();
        text
    }
}
