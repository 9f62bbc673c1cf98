//! What a turn asks of the offline engine: the recogniser's model of a character, the two
//! hearings of a question weighed, the answer from the knowledge, and the clarifying question
//! ("Do you mean the opening hours, or the tickets?") that waits for the visitor's next turn.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::super::{Heard, ProviderError};
use super::{self as local, answer};
use crate::engine::CharacterId;
use crate::engine::Engine;
use crate::engine::error::{Error, Result};
use crate::engine::language::Language;

/// The least fit (see `local::Closed`) at which the closed pass's question is believed when
/// the open pass's words answer nothing. Measured on the understanding benchmark (see
/// docs/understanding.md).
pub const CLOSED_FIT: f64 = 0.5;

/// How alike (see `local::Model::sounding_like`) a dictionary word must sound to a word heard
/// to count as what may have been said.
pub const SOUNDS_ALIKE: f64 = 0.6;

/// How the offline recogniser's two hearings of one question were weighed (`offline_weigh`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Weighing {
    /// The knowledge answers the open pass's words.
    pub open_answers: bool,
    /// The knowledge answers the closed pass's question.
    pub closed_answers: bool,
    /// The closed pass's fit per frame of its words (`local::Closed::fit` counts the silence).
    pub speech_fit: f64,
    /// How far the open pass's words point at the closed question's topic.
    pub support: Option<answer::Support>,
    /// As `support`, with words that sound like those heard (`SOUNDS_ALIKE`).
    pub sound_support: Option<answer::Support>,
    /// The closed pass's question is what was heard.
    pub believed: bool,
}

/// Words heard, as text.
fn words_of(heard: &[(String, f64)]) -> String {
    heard
        .iter()
        .map(|(w, _)| w.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The clarifying questions the offline engine asked ("Do you mean the opening hours, or the
/// tickets?"), per live session, awaiting the visitor's next turn. Bounded: one per session in
/// use, taken by that session's next turn, and forgotten after `CLARIFY_TTL`.
#[derive(Default)]
pub struct Clarifying(Mutex<HashMap<String, Asked>>);

/// How long a clarifying question waits for its reply (a visitor who walked away).
const CLARIFY_TTL: Duration = Duration::from_secs(120);

/// A clarifying question asked.
struct Asked {
    character_id: String,
    epoch: u64,
    /// The topics offered: two, the likelier first, or one to confirm.
    labels: (String, Option<String>),
    /// The question that was not clear.
    question: String,
    at: Instant,
}

impl Engine {
    /// The offline recogniser's model for a character: its knowledge, its own texts and the
    /// site document; rebuilt when knowledge changes. Blocking (seconds on a small board): call
    /// it on the blocking pool. One build at a time: a turn asking while the model is being
    /// built (see `Engine::listen`) waits for that build instead of starting another.
    pub fn recogniser_model(
        &self,
        character_id: &CharacterId,
    ) -> Result<Arc<local::Model>, ProviderError> {
        let epoch = self.knowledge_epoch();
        self.recogniser_models
            .get_or_build(character_id, epoch, || {
                let fail =
                    |e: Error| ProviderError::Failed(format!("cannot read the knowledge: {e}"));
                let mut texts = self.knowledge_texts(character_id).map_err(fail)?;
                let site = self.site_document().map_err(fail)?;
                texts.push(String::from_utf8_lossy(&site).into_owned());
                local::model(&self.config.data_dir.join("asr"), &texts)
            })
    }

    /// The offline engine's answer to `question` from the character's knowledge (to "who are
    /// you" from its name and description), or `None` when nothing there answers it clearly.
    /// `sure`: how sure the recogniser was of each word (empty for typed text). Reads the
    /// store on a change of knowledge: call it on the blocking pool.
    pub fn offline_answer(
        &self,
        character_id: &CharacterId,
        question: &str,
        sure: &[(String, f64)],
    ) -> Option<String> {
        if answer::asks_who(question) {
            let c = self.character_record(character_id).ok()?;
            return Some(answer::introduction(&c.name, &c.description));
        }
        self.offline_topics(character_id)
            .ok()?
            .answer(question, sure)
    }

    /// What the offline recogniser heard, from its two passes over the same speech (`open`
    /// with the language model, `closed` with the grammar of the knowledge's questions, see
    /// `local::Closed`): the open pass, unless the closed pass's question is believed (see
    /// `offline_weigh`). Reads the store on a change of knowledge: call it on the blocking pool.
    pub fn offline_heard(
        &self,
        character_id: &CharacterId,
        open: Vec<(String, f64)>,
        closed: Option<local::Closed>,
    ) -> Heard {
        let weighed = self.offline_weigh(character_id, &open, closed.as_ref());
        tracing::debug!(?open, ?closed, ?weighed, "offline recogniser's two passes");
        match closed {
            Some(closed) if weighed.believed => Heard {
                text: closed.words.join(" "),
                sure: Vec::new(),
                language: None,
            },
            _ => Heard {
                text: words_of(&open),
                sure: open,
                language: None,
            },
        }
    }

    /// How the two passes over one question weigh (see `Weighing`): the closed pass's
    /// question is believed only when the open pass's words answer nothing, the question
    /// answers, it fits the speech (`CLOSED_FIT`), and, when the open pass's words would ask
    /// about one topic ("Do you mean toilets?"), it is about that topic: the open pass heard a
    /// word of it, and the grammar's nearest sentence fitting loosely is no reason to answer
    /// about something else ("where are the coin" for "where are the toilets").
    pub fn offline_weigh(
        &self,
        character_id: &CharacterId,
        open: &[(String, f64)],
        closed: Option<&local::Closed>,
    ) -> Weighing {
        let open_text = words_of(open);
        let open_answers = self
            .offline_answer(character_id, &open_text, open)
            .is_some();
        let mut w = Weighing {
            open_answers,
            ..Weighing::default()
        };
        let Some(closed) = closed else {
            return w;
        };
        let said = closed.words.join(" ");
        w.closed_answers = self.offline_answer(character_id, &said, &[]).is_some();
        w.speech_fit = closed.fit * closed.frames as f64 / closed.speech_frames.max(1) as f64;
        let model = self.recogniser_model(character_id).ok();
        let mut another_topic = false;
        if let Ok(topics) = self.offline_topics(character_id) {
            w.support = topics.support(&said, &open_text, open);
            if let Some(model) = model {
                let like = model.sounding_like(open, SOUNDS_ALIKE);
                w.sound_support = topics.support(&said, &words_of(&like), &like);
            }
            if let answer::Understood::Confirm(label) = topics.understand(&open_text, open) {
                another_topic = !topics.is_about(&said, &label);
            }
        }
        w.believed =
            !open_answers && w.closed_answers && closed.fit >= CLOSED_FIT && !another_topic;
        w
    }

    /// The answer's topics of a character's knowledge in the museum's default language, built
    /// once per change of knowledge.
    fn offline_topics(&self, character_id: &CharacterId) -> Result<Arc<answer::Topics>> {
        self.offline_topics_in(character_id, &self.settings().default_language())
    }

    /// The answer's topics of the knowledge in `language` (all of it when none is in
    /// `language`: a museum with one language, or a translation not written yet).
    fn offline_topics_in(
        &self,
        character_id: &CharacterId,
        language: &Language,
    ) -> Result<Arc<answer::Topics>> {
        let settings = self.settings();
        // The museum's languages decide which file is in which (`knowledge::source_language`).
        let key = format!(
            "{character_id} {language} {:?}",
            settings
                .languages()
                .iter()
                .map(Language::tag)
                .collect::<Vec<_>>()
        );
        self.answer_topics
            .get_or_build(&key, self.knowledge_epoch(), || {
                let all = self.knowledge_by_language(character_id)?;
                let mut sources: Vec<Vec<String>> = all
                    .iter()
                    .filter(|(l, _)| l.same_as(language))
                    .map(|(_, p)| p.clone())
                    .collect();
                if sources.is_empty() {
                    sources = all.into_iter().map(|(_, p)| p).collect();
                }
                Ok(answer::Topics::new(&sources))
            })
    }

    /// The offline engine's reply in `language`: from the knowledge in that language, with no
    /// clarifying question (the engine asks those in English only, see `offline_reply`). The
    /// default language's reply is `offline_reply`'s.
    pub fn offline_reply_in(
        &self,
        session_id: Option<&str>,
        character_id: &CharacterId,
        (question, sure): (&str, &[(String, f64)]),
        language: &Language,
    ) -> Option<String> {
        let default = self.settings().default_language();
        if language.same_as(&default) && default.same_as(&Language::english()) {
            return match session_id {
                Some(session) => self.offline_reply(session, character_id, question, sure),
                None => self.offline_answer(character_id, question, sure),
            };
        }
        self.offline_topics_in(character_id, language)
            .ok()?
            .answer(question, sure)
    }

    /// The offline engine's reply in a live session: as `offline_answer`, but when two topics
    /// are too close to choose between, it asks which one is meant ("Do you mean ...?"), and
    /// when one unsure word alone chose a topic, whether that one is meant ("Do you mean
    /// toilets?"); the session's next question answers that ("yes", "no", or a topic's word):
    /// the topic chosen answers the question first asked. Never two clarifying questions in a
    /// row: a reply that chooses none is taken as a new question, answered or not. Call it on
    /// the blocking pool.
    pub fn offline_reply(
        &self,
        session_id: &str,
        character_id: &CharacterId,
        question: &str,
        sure: &[(String, f64)],
    ) -> Option<String> {
        let epoch = self.knowledge_epoch();
        let asked = {
            let mut pending = self.clarifying.0.lock().expect("clarifying lock");
            pending.retain(|_, a| a.at.elapsed() < CLARIFY_TTL);
            pending.remove(session_id)
        }
        .filter(|a| a.character_id == character_id.as_str() && a.epoch == epoch);
        if answer::asks_who(question) {
            return self.offline_answer(character_id, question, sure);
        }
        let topics = self.offline_topics(character_id).ok()?;
        if let Some(asked) = asked {
            let (a, b) = (asked.labels.0.as_str(), asked.labels.1.as_deref());
            return match answer::choose(question, (a, b)) {
                Some(label) => topics.answer_about(label, &asked.question),
                None => topics.answer(question, sure),
            };
        }
        let (text, labels) = match topics.understand(question, sure) {
            answer::Understood::Answer(a) => return Some(a),
            answer::Understood::Nothing => return None,
            answer::Understood::Either(a, b) => (answer::either_question(&a, &b), (a, Some(b))),
            answer::Understood::Confirm(a) => (answer::confirm_question(&a), (a, None)),
        };
        self.clarifying.0.lock().expect("clarifying lock").insert(
            session_id.to_string(),
            Asked {
                character_id: character_id.to_string(),
                epoch,
                labels,
                question: question.to_string(),
                at: Instant::now(),
            },
        );
        Some(text)
    }
}
