//! Configuration: a TOML file, then environment and command-line overrides.
//!
//! Every key has a default, so an empty file (or none) gives the embedded kiosk. Unknown keys are an
//! error naming the key: a typo in a config must not silently fall back to a default. The keys are
//! grouped in tables by what they are about; a key written at the top level as before the tables
//! is refused with its new place named (`MOVED_KEYS`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The whole configuration. Field names are the TOML keys; each section is a TOML table
/// (`[connections]`, `[access]`, ...), so a reader finds a key by what it is about.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Persistent data directory (redb file and blobs).
    pub data_dir: PathBuf,
    /// Address of the one listener (HTTP, WebSocket, gRPC; plain and TLS on the same port).
    pub listen: SocketAddr,
    /// Which devices the kiosk uses: `auto` (real where present, simulated for the rest), `sim`,
    /// `real` or `none` (a pure server).
    pub devices: DeviceMode,
    /// Stall limit of the watchdog when systemd sets none (`WATCHDOG_USEC`): the engine or the
    /// kiosk loop making no progress this long makes docent exit with code 70; 0 turns that off.
    pub watchdog_secs: u64,
    pub connections: ConnectionsConfig,
    pub access: AccessConfig,
    pub sessions: SessionsConfig,
    pub history: HistoryConfig,
    pub providers: ProvidersConfig,
    pub storage: StorageConfig,
    pub limits: Limits,
    pub audio: AudioConfig,
    pub ptt: PttConfig,
    /// A touch screen to choose questions on without speaking (docs/touch.md).
    pub touch: TouchConfig,
    /// Up to three buttons to choose questions on without speaking (docs/touch.md).
    pub choice_buttons: ChoiceButtonsConfig,
    pub display: DisplayConfig,
    pub kiosk: KioskConfig,
    pub mdns: MdnsConfig,
    pub update: UpdateConfig,
    pub fleet: FleetConfig,
    /// Hooks for the test rig only, kept apart so that a kiosk's file shows at a glance that
    /// none is on.
    pub test: TestHooks,
}

/// What the listener lets in at once, and for how long: bounds that keep many or slow clients
/// from using up the board.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ConnectionsConfig {
    /// Connections open at once. At this cap or the two below, a newcomer takes the place of
    /// an idle connection of whoever holds the most; with none idle, it is closed at once.
    pub max: usize,
    /// Connections open at once from one client address (loopback included).
    pub max_per_peer: usize,
    /// Connections open at once from one client network (an IPv4 /24, an IPv6 /64): one
    /// client that adds addresses at will still meets a bound.
    pub max_per_subnet: usize,
    /// Bytes of request bodies being received at once, over every request of callers that
    /// are not the administrator (body bounds per route apply besides); beyond it a body is
    /// refused (503), so that many slow bodies cannot use up the board's memory.
    pub request_body_budget_bytes: usize,
    /// Time a client has to send a request's headers (and to finish a TLS handshake).
    pub header_read_timeout_ms: u64,
    /// A connection with no bytes either way for this long is closed.
    pub idle_timeout_secs: u64,
    /// Live WebSocket chats at once; one more is refused with 503.
    pub max_websockets: usize,
    /// gRPC `Converse` streams at once; one more ends with RESOURCE_EXHAUSTED.
    pub max_grpc_streams: usize,
    /// Memory shared by the utterances that WebSocket and gRPC clients are sending; a client
    /// that would go beyond it is closed (1013, RESOURCE_EXHAUSTED).
    pub stream_buffer_bytes: usize,
}

/// Who may call what: TLS, passwords and tokens, origins, proxies, and the bounds on logins.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct AccessConfig {
    /// PEM certificate chain and private key of the HTTPS listener; when unset, a self-signed
    /// certificate is created once in `data_dir/tls/`.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// Lets `POST /api/auth` work over plain HTTP from another machine (only where TLS is
    /// terminated in front of the kiosk).
    pub allow_plain_http_login: bool,
    /// Administrator password in clear text (prefer `admin_password_file` or `ADMIN_PASSWORD`).
    pub admin_password: Option<String>,
    /// File whose first line is the administrator password (written at first boot on the image).
    pub admin_password_file: Option<PathBuf>,
    /// Bearer token that lets non-loopback callers use the internal routes.
    pub internal_token: Option<String>,
    /// Lets conversation routes (sessions, tasks, WebSocket chat, gRPC) be called from the LAN
    /// without credentials, as before client keys existed; a warning is logged at start.
    pub open_conversation_api: bool,
    /// Whether a caller connected over loopback counts as the kiosk's own (a conversation
    /// client without credentials, an administrator in setup mode). Tests turn it off to act as
    /// a LAN client while connecting to 127.0.0.1.
    pub loopback_is_trusted: bool,
    /// Origins (`scheme://host[:port]`) whose pages may read responses to requests that carry
    /// credentials (cookie or `Authorization`); none: same-origin only.
    pub cors_origins: Vec<String>,
    /// Lifetime of an administrator login.
    pub admin_session_secs: u64,
    /// Failed logins allowed per client address inside `login_window_secs`.
    pub login_max_failures: u32,
    pub login_window_secs: u64,
    /// Peers whose `Edge-Connecting-IP` / `X-Forwarded-For` header names the client; from any
    /// other peer a login is counted against the TCP peer's address (a header is the client's
    /// word, so trusting it by default would let anyone pick whose count a guess lands on).
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// Password checks (Argon2, 19 MiB each) running at once; further logins wait briefly, then
    /// get 429, so parallel logins cannot exhaust memory.
    pub login_concurrency: usize,
}

/// Conversations: how many at once, how long they live, how fast one caller may talk.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SessionsConfig {
    /// Live conversation sessions allowed at once.
    pub max: usize,
    /// Of those, the places one caller (a client key, loopback, the open API) may hold; the
    /// kiosk's own visitor session never counts and is never refused a place.
    pub max_per_client: usize,
    /// Live WebSocket chats, and gRPC `Converse` streams, one caller may hold at once (of
    /// `connections.max_websockets` and `connections.max_grpc_streams`).
    pub max_streams_per_client: usize,
    /// A session with no activity for this long is closed and stops counting against the cap.
    pub idle_secs: u64,
    /// Messages (REST, WebSocket, gRPC turns) and voice checks one caller may send in a burst;
    /// `message_refill_ms` gives one back.
    pub message_burst: u32,
    pub message_refill_ms: u64,
    /// Earlier messages of the session sent to the language model with each turn.
    pub history_messages: usize,
    /// Silence (ms) that ends a streamed gRPC utterance after speech; 0 turns voice activity
    /// detection off (utterances then end with an `is_final` chunk).
    pub vad_silence_ms: u64,
}

/// What is kept of visitors' words, and for how long (docs/privacy.md).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct HistoryConfig {
    /// Messages kept per character; older ones are removed when a message is stored.
    pub max_messages: usize,
    /// Days a visitor's transcript is kept (0..=365, 30 by default; docs/privacy.md): an hourly
    /// sweep removes older messages even when nobody writes, their counts kept in the daily
    /// statistics. 0 keeps none past the visit: statistics only.
    pub max_days: RetentionDays,
    /// A visit that ended in under this many seconds keeps no transcript (0: every visit is
    /// kept); its counts stay in the statistics.
    pub min_visit_secs: u64,
    /// A question is listed as unanswered or most asked only when this many different visits
    /// asked it (3): one visitor's words alone are never shown as a statistic.
    pub questions_min_visits: usize,
}

/// Bounds on the calls to recognition, language and speech providers.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ProvidersConfig {
    /// Bound on every provider call (recognition, each reply chunk, each sentence of speech).
    pub timeout_ms: u64,
    /// Time to open a connection to a network provider.
    pub connect_timeout_ms: u64,
    /// Wait for a streamed reply's first bytes (default: `timeout_ms`).
    pub first_byte_timeout_ms: Option<u64>,
    /// Wait between two chunks of a streamed reply (default: `timeout_ms`).
    pub chunk_timeout_ms: Option<u64>,
}

/// The data partition: the room kept free, the caches in memory, the image store.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct StorageConfig {
    /// Free space kept on the data partition: below it every write answers 507 before anything
    /// is written, so the database never meets a full disk; turns still answer.
    pub data_reserve_bytes: u64,
    /// Memory for redb's page cache.
    pub store_cache_bytes: usize,
    /// Whether the site image store (`/api/img/{name}`) is available.
    pub image_store: bool,
    /// Memory for cached `/api/img` responses.
    pub image_cache_bytes: usize,
}

/// Test rig only (`[test]`): never on a kiosk in service.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TestHooks {
    /// Enables `POST /api/v1/internal/debug/stall`, which really blocks a loop so the watchdog
    /// can be tested.
    pub hooks: bool,
    /// Read only with `hooks`: this build acts as one whose schema is this newer version,
    /// reached by migrations that change nothing, so that the simulated board can update across
    /// a schema migration and fall back.
    pub schema_version: Option<u64>,
}

/// The keys that were top-level before the sections, with the table and name each has now, so
/// that an old file's error says where its key went.
const MOVED_KEYS: &[(&str, &str, &str)] = &[
    ("max_connections", "connections", "max"),
    ("max_connections_per_peer", "connections", "max_per_peer"),
    (
        "max_connections_per_subnet",
        "connections",
        "max_per_subnet",
    ),
    (
        "request_body_budget_bytes",
        "connections",
        "request_body_budget_bytes",
    ),
    (
        "header_read_timeout_ms",
        "connections",
        "header_read_timeout_ms",
    ),
    ("idle_timeout_secs", "connections", "idle_timeout_secs"),
    ("max_websockets", "connections", "max_websockets"),
    ("max_grpc_streams", "connections", "max_grpc_streams"),
    ("stream_buffer_bytes", "connections", "stream_buffer_bytes"),
    ("tls_cert", "access", "tls_cert"),
    ("tls_key", "access", "tls_key"),
    ("allow_plain_http_login", "access", "allow_plain_http_login"),
    ("admin_password", "access", "admin_password"),
    ("admin_password_file", "access", "admin_password_file"),
    ("internal_token", "access", "internal_token"),
    ("open_conversation_api", "access", "open_conversation_api"),
    ("loopback_is_trusted", "access", "loopback_is_trusted"),
    ("cors_origins", "access", "cors_origins"),
    ("admin_session_secs", "access", "admin_session_secs"),
    ("login_max_failures", "access", "login_max_failures"),
    ("login_window_secs", "access", "login_window_secs"),
    ("trusted_proxies", "access", "trusted_proxies"),
    ("login_concurrency", "access", "login_concurrency"),
    ("max_sessions", "sessions", "max"),
    ("max_sessions_per_client", "sessions", "max_per_client"),
    (
        "max_streams_per_client",
        "sessions",
        "max_streams_per_client",
    ),
    ("session_idle_secs", "sessions", "idle_secs"),
    ("message_burst", "sessions", "message_burst"),
    ("message_refill_ms", "sessions", "message_refill_ms"),
    ("history_messages", "sessions", "history_messages"),
    ("vad_silence_ms", "sessions", "vad_silence_ms"),
    ("history_max_messages", "history", "max_messages"),
    ("history_max_days", "history", "max_days"),
    ("history_min_visit_secs", "history", "min_visit_secs"),
    ("questions_min_visits", "history", "questions_min_visits"),
    ("provider_timeout_ms", "providers", "timeout_ms"),
    (
        "provider_connect_timeout_ms",
        "providers",
        "connect_timeout_ms",
    ),
    (
        "provider_first_byte_timeout_ms",
        "providers",
        "first_byte_timeout_ms",
    ),
    ("provider_chunk_timeout_ms", "providers", "chunk_timeout_ms"),
    ("data_reserve_bytes", "storage", "data_reserve_bytes"),
    ("store_cache_bytes", "storage", "store_cache_bytes"),
    ("image_store", "storage", "image_store"),
    ("image_cache_bytes", "storage", "image_cache_bytes"),
    ("test_hooks", "test", "hooks"),
    ("test_schema_version", "test", "schema_version"),
];

/// Days a transcript is kept, at most a year: a museum states how long, and a typo cannot
/// keep visitors' words for decades.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "u64", into = "u64")]
pub struct RetentionDays(u16);

impl RetentionDays {
    pub const MAX: u16 = 365;

    pub fn get(self) -> u64 {
        u64::from(self.0)
    }
}

impl TryFrom<u64> for RetentionDays {
    type Error = String;

    fn try_from(days: u64) -> Result<RetentionDays, String> {
        u16::try_from(days)
            .ok()
            .filter(|d| *d <= RetentionDays::MAX)
            .map(RetentionDays)
            .ok_or_else(|| format!("history.max_days is 0 to 365, not {days}"))
    }
}

impl From<RetentionDays> for u64 {
    fn from(days: RetentionDays) -> u64 {
        days.get()
    }
}

/// Upper bounds on request bodies; anything larger is refused with 413 and nothing is stored.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    pub json_bytes: usize,
    pub image_bytes: usize,
    pub knowledge_file_bytes: usize,
    pub knowledge_request_bytes: usize,
    pub knowledge_files: usize,
    pub video_bytes: usize,
    /// Largest recorded answer uploaded (two minutes of 48 kHz stereo WAV fit).
    pub recording_bytes: usize,
    /// Largest backup archive a restore accepts.
    pub backup_bytes: u64,
    /// Most members a backup archive may have (one per stored file, plus two).
    pub backup_entries: usize,
}

/// ALSA devices of the kiosk (used by the device layer).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct AudioConfig {
    pub capture_device: PcmName,
    pub playback_device: PcmName,
    /// A second speaker for visitors with limited hearing (the 3.5 mm jack to a hearing loop's
    /// amplifier, a headphone socket): it plays the same speech at `kiosk.assistive_volume`.
    /// None by default.
    pub assistive_playback_device: Option<PcmName>,
    /// Simple mixer control that sets the volume (`kiosk.volume`); when the card has none, the
    /// volume is applied to the samples instead.
    pub mixer_control: String,
    /// ALSA period and buffer sizes asked for, in frames (the device may pick the nearest).
    pub period_frames: u32,
    pub buffer_frames: u32,
}

/// An ALSA PCM name of one of the fixed forms: a bare name (`default`, or a PCM the board's own
/// ALSA configuration defines, such as `mic`: letters, digits and `_`), or `hw:`, `plughw:`,
/// `sysdefault:`, `dmix:`, `dsnoop:` followed by simple arguments (`[A-Za-z0-9_,=]`, e.g.
/// `hw:CARD=Headphones,DEV=0` or `plughw:1,0`). A bare name can only name what the root-owned
/// configuration already defines; it cannot carry a definition. ALSA parses a PCM name as configuration, so
/// anything else (a plugin definition in braces, `file:'|cmd'`, quotes, spaces) could make the
/// process that opens it, root on the board, run a command or write a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PcmName(String);

impl PcmName {
    const PREFIXES: [&str; 5] = ["hw:", "plughw:", "sysdefault:", "dmix:", "dsnoop:"];

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for PcmName {
    fn default() -> Self {
        PcmName("default".into())
    }
}

impl TryFrom<String> for PcmName {
    type Error = String;

    fn try_from(name: String) -> Result<PcmName, String> {
        let simple = |args: &str| {
            !args.is_empty()
                && args.len() <= 64
                && args
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_,=".contains(c))
        };
        let bare = !name.is_empty()
            && name.len() <= 32
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        let ok = bare
            || PcmName::PREFIXES
                .iter()
                .any(|p| name.strip_prefix(p).is_some_and(simple));
        if ok {
            Ok(PcmName(name))
        } else {
            Err(format!(
                "{name:?} is not an ALSA device name this kiosk accepts: use a plain name \
                 (default, mic), or hw:, plughw:, sysdefault:, dmix:, dsnoop: with letters, \
                 digits, '_', ',' and '='"
            ))
        }
    }
}

impl From<PcmName> for String {
    fn from(name: PcmName) -> String {
        name.0
    }
}

/// Bounds of the kiosk loop: no state lasts longer than these, so it can never stay stuck.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct KioskConfig {
    /// Longest utterance: holding the button longer ends it and starts the turn.
    pub max_utterance_ms: u64,
    /// Longest wait from the end of the utterance to the first reply audio.
    pub max_processing_ms: u64,
    /// Longest reply played.
    pub max_speaking_ms: u64,
    /// Presses released sooner than this start no turn (they still stop the kiosk speaking).
    pub min_press_ms: u64,
    /// How long the last reply stays written on the screen after its speech ends (or until
    /// the next press), so nobody has to read fast.
    pub caption_linger_ms: u64,
    /// A visit ends this long after a visitor last pressed, touched or heard a reply end: the
    /// next press opens a new one, in the museum's default language.
    pub visit_idle_ms: u64,
}

/// How the kiosk announces itself on the LAN (mDNS/DNS-SD), so that an administrator can type
/// `https://docent-1a2b.local:8080/` instead of finding its address.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct MdnsConfig {
    pub enabled: bool,
    /// The host name without `.local`; empty: `docent-` and four hex digits of the board's id.
    pub name: HostLabel,
}

/// Firmware updates through RAUC (docs/updates.md).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct UpdateConfig {
    /// Whether the console may upload and install an update (RAUC must be on the system bus).
    pub enabled: bool,
    /// Largest bundle an administrator may upload; the data reserve applies besides.
    pub max_bundle_bytes: u64,
    /// The file whose creation asks the board to reboot (a root path unit acts on it): docent
    /// itself holds no capability.
    pub reboot_request: PathBuf,
    /// Where the image says its version (`VERSION_ID`).
    pub os_release: PathBuf,
}

impl Default for UpdateConfig {
    fn default() -> Self {
        UpdateConfig {
            enabled: true,
            max_bundle_bytes: 400 << 20,
            reboot_request: PathBuf::from("/run/docent/reboot"),
            os_release: PathBuf::from("/etc/os-release"),
        }
    }
}

impl Default for MdnsConfig {
    fn default() -> Self {
        MdnsConfig {
            enabled: true,
            name: HostLabel(String::new()),
        }
    }
}

/// Bounds of the fleet client (hawkBit DDI, see docs/fleet.md). Where the server is and the
/// target token are settings (`fleet` section), changed from the console; these bound what any
/// server may ask of the kiosk.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct FleetConfig {
    /// The server's polling interval (`config.polling.sleep`) is kept within these.
    pub min_poll_secs: u64,
    pub max_poll_secs: u64,
    /// Largest artifact downloaded (a firmware bundle or a content bundle).
    pub max_artifact_bytes: u64,
    /// Bound on one request to the server (a download: on each read of its body).
    pub request_timeout_secs: u64,
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            min_poll_secs: 10,
            max_poll_secs: 24 * 3600,
            max_artifact_bytes: 400 << 20,
            request_timeout_secs: 30,
        }
    }
}

/// A DNS label (letters, digits, inner hyphens, at most 63), or empty: nothing else can be a
/// `.local` host name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct HostLabel(String);

impl HostLabel {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for HostLabel {
    type Error = String;

    fn try_from(name: String) -> Result<Self, String> {
        let ok = name.len() <= 63
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !name.starts_with('-')
            && !name.ends_with('-');
        if ok {
            Ok(HostLabel(name.to_ascii_lowercase()))
        } else {
            Err(format!(
                "{name:?} is not a host name: letters, digits and inner hyphens, at most 63"
            ))
        }
    }
}

impl From<HostLabel> for String {
    fn from(name: HostLabel) -> String {
        name.0
    }
}

/// The push-to-talk button and its LED, as GPIO character-device lines.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct PttConfig {
    pub chip: String,
    pub line: u32,
    pub active_low: bool,
    pub debounce_ms: u32,
    pub led_line: Option<u32>,
    /// Optional evdev key (e.g. `KEY_SPACE`) as a second trigger.
    pub key: Option<String>,
    /// The pull docent asks the kernel for on the button's line; absent: the one that reads a
    /// released button as released (see [`PttConfig::bias`]).
    pub bias: Option<Bias>,
}

impl PttConfig {
    /// The bias the button's line is requested with: see [`Bias::for_button`].
    pub fn bias(&self) -> Bias {
        Bias::for_button(self.bias, self.active_low)
    }
}

/// The touch screen, read from evdev (single- or multi-touch).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default, deny_unknown_fields)]
pub struct TouchConfig {
    /// A `/dev/input/...` device; "" finds the first one that reports touches (and one plugged
    /// in later).
    pub device: String,
    /// How far clockwise the picture is turned on the panel, as the display shows it.
    pub rotation: Rotation,
}

/// A quarter-turn of the screen: 0, 90, 180 or 270 degrees clockwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(try_from = "u16", into = "u16")]
pub enum Rotation {
    #[default]
    R0,
    R90,
    R180,
    R270,
}

impl TryFrom<u16> for Rotation {
    type Error = String;
    fn try_from(degrees: u16) -> Result<Rotation, String> {
        match degrees {
            0 => Ok(Rotation::R0),
            90 => Ok(Rotation::R90),
            180 => Ok(Rotation::R180),
            270 => Ok(Rotation::R270),
            _ => Err(format!("rotation is 0, 90, 180 or 270, not {degrees}")),
        }
    }
}

impl From<Rotation> for u16 {
    fn from(r: Rotation) -> u16 {
        match r {
            Rotation::R0 => 0,
            Rotation::R90 => 90,
            Rotation::R180 => 180,
            Rotation::R270 => 270,
        }
    }
}

/// The previous / next / choose buttons: GPIO character-device lines of one chip, each
/// optional, wired and requested as the push-to-talk button is.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ChoiceButtonsConfig {
    /// "" (the default): no buttons.
    pub chip: String,
    pub previous: Option<u32>,
    pub next: Option<u32>,
    pub choose: Option<u32>,
    pub active_low: bool,
    pub debounce_ms: u32,
    /// As `[ptt] bias`; absent: see [`Bias::for_button`].
    pub bias: Option<Bias>,
}

impl Default for ChoiceButtonsConfig {
    /// No buttons; once a chip is named, active-low with 20 ms of debounce like `[ptt]`.
    fn default() -> Self {
        ChoiceButtonsConfig {
            chip: String::new(),
            previous: None,
            next: None,
            choose: None,
            active_low: true,
            debounce_ms: 20,
            bias: None,
        }
    }
}

impl ChoiceButtonsConfig {
    pub fn bias(&self) -> Bias {
        Bias::for_button(self.bias, self.active_low)
    }
}

/// The pull resistor asked for on the button's GPIO line (the GPIO uAPI's bias flags, Linux 5.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bias {
    PullUp,
    PullDown,
    /// No pull at all (bias off): an external resistor holds the line.
    Disabled,
    /// Nothing is asked: the line keeps the pull the firmware or an overlay set.
    AsIs,
}

impl Bias {
    /// The bias a button's line is requested with: `bias` when set, else pull-up for an
    /// active-low button (pressed connects the line to ground) and pull-down for an active-high
    /// one, so that a line nothing drives reads as released, never as a press.
    pub fn for_button(bias: Option<Bias>, active_low: bool) -> Bias {
        bias.unwrap_or(if active_low {
            Bias::PullUp
        } else {
            Bias::PullDown
        })
    }

    /// The name the configuration gives it.
    pub fn name(self) -> &'static str {
        match self {
            Bias::PullUp => "pull-up",
            Bias::PullDown => "pull-down",
            Bias::Disabled => "disabled",
            Bias::AsIs => "as-is",
        }
    }
}

/// Which devices to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum DeviceMode {
    /// Real devices where present, simulated ones for the rest.
    #[default]
    Auto,
    /// Simulated devices only.
    Sim,
    /// Real devices only; a missing one is reported in health and the kiosk goes on without it.
    Real,
    /// No devices at all (a pure server).
    None,
}

impl DeviceMode {
    /// The one rule for every device: whether to run its simulated stand-in, given whether the
    /// real one is present (asked only in `auto`). `sim` always simulates; `real` and `none`
    /// never do, so a missing real device shows as such in health instead.
    pub fn simulates(self, present: impl FnOnce() -> bool) -> bool {
        match self {
            DeviceMode::Sim => true,
            DeviceMode::Auto => !present(),
            DeviceMode::Real | DeviceMode::None => false,
        }
    }
}

/// Where idle clips are drawn.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct DisplayConfig {
    pub backend: DisplayBackend,
    /// `/dev/dri/cardN` or `/dev/fbN` (empty: the first found); for `sim`, `WIDTHxHEIGHT`.
    pub device: String,
    /// Caption lines that fit in the screen's height: each line is this fraction of it (20: a
    /// twentieth, 24 pixels on 480 lines; read from 1.5 m). Fewer lines, larger type; 8 to 40.
    pub caption_lines: u32,
}

/// The kind of screen the clips are drawn on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum DisplayBackend {
    /// DRM/KMS first, then `/dev/fb0`; simulated when neither opens and devices are `auto`.
    #[default]
    Auto,
    Drm,
    Fbdev,
    Sim,
    None,
}

impl DisplayBackend {
    /// Every backend's name, as the configuration and the launch parameters spell it.
    pub const NAMES: &[&str] = &["auto", "drm", "fbdev", "sim", "none"];
}

impl Default for Config {
    fn default() -> Self {
        Config {
            data_dir: PathBuf::from("./data"),
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            devices: DeviceMode::Auto,
            watchdog_secs: 10,
            connections: ConnectionsConfig::default(),
            access: AccessConfig::default(),
            sessions: SessionsConfig::default(),
            history: HistoryConfig::default(),
            providers: ProvidersConfig::default(),
            storage: StorageConfig::default(),
            limits: Limits::default(),
            audio: AudioConfig::default(),
            ptt: PttConfig::default(),
            touch: TouchConfig::default(),
            choice_buttons: ChoiceButtonsConfig::default(),
            display: DisplayConfig::default(),
            kiosk: KioskConfig::default(),
            mdns: MdnsConfig::default(),
            update: UpdateConfig::default(),
            fleet: FleetConfig::default(),
            test: TestHooks::default(),
        }
    }
}

impl Default for ConnectionsConfig {
    fn default() -> Self {
        ConnectionsConfig {
            max: 256,
            max_per_peer: 32,
            max_per_subnet: 128,
            request_body_budget_bytes: 32 << 20,
            header_read_timeout_ms: 10_000,
            idle_timeout_secs: 120,
            max_websockets: 32,
            max_grpc_streams: 32,
            stream_buffer_bytes: 48 << 20,
        }
    }
}

impl Default for AccessConfig {
    fn default() -> Self {
        AccessConfig {
            tls_cert: None,
            tls_key: None,
            allow_plain_http_login: false,
            admin_password: None,
            admin_password_file: None,
            internal_token: None,
            open_conversation_api: false,
            loopback_is_trusted: true,
            cors_origins: Vec::new(),
            admin_session_secs: 7 * 24 * 3600,
            login_max_failures: 5,
            login_window_secs: 15 * 60,
            trusted_proxies: Vec::new(),
            login_concurrency: 2,
        }
    }
}

impl Default for SessionsConfig {
    fn default() -> Self {
        SessionsConfig {
            max: 8,
            max_per_client: 4,
            max_streams_per_client: 8,
            idle_secs: 30 * 60,
            message_burst: 20,
            message_refill_ms: 2_000,
            history_messages: 12,
            vad_silence_ms: 0,
        }
    }
}

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig {
            max_messages: 10_000,
            max_days: RetentionDays(30),
            min_visit_secs: 0,
            questions_min_visits: 3,
        }
    }
}

impl Default for ProvidersConfig {
    fn default() -> Self {
        ProvidersConfig {
            timeout_ms: 15_000,
            connect_timeout_ms: 5_000,
            first_byte_timeout_ms: None,
            chunk_timeout_ms: None,
        }
    }
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            data_reserve_bytes: 8 << 20,
            store_cache_bytes: 16 << 20,
            image_store: true,
            image_cache_bytes: 32 << 20,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            json_bytes: 1 << 20,
            image_bytes: 10 << 20,
            knowledge_file_bytes: 64 << 20,
            knowledge_request_bytes: 256 << 20,
            knowledge_files: 1000,
            video_bytes: 64 << 20,
            recording_bytes: 24 << 20,
            backup_bytes: 4 << 30,
            backup_entries: 100_000,
        }
    }
}

impl Default for AudioConfig {
    fn default() -> Self {
        AudioConfig {
            capture_device: PcmName::default(),
            playback_device: PcmName::default(),
            assistive_playback_device: None,
            mixer_control: "Master".into(),
            period_frames: 800,
            buffer_frames: 8000,
        }
    }
}

impl Default for KioskConfig {
    fn default() -> Self {
        KioskConfig {
            max_utterance_ms: 30_000,
            max_processing_ms: 30_000,
            max_speaking_ms: 120_000,
            min_press_ms: 300,
            caption_linger_ms: 20_000,
            visit_idle_ms: 120_000,
        }
    }
}

impl Default for PttConfig {
    fn default() -> Self {
        PttConfig {
            chip: "/dev/gpiochip0".into(),
            line: 17,
            active_low: true,
            debounce_ms: 20,
            led_line: None,
            key: None,
            bias: None,
        }
    }
}

impl Default for DisplayConfig {
    fn default() -> Self {
        DisplayConfig {
            backend: DisplayBackend::Auto,
            device: String::new(),
            caption_lines: 20,
        }
    }
}

/// Why a configuration could not be loaded.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Parses a TOML document; unknown keys and wrong types are errors that name the key.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|e| match moved_keys(text) {
            Some(moved) => ConfigError(moved),
            None => ConfigError(e.to_string()),
        })
    }

    /// Reads and parses a TOML file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read config {}: {e}", path.display())))?;
        Config::from_toml(&text).map_err(|e| ConfigError(format!("{}: {e}", path.display())))
    }

    /// The administrator password, from `access.admin_password` or else the first line of
    /// `access.admin_password_file`. An empty password counts as none.
    pub fn resolve_admin_password(&self) -> Result<Option<String>, ConfigError> {
        let access = &self.access;
        let from_file = match &access.admin_password_file {
            Some(path) if access.admin_password.is_none() => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    ConfigError(format!(
                        "cannot read admin password file {}: {e}",
                        path.display()
                    ))
                })?;
                text.lines().next().map(|l| l.trim().to_string())
            }
            _ => None,
        };
        Ok(access
            .admin_password
            .clone()
            .or(from_file)
            .filter(|p| !p.is_empty()))
    }
}

/// For a document that does not load: where each key it still writes the flat way (or by its
/// old name inside its new table) now lives, when there is any.
fn moved_keys(text: &str) -> Option<String> {
    let doc: toml::Table = text.parse().ok()?;
    let moved: Vec<String> = MOVED_KEYS
        .iter()
        .filter(|(old, table, new)| {
            // A key that kept its name is where it belongs once it is in its table.
            doc.contains_key(*old)
                || (old != new
                    && doc
                        .get(*table)
                        .and_then(toml::Value::as_table)
                        .is_some_and(|t| t.contains_key(*old)))
        })
        .map(|(old, table, new)| {
            if old == new {
                format!("`{old}` moved to `[{table}]`")
            } else {
                format!("`{old}` moved to `[{table}]` as `{new}`")
            }
        })
        .collect();
    (!moved.is_empty()).then(|| {
        format!(
            "{} (the configuration file groups its keys in tables)",
            moved.join(", ")
        )
    })
}

#[cfg(test)]
mod moved_key_tests {
    use super::Config;

    /// A key in its new table under its old name is no moved key: the document's real fault
    /// is told (the update test's refused configuration: an unknown device mode).
    #[test]
    fn a_key_in_its_table_is_not_blamed_for_another_fault() {
        let profile = include_str!("../board/qemuarm64/docent.toml");
        assert!(Config::from_toml(profile).is_ok());
        let refused = profile.replace("devices = \"real\"", "devices = \"teleported\"");
        let err = Config::from_toml(&refused).unwrap_err().to_string();
        assert!(err.contains("teleported"), "{err}");
        assert!(!err.contains("moved"), "{err}");
        let flat = "admin_password_file = \"/data/p\"";
        let err = Config::from_toml(flat).unwrap_err().to_string();
        assert!(
            err.contains("`admin_password_file` moved to `[access]`"),
            "{err}"
        );
    }
}

#[cfg(test)]
mod host_label_tests {
    use super::HostLabel;

    #[test]
    fn only_dns_labels_are_host_names() {
        for good in ["", "docent-1a2b", "Hall-B", "k1"] {
            assert!(HostLabel::try_from(good.to_string()).is_ok(), "{good}");
        }
        for bad in ["-a", "a-", "a.b", "a b", "../x", "é", &"a".repeat(64)] {
            assert!(HostLabel::try_from(bad.to_string()).is_err(), "{bad}");
        }
    }
}

#[cfg(test)]
mod pcm_tests {
    use super::PcmName;

    #[test]
    fn only_the_fixed_forms_are_pcm_names() {
        for good in [
            "default",
            "sysdefault",
            "hw:0",
            "hw:CARD=Headphones,DEV=0",
            "plughw:1,0",
            "sysdefault:CARD=vc4hdmi",
            "dmix:CARD=0",
            "dsnoop:1",
            "mic",
        ] {
            assert!(PcmName::try_from(good.to_string()).is_ok(), "{good}");
        }
        for bad in [
            "file:'|touch /tmp/x',raw",
            "plug:{type file slave.pcm null file \"|id\"}",
            "hw:0 ",
            "hw:",
            "hw:\"x\"",
            "docent_sim_mic:FILE=\"/tmp/x\"",
            "hw:0;x",
            "",
        ] {
            assert!(PcmName::try_from(bad.to_string()).is_err(), "{bad}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_document_gives_defaults() {
        assert_eq!(Config::from_toml("").unwrap(), Config::default());
    }

    #[test]
    fn unknown_key_is_named() {
        let err = Config::from_toml("image_stor = false").unwrap_err();
        assert!(err.0.contains("image_stor"), "{err}");
        let err = Config::from_toml("[limits]\njson_byte = 3").unwrap_err();
        assert!(err.0.contains("json_byte"), "{err}");
    }

    #[test]
    fn keys_override_defaults() {
        let c = Config::from_toml(
            "watchdog_secs = 0\n[storage]\nimage_store = false\n[sessions]\nmax = 2\n\
             [test]\nhooks = true\n[limits]\njson_bytes = 10\n[ptt]\nled_line = 27",
        )
        .unwrap();
        assert!(!c.storage.image_store);
        assert_eq!(c.watchdog_secs, 0);
        assert!(c.test.hooks);
        assert_eq!(c.sessions.max, 2);
        assert_eq!(c.limits.json_bytes, 10);
        assert_eq!(c.limits.image_bytes, 10 << 20);
        assert_eq!(c.ptt.led_line, Some(27));
    }

    #[test]
    fn the_buttons_bias_is_named_and_follows_active_low_when_absent() {
        let bias = |toml: &str| {
            Config::from_toml(&format!("[ptt]\n{toml}"))
                .unwrap()
                .ptt
                .bias()
        };
        assert_eq!(bias(""), Bias::PullUp, "active low by default");
        assert_eq!(bias("active_low = false"), Bias::PullDown);
        assert_eq!(bias("bias = \"pull-up\"\nactive_low = false"), Bias::PullUp);
        assert_eq!(bias("bias = \"pull-down\""), Bias::PullDown);
        assert_eq!(bias("bias = \"disabled\""), Bias::Disabled);
        assert_eq!(bias("bias = \"as-is\""), Bias::AsIs);
        for b in [Bias::PullUp, Bias::PullDown, Bias::Disabled, Bias::AsIs] {
            assert_eq!(bias(&format!("bias = \"{}\"", b.name())), b);
        }
        for wrong in ["\"pullup\"", "\"up\"", "\"PULL-UP\"", "true"] {
            let err = Config::from_toml(&format!("[ptt]\nbias = {wrong}")).unwrap_err();
            assert!(err.0.contains("bias"), "{wrong}: {err}");
        }
    }

    #[test]
    fn transcripts_are_kept_thirty_days_and_at_most_a_year() {
        assert_eq!(Config::default().history.max_days.get(), 30);
        for days in [0, 1, 365] {
            let c = Config::from_toml(&format!("[history]\nmax_days = {days}")).unwrap();
            assert_eq!(c.history.max_days.get(), days);
        }
        for days in ["366", "100000", "-1"] {
            let err = Config::from_toml(&format!("[history]\nmax_days = {days}")).unwrap_err();
            assert!(err.0.contains("max_days"), "{days}: {err}");
        }
    }

    #[test]
    fn wrong_type_is_an_error() {
        assert!(Config::from_toml("[sessions]\nmax = \"many\"").is_err());
    }

    #[test]
    fn a_flat_key_of_before_the_sections_names_its_new_place() {
        let err = Config::from_toml("max_connections = 3").unwrap_err();
        assert!(
            err.0
                .contains("`max_connections` moved to `[connections]` as `max`"),
            "{err}"
        );
        let err = Config::from_toml("image_store = false\ntest_hooks = true").unwrap_err();
        assert!(
            err.0.contains("`image_store` moved to `[storage]`"),
            "{err}"
        );
        assert!(
            err.0.contains("`test_hooks` moved to `[test]` as `hooks`"),
            "{err}"
        );
        let err = Config::from_toml("[history]\nhistory_max_days = 3").unwrap_err();
        assert!(err.0.contains("as `max_days`"), "{err}");
    }

    /// Every moved key's new place is a key of the configuration: the table cannot point
    /// where nothing is.
    #[test]
    fn every_moved_key_has_a_new_place() {
        let doc = serde_json::to_value(Config::default()).unwrap();
        for (old, table, new) in MOVED_KEYS {
            assert!(doc.get(old).is_none(), "{old} is still top-level");
            assert!(doc[table].get(new).is_some(), "{old} -> [{table}] {new}");
        }
    }

    #[test]
    fn display_backend_names_round_trip_and_a_typo_is_an_error() {
        for name in DisplayBackend::NAMES {
            let c = Config::from_toml(&format!("[display]\nbackend = \"{name}\"")).unwrap();
            assert_eq!(
                toml::Value::try_from(c.display.backend).unwrap().as_str(),
                Some(*name)
            );
        }
        let err = Config::from_toml("[display]\nbackend = \"drn\"").unwrap_err();
        assert!(err.0.contains("drn"), "{err}");
    }

    #[test]
    fn only_auto_asks_whether_the_real_device_is_present() {
        let never = || -> bool { panic!("asked") };
        assert!(DeviceMode::Sim.simulates(never));
        assert!(!DeviceMode::Real.simulates(never));
        assert!(!DeviceMode::None.simulates(never));
        assert!(DeviceMode::Auto.simulates(|| false));
        assert!(!DeviceMode::Auto.simulates(|| true));
    }

    /// Every TOML block of the README and of docs/ is a configuration a reader may copy: each
    /// must load with the real loader (unknown keys are errors).
    #[test]
    fn documented_configurations_load() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = vec![root.join("README.md")];
        for entry in std::fs::read_dir(root.join("docs")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
        let mut blocks = 0;
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for block in text.split("```toml\n").skip(1) {
                let block = block.split("```").next().unwrap();
                if let Err(e) = Config::from_toml(block) {
                    panic!(
                        "{}: a TOML block does not load: {e}\n{block}",
                        file.display()
                    );
                }
                blocks += 1;
            }
        }
        assert!(blocks >= 1, "the README documents the configuration file");
    }
}
