//! What turns keep in the store: each message with its turn number, and the recent history a
//! language model is given back. Writes run on the blocking pool, as every write waits for
//! fsync.

use std::sync::Arc;

use super::HISTORY_MAX_CHARS;
use crate::engine::Engine;
use crate::engine::error::{Error, Result};
use crate::engine::live::LiveSession;
use crate::engine::providers::ChatMessage;
use crate::engine::sessions::{Mark, append_message};
use crate::store;
use crate::store::records::{Message, Session};
use crate::store::tables::{MESSAGES, SESSIONS};

/// Messages of a character looked at, newest first, to find a session's recent history.
const RECENT_SCAN: usize = 512;

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
        {
            let mut sessions = tx.open_table(SESSIONS)?;
            let Some(mut s) = store::get::<Session>(&sessions, session_id)? else {
                return Ok(());
            };
            s.turn_seq = s.turn_seq.max(seq);
            s.last_active_at = store::now();
            sessions.insert(session_id, store::to_json(&s).as_slice())?;
            let staff = self.is_staff(&s);
            append_message(&tx, &s, role, text, seq, mark, staff)?;
            self.retain_history(&tx, &s.character_id)?;
        }
        tx.commit()?;
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

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant, SystemTime};

    use redb::ReadableTable;

    use super::*;
    use crate::config::Config;
    use crate::engine::sessions::{NewSession, Purge};

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
        let stats = e.statistics(&cid).unwrap();
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
        assert_eq!(e.purge_history(&cid, &Purge::Session(a)).unwrap(), 3);
        assert_eq!(count(&e, &cid), 2);
        let past = Purge::Before(SystemTime::now() - Duration::from_secs(3600));
        assert_eq!(e.purge_history(&cid, &past).unwrap(), 0);
        let now = Purge::Before(SystemTime::now() + Duration::from_secs(1));
        assert_eq!(e.purge_history(&cid, &now).unwrap(), 2);
        e.seed_history(&b, &said(2, "b")).unwrap();
        assert_eq!(e.purge_history(&cid, &Purge::All).unwrap(), 2);
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
