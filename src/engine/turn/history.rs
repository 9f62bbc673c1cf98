//! What turns keep in the store: each message with its turn number, and the recent history a
//! language model is given back. Writes run on the blocking pool, as every write waits for
//! fsync.

use std::sync::Arc;

use super::HISTORY_MAX_CHARS;
use crate::engine::Engine;
use crate::engine::error::Result;
use crate::engine::live::LiveSession;
use crate::engine::providers::ChatMessage;
use crate::engine::sessions::append_message;
use crate::store;
use crate::store::records::{Message, Session};
use crate::store::tables::{MESSAGES, SESSIONS};

impl Engine {
    /// The session's latest messages, oldest first, within the configured bounds.
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
        {
            let m: Message = store::from_json(item?.1.value())?;
            if m.session_id != session_id {
                continue;
            }
            chars += m.content.len();
            if out.len() >= self.config.history_messages || chars > HISTORY_MAX_CHARS {
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
    pub(super) async fn store_message(
        self: &Arc<Self>,
        live: &LiveSession,
        role: &'static str,
        text: String,
        seq: u64,
    ) {
        let engine = self.clone();
        let id = live.id.clone();
        let stored =
            tokio::task::spawn_blocking(move || engine.record_message(&id, role, &text, seq)).await;
        if let Ok(Err(e)) = stored {
            tracing::warn!(session = %live.id, "cannot store a {role} message: {e}");
        }
    }

    /// Appends to the history of a session and advances its stored turn number.
    pub(in crate::engine) fn record_message(
        &self,
        session_id: &str,
        role: &str,
        text: &str,
        seq: u64,
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
            append_message(&tx, &s.character_id, session_id, role, text, seq)?;
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
