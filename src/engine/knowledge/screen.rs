//! Questions on the screen: FAQ questions of a character's knowledge that staff put on the
//! kiosk's screen, in their order, so that a visitor who cannot or will not speak can ask by
//! touch or buttons (EN 301 549 4.2.9). A chosen question is asked exactly as a spoken one
//! (stored, answered from the knowledge, counted), marked as asked by touch.

use std::sync::Arc;

use serde::Serialize;

use crate::engine::CharacterId;
use crate::engine::Engine;
use crate::engine::error::{Result, bad, not_found};
use crate::engine::history::Mark;
use crate::engine::language::Language;
use crate::engine::live::LiveSession;
use crate::engine::new_id;
use crate::engine::providers::local::answer::{Side, faq_line};
use crate::engine::turn::TurnInput;
use crate::store;
use crate::store::records::ScreenQuestion;
use crate::store::tables::CHARACTERS;

/// Questions on one character's screen at most: more would be pages a visitor leafs through
/// without end.
pub const SCREEN_MAX_QUESTIONS: usize = 30;
/// Characters of a question on the screen at most: two lines of a caption at a size read from
/// 1.5 m.
pub const SCREEN_MAX_CHARS: usize = 120;

/// What the console shows to choose from: the questions on the screen in order, and the FAQ
/// questions of the knowledge (in the order the knowledge gives them).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ScreenChoice {
    pub on_screen: Vec<ScreenQuestion>,
    /// Every FAQ question (`Q:` line followed by its `A:` line) of the indexed knowledge, those
    /// on the screen included; a question on the screen whose file went is not among them.
    pub faq: Vec<String>,
}

impl Engine {
    /// The questions on a character's screen, in the order staff gave them (what the kiosk
    /// draws; each chosen by its `id` with [`Engine::ask_on_screen`]).
    pub fn on_screen_questions(&self, character_id: &CharacterId) -> Result<Vec<ScreenQuestion>> {
        Ok(self.character_record(character_id)?.on_screen)
    }

    /// The FAQ questions of a character's indexed knowledge, each once, in order.
    pub fn faq_questions(&self, character_id: &CharacterId) -> Result<Vec<String>> {
        Ok(self
            .faq_questions_by_language(character_id)?
            .into_iter()
            .map(|(q, _)| q)
            .collect())
    }

    /// The FAQ questions with the language of the file each is in.
    pub(super) fn faq_questions_by_language(
        &self,
        character_id: &CharacterId,
    ) -> Result<Vec<(String, Language)>> {
        Ok(self
            .faq_entries(character_id)?
            .into_iter()
            .map(|(q, _, l)| (q, l))
            .collect())
    }

    /// The FAQ's questions with their answers.
    pub(super) fn faq_pairs(&self, character_id: &CharacterId) -> Result<Vec<(String, String)>> {
        Ok(self
            .faq_entries(character_id)?
            .into_iter()
            .map(|(q, a, _)| (q, a))
            .collect())
    }

    /// Every FAQ entry of the indexed knowledge, each question once, in order: the question,
    /// its answer and the language of its file.
    fn faq_entries(&self, character_id: &CharacterId) -> Result<Vec<(String, String, Language)>> {
        let mut out: Vec<(String, String, Language)> = Vec::new();
        for (language, passages) in self.knowledge_by_language(character_id)? {
            for passage in passages {
                // A question counts only with its answer on the next line of the same passage:
                // a question a passage boundary cut short is never offered.
                let lines: Vec<&str> = passage
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .collect();
                for pair in lines.windows(2) {
                    if let (Some((Side::Question, q)), Some((Side::Answer, a))) =
                        (faq_line(pair[0]), faq_line(pair[1]))
                        && !q.is_empty()
                        && !out.iter().any(|(o, _, _)| o == q)
                    {
                        out.push((q.to_string(), a.to_string(), language.clone()));
                    }
                }
            }
        }
        Ok(out)
    }

    /// The questions on the screen and the FAQ questions to choose them from (admin).
    pub fn screen_choice(&self, character_id: &CharacterId) -> Result<ScreenChoice> {
        Ok(ScreenChoice {
            on_screen: self.on_screen_questions(character_id)?,
            faq: self.faq_questions(character_id)?,
        })
    }

    /// Puts these questions on the character's screen, in this order (admin). Each must be an
    /// FAQ question of its knowledge or already on the screen (so staff can keep one whose file
    /// is being replaced); a question that stays keeps its id.
    pub fn set_on_screen(&self, character_id: &str, texts: &[String]) -> Result<ScreenChoice> {
        if texts.len() > SCREEN_MAX_QUESTIONS {
            return Err(bad(format!(
                "at most {SCREEN_MAX_QUESTIONS} questions fit on the screen"
            )));
        }
        let character_id = &CharacterId::parse(character_id)?;
        let faq = self.faq_questions_by_language(character_id)?;
        let tx = self.store.write()?;
        {
            let mut table = tx.open_table(CHARACTERS)?;
            let mut c: crate::store::records::Character =
                store::get(&table, character_id)?.ok_or_else(|| not_found("no such character"))?;
            let mut next: Vec<ScreenQuestion> = Vec::with_capacity(texts.len());
            for text in texts {
                let text = text.trim();
                if text.chars().count() > SCREEN_MAX_CHARS {
                    return Err(bad(format!(
                        "a question on the screen is at most {SCREEN_MAX_CHARS} characters: {text:?}"
                    )));
                }
                if next.iter().any(|q| q.text == text) {
                    return Err(bad(format!("{text:?} is on the screen twice")));
                }
                let kept = c.on_screen.iter().find(|q| q.text == text);
                let language = match faq.iter().find(|(f, _)| f == text) {
                    Some((_, l)) => l.tag().to_string(),
                    None => match kept {
                        Some(q) => q.language.clone(),
                        None => {
                            return Err(bad(format!(
                                "{text:?} is not an FAQ question of this character's knowledge"
                            )));
                        }
                    },
                };
                next.push(ScreenQuestion {
                    id: kept.map_or_else(new_id, |q| q.id.clone()),
                    text: text.to_string(),
                    language,
                });
            }
            c.on_screen = next;
            c.updated_at = store::now();
            table.insert(character_id.as_str(), store::to_json(&c).as_slice())?;
        }
        tx.commit()?;
        self.characters.invalidate();
        Ok(ScreenChoice {
            on_screen: self.on_screen_questions(character_id)?,
            faq: faq.into_iter().map(|(q, _)| q).collect(),
        })
    }

    /// Asks the question on the screen of `live`'s character whose id is `question_id`, as a
    /// new turn: stored in the history marked as asked by touch, then answered as a spoken
    /// question would be (cancelling the turn running). Returns the turn's number.
    pub fn ask_on_screen(
        self: &Arc<Self>,
        live: &Arc<LiveSession>,
        question_id: &str,
    ) -> Result<u64> {
        let text = self
            .on_screen_questions(&live.character_id)?
            .into_iter()
            .find(|q| q.id == question_id)
            .ok_or_else(|| not_found("no such question on the screen"))?
            .text;
        let (seq, cancel) = live.next_turn();
        // As a typed message: a full data partition does not silence the kiosk; the turn
        // tries to store the question again and reports once that it could not.
        let stored = match self.record_message(&live.id, "user", &text, seq, Mark::Touch) {
            Ok(()) => true,
            Err(crate::engine::error::Error::InsufficientStorage(_)) => false,
            Err(e) => {
                cancel.cancel();
                return Err(e);
            }
        };
        self.spawn_turn(live.clone(), seq, cancel, TurnInput::Text { text, stored });
        Ok(seq)
    }
}

/// Whether `said` is the question `written`, case, spacing and punctuation aside ("where is
/// the cafe" is "Where is the cafe?", "donde esta la cafeteria" is not "¿Dónde está la
/// cafetería?": accents count).
pub(super) fn question_matches(written: &str, said: &str) -> bool {
    let words = |t: &str| -> Vec<String> {
        t.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    let w = words(written);
    !w.is_empty() && w == words(said)
}
