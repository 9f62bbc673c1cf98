//! The appliance's one administrator login: a password, kept only as an Argon2id hash, exchanged
//! for session tokens that live in redb (so they survive a restart), with failed attempts
//! counted per client address, also in redb.
//!
//! First boot: a password that came from `access.admin_password_file` (written by the image's first-boot
//! step) is also kept in clear text, in memory only, until the administrator's first successful
//! login, so that the display can show it ([`Engine::first_boot_password`]). That login is
//! recorded once, durably, as the `admin_first_login` flag in `META`; from then on, restarts
//! included, the clear text is never kept again.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use argon2::{Algorithm, Argon2, Params, Version};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::Engine;
use super::error::{Error, Result};
use crate::store::records::{AdminSession, LoginFailures};
use crate::store::tables::{ADMIN_SESSIONS, LOGIN_FAILURES, META};
use crate::store::{self, blobs::hex};

/// Argon2id cost: 19 MiB and two passes (OWASP's baseline), about 30 ms per login here.
const M_COST_KIB: u32 = 19 * 1024;
const T_COST: u32 = 2;

/// `META` flag set by the administrator's first successful login.
const FIRST_LOGIN: &str = "admin_first_login";

/// `META` entry with the salt and Argon2 hash of the password in force: a start with another
/// password (the password changed) ends every session opened under the old one.
const PASSWORD_HASH: &str = "admin_password_hash";

/// `META` flag: the hash in `PASSWORD_HASH` was chosen in the console and wins over the
/// configured password.
const CHANGED: &str = "admin_password_changed";

/// Shortest password an administrator may choose, in characters.
pub const MIN_PASSWORD_CHARS: usize = 10;
/// Longest password accepted, in bytes (Argon2 hashes any length; this bounds the work).
pub const MAX_PASSWORD_BYTES: usize = 1024;

/// The password in force as a salted hash; the clear text is dropped after start (except a
/// first-boot password, see [`FirstBoot`]).
pub struct Password {
    salt: [u8; 16],
    hash: [u8; 32],
}

impl Password {
    pub fn new(clear: &str) -> Password {
        let mut salt = [0u8; 16];
        getrandom::fill(&mut salt).expect("system random source");
        let hash = derive(clear, &salt);
        Password { salt, hash }
    }

    /// The password chosen in the console, if one was: it wins over the configured one.
    pub(super) fn chosen(store: &store::Store) -> Result<Option<Password>> {
        let tx = store.read()?;
        let meta = tx.open_table(META)?;
        if meta.get(CHANGED)?.is_none() {
            return Ok(None);
        }
        Ok(meta
            .get(PASSWORD_HASH)?
            .and_then(|v| <[u8; 48]>::try_from(v.value()).ok())
            .map(|stored| Password::from_record(&stored)))
    }

    fn from_record(stored: &[u8; 48]) -> Password {
        let mut salt = [0u8; 16];
        let mut hash = [0u8; 32];
        salt.copy_from_slice(&stored[..16]);
        hash.copy_from_slice(&stored[16..]);
        Password { salt, hash }
    }

    fn record(&self) -> [u8; 48] {
        let mut record = [0u8; 48];
        record[..16].copy_from_slice(&self.salt);
        record[16..].copy_from_slice(&self.hash);
        record
    }

    /// The password for `clear`, under the salt stored with the previous start's password when
    /// that was the same password. A different (changed) password is stored instead and every
    /// administrator session is ended, so a password change locks out whoever held the old one.
    pub(super) fn load(clear: &str, store: &store::Store) -> Result<Password> {
        let previous = {
            let tx = store.read()?;
            tx.open_table(META)?
                .get(PASSWORD_HASH)?
                .and_then(|v| <[u8; 48]>::try_from(v.value()).ok())
        };
        if let Some(stored) = previous {
            let mut salt = [0u8; 16];
            salt.copy_from_slice(&stored[..16]);
            let hash = derive(clear, &salt);
            if bool::from(hash.ct_eq(&stored[16..])) {
                return Ok(Password { salt, hash });
            }
        }
        let password = Password::new(clear);
        let tx = store.write()?;
        tx.open_table(META)?
            .insert(PASSWORD_HASH, password.record().as_slice())?;
        tx.open_table(ADMIN_SESSIONS)?.retain(|_, _| false)?;
        tx.commit()?;
        if previous.is_some() {
            tracing::info!("administrator password changed: every session ended");
        }
        Ok(password)
    }

    /// Compares in constant time over the whole hash, so timing tells nothing about where a
    /// wrong password first differs.
    fn matches(&self, candidate: &str) -> bool {
        derive(candidate, &self.salt).ct_eq(&self.hash).into()
    }
}

fn derive(password: &str, salt: &[u8]) -> [u8; 32] {
    let params = Params::new(M_COST_KIB, T_COST, 1, Some(32)).expect("valid Argon2 parameters");
    let mut out = [0u8; 32];
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
        .hash_password_into(password.as_bytes(), salt, &mut out)
        .expect("Argon2 with a 16-byte salt");
    out
}

/// The first-boot password in clear text while no administrator has logged in yet; `None` when
/// the password did not come from `access.admin_password_file` or the first login has happened.
///
/// Deliberately not `Debug`: the clear text must never reach a log line.
#[derive(Default)]
pub struct FirstBoot(Mutex<Option<String>>);

impl FirstBoot {
    /// What to keep at start: `clear` only when it came from the password file (no
    /// `access.admin_password`, which `ADMIN_PASSWORD` and `--admin-password` also set) and `store`
    /// has no record of a login.
    pub(super) fn load(
        config: &crate::config::Config,
        clear: Option<&str>,
        store: &store::Store,
    ) -> Result<FirstBoot> {
        let keep = match clear {
            Some(p) if from_file(config) && !p.is_empty() => {
                let tx = store.read()?;
                let logged_in = tx.open_table(META)?.get(FIRST_LOGIN)?.is_some();
                (!logged_in).then(|| p.to_string())
            }
            _ => None,
        };
        Ok(FirstBoot(Mutex::new(keep)))
    }

    fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn is_on(&self) -> bool {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    fn end(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

/// Failed logins from every address together, in the current window: a client that adds
/// addresses at will escapes the per-address limit, not this one.
#[derive(Default)]
pub struct AllFailures(Mutex<(u64, u64)>);

/// Failed logins in a window before any login is slowed down.
const FAILURES_BEFORE_DELAY: u64 = 20;
/// Delay per failed login beyond those, and the longest delay.
const DELAY_STEP: std::time::Duration = std::time::Duration::from_millis(250);
const DELAY_MAX: std::time::Duration = std::time::Duration::from_secs(10);

/// Whether the configured password came from `access.admin_password_file` (the first-boot password
/// shown on the display), not from `access.admin_password` (which the environment and flag also set).
pub(super) fn from_file(config: &crate::config::Config) -> bool {
    config.access.admin_password.is_none() && config.access.admin_password_file.is_some()
}

/// What a login attempt came to.
#[derive(Debug, PartialEq)]
pub enum Login {
    /// The new session token.
    Success(String),
    WrongPassword,
    /// Too many failures from this address: retry after this many seconds.
    Limited(u64),
}

/// What a password change came to.
#[derive(Debug, PartialEq)]
pub enum Change {
    Changed,
    /// The current password given was wrong.
    WrongPassword,
    /// Too many failures from this address: retry after this many seconds.
    Limited(u64),
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn token_key(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

impl Engine {
    /// Whether an administrator password is configured (else the kiosk is in setup mode).
    pub fn has_admin_password(&self) -> bool {
        self.password
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Whether the password in force is the first-boot one from `access.admin_password_file`, which
    /// the administrator must replace before doing anything else.
    pub fn must_change_password(&self) -> bool {
        self.must_change.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether `candidate` is the password in force (constant time, one Argon2 derivation).
    fn password_matches(&self, candidate: &str) -> Result<bool> {
        let password = self.password.read().unwrap_or_else(|e| e.into_inner());
        let configured = password
            .as_ref()
            .ok_or_else(|| Error::Conflict("no administrator password is configured".into()))?;
        Ok(configured.matches(candidate))
    }

    /// The administrator password in clear text, for the kiosk's own display only, while the
    /// kiosk is in first boot: the password came from `access.admin_password_file` (not from
    /// `access.admin_password` or `ADMIN_PASSWORD`) and no administrator has ever logged in on this
    /// data directory. `None` from the first successful login on, restarts included.
    ///
    /// Never return this from an API route and never log it.
    pub fn first_boot_password(&self) -> Option<String> {
        self.first_boot.get()
    }

    /// Whether the kiosk is in first boot ([`Engine::first_boot_password`] is some), without
    /// copying the password.
    pub fn in_first_boot(&self) -> bool {
        self.first_boot.is_on()
    }

    /// Seconds `client` must still wait before trying to log in, if it is rate limited.
    pub fn login_wait(&self, client: &str) -> Result<Option<u64>> {
        let tx = self.store.read()?;
        let failures: Option<LoginFailures> = store::get(&tx.open_table(LOGIN_FAILURES)?, client)?;
        let now = unix_now();
        Ok(failures.and_then(|f| {
            let end = f.window_start + self.config.access.login_window_secs;
            (f.count >= self.config.access.login_max_failures && now < end).then(|| end - now)
        }))
    }

    /// Checks a password for `client`; a success opens a session, clears the address's
    /// failures and, the first time, records that the administrator has logged in (which ends
    /// first boot); a failure is counted. Without a configured password this is an error.
    pub fn login(&self, client: &str, password: &str) -> Result<Login> {
        if !self.has_admin_password() {
            return Err(Error::Internal(
                "no administrator password is configured".into(),
            ));
        }
        if let Some(wait) = self.count_attempt(client)? {
            return Ok(Login::Limited(wait));
        }
        if !self.password_matches(password)? {
            self.count_failure_everywhere();
            return Ok(Login::WrongPassword);
        }
        let now = unix_now();
        let tx = self.store.write()?;
        tx.open_table(LOGIN_FAILURES)?.remove(client)?;
        let mut raw = [0u8; 32];
        getrandom::fill(&mut raw).map_err(|e| Error::Internal(format!("random source: {e}")))?;
        let token = URL_SAFE_NO_PAD.encode(raw);
        {
            let mut sessions = tx.open_table(ADMIN_SESSIONS)?;
            sessions.retain(|_, v| {
                store::from_json::<AdminSession>(v).is_ok_and(|s| s.expires_at > now)
            })?;
            let session = AdminSession {
                created_at: store::now(),
                expires_at: now + self.config.access.admin_session_secs,
            };
            sessions.insert(
                token_key(&token).as_str(),
                store::to_json(&session).as_slice(),
            )?;
        }
        let first = !store::meta_flag(&tx, FIRST_LOGIN)?;
        if first {
            store::set_meta_flag(&tx, FIRST_LOGIN)?;
        }
        tx.commit()?;
        if first {
            tracing::info!("first administrator login: first boot is over");
        }
        self.first_boot.end();
        Ok(Login::Success(token))
    }

    /// Counts a password check by `client` as a failure, in the same write transaction as the
    /// limit check and before the password is compared, so concurrent guesses cannot all pass
    /// the check before any of them is counted (a success then clears the count). `Some(wait)`
    /// when the client is rate limited.
    /// A login attempt without a password: counted against `client` like a wrong one (so a
    /// flood of empty attempts meets the same limit); Some(wait) once the limit is reached.
    pub fn login_refused(&self, client: &str) -> Result<Option<u64>> {
        self.count_failure_everywhere();
        self.count_attempt(client)
    }

    fn count_failure_everywhere(&self) {
        let now = unix_now();
        let mut all = self
            .all_failures
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if now >= all.0 + self.config.access.login_window_secs {
            *all = (now, 0);
        }
        all.1 += 1;
    }

    /// How long the next login waits before its password is checked: nothing, until failed
    /// logins from all addresses together pass `FAILURES_BEFORE_DELAY` in the window, then a
    /// little more for each (at most `DELAY_MAX`).
    pub fn login_delay(&self) -> std::time::Duration {
        let all = *self
            .all_failures
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if unix_now() >= all.0 + self.config.access.login_window_secs {
            return std::time::Duration::ZERO;
        }
        let beyond = all.1.saturating_sub(FAILURES_BEFORE_DELAY);
        DELAY_STEP.saturating_mul(beyond as u32).min(DELAY_MAX)
    }

    fn count_attempt(&self, client: &str) -> Result<Option<u64>> {
        let now = unix_now();
        let window = self.config.access.login_window_secs;
        let tx = self.store.write()?;
        {
            let mut table = tx.open_table(LOGIN_FAILURES)?;
            let previous: Option<LoginFailures> = store::get(&table, client)?;
            let failures = match previous {
                Some(f) if now < f.window_start + window => {
                    if f.count >= self.config.access.login_max_failures {
                        return Ok(Some(f.window_start + window - now));
                    }
                    LoginFailures {
                        count: f.count + 1,
                        ..f
                    }
                }
                _ => LoginFailures {
                    count: 1,
                    window_start: now,
                },
            };
            table.insert(client, store::to_json(&failures).as_slice())?;
        }
        tx.commit()?;
        Ok(None)
    }

    /// Replaces the password in force by `new`, once `current` checks out (counted against
    /// `client`'s failed attempts like a login). The new password is stored as a hash and wins
    /// over the configured one from then on; every administrator session but `keep` (the
    /// caller's) ends in the same transaction.
    pub fn change_password(
        &self,
        client: &str,
        keep: Option<&str>,
        current: &str,
        new: &str,
    ) -> Result<Change> {
        if !self.has_admin_password() {
            return Err(Error::Conflict(
                "no administrator password is configured".into(),
            ));
        }
        if new.chars().count() < MIN_PASSWORD_CHARS {
            return Err(super::error::bad(format!(
                "the new password must have at least {MIN_PASSWORD_CHARS} characters"
            )));
        }
        if new.len() > MAX_PASSWORD_BYTES {
            return Err(super::error::bad(format!(
                "the new password must have at most {MAX_PASSWORD_BYTES} bytes"
            )));
        }
        if new == current {
            return Err(super::error::bad(
                "the new password must differ from the current one",
            ));
        }
        if let Some(wait) = self.count_attempt(client)? {
            return Ok(Change::Limited(wait));
        }
        if !self.password_matches(current)? {
            return Ok(Change::WrongPassword);
        }
        let password = Password::new(new);
        let keep = keep.map(token_key);
        // The first change after first boot: whatever was made with the first-boot password
        // (which a passer-by may have read on the screen) goes with it.
        let first_change = self.must_change_password();
        let tx = self.store.write()?;
        tx.open_table(LOGIN_FAILURES)?.remove(client)?;
        if first_change {
            tx.open_table(crate::store::tables::CLIENT_KEYS)?
                .retain(|_, _| false)?;
        }
        {
            let mut meta = tx.open_table(META)?;
            meta.insert(PASSWORD_HASH, password.record().as_slice())?;
            meta.insert(CHANGED, [1u8].as_slice())?;
        }
        tx.open_table(ADMIN_SESSIONS)?
            .retain(|k, _| keep.as_deref() == Some(k))?;
        tx.commit()?;
        *self.password.write().unwrap_or_else(|e| e.into_inner()) = Some(password);
        self.must_change
            .store(false, std::sync::atomic::Ordering::Relaxed);
        self.first_boot.end();
        self.credentials_changed();
        if first_change {
            tracing::info!(
                "administrator password changed (the first-boot one): other sessions and every client key ended"
            );
        } else {
            tracing::info!("administrator password changed in the console: other sessions ended");
        }
        Ok(Change::Changed)
    }

    /// Whether `token` names a live administrator session.
    pub fn admin_session_valid(&self, token: &str) -> bool {
        let lookup = || -> Result<bool> {
            let tx = self.store.read()?;
            let s: Option<AdminSession> =
                store::get(&tx.open_table(ADMIN_SESSIONS)?, &token_key(token))?;
            Ok(s.is_some_and(|s| s.expires_at > unix_now()))
        };
        !token.is_empty() && lookup().unwrap_or(false)
    }

    /// Ends every administrator session except `keep` ("sign out everywhere"); returns how many
    /// ended.
    pub fn logout_all(&self, keep: Option<&str>) -> Result<usize> {
        let keep = keep.map(token_key);
        let tx = self.store.write()?;
        let mut ended = 0;
        tx.open_table(ADMIN_SESSIONS)?.retain(|k, _| {
            let stay = keep.as_deref() == Some(k);
            ended += usize::from(!stay);
            stay
        })?;
        tx.commit()?;
        self.credentials_changed();
        Ok(ended)
    }

    /// Ends a session (logout); unknown tokens are ignored.
    pub fn logout(&self, token: &str) -> Result<()> {
        let tx = self.store.write()?;
        tx.open_table(ADMIN_SESSIONS)?
            .remove(token_key(token).as_str())?;
        tx.commit()?;
        self.credentials_changed();
        Ok(())
    }

    /// A credential ended (a logout, a revoked key, a password change): every open stream checks
    /// again that what opened it still stands.
    pub(super) fn credentials_changed(&self) {
        self.credentials.send_modify(|n| *n += 1);
    }

    /// Changes whenever a credential ends (see `credentials_changed`).
    pub fn credential_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.credentials.subscribe()
    }

    /// Removes expired sessions and finished rate-limit windows; run periodically.
    pub fn expire_logins(&self) -> Result<()> {
        let now = unix_now();
        let window = self.config.access.login_window_secs;
        let tx = self.store.write()?;
        tx.open_table(ADMIN_SESSIONS)?
            .retain(|_, v| store::from_json::<AdminSession>(v).is_ok_and(|s| s.expires_at > now))?;
        tx.open_table(LOGIN_FAILURES)?.retain(|_, v| {
            store::from_json::<LoginFailures>(v).is_ok_and(|f| now < f.window_start + window)
        })?;
        tx.commit()?;
        Ok(())
    }
}

/// `docent reset-password`: forgets the password chosen in the console, every administrator
/// session and the record of the first login, so that the next start takes the configured
/// password again (a password from `access.admin_password_file` is shown on the display once more).
/// The kiosk must be stopped: the database is opened here.
pub fn reset_password(config: &crate::config::Config) -> Result<()> {
    let store = store::Store::open(&config.data_dir, config.storage.store_cache_bytes)?;
    let tx = store.write()?;
    {
        let mut meta = tx.open_table(META)?;
        meta.remove(CHANGED)?;
        meta.remove(PASSWORD_HASH)?;
        meta.remove(FIRST_LOGIN)?;
    }
    tx.open_table(ADMIN_SESSIONS)?.retain(|_, _| false)?;
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_matches_only_itself() {
        let p = Password::new("correct horse");
        assert!(p.matches("correct horse"));
        assert!(!p.matches("correct hors"));
        assert!(!p.matches("correct horse "));
        assert!(!p.matches(""));
        let q = Password::new("correct horse");
        assert_ne!(p.hash, q.hash, "salts differ");
    }

    #[test]
    fn tokens_are_stored_hashed() {
        assert_eq!(token_key("abc").len(), 64);
        assert_ne!(token_key("abc"), "abc");
    }
}
