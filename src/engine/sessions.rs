//! Conversation sessions and the history they write.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use redb::{ReadableTable, ReadableTableMetadata, WriteTransaction};
use serde::{Deserialize, Serialize};

use super::access::{self, Owner, Use};
use super::error::{Error, Result, bad, not_found};
use super::turn::TurnInput;
use super::{Engine, is_id, new_id};
use crate::store::records::{Character, Message, Session};
use crate::store::tables::{CHARACTERS, MESSAGES, SESSIONS};
use crate::store::{self};

/// Longest user message accepted, in characters.
pub const MESSAGE_MAX_CHARS: usize = 8_000;

/// What a visitor (or an admin's question) says, trimmed: not blank, at most
/// `MESSAGE_MAX_CHARS`; `field` names it in the error.
pub(crate) fn message_text<'a>(field: &str, text: &'a str) -> Result<&'a str> {
    let text = text.trim();
    if text.is_empty() {
        return Err(bad(format!("{field} must not be blank")));
    }
    if text.chars().count() > MESSAGE_MAX_CHARS {
        return Err(bad(format!(
            "{field} is longer than {MESSAGE_MAX_CHARS} characters"
        )));
    }
    Ok(text)
}
const HISTORY_MAX_PAGE: usize = 200;

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct NewSession {
    pub mode: Option<String>,
    pub character_id: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SessionCreated {
    pub session_id: String,
    pub mode: String,
    pub character_id: String,
    pub streaming_mode: &'static str,
    pub avatar_enabled: bool,
    pub idle_strategy: &'static str,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub idle_video_url: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub idle_video_urls: Vec<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SessionSummary {
    pub id: String,
    pub state: String,
    pub character_id: String,
    pub mode: String,
    pub created_at: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct HistoryPage {
    pub messages: Vec<Message>,
    pub next_cursor: Option<String>,
    pub has_more: bool,
}

impl Engine {
    /// Stores the language a visit is in (see `Engine::set_visit_language`).
    pub(super) fn store_session_language(
        &self,
        session_id: &str,
        language: &super::language::Language,
    ) -> Result<()> {
        let tx = self.store.write()?;
        {
            let mut sessions = tx.open_table(SESSIONS)?;
            let mut s: Session =
                store::get(&sessions, session_id)?.ok_or_else(|| not_found("no such session"))?;
            s.language = language.tag().to_string();
            sessions.insert(session_id, store::to_json(&s).as_slice())?;
        }
        tx.commit()?;
        Ok(())
    }

    /// The character the kiosk speaks as: the one named in the settings if it exists, else the
    /// oldest.
    pub fn kiosk_character(&self) -> Result<Character> {
        let wanted = self.settings().kiosk.character_id.clone();
        let tx = self.store.read()?;
        let table = tx.open_table(CHARACTERS)?;
        if is_id(&wanted)
            && let Some(c) = store::get::<Character>(&table, &wanted)?
        {
            return Ok(c);
        }
        let mut oldest: Option<Character> = None;
        for item in table.iter()? {
            let c: Character = store::from_json(item?.1.value())?;
            if oldest
                .as_ref()
                .is_none_or(|o| (&c.created_at, &c.id) < (&o.created_at, &o.id))
            {
                oldest = Some(c);
            }
        }
        oldest.ok_or_else(|| not_found("there is no character"))
    }

    /// Opens a session; idle sessions past their timeout are closed first so they do not hold
    /// places under the cap.
    /// `owner` is the caller (see `access`): only it, or an administrator, may use it.
    pub fn create_session(&self, req: NewSession, owner: Owner) -> Result<SessionCreated> {
        self.create_session_as(new_id(), req, owner)
    }

    /// Opens a session under an id the client chose (gRPC `config.session_id`).
    pub fn create_session_as(
        &self,
        id: String,
        req: NewSession,
        owner: Owner,
    ) -> Result<SessionCreated> {
        if !is_id(&id) {
            return Err(bad("session_id must be a UUID"));
        }
        let character = match req.character_id.as_deref().filter(|s| !s.is_empty()) {
            Some(id) => self.character_record(id)?,
            None => self.kiosk_character()?,
        };
        let mode = match req.mode.as_deref().unwrap_or("") {
            "" => character.mode.clone(),
            "omni" | "voice_llm" => "omni".into(),
            "standard" => "standard".into(),
            other => return Err(bad(format!("mode must be omni or standard, not {other:?}"))),
        };
        let tx = self.store.write()?;
        let expired = self.sweep_sessions(&tx)?;
        let session = {
            let mut table = tx.open_table(SESSIONS)?;
            // The kiosk's visitor session takes no place and is never refused one; a caller
            // other than the administrator holds at most `sessions.max_per_client` of them.
            if owner != Owner::Kiosk {
                let (mut taken, mut own) = (0, 0);
                for item in table.iter()? {
                    let s: Session = store::from_json(item?.1.value())?;
                    taken += usize::from(s.owner != Owner::Kiosk);
                    own += usize::from(s.owner == owner);
                }
                if taken >= self.config.sessions.max {
                    return Err(Error::Unavailable(format!(
                        "all {} conversation places are taken; try again later",
                        self.config.sessions.max
                    )));
                }
                if owner != Owner::Admin && own >= self.config.sessions.max_per_client {
                    return Err(Error::TooMany(format!(
                        "this client holds {own} conversation places already; end one first"
                    )));
                }
            }
            let now = store::now();
            if table.get(id.as_str())?.is_some() {
                return Err(Error::Conflict("a session with this id exists".into()));
            }
            let s = Session {
                id,
                character_id: character.id.clone(),
                mode,
                state: "idle".into(),
                turn_seq: 0,
                created_at: now.clone(),
                last_active_at: now,
                owner,
                language: String::new(),
            };
            table.insert(s.id.as_str(), store::to_json(&s).as_slice())?;
            s
        };
        tx.commit()?;
        for id in expired {
            self.session_ended(&id);
        }
        let view = self.character(&character.id)?;
        Ok(SessionCreated {
            session_id: session.id,
            mode: session.mode,
            character_id: character.id,
            streaming_mode: "websocket",
            avatar_enabled: false,
            idle_strategy: "cached_video",
            idle_video_url: view.idle_video_url,
            idle_video_urls: view.idle_video_urls,
        })
    }

    /// Opens a session seeded with earlier messages (gRPC `dialog_context`): only a new
    /// session of the caller is seeded, and the context is bounded (checked before anything is
    /// created).
    pub fn create_seeded_session(
        &self,
        id: Option<String>,
        req: NewSession,
        owner: Owner,
        items: &[(String, String)],
    ) -> Result<SessionCreated> {
        access::check_context(items)?;
        let created = self.create_session_as(id.unwrap_or_else(new_id), req, owner)?;
        if !items.is_empty() {
            self.seed_history(&created.session_id, items)?;
        }
        Ok(created)
    }

    pub(in crate::engine) fn seed_history(
        &self,
        session_id: &str,
        items: &[(String, String)],
    ) -> Result<()> {
        let session = self.session(session_id)?;
        let tx = self.store.write()?;
        for (role, text) in items {
            let role = if role == "assistant" {
                "assistant"
            } else {
                "user"
            };
            if !text.trim().is_empty() {
                let staff = self.is_staff(&session);
                append_message(&tx, &session, role, text.trim(), 0, Mark::Plain, staff)?;
            }
        }
        self.retain_history(&tx, &session.character_id)?;
        tx.commit()?;
        Ok(())
    }

    /// Removes sessions idle for longer than `sessions.idle_secs`; returns their ids.
    fn sweep_sessions(&self, tx: &WriteTransaction) -> Result<Vec<String>> {
        let cutoff = SystemTime::now() - Duration::from_secs(self.config.sessions.idle_secs);
        let mut expired = Vec::new();
        tx.open_table(SESSIONS)?.retain(|id, v| {
            let stale = store::from_json::<Session>(v)
                .ok()
                .and_then(|s| humantime::parse_rfc3339(&s.last_active_at).ok())
                .is_none_or(|t| t < cutoff);
            if stale {
                expired.push(id.to_string());
            }
            !stale
        })?;
        Ok(expired)
    }

    /// Closes idle sessions; run periodically.
    pub fn expire_sessions(&self) -> Result<()> {
        let tx = self.store.write()?;
        let expired = self.sweep_sessions(&tx)?;
        if expired.is_empty() {
            return Ok(());
        }
        tx.commit()?;
        for id in expired {
            tracing::info!(session = %id, "session closed after being idle");
            self.session_ended(&id);
        }
        Ok(())
    }

    /// Whether `session` is a staff test: an administrator's own (the console's Try it) while a
    /// password guards the console. In setup mode every loopback caller counts as an
    /// administrator, so its sessions are not told apart from visitors'.
    pub(in crate::engine) fn is_staff(&self, session: &Session) -> bool {
        session.owner == Owner::Admin && self.has_admin_password()
    }

    /// How many sessions are open: counted again only after a write, so that health polls
    /// read no table.
    pub fn session_count(&self) -> Result<usize> {
        let version = self.store.version();
        let counted = self.session_count.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, count)) = *counted
            && at == version
        {
            return Ok(count);
        }
        drop(counted);
        let tx = self.store.read()?;
        let count = tx.open_table(SESSIONS)?.len()? as usize;
        *self.session_count.lock().unwrap_or_else(|e| e.into_inner()) = Some((version, count));
        Ok(count)
    }

    /// The open sessions `caller` may watch (an administrator: all), newest first.
    pub fn sessions(&self, caller: &Owner) -> Result<Vec<SessionSummary>> {
        let tx = self.store.read()?;
        let mut all = Vec::new();
        for item in tx.open_table(SESSIONS)?.iter()? {
            let s = store::from_json::<Session>(item?.1.value())?;
            if access::may(caller, &s.owner, Use::Watch) {
                all.push(s);
            }
        }
        all.sort_by(|a, b| (&b.created_at, &b.id).cmp(&(&a.created_at, &a.id)));
        Ok(all
            .into_iter()
            .map(|s| SessionSummary {
                id: s.id,
                state: s.state,
                character_id: s.character_id,
                mode: s.mode,
                created_at: s.created_at,
            })
            .collect())
    }

    pub fn session(&self, id: &str) -> Result<Session> {
        if !is_id(id) {
            return Err(not_found("no such session"));
        }
        let tx = self.store.read()?;
        store::get(&tx.open_table(SESSIONS)?, id)?.ok_or_else(|| not_found("no such session"))
    }

    /// Ends a session: its turn stops and its watchers are closed; its history stays.
    pub fn delete_session(&self, id: &str, caller: &Owner) -> Result<()> {
        self.session_for(id, caller, Use::Steer)?;
        let tx = self.store.write()?;
        let removed = tx.open_table(SESSIONS)?.remove(id)?.is_some();
        tx.commit()?;
        if !removed {
            return Err(not_found("no such session"));
        }
        self.session_ended(id);
        Ok(())
    }

    /// Tells the live parts of the engine that a session is gone.
    pub(super) fn session_ended(&self, id: &str) {
        self.close_live(id);
        // A visit too short to keep (or any, with 0 days) goes now, not within the hour.
        self.retention.wake.notify_one();
    }

    /// Accepts a user message: it is stored in the history under a new turn, which then runs in
    /// the background (the reply streams to the session's watchers). Returns the turn number.
    pub fn post_message(
        self: &Arc<Self>,
        session_id: &str,
        text: &str,
        caller: &Owner,
    ) -> Result<u64> {
        self.session_for(session_id, caller, Use::Steer)?;
        let text = message_text("text", text)?;
        self.spend_message(caller)?;
        let live = self.live(session_id)?;
        let (seq, cancel) = live.next_turn();
        // A full data partition does not silence the kiosk: the turn runs, tries to store the
        // question again and reports once that it could not.
        let stored = match self.record_message(session_id, "user", text, seq, Mark::Plain) {
            Ok(()) => true,
            Err(Error::InsufficientStorage(_)) => false,
            Err(e) => {
                cancel.cancel();
                return Err(e);
            }
        };
        self.spawn_turn(
            live,
            seq,
            cancel,
            TurnInput::Text {
                text: text.to_string(),
                stored,
            },
        );
        Ok(seq)
    }

    /// One page of a character's history (or of one session's, one visit), walking back from
    /// `before` (newest page first); messages within a page run oldest to newest.
    pub fn history(
        &self,
        character_id: &str,
        limit: Option<usize>,
        before: Option<&str>,
        session_id: Option<&str>,
    ) -> Result<HistoryPage> {
        let limit = limit.unwrap_or(50).clamp(1, HISTORY_MAX_PAGE);
        let before = match before.filter(|s| !s.is_empty()) {
            Some(c) => decode_cursor(c)?,
            None => u64::MAX,
        };
        self.character_record(character_id)?;
        let tx = self.store.read()?;
        let table = tx.open_table(MESSAGES)?;
        let mut page = Vec::with_capacity(limit);
        let mut oldest = None;
        let mut has_more = false;
        for item in table
            .range((character_id, 0)..(character_id, before))?
            .rev()
        {
            let (k, v) = item?;
            let m = store::from_json::<Message>(v.value())?;
            if session_id.is_some_and(|s| s != m.session_id) {
                continue;
            }
            if page.len() == limit {
                has_more = true;
                break;
            }
            oldest = Some(k.value().1);
            page.push(m);
        }
        page.reverse();
        Ok(HistoryPage {
            messages: page,
            next_cursor: oldest.filter(|_| has_more).map(encode_cursor),
            has_more,
        })
    }
}

/// Messages read per transaction by an export.
pub const EXPORT_BATCH: usize = 256;

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
    /// The next messages of a character's history (or one session's) after message number
    /// `after`, oldest first, at most `EXPORT_BATCH`; with the number to continue after, or
    /// `None` at the end. An export reads the history this way, one short read at a time.
    pub fn history_batch(
        &self,
        character_id: &str,
        after: Option<u64>,
        session_id: Option<&str>,
    ) -> Result<(Vec<Message>, Option<u64>)> {
        let tx = self.store.read()?;
        let table = tx.open_table(MESSAGES)?;
        let start = after.map_or(0, |a| a.saturating_add(1));
        let mut out = Vec::new();
        for item in table.range((character_id, start)..=(character_id, u64::MAX))? {
            let (k, v) = item?;
            let m = store::from_json::<Message>(v.value())?;
            if session_id.is_none_or(|s| s == m.session_id) {
                out.push(m);
            }
            if out.len() == EXPORT_BATCH {
                return Ok((out, Some(k.value().1)));
            }
        }
        Ok((out, None))
    }

    /// The questions visitors asked that the knowledge did not answer, most recently asked
    /// first, repeats counted together (admin); staff tests are not visitors' questions. Walks
    /// the whole kept history, which `history.max_messages` bounds.
    pub fn unmatched_questions(
        &self,
        character_id: &str,
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
            .range((character_id, 0)..=(character_id, u64::MAX))?
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
    /// tests are not counted. Walks the history, which `history.max_messages` bounds.
    pub fn statistics(&self, character_id: &str) -> Result<Statistics> {
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
        for item in table.range((character_id, 0)..=(character_id, u64::MAX))? {
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

/// What a purge of a character's history removes.
#[derive(Debug, Clone, PartialEq)]
pub enum Purge {
    All,
    /// The messages of one session (one visit).
    Session(String),
    /// Messages said before this time.
    Before(SystemTime),
}

impl Purge {
    /// The purge a request names: one session, or everything before a date (RFC 3339, or a
    /// day `YYYY-MM-DD` meaning its start in UTC), or with neither the whole history.
    pub fn parse(session_id: Option<&str>, before: Option<&str>) -> Result<Purge> {
        match (session_id, before) {
            (Some(_), Some(_)) => Err(bad("give session_id or before_date, not both")),
            (Some(id), None) => Ok(Purge::Session(id.to_string())),
            (None, Some(date)) => {
                let full = if date.len() == 10 {
                    format!("{date}T00:00:00Z")
                } else {
                    date.to_string()
                };
                humantime::parse_rfc3339_weak(&full)
                    .map(Purge::Before)
                    .map_err(|_| bad("before_date must be a date such as 2026-01-31"))
            }
            (None, None) => Ok(Purge::All),
        }
    }
}

/// Whether a stored message was said before `t` (an unreadable one counts as old).
fn said_before(stored: &[u8], t: SystemTime) -> bool {
    store::from_json::<Message>(stored)
        .ok()
        .and_then(|m| humantime::parse_rfc3339(&m.timestamp).ok())
        .is_none_or(|at| at < t)
}

impl Engine {
    /// Removes messages of a character's history (admin); returns how many.
    pub fn purge_history(&self, character_id: &str, purge: &Purge) -> Result<usize> {
        self.character_record(character_id)?;
        let tx = self.store.write()?;
        let mut removed = 0;
        tx.open_table(MESSAGES)?.retain_in(
            (character_id, 0)..=(character_id, u64::MAX),
            |_, v| {
                let gone = match purge {
                    Purge::All => true,
                    Purge::Session(id) => {
                        store::from_json::<Message>(v).is_ok_and(|m| m.session_id == *id)
                    }
                    Purge::Before(t) => said_before(v, *t),
                };
                removed += usize::from(gone);
                !gone
            },
        )?;
        tx.commit()?;
        Ok(removed)
    }

    /// Keeps a character's history within `history.max_messages` (newest kept) and
    /// `history.max_days` (the old ones' counts kept: `privacy`); part of the transaction that
    /// appended, so the bound holds after every write, and the hourly sweep holds it between
    /// writes. The cost is one walk over at most the kept count plus what goes.
    pub(in crate::engine) fn retain_history(
        &self,
        tx: &WriteTransaction,
        character_id: &str,
    ) -> Result<()> {
        let max = self.config.history.max_messages;
        if max > 0 {
            let mut table = tx.open_table(MESSAGES)?;
            let beyond = table
                .range((character_id, 0)..=(character_id, u64::MAX))?
                .rev()
                .nth(max)
                .transpose()?
                .map(|(k, _)| k.value().1);
            if let Some(newest_gone) = beyond {
                table.retain_in((character_id, 0)..=(character_id, newest_gone), |_, _| {
                    false
                })?;
            }
        }
        self.retire_old(tx, character_id)?;
        Ok(())
    }
}

/// What a stored message is marked as, beyond its role: the statistics count by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Plain,
    /// A reply the knowledge did not answer.
    Unmatched,
    /// A question chosen on the kiosk's screen (touch or buttons), not said or typed.
    Touch,
}

/// Appends to the history of `session`'s character under the next global message number, so the
/// order of keys is the order in which messages were said, its personal details replaced by
/// placeholders (`redact`; the live turn has the words as said). `staff`: said in a staff test
/// ([`Engine::is_staff`]).
pub fn append_message(
    tx: &WriteTransaction,
    session: &Session,
    role: &str,
    content: &str,
    turn_seq: u64,
    mark: Mark,
    staff: bool,
) -> Result<()> {
    let seq = store::next_counter(tx, "message_seq")?;
    let m = Message {
        session_id: session.id.clone(),
        role: role.into(),
        content: if role == "user" {
            super::redact::redact(content)
        } else {
            super::redact::redact_reply(content)
        },
        timestamp: store::now(),
        turn_seq,
        unmatched: mark == Mark::Unmatched,
        staff,
        touch: mark == Mark::Touch,
        language: session.language.clone(),
    };
    tx.open_table(MESSAGES)?.insert(
        (session.character_id.as_str(), seq),
        store::to_json(&m).as_slice(),
    )?;
    Ok(())
}

fn encode_cursor(seq: u64) -> String {
    URL_SAFE_NO_PAD.encode(seq.to_be_bytes())
}

fn decode_cursor(c: &str) -> Result<u64> {
    URL_SAFE_NO_PAD
        .decode(c)
        .ok()
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| bad("before is not a cursor this server issued"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        for n in [0, 1, 42, u64::MAX - 1] {
            assert_eq!(decode_cursor(&encode_cursor(n)).unwrap(), n);
        }
        assert!(decode_cursor("not-a-cursor!").is_err());
        assert!(decode_cursor("AAAA").is_err());
    }
}
