//! What a character's kept history says about its visitors: the questions the knowledge did not
//! answer, the visits and questions per day, the most asked questions.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::Engine;
use super::error::Result;
use super::history::HISTORY_MAX_PAGE;
use crate::engine::CharacterId;
use crate::store;
use crate::store::records::Message;
use crate::store::tables::MESSAGES;

/// A question the knowledge did not answer, with how often it was asked.
#[derive(Debug, Serialize, PartialEq, utoipa::ToSchema)]
pub struct Unmatched {
    /// Its latest wording.
    pub question: String,
    /// How many times it was asked (the same words, case and punctuation aside).
    pub count: usize,
    pub last_asked: String,
    /// The visit that asked it last.
    pub session_id: String,
    /// The visit's language (a tag; the museum's default when none was chosen or heard).
    pub language: String,
}

/// A question as it is compared with its repeats: lower case, words only.
pub(super) fn question_key(q: &str) -> String {
    q.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

impl Engine {
    /// The questions visitors asked that the knowledge did not answer, most recently asked
    /// first, repeats counted together (admin); staff tests are not visitors' questions. Walks
    /// the whole kept history, which `history_max_messages` bounds.
    pub fn unmatched_questions(
        &self,
        character_id: &CharacterId,
        limit: Option<usize>,
    ) -> Result<Vec<Unmatched>> {
        let limit = limit.unwrap_or(50).clamp(1, HISTORY_MAX_PAGE);
        self.character_record(character_id)?;
        let default = self.settings().default_language();
        let tx = self.store.read()?;
        let table = tx.open_table(MESSAGES)?;
        // Turns whose reply was unmatched, waiting for their question (said before the reply).
        let mut waiting: HashSet<(String, u64)> = HashSet::new();
        let mut out: Vec<Unmatched> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        // The visits that asked each (one visitor's words alone are not shown: docs/privacy.md).
        let mut askers: Vec<HashSet<String>> = Vec::new();
        for item in table
            .range((character_id.as_str(), 0)..=(character_id.as_str(), u64::MAX))?
            .rev()
        {
            let m = store::from_json::<Message>(item?.1.value())?;
            if m.staff {
                continue;
            }
            if m.role != "user" {
                if m.unmatched {
                    waiting.insert((m.session_id, m.turn_seq));
                }
                continue;
            }
            if !waiting.remove(&(m.session_id.clone(), m.turn_seq)) {
                continue;
            }
            let key = question_key(&m.content);
            match index.get(&key) {
                Some(&i) => {
                    out[i].count += 1;
                    askers[i].insert(m.session_id);
                }
                None => {
                    index.insert(key, out.len());
                    askers.push(HashSet::from([m.session_id.clone()]));
                    out.push(Unmatched {
                        question: m.content,
                        count: 1,
                        last_asked: m.timestamp,
                        session_id: m.session_id,
                        language: if m.language.is_empty() {
                            default.tag().to_string()
                        } else {
                            m.language
                        },
                    });
                }
            }
        }
        let min = self.config.history.questions_min_visits;
        let mut askers = askers.into_iter();
        out.retain(|_| askers.next().is_some_and(|a| a.len() >= min));
        out.truncate(limit);
        Ok(out)
    }
}

/// One day of a character's visits (UTC), staff tests left out.
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct Day {
    /// `YYYY-MM-DD`.
    pub day: String,
    /// Visits that began that day.
    pub visits: usize,
    /// Questions asked (said or typed by visitors).
    pub questions: usize,
    /// Questions the knowledge answered.
    pub answered: usize,
    /// Questions it did not answer.
    pub unanswered: usize,
    /// Questions the visitor had already asked in the same visit (the same words).
    pub asked_again: usize,
    /// Of the questions, those chosen on the kiosk's screen (touch or buttons).
    pub by_touch: usize,
    /// The questions per language of the visit (a tag -> how many).
    #[serde(default)]
    pub by_language: std::collections::BTreeMap<String, usize>,
}

/// A question visitors ask often. Named `MostAsked` in the OpenAPI document: the knowledge
/// ask's answer is `turn::Asked`, and one name for both gave one of them the other's schema.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
#[schema(as = MostAsked)]
pub struct Asked {
    /// Its latest wording.
    pub question: String,
    pub count: usize,
    /// How many of those times the knowledge answered it.
    pub answered: usize,
}

/// What a character's kept history says about its visitors.
#[derive(Debug, Serialize, PartialEq, utoipa::ToSchema)]
pub struct Statistics {
    /// The days with visits or questions, oldest first.
    pub days: Vec<Day>,
    /// The most asked questions (at most `MOST_ASKED`), most asked first.
    pub most_asked: Vec<Asked>,
}

/// How many of the most asked questions the statistics list.
const MOST_ASKED: usize = 10;

impl Engine {
    /// Visits and questions per day, how many were answered, asked again or not answered, and
    /// the most asked questions, over the whole kept history of `character_id` (admin); staff
    /// tests are not counted. Walks the history, which `history_max_messages` bounds.
    pub fn statistics(&self, character_id: &CharacterId) -> Result<Statistics> {
        self.character_record(character_id)?;
        let tx = self.store.read()?;
        let table = tx.open_table(MESSAGES)?;
        let mut days: Vec<Day> = Vec::new();
        let mut visits: HashSet<String> = HashSet::new();
        let mut asked_in_visit: HashSet<(String, String)> = HashSet::new();
        // Questions waiting for their reply: (visit, turn) -> (day index, question key).
        let mut waiting: HashMap<(String, u64), (usize, String)> = HashMap::new();
        let mut asked: HashMap<String, Asked> = HashMap::new();
        let mut askers: HashMap<String, HashSet<String>> = HashMap::new();
        for item in table.range((character_id.as_str(), 0)..=(character_id.as_str(), u64::MAX))? {
            let m = store::from_json::<Message>(item?.1.value())?;
            if m.staff {
                continue;
            }
            let day = m.timestamp.get(..10).unwrap_or("").to_string();
            if days.last().is_none_or(|d| d.day != day) {
                days.push(Day {
                    day,
                    ..Day::default()
                });
            }
            let at = days.len() - 1;
            if visits.insert(m.session_id.clone()) {
                days[at].visits += 1;
            }
            if m.role == "user" {
                let key = question_key(&m.content);
                days[at].questions += 1;
                days[at].by_touch += usize::from(m.touch);
                *days[at].by_language.entry(m.language.clone()).or_default() += 1;
                if !asked_in_visit.insert((m.session_id.clone(), key.clone())) {
                    days[at].asked_again += 1;
                }
                let entry = asked.entry(key.clone()).or_insert_with(|| Asked {
                    question: String::new(),
                    count: 0,
                    answered: 0,
                });
                entry.question = m.content;
                entry.count += 1;
                askers
                    .entry(key.clone())
                    .or_default()
                    .insert(m.session_id.clone());
                waiting.insert((m.session_id, m.turn_seq), (at, key));
            } else if let Some((at, key)) = waiting.remove(&(m.session_id, m.turn_seq)) {
                if m.unmatched {
                    days[at].unanswered += 1;
                } else {
                    days[at].answered += 1;
                    if let Some(a) = asked.get_mut(&key) {
                        a.answered += 1;
                    }
                }
            }
        }
        super::privacy::with_kept_counts(&tx, character_id, &mut days)?;
        // A question of a visit in the default language is stored without a language.
        let default = self.settings().default_language();
        for d in &mut days {
            if let Some(n) = d.by_language.remove("") {
                *d.by_language.entry(default.tag().to_string()).or_default() += n;
            }
        }
        // One visitor's words alone are not shown (docs/privacy.md).
        let min = self.config.history.questions_min_visits;
        asked.retain(|key, _| askers.get(key).is_some_and(|a| a.len() >= min));
        let mut most_asked: Vec<Asked> = asked.into_values().collect();
        most_asked.sort_by(|a, b| b.count.cmp(&a.count).then(a.question.cmp(&b.question)));
        most_asked.truncate(MOST_ASKED);
        Ok(Statistics { days, most_asked })
    }
}
