//! Who may talk to the kiosk: the owner of each conversation session, what other callers may
//! do with it, client keys (stored only as SHA-256, compared in constant time) and the
//! per-caller message budget. Front doors turn credentials into an [`Owner`]; the rules are here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use redb::{ReadableTable, ReadableTableMetadata};
use serde::Serialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::error::{Error, Result, bad, not_found};
use super::live::LiveSession;
use super::{Engine, SessionId, is_id, new_id};
use crate::store::records::{ClientKey, Session};
use crate::store::tables::CLIENT_KEYS;
use crate::store::{self, blobs::hex};

pub use crate::store::records::{KeyScope, Owner};

/// Client keys an installation may hold (each is checked on every keyed request).
pub const MAX_CLIENT_KEYS: usize = 64;
/// `dialog_context` bounds: items, and bytes of text in all.
pub const CONTEXT_MAX_ITEMS: usize = 50;
pub const CONTEXT_MAX_BYTES: usize = 64 * 1024;
/// `last_used_at` is written at most this often per key, so a busy client does not turn every
/// request into an fsync.
const LAST_USED_EVERY: Duration = Duration::from_secs(60);

/// What a caller wants to do with a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// Follow its events (WebSocket without input).
    Watch,
    /// Send to it, interrupt it, override its prompt or configuration, delete it.
    Steer,
}

/// Whether `caller` may `use_` a session owned by `owner`: its owner may do anything; an
/// administrator may steer any session but the kiosk's visitor sessions, which it may only
/// watch; nobody else may touch it.
pub fn may(caller: &Owner, owner: &Owner, use_: Use) -> bool {
    caller == owner
        || match (caller, owner) {
            (Owner::Admin, Owner::Kiosk) => use_ == Use::Watch,
            (Owner::Admin, _) => true,
            _ => false,
        }
}

/// A client key as listed: never the key itself.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ClientKeyView {
    pub id: String,
    pub name: String,
    pub created_at: String,
    pub last_used_at: Option<String>,
    pub scope: KeyScope,
}

/// A client key just created: the only time the key is shown.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct NewClientKey {
    #[serde(flatten)]
    pub view: ClientKeyView,
    pub key: String,
}

fn view(k: ClientKey) -> ClientKeyView {
    ClientKeyView {
        id: k.id,
        name: k.name,
        created_at: k.created_at,
        last_used_at: k.last_used_at,
        scope: k.scope,
    }
}

fn key_hash(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// Token buckets of message budget, one per caller (bounded: one per client key plus the few
/// credential-less kinds).
#[derive(Default)]
pub struct Budgets(Mutex<HashMap<Owner, (f64, Instant)>>);

/// When each key's `last_used_at` was last written.
#[derive(Default)]
pub struct LastUsed(Mutex<HashMap<String, Instant>>);

impl Engine {
    /// Creates a client key named `name` that opens `scope`; the key is in the answer and
    /// nowhere else.
    pub fn create_client_key(&self, name: &str, scope: KeyScope) -> Result<NewClientKey> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > 100 {
            return Err(bad("name must be 1 to 100 characters"));
        }
        let mut raw = [0u8; 32];
        getrandom::fill(&mut raw).map_err(|e| Error::Internal(format!("random source: {e}")))?;
        let key = URL_SAFE_NO_PAD.encode(raw);
        let record = ClientKey {
            id: new_id(),
            name: name.to_string(),
            hash: hex(&key_hash(&key)),
            created_at: store::now(),
            last_used_at: None,
            scope,
        };
        let tx = self.store.write()?;
        {
            let mut table = tx.open_table(CLIENT_KEYS)?;
            if table.len()? as usize >= MAX_CLIENT_KEYS {
                return Err(Error::Conflict(format!(
                    "at most {MAX_CLIENT_KEYS} client keys; revoke one first"
                )));
            }
            table.insert(record.id.as_str(), store::to_json(&record).as_slice())?;
        }
        tx.commit()?;
        Ok(NewClientKey {
            view: view(record),
            key,
        })
    }

    /// Every client key, oldest first, without the keys.
    pub fn client_keys(&self) -> Result<Vec<ClientKeyView>> {
        let tx = self.store.read()?;
        let mut all = Vec::new();
        for item in tx.open_table(CLIENT_KEYS)?.iter()? {
            all.push(store::from_json::<ClientKey>(item?.1.value())?);
        }
        all.sort_by(|a, b| (&a.created_at, &a.id).cmp(&(&b.created_at, &b.id)));
        Ok(all.into_iter().map(view).collect())
    }

    /// Revokes a client key: it authenticates nothing from now on.
    pub fn revoke_client_key(&self, id: &str) -> Result<()> {
        if !is_id(id) {
            return Err(not_found("no such client key"));
        }
        let tx = self.store.write()?;
        let removed = tx.open_table(CLIENT_KEYS)?.remove(id)?.is_some();
        tx.commit()?;
        if !removed {
            return Err(not_found("no such client key"));
        }
        self.credentials_changed();
        self.last_used
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        Ok(())
    }

    /// The owner a presented conversation key stands for, if it is a live one (a metrics key
    /// opens no conversation: it is as unknown here).
    pub fn client_of_key(&self, key: &str) -> Result<Option<Owner>> {
        Ok(self
            .key_of(key, KeyScope::Conversation)?
            .map(|k| Owner::Client(k.id)))
    }

    /// Whether `key` is a live metrics key (`GET /metrics`).
    pub fn metrics_key(&self, key: &str) -> Result<bool> {
        Ok(self.key_of(key, KeyScope::Metrics)?.is_some())
    }

    /// The live key of `scope` that `key` is. Every stored hash is compared in constant time
    /// (there are at most `MAX_CLIENT_KEYS`), whatever its scope.
    fn key_of(&self, key: &str, scope: KeyScope) -> Result<Option<ClientKey>> {
        let want = hex(&key_hash(key));
        let tx = self.store.read()?;
        let mut found: Option<ClientKey> = None;
        for item in tx.open_table(CLIENT_KEYS)?.iter()? {
            let k: ClientKey = store::from_json(item?.1.value())?;
            if bool::from(want.as_bytes().ct_eq(k.hash.as_bytes())) {
                found = Some(k);
            }
        }
        drop(tx);
        let Some(k) = found.filter(|k| k.scope == scope) else {
            return Ok(None);
        };
        self.touch_client_key(&k.id)?;
        Ok(Some(k))
    }

    /// Records that a key was used, at most once per `LAST_USED_EVERY`.
    fn touch_client_key(&self, id: &str) -> Result<()> {
        {
            let mut seen = self.last_used.0.lock().unwrap_or_else(|e| e.into_inner());
            if seen.get(id).is_some_and(|t| t.elapsed() < LAST_USED_EVERY) {
                return Ok(());
            }
            seen.insert(id.to_string(), Instant::now());
        }
        let tx = self.store.write()?;
        {
            let mut table = tx.open_table(CLIENT_KEYS)?;
            let current: Option<ClientKey> = store::get(&table, id)?;
            if let Some(mut k) = current {
                k.last_used_at = Some(store::now());
                table.insert(id, store::to_json(&k).as_slice())?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// The session `id` if `caller` may `use_` it: 404 when there is none, 403 when it belongs
    /// to someone else.
    pub fn session_for(&self, id: &SessionId, caller: &Owner, use_: Use) -> Result<Session> {
        let session = self.session(id)?;
        if may(caller, &session.owner, use_) {
            Ok(session)
        } else {
            Err(Error::Forbidden(match use_ {
                Use::Watch => "this session belongs to another caller".into(),
                Use::Steer if *caller == Owner::Admin => {
                    "the kiosk's visitor sessions are read-only".into()
                }
                Use::Steer => "this session belongs to another caller".into(),
            }))
        }
    }

    /// The live session `id` for a front door, if `caller` may `use_` it.
    pub fn live_for(&self, id: &SessionId, caller: &Owner, use_: Use) -> Result<Arc<LiveSession>> {
        self.session_for(id, caller, use_)?;
        self.live(id)
    }

    /// Takes one message from `caller`'s budget (`sessions.message_burst`, one more every
    /// `sessions.message_refill_ms`). Only callers from the LAN are limited (client keys, and everyone
    /// at once under `access.open_conversation_api`): the kiosk, its administrator and its own loopback
    /// callers are not.
    pub fn spend_message(&self, caller: &Owner) -> Result<()> {
        let caller = match caller {
            // The open API is one caller for the budget, however many addresses it comes from.
            Owner::Anonymous(_) | Owner::Open => &Owner::Open,
            Owner::Client(_) => caller,
            Owner::Kiosk | Owner::Admin | Owner::Loopback => return Ok(()),
        };
        let burst = f64::from(self.config.sessions.message_burst);
        let refill = self.config.sessions.message_refill_ms.max(1) as f64;
        let mut buckets = self.budgets.0.lock().unwrap_or_else(|e| e.into_inner());
        let (tokens, at) = buckets
            .entry(caller.clone())
            .or_insert((burst, Instant::now()));
        *tokens = (*tokens + at.elapsed().as_millis() as f64 / refill).min(burst);
        *at = Instant::now();
        if *tokens < 1.0 {
            return Err(Error::TooMany(format!(
                "too many messages; one more is allowed every {} ms",
                self.config.sessions.message_refill_ms
            )));
        }
        *tokens -= 1.0;
        Ok(())
    }
}

/// Checks a `dialog_context` against its bounds before anything is created.
pub fn check_context(items: &[(String, String)]) -> Result<()> {
    if items.len() > CONTEXT_MAX_ITEMS {
        return Err(bad(format!(
            "dialog_context holds at most {CONTEXT_MAX_ITEMS} items"
        )));
    }
    let bytes: usize = items.iter().map(|(r, t)| r.len() + t.len()).sum();
    if bytes > CONTEXT_MAX_BYTES {
        return Err(bad(format!(
            "dialog_context holds at most {CONTEXT_MAX_BYTES} bytes of text"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_steer_their_own_and_admins_only_watch_the_kiosk() {
        let a = Owner::Client("a".into());
        let b = Owner::Client("b".into());
        for use_ in [Use::Watch, Use::Steer] {
            assert!(may(&a, &a, use_));
            assert!(!may(&a, &b, use_));
            assert!(!may(&Owner::Loopback, &a, use_));
            assert!(!may(&a, &Owner::Kiosk, use_));
            assert!(!may(&Owner::Loopback, &Owner::Kiosk, use_));
            assert!(may(&Owner::Admin, &a, use_));
            assert!(may(&Owner::Admin, &Owner::Loopback, use_));
        }
        assert!(may(&Owner::Admin, &Owner::Kiosk, Use::Watch));
        assert!(!may(&Owner::Admin, &Owner::Kiosk, Use::Steer));
    }

    #[test]
    fn keys_stored_before_scopes_are_conversation_keys() {
        let old = r#"{"id":"a","name":"n","hash":"00","created_at":"2025-01-01T00:00:00Z"}"#;
        let k: ClientKey = serde_json::from_str(old).unwrap();
        assert_eq!(k.scope, KeyScope::Conversation);
    }

    #[test]
    fn context_is_bounded_by_count_and_size() {
        let item = || ("user".to_string(), "hi".to_string());
        assert!(check_context(&vec![item(); CONTEXT_MAX_ITEMS]).is_ok());
        assert!(check_context(&vec![item(); CONTEXT_MAX_ITEMS + 1]).is_err());
        let big = ("user".to_string(), "x".repeat(CONTEXT_MAX_BYTES));
        assert!(check_context(&[big]).is_err());
    }
}
