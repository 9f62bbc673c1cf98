//! The conversation engine: characters, sessions, history, tasks, knowledge and settings, with
//! their rules. Front doors (HTTP, WebSocket, gRPC, the kiosk's own button, the fleet client)
//! call these methods; nothing here knows which door a call came through.
//!
//! Engine methods that write block on fsync; async callers run them on the blocking pool.
//!
//! `Engine` is one type whose methods live with the resource they serve, one file each; this
//! list (checked by a tidy test) says where each method is:
//! - `mod.rs`: `open`, `data_fell_back`, `blobs`, `scratch_dir`.
//! - `settings/mod.rs`: `settings`, `watch_settings`, `update_settings`.
//! - `settings/fleet.rs`: `set_fleet_paused`.
//! - `auth.rs`: `has_admin_password`, `must_change_password`, `password_matches`,
//!   `first_boot_password`, `in_first_boot`, `login_wait`, `login`, `login_refused`,
//!   `count_failure_everywhere`, `login_delay`, `count_attempt`, `change_password`,
//!   `admin_session_valid`, `logout_all`, `logout`, `credentials_changed`, `credential_changes`,
//!   `expire_logins`.
//! - `access.rs`: `create_client_key`, `client_keys`, `revoke_client_key`, `client_of_key`,
//!   `metrics_key`, `key_of`, `touch_client_key`, `session_for`, `live_for`, `spend_message`.
//! - `characters.rs`: `ensure_default_character`, `characters_json`, `listed`, `character`,
//!   `characters_not_on_this_kiosk`, `character_record`, `create_character`, `update_character`,
//!   `delete_character`, `add_image`, `images`, `image`, `avatar`, `delete_image`, `activate_image`,
//!   `put_clip`, `clip`, `active_clips`, `delete_clip`.
//! - `sessions.rs`: `store_session_language`, `kiosk_character`, `create_session`,
//!   `create_session_as`, `create_seeded_session`, `seed_history`, `sweep_sessions`,
//!   `expire_sessions`, `is_staff`, `session_count`, `sessions`, `session`, `delete_session`,
//!   `session_ended`, `post_message`.
//! - `live.rs`: `live`, `set_visit_language`, `live_if_active`, `probe`, `stall_for_test`,
//!   `close_live`.
//! - `turn/mod.rs`: `start_turn`, `listen`, `interrupt`, `spawn_turn`, `plan`, `providers`,
//!   `session_voice`, `stream_bounds`, `provider_for`.
//! - `turn/standard.rs`: `answer_question`.
//! - `turn/ask.rs`: `ask_knowledge`.
//! - `providers/dispatch.rs`: `recognise`, `generate`, `speak`, `converse`.
//! - `providers/local/turns.rs`: `recogniser_model`, `offline_answer`, `offline_heard`,
//!   `offline_weigh`, `offline_topics`, `offline_topics_in`, `offline_reply_in`, `offline_reply`.
//! - `providers/speech.rs`: `voices`, `test_voice`, `voice_sample`, `speak_line`.
//! - `providers/health.rs`: `components`, `provider_health`, `inference_connected`, `reachability`,
//!   `test_settings`, `record_call`, `test_providers`, `checks_of`.
//! - `knowledge/mod.rs`: `knowledge_epoch`, `knowledge_texts`, `knowledge_sources_text`,
//!   `knowledge_by_language`, `character_exists`, `sources`, `add_sources`, `store_sources`,
//!   `delete_source`, `reindex_source`, `remove_knowledge_of`, `search_knowledge`, `index_next`.
//! - `knowledge/faq.rs`: `faq_record`, `faq`, `set_faq`, `save_faq`, `faq_csv`, `set_faq_csv`.
//! - `knowledge/recordings.rs`: `recordings`, `add_recording`, `replace_recording`,
//!   `delete_recording`, `recording_wav`, `recorded_answer`.
//! - `knowledge/screen.rs`: `on_screen_questions`, `faq_questions`, `faq_questions_by_language`,
//!   `faq_pairs`, `faq_entries`, `screen_choice`, `set_on_screen`, `ask_on_screen`.
//! - `history.rs`: `recent_history`, `store_message`, `record_message`, `save_turn_seq`, `history`,
//!   `history_batch`, `purge_history`, `retain_history`.
//! - `statistics.rs`: `unmatched_questions`, `statistics`.
//! - `hours.rs`: `use_clock`, `local_now`, `opening`.
//! - `metrics.rs`: `data_free_bytes`.
//! - `availability.rs`: `sample_availability`, `sampled_up_to`, `availability`.
//! - `privacy.rs`: `retention_now`, `advance_clock_for_test`, `sweep_transcripts`, `forget_visit`,
//!   `retire_old`, `disclosure`.
//! - `tasks.rs`: `task`, `session_tasks`, `task_events`, `post_task_event`, `post_artifact`,
//!   `announce`, `artifact`.
//! - `site.rs`: `ensure_site_document`, `site_document`, `put_site_document`, `seed_site_document`,
//!   `image_store_on`, `site_image`, `put_site_image`, `delete_site_image`.
//! - `launch.rs`: `launch_config`, `update_launch_config`.
//! - `backup.rs`: `write_backup`, `write_archive`, `snapshot_into`, `restore_backup`,
//!   `restore_with`, `check_reserve`, `headroom`, `has_room_for`, `restore_staged`,
//!   `maintenance_lock`, `request_restart`, `restart_token`.
//! - `content.rs`: `content_work_dir`, `export_content`, `apply_content`, `character_count`.

pub mod access;
pub mod auth;
pub mod availability;
pub mod backup;
pub mod characters;
pub mod content;
pub mod error;
pub mod history;
pub mod hours;
pub mod ids;
pub mod knowledge;
pub mod language;
pub mod launch;
pub mod live;
pub mod media;
pub mod metrics;
pub mod pcm;
pub mod privacy;
pub mod providers;
pub mod redact;
pub mod sessions;
pub mod settings;
pub mod site;
pub mod spoken;
pub mod statistics;
pub mod tasks;
pub mod turn;
pub mod voice;

use std::sync::Arc;
use std::time::Instant;

use crate::config::Config;
use crate::store::Store;
pub use crate::store::blobs::{BlobRef, Blobs};
/// Now, as the records write it (RFC 3339, milliseconds).
pub use crate::store::now;
/// A stored message of the history, as front doors write it out (the export).
pub use crate::store::records::Message;
/// A question on the kiosk's screen, as the device layer reads it.
pub use crate::store::records::ScreenQuestion;
pub use error::{Error, Result};
pub use ids::{CharacterId, SessionId};

/// The one engine of the process, shared by every front door.
pub struct Engine {
    store: Store,
    pub config: Config,
    pub started: Instant,
    characters: characters::ListCache,
    pub knowledge: knowledge::Indexer,
    settings: settings::Live,
    /// The password in force; replaced when the administrator changes it.
    password: std::sync::RwLock<Option<auth::Password>>,
    /// Whether the password in force is the first-boot one, to be changed at once.
    must_change: std::sync::atomic::AtomicBool,
    /// Failed logins from all addresses together (the growing delay of every login).
    all_failures: auth::AllFailures,
    /// Bumped when a credential ends, so that streams it opened end too.
    credentials: tokio::sync::watch::Sender<u64>,
    first_boot: auth::FirstBoot,
    /// Cancelled when an administrator asks for a restart (or a restore needs one).
    restart: tokio_util::sync::CancellationToken,
    /// Held while a backup or restore runs: one at a time.
    maintenance: std::sync::Mutex<()>,
    live: live::Registry,
    /// Client for HTTP providers (TLS through rustls with ring).
    http: reqwest::Client,
    recogniser_models: providers::EpochCache<providers::local::Model>,
    answer_topics: providers::EpochCache<providers::local::answer::Topics>,
    clarifying: providers::local::Clarifying,
    budgets: access::Budgets,
    last_used: access::LastUsed,
    reachability: providers::Reachability,
    last_calls: providers::LastCalls,
    /// The open sessions counted, with the store version counted at (a health poll's count).
    session_count: std::sync::Mutex<Option<(u64, usize)>>,
    site_document: site::DocumentCache,
    /// The transcripts' retention sweep (`privacy`).
    pub retention: privacy::Retention,
    /// Where the kiosk's local time comes from (`hours`): the system's, or a test's.
    clock: std::sync::RwLock<Arc<dyn hours::Clock>>,
    /// This run's instruments, which `GET /metrics` writes out.
    pub metrics: metrics::Metrics,
    /// The availability sampler's last sample (`availability`).
    sampler: availability::Sampler,
}

impl Engine {
    /// Opens the store and prepares the engine: a default character on first start, knowledge
    /// sources interrupted by a crash queued for indexing again. Launch parameters saved from the
    /// web are applied over `config`.
    pub fn open(config: Config) -> Result<Arc<Engine>> {
        let clear = config
            .resolve_admin_password()
            .map_err(|e| Error::BadRequest(e.to_string()))?;
        let schema = match config.test.schema_version.filter(|_| config.test.hooks) {
            Some(version) => crate::store::Schema {
                version,
                upgrade: |_, _| Ok(()),
            },
            None => crate::store::CURRENT,
        };
        let store = Store::open_as(&config.data_dir, config.storage.store_cache_bytes, &schema)?
            .with_reserve(config.storage.data_reserve_bytes);
        let chosen = auth::Password::chosen(&store)?;
        let must_change = chosen.is_none() && clear.is_some() && auth::from_file(&config);
        let password = match (chosen, clear.as_deref()) {
            (Some(chosen), _) => Some(chosen),
            (None, Some(p)) => Some(auth::Password::load(p, &store)?),
            (None, None) => None,
        };
        let first_boot = auth::FirstBoot::load(&config, clear.as_deref(), &store)?;
        drop(clear);
        let config = launch::apply_saved(&store, config)?;
        let settings = settings::Live::load(&store)?;
        // Several engines may open in one process (tests); the first installation wins.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = http_client(config.providers.connect_timeout_ms)?;
        let scratch = config.data_dir.join("tmp");
        if scratch.exists() {
            std::fs::remove_dir_all(&scratch)?;
        }
        std::fs::create_dir_all(&scratch)?;
        let engine = Arc::new(Engine {
            store,
            config,
            started: Instant::now(),
            characters: characters::ListCache::default(),
            knowledge: knowledge::Indexer::default(),
            settings,
            password: std::sync::RwLock::new(password),
            must_change: must_change.into(),
            credentials: tokio::sync::watch::Sender::new(0),
            all_failures: Default::default(),
            first_boot,
            restart: Default::default(),
            maintenance: Default::default(),
            live: live::Registry::default(),
            http,
            recogniser_models: Default::default(),
            answer_topics: Default::default(),
            clarifying: Default::default(),
            budgets: access::Budgets::default(),
            last_used: access::LastUsed::default(),
            reachability: providers::Reachability::default(),
            last_calls: providers::LastCalls::default(),
            session_count: Default::default(),
            site_document: site::DocumentCache::default(),
            retention: privacy::Retention::default(),
            clock: std::sync::RwLock::new(Arc::new(hours::SystemClock)),
            metrics: metrics::Metrics::default(),
            sampler: availability::Sampler::default(),
        });
        engine.ensure_default_character()?;
        // The offline engine's voices are listed once, off the path of the first turn.
        std::thread::spawn(|| voice::offline_voices().len());
        engine.ensure_site_document()?;
        knowledge::Indexer::start(&engine)?;
        Ok(engine)
    }
}

impl Engine {
    /// The stored files (avatars, clips, knowledge sources, site images): what front doors
    /// serve and stage uploads in. Records that name them are written through the engine.
    /// Set when this start opened the data as it was before a newer version migrated it.
    pub fn data_fell_back(&self) -> Option<&str> {
        self.store.fell_back.as_deref()
    }

    pub fn blobs(&self) -> &Blobs {
        self.store.blobs()
    }

    /// A directory for short-lived working files, emptied at every start.
    pub fn scratch_dir(&self) -> std::path::PathBuf {
        self.config.data_dir.join("tmp")
    }
}

/// Checks one path segment naming a stored file (`{filename}`, `{imgbase}`, `{variant}`): the
/// name is only ever a key, but a name that could mean a path is refused outright.
pub fn check_segment(what: &str, s: &str) -> Result<()> {
    if s.is_empty() || s.len() > 255 {
        return Err(error::bad(format!("{what} must be 1 to 255 bytes")));
    }
    if s.contains(['/', '\\', '\0']) || s.contains("..") {
        return Err(error::bad(format!(
            "{what} must not contain '/', '\\', NUL or '..'"
        )));
    }
    if s.chars().any(char::is_control) {
        return Err(error::bad(format!(
            "{what} must not contain control characters"
        )));
    }
    Ok(())
}

/// Checks that an id looks like one we issue, so malformed ids are 404 without a lookup that
/// could treat them as a key prefix.
pub fn is_id(s: &str) -> bool {
    uuid::Uuid::try_parse(s).is_ok() && !s.contains('/')
}

pub fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The providers' HTTP client. An appliance without a CA store (no `ca-certificates`) still
/// starts: plain-HTTP providers on the LAN work, and HTTPS ones fail their certificate check
/// with a clear error instead of the whole kiosk refusing to run.
fn http_client(connect_timeout_ms: u64) -> Result<reqwest::Client> {
    let builder = || {
        reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_millis(connect_timeout_ms))
    };
    builder().build().or_else(|e| {
        tracing::warn!("no usable CA certificates ({e}); HTTPS providers cannot be verified");
        builder()
            .tls_certs_only([])
            .build()
            .map_err(|e| Error::Internal(format!("HTTP client: {e}")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_that_could_be_paths_are_refused() {
        for bad in ["", "..", "a/b", "a\\b", "a\0b", "...", "x..y", "a\nb"] {
            assert!(check_segment("name", bad).is_err(), "{bad:?}");
        }
        for good in ["img_001.png", "idle", "800x480", "clip.mp4", "été.mp4"] {
            assert!(check_segment("name", good).is_ok(), "{good:?}");
        }
    }
}
