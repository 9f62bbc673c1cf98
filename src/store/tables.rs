//! Every redb table of the kiosk, in one place so the whole schema can be read at a glance.
//!
//! Values are JSON records unless noted. Child records use `parent/child` string keys (see
//! `store::key`), so all children of a parent are one range scan.

use redb::{TableDefinition, WriteTransaction};

use super::Result;

/// Schema version and named counters (big-endian u64 values), and one-time flags (`[1]`):
/// `default_character` (the default character was created once), `admin_first_login` (an
/// administrator has logged in: first boot is over, see `engine::auth`); and
/// `availability_sampled`, the local minute availability was counted up to (see
/// `engine::availability`).
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
/// Blob id -> `BlobRef`: the blob files that committed records own.
pub const BLOBS: TableDefinition<&str, &[u8]> = TableDefinition::new("blobs");
/// Character id -> `Character`.
pub const CHARACTERS: TableDefinition<&str, &[u8]> = TableDefinition::new("characters");
/// `character/filename` -> `Image` (avatar images of a character).
pub const IMAGES: TableDefinition<&str, &[u8]> = TableDefinition::new("images");
/// `character/imgbase/variant/filename` -> `Clip` (variant may be empty).
pub const CLIPS: TableDefinition<&str, &[u8]> = TableDefinition::new("clips");
/// Session id -> `Session`.
pub const SESSIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("sessions");
/// (character id, message seq) -> `Message`: the conversation history, in the order it was said.
pub const MESSAGES: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("messages");
/// (character id, day `YYYY-MM-DD`) -> `Day`: counts of visits and questions whose
/// transcripts are gone (retention, a forgotten visit). No text: kept as long as the character.
pub const DAILY: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("daily_statistics");
/// Local day `YYYY-MM-DD` -> `Availability` (`engine::availability`): the seconds the kiosk was
/// open and fully serving that day; the last 400 days are kept.
pub const AVAILABILITY: TableDefinition<&str, &[u8]> = TableDefinition::new("availability");
/// Task id -> `Task`.
pub const TASKS: TableDefinition<&str, &[u8]> = TableDefinition::new("tasks");
/// (session id, task seq) -> task id: a session's tasks in creation order.
pub const SESSION_TASKS: TableDefinition<(&str, u64), &str> = TableDefinition::new("session_tasks");
/// (task id, event seq) -> `TaskEvent`.
pub const TASK_EVENTS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("task_events");
/// `task/artifact` -> `Artifact`.
pub const ARTIFACTS: TableDefinition<&str, &[u8]> = TableDefinition::new("artifacts");
/// `character/source` -> `Source` (a knowledge file).
pub const SOURCES: TableDefinition<&str, &[u8]> = TableDefinition::new("knowledge_sources");
/// Character id -> `Faq`: the structured FAQ with its translations (see
/// `engine::knowledge::faq`); its text reaches the index through managed sources.
pub const FAQS: TableDefinition<&str, &[u8]> = TableDefinition::new("faqs");
/// (source id, chunk number) -> passage text (UTF-8).
pub const CHUNKS: TableDefinition<(&str, u32), &str> = TableDefinition::new("knowledge_chunks");
/// (source id, term) -> packed postings of that term in that source (see `engine::knowledge::index`).
pub const POSTINGS: TableDefinition<(&str, &str), &[u8]> =
    TableDefinition::new("knowledge_postings");
/// `"settings"` -> the provider and kiosk settings document.
pub const SETTINGS: TableDefinition<&str, &[u8]> = TableDefinition::new("settings");
/// Launch parameter path (e.g. `ptt.line`) -> its saved JSON value, applied at the next start.
pub const LAUNCH: TableDefinition<&str, &[u8]> = TableDefinition::new("launch_config");

/// SHA-256 (hex) of an administrator session token -> `AdminSession`. Raw tokens are never stored.
pub const ADMIN_SESSIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("admin_sessions");
/// Client key id -> `ClientKey` (the key itself is never stored, only its SHA-256).
pub const CLIENT_KEYS: TableDefinition<&str, &[u8]> = TableDefinition::new("client_keys");
/// Client address -> `LoginFailures`: failed logins in the current rate-limit window.
pub const LOGIN_FAILURES: TableDefinition<&str, &[u8]> = TableDefinition::new("login_failures");
/// `"document"` -> the site content document, exactly as it was stored (JSON text).
pub const SITE: TableDefinition<&str, &[u8]> = TableDefinition::new("site");
/// Image key -> `BlobRef` of a site image (the blob's content type is its HTTP metadata).
pub const SITE_IMAGES: TableDefinition<&str, &[u8]> = TableDefinition::new("site_images");

/// Something done to every table in turn (create, copy, check): `each` is the one list of the
/// schema's tables, so no use of the whole schema can miss one.
pub trait Visit {
    fn visit<K: redb::Key + 'static, V: redb::Value + 'static>(
        &mut self,
        def: TableDefinition<K, V>,
    ) -> Result<()>;
}

/// Visits every table of the schema.
pub fn each(v: &mut impl Visit) -> Result<()> {
    v.visit(META)?;
    v.visit(BLOBS)?;
    v.visit(CHARACTERS)?;
    v.visit(IMAGES)?;
    v.visit(CLIPS)?;
    v.visit(SESSIONS)?;
    v.visit(MESSAGES)?;
    v.visit(DAILY)?;
    v.visit(AVAILABILITY)?;
    v.visit(TASKS)?;
    v.visit(SESSION_TASKS)?;
    v.visit(TASK_EVENTS)?;
    v.visit(ARTIFACTS)?;
    v.visit(SOURCES)?;
    v.visit(FAQS)?;
    v.visit(CHUNKS)?;
    v.visit(POSTINGS)?;
    v.visit(SETTINGS)?;
    v.visit(LAUNCH)?;
    v.visit(ADMIN_SESSIONS)?;
    v.visit(CLIENT_KEYS)?;
    v.visit(LOGIN_FAILURES)?;
    v.visit(SITE)?;
    v.visit(SITE_IMAGES)?;
    Ok(())
}

/// Opens every table once so that readers never meet a missing table.
pub fn create_all(tx: &WriteTransaction) -> Result<()> {
    struct Create<'a>(&'a WriteTransaction);
    impl Visit for Create<'_> {
        fn visit<K: redb::Key + 'static, V: redb::Value + 'static>(
            &mut self,
            def: TableDefinition<K, V>,
        ) -> Result<()> {
            self.0.open_table(def)?;
            Ok(())
        }
    }
    each(&mut Create(tx))
}
