//! Conversation sessions: opened, listed, expired and deleted, and the messages posted in them
//! (each starts a turn; what turns keep is the history, `history.rs`).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use redb::{ReadableTable, ReadableTableMetadata, WriteTransaction};
use serde::{Deserialize, Serialize};

use super::access::{self, Owner, Use};
use super::error::{Error, Result, bad, not_found};
use super::history::{Mark, append_message};
use super::turn::TurnInput;
use super::{Engine, SessionId};
use crate::engine::CharacterId;
use crate::store::records::{Character, Session};
use crate::store::tables::{CHARACTERS, SESSIONS};
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
        let wanted = CharacterId::parse(&self.settings().kiosk.character_id);
        let tx = self.store.read()?;
        let table = tx.open_table(CHARACTERS)?;
        if let Ok(wanted) = wanted
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
        self.create_session_as(SessionId::new(), req, owner)
    }

    /// Opens a session under an id the client chose (gRPC `config.session_id`).
    pub fn create_session_as(
        &self,
        id: SessionId,
        req: NewSession,
        owner: Owner,
    ) -> Result<SessionCreated> {
        let character = match req.character_id.as_deref().filter(|s| !s.is_empty()) {
            Some(id) => self.character_record(&CharacterId::parse(id)?)?,
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
                id: id.into(),
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
        if !self.is_staff(&session) {
            self.metrics.visit();
        }
        let view = self.character(&CharacterId::of_record(&character.id))?;
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
        let id = match id {
            Some(id) => SessionId::parse(&id).map_err(|_| bad("session_id must be a UUID"))?,
            None => SessionId::new(),
        };
        let created = self.create_session_as(id, req, owner)?;
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
        let session = self.session(&SessionId::of_record(session_id))?;
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

    pub fn session(&self, id: &SessionId) -> Result<Session> {
        let tx = self.store.read()?;
        store::get(&tx.open_table(SESSIONS)?, id)?.ok_or_else(|| not_found("no such session"))
    }

    /// Ends a session: its turn stops and its watchers are closed; its history stays.
    pub fn delete_session(&self, id: &SessionId, caller: &Owner) -> Result<()> {
        self.session_for(id, caller, Use::Steer)?;
        let tx = self.store.write()?;
        let removed = tx.open_table(SESSIONS)?.remove(id.as_str())?.is_some();
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
        session_id: &SessionId,
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
}
