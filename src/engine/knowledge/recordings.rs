//! Recorded answers: a curator records the answer to an FAQ question in a human voice, and the
//! kiosk plays it instead of synthesising the answer, captioned with the FAQ's text. One
//! recording per question (a question is in one language: the language of its file); decoded
//! and brought to the synthesised speech's loudness once, on upload, so that playing it costs
//! a file read (`media::sound`).

use serde::Serialize;

use super::screen::question_matches;
use crate::engine::CharacterId;
use crate::engine::error::{Result, bad, not_found};
use crate::engine::language::Language;
use crate::engine::media::sound;
use crate::engine::{Engine, new_id};
use crate::store::records::{Character, Recording};
use crate::store::tables::CHARACTERS;
use crate::store::{self, BlobRef, blobs};

/// The longest recorded answer: a visitor listens to two minutes, not more.
pub const MAX_RECORDING_SECS: u32 = 120;
/// Recorded answers per character at most (each a question of its FAQ).
pub const MAX_RECORDINGS: usize = 200;

/// A recorded answer as the console shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RecordingView {
    pub id: String,
    /// The FAQ question it answers.
    pub question: String,
    pub language: String,
    pub seconds: f64,
    /// The gain the upload was given to sound as loud as the synthesised answers (dB).
    pub gain_db: f64,
    pub orig_name: String,
    pub added_at: String,
    /// Where the console plays it (a WAV).
    pub url: String,
}

impl RecordingView {
    fn of(character_id: &CharacterId, r: &Recording) -> RecordingView {
        RecordingView {
            id: r.id.clone(),
            question: r.question.clone(),
            language: r.language.clone(),
            seconds: r.samples as f64 / f64::from(crate::engine::pcm::OUTPUT_RATE),
            gain_db: (r.gain_db * 10.0).round() / 10.0,
            orig_name: r.orig_name.clone(),
            added_at: r.added_at.clone(),
            url: format!("/api/v1/characters/{character_id}/recordings/{}", r.id),
        }
    }
}

/// A recorded answer to play: its speech (mono 24 kHz) and the text it is captioned with.
pub struct Recorded {
    pub text: String,
    pub blob: BlobRef,
}

impl Engine {
    /// A character's recorded answers, in the order of its FAQ's questions.
    pub fn recordings(&self, character_id: &CharacterId) -> Result<Vec<RecordingView>> {
        let c = self.character_record(character_id)?;
        Ok(c.recordings
            .iter()
            .map(|r| RecordingView::of(character_id, r))
            .collect())
    }

    /// Stores `bytes` (WAV, FLAC, Ogg Vorbis or MP3) as the recorded answer to the FAQ
    /// question `question`, replacing the one it had; decoded and normalised first, so that a
    /// file the kiosk cannot play is refused and nothing is stored.
    pub fn add_recording(
        &self,
        character_id: &CharacterId,
        question: &str,
        orig_name: &str,
        bytes: &[u8],
    ) -> Result<RecordingView> {
        let question = question.trim();
        let faq = self.faq_questions_by_language(character_id)?;
        let (question, language) =
            faq.into_iter()
                .find(|(q, _)| q == question)
                .ok_or_else(|| {
                    bad(format!(
                        "{question:?} is not an FAQ question of this character's knowledge"
                    ))
                })?;
        let mut speech = sound::decode(bytes, MAX_RECORDING_SECS)
            .map_err(|e| bad(format!("{orig_name}: {e}")))?;
        let gain_db = sound::normalise(&mut speech);
        self.store.blobs().check_space()?;
        let blob = self.store.blobs().put(
            &crate::engine::pcm::samples_to_le(&speech),
            "audio/L16;rate=24000",
        )?;
        let recording = Recording {
            id: new_id(),
            question,
            language: language.tag().to_string(),
            blob: blob.clone(),
            samples: speech.len() as u64,
            gain_db,
            orig_name: orig_name.chars().take(200).collect(),
            added_at: store::now(),
        };
        let stored = self.replace_recording(character_id, &recording);
        if stored.is_err() {
            self.store.blobs().remove_all(&[blob]);
        }
        let replaced = stored?;
        self.store.blobs().remove_all(&replaced);
        Ok(RecordingView::of(character_id, &recording))
    }

    /// Puts `recording` in the character's record in place of one for the same question;
    /// returns the blobs no longer used.
    fn replace_recording(
        &self,
        character_id: &CharacterId,
        recording: &Recording,
    ) -> Result<Vec<BlobRef>> {
        let tx = self.store.write()?;
        let mut dropped = Vec::new();
        {
            let mut table = tx.open_table(CHARACTERS)?;
            let mut c: Character =
                store::get(&table, character_id)?.ok_or_else(|| not_found("no such character"))?;
            c.recordings.retain(|r| {
                let same = r.question == recording.question;
                if same {
                    dropped.push(r.blob.clone());
                }
                !same
            });
            if c.recordings.len() >= MAX_RECORDINGS {
                return Err(bad(format!(
                    "at most {MAX_RECORDINGS} recorded answers per character"
                )));
            }
            c.recordings.push(recording.clone());
            c.updated_at = store::now();
            table.insert(character_id.as_str(), store::to_json(&c).as_slice())?;
        }
        blobs::register(&tx, &recording.blob)?;
        for b in &dropped {
            blobs::unregister(&tx, b)?;
        }
        tx.commit()?;
        self.characters.invalidate();
        Ok(dropped)
    }

    /// Removes a recorded answer: the question is answered by synthesis again.
    pub fn delete_recording(&self, character_id: &CharacterId, id: &str) -> Result<()> {
        let tx = self.store.write()?;
        let dropped;
        {
            let mut table = tx.open_table(CHARACTERS)?;
            let mut c: Character =
                store::get(&table, character_id)?.ok_or_else(|| not_found("no such character"))?;
            let at = c
                .recordings
                .iter()
                .position(|r| r.id == id)
                .ok_or_else(|| not_found("no such recording"))?;
            dropped = c.recordings.remove(at).blob;
            c.updated_at = store::now();
            table.insert(character_id.as_str(), store::to_json(&c).as_slice())?;
        }
        blobs::unregister(&tx, &dropped)?;
        tx.commit()?;
        self.characters.invalidate();
        self.store.blobs().remove_all(&[dropped]);
        Ok(())
    }

    /// A recorded answer as a WAV file, for the console to play.
    pub fn recording_wav(&self, character_id: &CharacterId, id: &str) -> Result<Vec<u8>> {
        let c = self.character_record(character_id)?;
        let r = c
            .recordings
            .iter()
            .find(|r| r.id == id)
            .ok_or_else(|| not_found("no such recording"))?;
        let pcm = self.store.blobs().read(&r.blob)?;
        Ok(crate::engine::pcm::wav_bytes(
            &crate::engine::pcm::samples_from_le(&pcm),
            crate::engine::pcm::OUTPUT_RATE,
        ))
    }

    /// The recorded answer to `question` in `language`, if the curator recorded one: the
    /// question is an FAQ question with a recording (asked on the screen, or said as written),
    /// or the offline engine answers it with such a question's answer. The text is the FAQ's
    /// answer, for the captions.
    pub(crate) fn recorded_answer(
        &self,
        character: &Character,
        question: &str,
        language: &Language,
        offline: bool,
    ) -> Option<Recorded> {
        if character.recordings.is_empty() {
            return None;
        }
        let faq = self
            .faq_pairs(&CharacterId::of_record(&character.id))
            .ok()?;
        let in_language =
            |r: &&Recording| Language::parse(&r.language).is_some_and(|l| l.same_as(language));
        let answer_of = |q: &str| faq.iter().find(|(fq, _)| fq == q).map(|(_, a)| a.clone());
        let by_question = character
            .recordings
            .iter()
            .filter(in_language)
            .find(|r| question_matches(&r.question, question));
        let found = match by_question {
            Some(r) => Some(r),
            None if offline => {
                let said = self.offline_reply_in(
                    None,
                    &CharacterId::of_record(&character.id),
                    (question, &[]),
                    language,
                )?;
                character
                    .recordings
                    .iter()
                    .filter(in_language)
                    .find(|r| answer_of(&r.question).is_some_and(|a| a == said.trim()))
            }
            None => None,
        }?;
        Some(Recorded {
            text: answer_of(&found.question)?,
            blob: found.blob.clone(),
        })
    }
}
