//! `GET /metrics`: the Prometheus text exposition (format 0.0.4) of this run's instruments, for
//! the administrator or a metrics key only (docs/operations.md). The front doors' own counts
//! (requests by route class, refused connections) are kept here; what is cheap to read is read
//! at scrape time (sessions, streams, device health, temperature, free bytes, memory, firmware,
//! fleet, update) rather than pushed; the engine's instruments are its own (`engine::metrics`).

use std::path::Path;

use axum::Router;
use axum::extract::{FromRequestParts, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus::{
    Encoder, Gauge, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

use super::auth::{bearer, is_admin, peer, unauthenticated};
use super::error::{ApiError, ApiResult};
use super::state::AppState;
use crate::device::Health;

pub fn routes() -> Router<AppState> {
    Router::new().route("/metrics", get(metrics))
}

/// The exposition format's content type (text 0.0.4, which every Prometheus reads).
const TEXT_0_0_4: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Proof that the caller may read the metrics: the administrator (as for any admin route) or a
/// metrics key. A conversation key is refused as no credential (401).
pub struct MetricsReader;

impl FromRequestParts<AppState> for MetricsReader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if is_admin(&parts.headers, peer(parts), state) {
            return Ok(MetricsReader);
        }
        let key = bearer(&parts.headers).map(str::to_owned);
        let engine = state.engine.clone();
        let keyed = match key {
            Some(key) => tokio::task::spawn_blocking(move || engine.metrics_key(&key))
                .await
                .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error"))?
                .map_err(ApiError::from)?,
            None => false,
        };
        if keyed {
            Ok(MetricsReader)
        } else {
            Err(unauthenticated(
                &parts.extensions,
                "a metrics key or an admin session is required",
            ))
        }
    }
}

/// The metrics in the Prometheus text format 0.0.4.
#[utoipa::path(get, path = "/metrics", tag = "system",
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "The metrics (Prometheus text format 0.0.4)", body = String,
            content_type = "text/plain; version=0.0.4; charset=utf-8"),
        (status = 401, description = "Neither the administrator nor a metrics key",
            body = crate::api::schema::ErrorBody),
    ))]
async fn metrics(_: MetricsReader, State(s): State<AppState>) -> ApiResult<Response> {
    let body = scrape(&s);
    Ok(([(CONTENT_TYPE, TEXT_0_0_4)], body).into_response())
}

/// The text of every metric of this run, read now.
fn scrape(s: &AppState) -> String {
    let http = &s.http;
    // One scrape at a time: another's reset of an info gauge must not blank this one's.
    let _one = http.scraping.lock().unwrap_or_else(|e| e.into_inner());
    http.read(s);
    let mut families = s.engine.metrics.registry.gather();
    families.extend(http.registry.gather());
    let temperature = soc_temperature(Path::new(SYS));
    let throttled = throttled(Path::new(SYS));
    if let Some(t) = temperature {
        http.temperature.set(t);
    }
    if let Some(flags) = throttled {
        for (bit, flag) in THROTTLED_BITS {
            let set = flags & (1 << bit) != 0;
            http.throttled
                .with_label_values(&[flag])
                .set(i64::from(set));
        }
    }
    // A board without the sensor or the firmware's flags has no such series.
    families.retain(|f| match f.name() {
        "docent_soc_temperature_celsius" => temperature.is_some(),
        "docent_rpi_throttled" => throttled.is_some(),
        // Never open yet: no share to give.
        "docent_availability_ratio" => !http.availability.get().is_nan(),
        _ => true,
    });
    let mut out = Vec::with_capacity(SCRAPE_BYTES);
    TextEncoder::new()
        .encode(&families, &mut out)
        .expect("the text format writes to memory");
    String::from_utf8(out).expect("the text format is UTF-8")
}

/// The period of the availability gauges, as the dashboard shows it.
const AVAILABILITY_DAYS: u16 = 30;

/// What a scrape usually takes (some 8 KiB).
const SCRAPE_BYTES: usize = 16 * 1024;

/// The root of sysfs (temperatures, the Raspberry Pi's throttling flags).
const SYS: &str = "/sys";

/// The Raspberry Pi firmware's `get_throttled` bits, by the label each is written under.
const THROTTLED_BITS: [(u32, &str); 8] = [
    (0, "undervoltage"),
    (1, "frequency_capped"),
    (2, "throttled"),
    (3, "soft_temperature_limit"),
    (16, "undervoltage_occurred"),
    (17, "frequency_capped_occurred"),
    (18, "throttled_occurred"),
    (19, "soft_temperature_limit_occurred"),
];

/// The hottest thermal zone, in degrees Celsius (the zones write millidegrees).
fn soc_temperature(sys: &Path) -> Option<f64> {
    let zones = std::fs::read_dir(sys.join("class/thermal")).ok()?;
    zones
        .flatten()
        .filter(|z| z.file_name().to_string_lossy().starts_with("thermal_zone"))
        .filter_map(|z| std::fs::read_to_string(z.path().join("temp")).ok())
        .filter_map(|t| t.trim().parse::<i64>().ok())
        .max()
        .map(|milli| milli as f64 / 1000.0)
}

/// The Raspberry Pi firmware's throttling flags: `get_throttled` where the firmware driver has
/// it, else the `rpi_volt` hwmon's undervoltage alarm as bit 0. None on other boards.
fn throttled(sys: &Path) -> Option<u32> {
    let firmware = sys.join("devices/platform/soc/soc:firmware/get_throttled");
    if let Ok(text) = std::fs::read_to_string(firmware) {
        let hex = text.trim().trim_start_matches("0x");
        return u32::from_str_radix(hex, 16).ok();
    }
    let hwmons = std::fs::read_dir(sys.join("class/hwmon")).ok()?;
    hwmons.flatten().find_map(|h| {
        let name = std::fs::read_to_string(h.path().join("name")).ok()?;
        if name.trim() != "rpi_volt" {
            return None;
        }
        let alarm = std::fs::read_to_string(h.path().join("in0_lcrit_alarm")).ok()?;
        Some(u32::from(alarm.trim() == "1"))
    })
}

/// This process's resident memory, from `/proc/self/statm` (pages).
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

/// The RAUC slot this boot came up in, from the kernel command line (`rauc.slot=`).
fn booted_slot() -> &'static str {
    static SLOT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SLOT.get_or_init(|| {
        std::fs::read_to_string("/proc/cmdline")
            .ok()
            .and_then(|c| {
                c.split_whitespace()
                    .find_map(|w| w.strip_prefix("rauc.slot="))
                    .map(str::to_owned)
            })
            .unwrap_or_default()
    })
}

/// The class of route a request went to: a small closed set, so the series stay few.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteClass {
    /// Open to anyone or to any front end: health, the OpenAPI document, signing in, the site
    /// data, the characters.
    Public,
    /// A conversation client's: sessions, tasks, WebSocket chat, gRPC.
    Conversation,
    /// The administrator's API.
    Admin,
    /// The kiosk's own components (`/api/v1/internal`).
    Internal,
    /// The console's pages.
    Console,
    /// `GET /metrics`.
    Metrics,
    /// No route.
    Other,
}

impl RouteClass {
    const ALL: [RouteClass; 7] = [
        RouteClass::Public,
        RouteClass::Conversation,
        RouteClass::Admin,
        RouteClass::Internal,
        RouteClass::Console,
        RouteClass::Metrics,
        RouteClass::Other,
    ];

    fn label(self) -> &'static str {
        match self {
            RouteClass::Public => "public",
            RouteClass::Conversation => "conversation",
            RouteClass::Admin => "admin",
            RouteClass::Internal => "internal",
            RouteClass::Console => "console",
            RouteClass::Metrics => "metrics",
            RouteClass::Other => "other",
        }
    }

    /// The class of the route at `uri`'s path (by its prefix: no routing needed).
    pub fn of(uri: &Uri) -> RouteClass {
        let path = uri.path();
        let under = |prefix: &str| {
            path.strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        };
        if path == "/metrics" {
            RouteClass::Metrics
        } else if under("/api/v1/sessions") || under("/api/v1/tasks") || under("/ws") {
            RouteClass::Conversation
        } else if under("/api/v1/internal") {
            RouteClass::Internal
        } else if path == "/api/v1/health"
            || path == "/api/openapi.json"
            || under("/api/auth")
            || under("/api/data")
            || under("/api/v1/characters")
            || under("/api/v1/avatars")
        {
            RouteClass::Public
        } else if under("/api") {
            RouteClass::Admin
        } else if path == "/" || under("/console") {
            RouteClass::Console
        } else if path.split('/').nth(1).is_some_and(|s| s.contains('.')) {
            // gRPC: `/package.Service/Method`.
            RouteClass::Conversation
        } else {
            RouteClass::Other
        }
    }
}

/// The class of an answer's status: `1xx` to `5xx`.
fn status_class(status: StatusCode) -> usize {
    usize::from(status.as_u16() / 100).clamp(1, 5) - 1
}

/// Why the listener refused a connection: the cap it met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The address's own connections.
    Peer,
    /// Its network's.
    Subnet,
    /// All places.
    Total,
}

/// The front doors' instruments and the gauges read at scrape time, in their own registry.
pub struct Http {
    registry: Registry,
    /// Held while a scrape reads the gauges and writes them out.
    scraping: std::sync::Mutex<()>,
    requests: [[IntCounter; 5]; 7],
    refusals: [IntCounter; 3],
    sessions: IntGauge,
    websockets: IntGauge,
    grpc_streams: IntGauge,
    device: IntGaugeVec,
    temperature: Gauge,
    throttled: IntGaugeVec,
    free: IntGauge,
    reserve: IntGauge,
    resident: IntGauge,
    open: IntGauge,
    availability: Gauge,
    opening_secs: IntGauge,
    serving_secs: IntGauge,
    firmware: IntGaugeVec,
    fleet_enabled: IntGauge,
    fleet_paused: IntGauge,
    fleet_action: IntGaugeVec,
    update: IntGaugeVec,
    uptime: Gauge,
}

impl Default for Http {
    fn default() -> Http {
        let registry = Registry::new();
        let add = |c: Box<dyn prometheus::core::Collector>| {
            registry.register(c).expect("registers once");
        };
        let gauge = |name: &str, help: &str| {
            let g = IntGauge::new(name, help).expect("valid metric");
            add(Box::new(g.clone()));
            g
        };
        let gauges = |name: &str, help: &str, labels: &[&str]| {
            let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric");
            add(Box::new(g.clone()));
            g
        };
        let float = |name: &str, help: &str| {
            let g = Gauge::new(name, help).expect("valid metric");
            add(Box::new(g.clone()));
            g
        };
        let requests = IntCounterVec::new(
            Opts::new(
                "docent_http_requests_total",
                "HTTP requests answered, by route class and status class.",
            ),
            &["class", "code"],
        )
        .expect("valid metric");
        add(Box::new(requests.clone()));
        let refusals = IntCounterVec::new(
            Opts::new(
                "docent_connections_refused_total",
                "Connections the listener refused, by the cap they met.",
            ),
            &["reason"],
        )
        .expect("valid metric");
        add(Box::new(refusals.clone()));
        let codes = ["1xx", "2xx", "3xx", "4xx", "5xx"];
        Http {
            requests: RouteClass::ALL
                .map(|c| codes.map(|code| requests.with_label_values(&[c.label(), code]))),
            refusals: ["peer", "subnet", "total"].map(|r| refusals.with_label_values(&[r])),
            sessions: gauge("docent_sessions_open", "Conversation sessions open."),
            websockets: gauge("docent_websockets_open", "WebSocket chats open."),
            grpc_streams: gauge("docent_grpc_streams_open", "gRPC Converse streams open."),
            device: gauges(
                "docent_device_up",
                "Whether each device works (1: the real one or its simulated stand-in).",
                &["part"],
            ),
            temperature: float(
                "docent_soc_temperature_celsius",
                "The hottest thermal zone of the board.",
            ),
            throttled: gauges(
                "docent_rpi_throttled",
                "The Raspberry Pi firmware's undervoltage and throttling flags (1: set).",
                &["flag"],
            ),
            free: gauge(
                "docent_data_free_bytes",
                "Free bytes on the data partition (for this process).",
            ),
            reserve: gauge(
                "docent_data_reserve_bytes",
                "The free bytes the kiosk keeps on the data partition (storage.data_reserve_bytes).",
            ),
            resident: gauge(
                "docent_resident_memory_bytes",
                "The process's resident memory.",
            ),
            open: gauge(
                "docent_open",
                "Whether the kiosk is open now by its opening hours (1) or closed (0).",
            ),
            availability: float(
                "docent_availability_ratio",
                "The share of the last 30 days' opening hours the kiosk was fully serving (0 to 1).",
            ),
            opening_secs: gauge(
                "docent_availability_open_seconds",
                "Seconds the kiosk was open by its opening hours in the last 30 days.",
            ),
            serving_secs: gauge(
                "docent_availability_serving_seconds",
                "Of those, the seconds it was fully serving (devices and providers healthy).",
            ),
            firmware: gauges(
                "docent_firmware_info",
                "The firmware version and the RAUC slot it booted from (always 1).",
                &["version", "slot"],
            ),
            fleet_enabled: gauge("docent_fleet_enabled", "Whether the fleet client is on."),
            fleet_paused: gauge(
                "docent_fleet_paused",
                "Whether the fleet client's polling is paused.",
            ),
            fleet_action: gauges(
                "docent_fleet_action_info",
                "The fleet action in progress, by kind and stage (1 while one runs).",
                &["kind", "stage"],
            ),
            update: gauges(
                "docent_update_outcome_info",
                "How the last firmware update ended (1), if one did.",
                &["result"],
            ),
            uptime: float("docent_uptime_seconds", "Seconds since this run started."),
            scraping: std::sync::Mutex::default(),
            registry,
        }
    }
}

impl Http {
    /// One answered request.
    pub fn request(&self, class: RouteClass, status: StatusCode) {
        self.requests[class as usize][status_class(status)].inc();
    }

    /// One refused connection.
    pub fn refused(&self, why: Refusal) {
        self.refusals[why as usize].inc();
    }

    /// Reads the gauges that are cheap to read now.
    fn read(&self, s: &AppState) {
        let e = &s.engine;
        self.sessions.set(e.session_count().map_or(0, |n| n as i64));
        self.websockets.set(s.streams.open_websockets() as i64);
        self.grpc_streams.set(s.streams.open_grpc() as i64);
        let device = s.devices.health.get();
        for (part, health) in [
            ("audio", &device.audio),
            ("button", &device.ptt),
            ("display", &device.display),
            ("choice", &device.choice),
        ] {
            let up = matches!(health, Health::Ok | Health::Sim);
            self.device.with_label_values(&[part]).set(i64::from(up));
        }
        if let Ok(free) = e.data_free_bytes() {
            self.free.set(i64::try_from(free).unwrap_or(i64::MAX));
        }
        let reserve = e.config.storage.data_reserve_bytes;
        self.reserve.set(i64::try_from(reserve).unwrap_or(i64::MAX));
        if let Some(rss) = resident_bytes() {
            self.resident.set(i64::try_from(rss).unwrap_or(i64::MAX));
        }
        self.open.set(i64::from(e.opening().open));
        if let Ok(a) = e.availability(AVAILABILITY_DAYS) {
            self.opening_secs
                .set(i64::try_from(a.open_secs).unwrap_or(i64::MAX));
            self.serving_secs
                .set(i64::try_from(a.serving_secs).unwrap_or(i64::MAX));
            self.availability
                .set(a.percent.map_or(f64::NAN, |p| p / 100.0));
        }
        let version = s
            .updates
            .firmware_version()
            .unwrap_or(env!("CARGO_PKG_VERSION"));
        self.firmware.reset();
        self.firmware
            .with_label_values(&[version, booted_slot()])
            .set(1);
        let fleet = s.fleet.status();
        self.fleet_enabled.set(i64::from(fleet.enabled));
        self.fleet_paused.set(i64::from(fleet.paused));
        self.fleet_action.reset();
        if let Some(action) = &fleet.action {
            let kind = match action.kind {
                crate::fleet::Kind::Firmware => "firmware",
                crate::fleet::Kind::Content => "content",
            };
            self.fleet_action
                .with_label_values(&[kind, action.stage.as_str()])
                .set(1);
        }
        self.update.reset();
        if let Some(outcome) = s.updates.outcome() {
            let result = match outcome.result {
                crate::update::OutcomeKind::Updated => "updated",
                crate::update::OutcomeKind::RolledBack => "rolled_back",
            };
            self.update.with_label_values(&[result]).set(1);
        }
        self.uptime.set(e.started.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_fall_in_their_class() {
        let class = |p: &str| RouteClass::of(&p.parse().unwrap());
        assert_eq!(class("/metrics"), RouteClass::Metrics);
        assert_eq!(
            class("/api/v1/sessions/x/messages"),
            RouteClass::Conversation
        );
        assert_eq!(class("/ws/chat/x"), RouteClass::Conversation);
        assert_eq!(
            class("/docent.VoiceLLMService/Converse"),
            RouteClass::Conversation
        );
        assert_eq!(class("/api/v1/internal/tasks"), RouteClass::Internal);
        assert_eq!(class("/api/v1/health"), RouteClass::Public);
        assert_eq!(class("/api/v1/settings"), RouteClass::Admin);
        assert_eq!(class("/api/v1/sessionsx"), RouteClass::Admin);
        assert_eq!(class("/console/system"), RouteClass::Console);
        assert_eq!(class("/nothing"), RouteClass::Other);
    }

    #[test]
    fn sysfs_is_read_where_present() {
        let sys = tempfile::tempdir().unwrap();
        assert_eq!(soc_temperature(sys.path()), None);
        assert_eq!(throttled(sys.path()), None);
        for (zone, milli) in [("thermal_zone0", "41234\n"), ("thermal_zone1", "52500\n")] {
            let dir = sys.path().join("class/thermal").join(zone);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("temp"), milli).unwrap();
        }
        assert_eq!(soc_temperature(sys.path()), Some(52.5));
        let hwmon = sys.path().join("class/hwmon/hwmon0");
        std::fs::create_dir_all(&hwmon).unwrap();
        std::fs::write(hwmon.join("name"), "rpi_volt\n").unwrap();
        std::fs::write(hwmon.join("in0_lcrit_alarm"), "1\n").unwrap();
        assert_eq!(throttled(sys.path()), Some(1));
        let firmware = sys.path().join("devices/platform/soc/soc:firmware");
        std::fs::create_dir_all(&firmware).unwrap();
        std::fs::write(firmware.join("get_throttled"), "50005\n").unwrap();
        assert_eq!(throttled(sys.path()), Some(0x50005));
    }
}
