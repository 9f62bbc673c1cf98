//! A character's history: the messages turns keep (each with its turn number, its personal
//! details replaced by placeholders), the pages the console reads, the export's batches, the
//! recent history a language model is given back, and the purge. Writes run on the blocking
//! pool, as every write waits for fsync.

use std::sync::Arc;
use std::time::SystemTime;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use redb::{ReadableTable, WriteTransaction};
use serde::Serialize;

use super::Engine;
use super::error::{Error, Result, bad};
use super::live::LiveSession;
use super::metrics::Via;
use super::providers::ChatMessage;
use super::statistics::question_key;
use crate::engine::CharacterId;
use crate::store;
use crate::store::records::{Message, Session};
use crate::store::tables::{MESSAGES, SESSIONS};

/// Messages of a character looked at, newest first, to find a session's recent history.
const RECENT_SCAN: usize = 512;
/// Characters of earlier conversation sent to the language model at most.
const HISTORY_MAX_CHARS: usize = 6_000;

impl Engine {
    /// The session's latest messages, oldest first, within the configured bounds. The character's
    /// history is walked back from its newest message over at most `RECENT_SCAN` messages: a
    /// turn costs the same however long the history is, and a session whose last words are
    /// more than that many messages (of other sessions) back simply has no earlier context.
    pub(super) fn recent_history(
        &self,
        session_id: &str,
        character_id: &str,
    ) -> Result<Vec<ChatMessage>> {
        let tx = self.store.read()?;
        let table = tx.open_table(MESSAGES)?;
        let mut out = Vec::new();
        let mut chars = 0;
        for item in table
            .range((character_id, 0)..=(character_id, u64::MAX))?
            .rev()
            .take(RECENT_SCAN)
        {
            let m: Message = store::from_json(item?.1.value())?;
            if m.session_id != session_id {
                continue;
            }
            chars += m.content.len();
            if out.len() >= self.config.sessions.history_messages || chars > HISTORY_MAX_CHARS {
                break;
            }
            out.push(ChatMessage {
                role: if m.role == "user" {
                    "user"
                } else {
                    "assistant"
                },
                content: m.content,
            });
        }
        out.reverse();
        Ok(out)
    }

    /// Stores a message of turn `seq` (on the blocking pool; a deleted session stores nothing).
    /// A failure is returned for the turn to report: the turn goes on without it.
    pub(super) async fn store_message(
        self: &Arc<Self>,
        live: &LiveSession,
        role: &'static str,
        text: String,
        seq: u64,
        mark: Mark,
    ) -> Result<()> {
        let engine = self.clone();
        let id = live.id.clone();
        tokio::task::spawn_blocking(move || engine.record_message(&id, role, &text, seq, mark))
            .await
            .unwrap_or_else(|e| Err(Error::Internal(format!("history write: {e}"))))
    }

    /// Appends to the history of a session and advances its stored turn number.
    pub(in crate::engine) fn record_message(
        &self,
        session_id: &str,
        role: &str,
        text: &str,
        seq: u64,
        mark: Mark,
    ) -> Result<()> {
        let tx = self.store.write()?;
        let staff;
        {
            let mut sessions = tx.open_table(SESSIONS)?;
            let Some(mut s) = store::get::<Session>(&sessions, session_id)? else {
                return Ok(());
            };
            s.turn_seq = s.turn_seq.max(seq);
            s.last_active_at = store::now();
            sessions.insert(session_id, store::to_json(&s).as_slice())?;
            staff = self.is_staff(&s);
            append_message(&tx, &s, role, text, seq, mark, staff)?;
            self.retain_history(&tx, &s.character_id)?;
        }
        tx.commit()?;
        if role == "user" && !staff {
            let via = match mark {
                Mark::Spoken => Via::Voice,
                Mark::Touch => Via::Touch,
                Mark::Plain | Mark::Unmatched => Via::Text,
            };
            let again = self
                .live_if_active(session_id)
                .is_some_and(|l| l.asked_before(question_key(text)));
            self.metrics.question(via, again);
        }
        Ok(())
    }

    pub(super) fn save_turn_seq(&self, session_id: &str, seq: u64) {
        let save = || -> Result<()> {
            let tx = self.store.write()?;
            {
                let mut sessions = tx.open_table(SESSIONS)?;
                let Some(mut s) = store::get::<Session>(&sessions, session_id)? else {
                    return Ok(());
                };
                s.turn_seq = s.turn_seq.max(seq);
                sessions.insert(session_id, store::to_json(&s).as_slice())?;
            }
            tx.commit()?;
            Ok(())
        };
        if let Err(e) = save() {
            tracing::warn!(session = %session_id, "cannot store the turn number: {e}");
        }
    }
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct HistoryPage {
    pub messages: Vec<Message>,
    pub next_cursor: Option<String>,
    pub has_more: bool,
}

/// Messages per page at most (of the history, of the unanswered questions).
pub(super) const HISTORY_MAX_PAGE: usize = 200;

/// Messages read per transaction by an export.
pub const EXPORT_BATCH: usize = 256;

impl Engine {
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
        self.character_record(&CharacterId::parse(character_id)?)?;
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

    /// The next messages of a character's history (or one session's) after message number
    /// `after`, oldest first, at most `EXPORT_BATCH`; with the number to continue after, or
    /// `None` at the end. An export reads the history this way, one short read at a time.
    pub fn history_batch(
        &self,
        character_id: &CharacterId,
        after: Option<u64>,
        session_id: Option<&str>,
    ) -> Result<(Vec<Message>, Option<u64>)> {
        let tx = self.store.read()?;
        let table = tx.open_table(MESSAGES)?;
        let start = after.map_or(0, |a| a.saturating_add(1));
        let mut out = Vec::new();
        for item in
            table.range((character_id.as_str(), start)..=(character_id.as_str(), u64::MAX))?
        {
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
    pub fn purge_history(&self, character_id: &CharacterId, purge: &Purge) -> Result<usize> {
        self.character_record(character_id)?;
        let tx = self.store.write()?;
        let mut removed = 0;
        tx.open_table(MESSAGES)?.retain_in(
            (character_id.as_str(), 0)..=(character_id.as_str(), u64::MAX),
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

    /// Keeps a character's history within `history_max_messages` (newest kept) and
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
    /// A question said and recognised (stored as a plain one; the metrics count it as spoken).
    Spoken,
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

    use std::time::{Duration, Instant, SystemTime};

    use redb::ReadableTable;

    use crate::config::Config;
    use crate::engine::sessions::NewSession;

    fn engine(dir: &tempfile::TempDir, tweak: impl FnOnce(&mut Config)) -> Arc<Engine> {
        let mut config = Config {
            data_dir: dir.path().to_path_buf(),
            ..Config::default()
        };
        tweak(&mut config);
        Engine::open(config).unwrap()
    }

    fn session(e: &Engine) -> (String, String) {
        let s = e
            .create_session(
                NewSession {
                    mode: None,
                    character_id: None,
                },
                crate::store::records::Owner::Admin,
            )
            .unwrap();
        (s.session_id, s.character_id)
    }

    fn said(n: usize, what: &str) -> Vec<(String, String)> {
        (0..n)
            .map(|i| ("user".to_string(), format!("{what} {i}")))
            .collect()
    }

    fn count(e: &Engine, character: &str) -> usize {
        e.history(character, Some(500), None, None)
            .unwrap()
            .messages
            .len()
    }

    #[test]
    fn history_keeps_the_newest_messages_up_to_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let e = engine(&dir, |c| c.history.max_messages = 100);
        let (sid, cid) = session(&e);
        e.seed_history(&sid, &said(300, "flood")).unwrap();
        let page = e.history(&cid, Some(500), None, None).unwrap();
        assert_eq!(page.messages.len(), 100);
        assert_eq!(page.messages[99].content, "flood 299", "the newest stay");
        e.record_message(&sid, "user", "one more", 1, Mark::Plain)
            .unwrap();
        assert_eq!(count(&e, &cid), 100);
    }

    #[test]
    fn messages_older_than_the_age_bound_go_on_the_next_write() {
        let dir = tempfile::tempdir().unwrap();
        let e = engine(&dir, |c| {
            c.history.max_days = crate::config::RetentionDays::try_from(30).unwrap();
        });
        let (sid, cid) = session(&e);
        // Three messages, then made 40 days old.
        e.seed_history(&sid, &said(3, "old")).unwrap();
        {
            let tx = e.store.write().unwrap();
            let old = humantime::format_rfc3339_millis(
                SystemTime::now() - Duration::from_secs(40 * 86_400),
            )
            .to_string();
            let mut table = tx.open_table(MESSAGES).unwrap();
            let keys: Vec<u64> = table
                .range((cid.as_str(), 0)..=(cid.as_str(), u64::MAX))
                .unwrap()
                .map(|i| i.unwrap().0.value().1)
                .collect();
            for seq in keys {
                let mut m: Message =
                    store::from_json(table.get((cid.as_str(), seq)).unwrap().unwrap().value())
                        .unwrap();
                m.timestamp = old.clone();
                table
                    .insert((cid.as_str(), seq), store::to_json(&m).as_slice())
                    .unwrap();
            }
            drop(table);
            tx.commit().unwrap();
        }
        assert_eq!(count(&e, &cid), 3);
        e.record_message(&sid, "user", "new", 1, Mark::Plain)
            .unwrap();
        let page = e.history(&cid, Some(500), None, None).unwrap();
        assert_eq!(page.messages.len(), 1);
        assert_eq!(page.messages[0].content, "new");
        let stats = e.statistics(&CharacterId::of_record(&cid)).unwrap();
        let asked: usize = stats.days.iter().map(|d| d.questions).sum();
        assert_eq!(asked, 4, "the old questions are still counted: {stats:?}");
        assert_eq!(stats.days.len(), 2, "on their own day: {stats:?}");
    }

    #[test]
    fn purges_remove_a_session_a_period_or_everything() {
        let dir = tempfile::tempdir().unwrap();
        let e = engine(&dir, |_| {});
        let (a, cid) = session(&e);
        let (b, _) = session(&e);
        e.seed_history(&a, &said(3, "a")).unwrap();
        e.seed_history(&b, &said(2, "b")).unwrap();
        assert_eq!(
            e.purge_history(&CharacterId::of_record(&cid), &Purge::Session(a))
                .unwrap(),
            3
        );
        assert_eq!(count(&e, &cid), 2);
        let past = Purge::Before(SystemTime::now() - Duration::from_secs(3600));
        assert_eq!(
            e.purge_history(&CharacterId::of_record(&cid), &past)
                .unwrap(),
            0
        );
        let now = Purge::Before(SystemTime::now() + Duration::from_secs(1));
        assert_eq!(
            e.purge_history(&CharacterId::of_record(&cid), &now)
                .unwrap(),
            2
        );
        e.seed_history(&b, &said(2, "b")).unwrap();
        assert_eq!(
            e.purge_history(&CharacterId::of_record(&cid), &Purge::All)
                .unwrap(),
            2
        );
        assert_eq!(count(&e, &cid), 0);
        assert!(Purge::parse(Some("x"), Some("2026-01-01")).is_err());
        assert!(Purge::parse(None, Some("yesterday")).is_err());
        assert!(matches!(
            Purge::parse(None, Some("2026-01-31")),
            Ok(Purge::Before(_))
        ));
    }

    #[test]
    fn a_turn_reads_a_bounded_part_of_a_flooded_history() {
        let dir = tempfile::tempdir().unwrap();
        let e = engine(&dir, |c| c.history.max_messages = 0);
        let (visitor, cid) = session(&e);
        let (flood, _) = session(&e);
        e.seed_history(&visitor, &said(4, "visitor")).unwrap();
        e.seed_history(&flood, &said(20_000, "flood")).unwrap();
        let started = Instant::now();
        let recent = e.recent_history(&visitor, &cid).unwrap();
        let took = started.elapsed();
        eprintln!("recent history after a flood of 20000 messages: {took:?}");
        assert!(
            recent.is_empty(),
            "the visitor's words are more than RECENT_SCAN messages back: not looked for"
        );
        let flooded = e.recent_history(&flood, &cid).unwrap();
        assert_eq!(flooded.len(), e.config.sessions.history_messages);
    }
}
