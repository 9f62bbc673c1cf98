//! Health, components, settings, provider tests, avatar model, launch config, CORS, the voice
//! test and the guard of the internal routes, over real HTTP (http-api.md).

use std::net::{IpAddr, Ipv4Addr, UdpSocket};
use std::time::{Duration, Instant};

use crate::support::{Server, assert_error, check, expect, keys, launch_param};
use serde_json::{Value, json};

const SETTINGS: &str = "/api/v1/settings";
const LAUNCH: &str = "/api/v1/config/launch";

fn espeak_installed() -> bool {
    std::process::Command::new("which")
        .arg("espeak-ng")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether the offline recogniser's model is installed (what `asr:local` depends on).
fn asr_model_installed() -> bool {
    std::path::Path::new("/usr/share/pocketsphinx/model/en-us").is_dir()
}

/// A port on 127.0.0.1 that nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

async fn put_settings(s: &Server, patch: Value, status: u16) -> Value {
    s.put_json(SETTINGS, patch, status).await
}

/// The option `id` of a components stage.
fn option<'a>(components: &'a Value, stage: &str, id: &str) -> &'a Value {
    components[stage]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == id)
        .unwrap_or_else(|| panic!("no {stage} option {id} in {components}"))
}

/// Runs the settings test; returns the HTTP status and the answer.
async fn test_settings(s: &Server) -> (u16, Value) {
    let res = s.post("/api/v1/settings/test").send().await.unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}

async fn put_launch(s: &Server, params: Value, status: u16) -> Value {
    s.put_json(LAUNCH, json!({ "params": params }), status)
        .await
}

// ---------------------------------------------------------------- health and components

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_has_its_shape_and_counts_sessions() {
    let s = Server::start().await;
    // In setup mode the trusted loopback is the administrator: `version` is in the answer.
    let health = s.get_json("/api/v1/health", 200).await;
    for key in [
        "status",
        "version",
        "uptime_s",
        "sessions",
        "admin_auth",
        "providers",
        "device",
    ] {
        assert!(health.get(key).is_some(), "{key} missing in {health}");
    }
    assert!(
        ["ok", "degraded"].contains(&health["status"].as_str().unwrap()),
        "{health}"
    );
    assert_eq!(health["version"], env!("CARGO_PKG_VERSION"));
    assert!(health["uptime_s"].is_u64(), "{health}");
    assert_eq!(health["sessions"], 0);
    assert_eq!(health["admin_auth"], "setup");
    assert!(health["providers"].is_object(), "{health}");
    assert_eq!(
        keys(&health["device"]),
        ["audio", "choice", "display", "ptt"]
    );

    s.post_json("/api/v1/sessions", json!({}), 201).await;
    assert_eq!(s.get_json("/api/v1/health", 200).await["sessions"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn components_have_one_default_per_stage_and_measured_availability() {
    let s = Server::start().await;
    let components = s.get_json("/api/v1/components", 200).await;
    assert_eq!(keys(&components), ["asr", "llm", "tts"]);
    for stage in ["llm", "asr", "tts"] {
        let options = components[stage].as_array().unwrap();
        for o in options {
            assert_eq!(
                keys(o),
                [
                    "available",
                    "default",
                    "id",
                    "model",
                    "name",
                    "on_this_kiosk"
                ],
                "{o}"
            );
            assert!(
                o["id"].is_string() && o["name"].is_string() && o["model"].is_string(),
                "{o}"
            );
            assert!(
                o["default"].is_boolean() && o["available"].is_boolean(),
                "{o}"
            );
        }
        let defaults: Vec<&Value> = options
            .iter()
            .filter(|o| o["default"] == true)
            .map(|o| &o["id"])
            .collect();
        assert_eq!(defaults, [&json!("local")], "{stage}");
    }
    assert_eq!(
        option(&components, "tts", "local")["available"],
        espeak_installed()
    );
    assert_eq!(
        option(&components, "asr", "local")["available"],
        asr_model_installed()
    );
    assert_eq!(
        option(&components, "llm", "openai")["available"],
        false,
        "no address configured"
    );

    put_settings(
        &s,
        json!({ "llm": { "base_url": "http://127.0.0.1:9/v1" } }),
        200,
    )
    .await;
    let components = s.get_json("/api/v1/components", 200).await;
    assert_eq!(option(&components, "llm", "openai")["available"], true);
    assert_eq!(
        option(&components, "tts", "openai")["available"],
        false,
        "only the llm address was set"
    );

    put_settings(&s, json!({ "llm": { "provider": "openai" } }), 200).await;
    let components = s.get_json("/api/v1/components", 200).await;
    assert_eq!(option(&components, "llm", "openai")["default"], true);
    assert_eq!(option(&components, "llm", "local")["default"], false);
}

// ---------------------------------------------------------------- settings

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_have_the_documented_shape() {
    let s = Server::start().await;
    let settings = s.get_json(SETTINGS, 200).await;
    let sections: [(&str, &[&str]); 11] = [
        (
            "llm",
            &[
                "api_key",
                "api_key_set",
                "base_url",
                "max_tokens",
                "model",
                "provider",
                "temperature",
            ],
        ),
        (
            "asr",
            &[
                "api_key",
                "api_key_set",
                "base_url",
                "language",
                "model",
                "provider",
            ],
        ),
        (
            "tts",
            &[
                "api_key",
                "api_key_set",
                "base_url",
                "model",
                "provider",
                "voice",
            ],
        ),
        (
            "realtime",
            &["api_key", "api_key_set", "base_url", "model", "provider"],
        ),
        ("remote_voice", &["grpc_addr"]),
        ("inference", &["grpc_addr"]),
        (
            "model_providers",
            &[
                "dashscope_api_key",
                "dashscope_api_key_set",
                "openai_api_key",
                "openai_api_key_set",
            ],
        ),
        ("doubao", &["access_token", "access_token_set", "app_id"]),
        (
            "kiosk",
            &[
                "assistive_volume",
                "character_id",
                "language",
                "languages",
                "lines",
                "volume",
            ],
        ),
        ("hours", &["closed_days", "enabled", "week", "when_closed"]),
        (
            "fleet",
            &[
                "allow_insecure_http",
                "content_public_key",
                "controller_id",
                "distribution",
                "enabled",
                "paused",
                "server_url",
                "target_token",
                "target_token_set",
                "tenant",
            ],
        ),
    ];
    let mut names: Vec<&str> = sections.iter().map(|(name, _)| *name).collect();
    names.sort_unstable();
    assert_eq!(keys(&settings), names);
    for (name, fields) in sections {
        assert_eq!(keys(&settings[name]), fields, "{name}");
    }
    assert_eq!(settings["llm"]["provider"], "local");
    assert_eq!(settings["llm"]["api_key_set"], false);
}

/// Every secret field of the settings (`section.field`, written here apart from the server's
/// own list, so that a secret it forgets is caught), with a distinct clear value.
fn secrets() -> Vec<(&'static str, &'static str, String)> {
    const SECRET_FIELDS: [&str; 8] = [
        "llm.api_key",
        "asr.api_key",
        "tts.api_key",
        "realtime.api_key",
        "model_providers.openai_api_key",
        "model_providers.dashscope_api_key",
        "doubao.access_token",
        "fleet.target_token",
    ];
    SECRET_FIELDS
        .into_iter()
        .map(|name| name.split_once('.').expect("section.field"))
        .map(|(section, field)| (section, field, format!("sk-{section}-{field}-S3CRET-9876")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_never_returned_in_clear() {
    let s = Server::start().await;
    let mut patch = json!({});
    for (section, field, secret) in secrets() {
        patch[section][field] = json!(secret);
    }
    let saved = put_settings(&s, patch, 200).await;
    assert_eq!(saved["status"], "saved");
    let read = s.get_json(SETTINGS, 200).await;
    assert_eq!(saved["settings"], read, "PUT answers with what GET shows");
    let text = read.to_string();
    for (section, field, secret) in secrets() {
        assert!(
            !text.contains(&secret) && !text.contains("S3CRET"),
            "{section}.{field} leaked: {text}"
        );
        assert_eq!(
            read[section][format!("{field}_set")],
            true,
            "{section}.{field}"
        );
        assert_eq!(
            read[section][field], "sk-…9876",
            "{section}.{field} shows a mask"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_updates_keep_absent_fields_clear_nulls_and_ignore_masks() {
    let s = Server::start().await;
    let before = s.get_json(SETTINGS, 200).await;
    let secret = "sk-abcdefghijklmnop-wxyz";
    let patch = json!({ "llm": { "model": "m1", "api_key": secret, "temperature": 1.2 } });
    let saved = put_settings(&s, patch, 200).await["settings"].clone();
    let llm = &saved["llm"];
    assert_eq!(
        (&llm["model"], &llm["temperature"], &llm["api_key_set"]),
        (&json!("m1"), &json!(1.2), &json!(true))
    );
    assert_eq!(
        llm["max_tokens"], before["llm"]["max_tokens"],
        "absent: unchanged"
    );
    assert_eq!(saved["asr"], before["asr"], "absent section: unchanged");
    assert_eq!(s.get_json(SETTINGS, 200).await, saved, "in force at once");

    let masked = llm["api_key"].clone();
    assert_eq!(masked, "sk-…wxyz");
    let patch = json!({ "llm": { "api_key": masked, "model": "m2" } });
    let after_mask = put_settings(&s, patch, 200).await["settings"]["llm"].clone();
    assert_eq!(
        (&after_mask["api_key"], &after_mask["api_key_set"]),
        (&masked, &json!(true)),
        "the mask leaves the secret"
    );
    assert_eq!(after_mask["model"], "m2");
    let forged_mask = json!({ "llm": { "api_key": "sk-…zzzz" } });
    assert_error(&put_settings(&s, forged_mask, 400).await);

    let patch = json!({ "llm": { "api_key": null, "model": null, "temperature": null } });
    let cleared = put_settings(&s, patch, 200).await["settings"]["llm"].clone();
    assert_eq!(cleared["api_key_set"], false);
    assert_eq!(cleared["api_key"], "");
    assert_eq!(
        cleared["model"], before["llm"]["model"],
        "null resets to the default"
    );
    assert_eq!(cleared["temperature"], before["llm"]["temperature"]);
}

/// The original front end's settings form fills itself from a read, falls back to its own
/// default address (`localhost:50051`) where the read has no `inference`, and sends the whole
/// form back: an address set on the kiosk survives a save there, and a read sent back whole
/// changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_original_front_end_keeps_the_remote_address() {
    let s = Server::start().await;
    let remote = json!({ "remote_voice": { "grpc_addr": "10.0.0.7:50051" } });
    put_settings(&s, remote, 200).await;
    let read = s.get_json(SETTINGS, 200).await;
    assert_eq!(read["inference"]["grpc_addr"], "10.0.0.7:50051", "{read}");
    // What its SettingsPage.vue sends: each section of its form from the read, `""` if absent.
    let form = json!({
        "doubao": { "access_token": read["doubao"]["access_token"], "app_id": "app-1" },
        "livekit": { "url": "", "api_key": "", "api_secret": "" },
        "model_providers": { "dashscope_api_key": "", "openai_api_key": "" },
        "inference": { "grpc_addr": read["inference"]["grpc_addr"] },
    });
    let saved = put_settings(&s, form, 200).await["settings"].clone();
    assert_eq!(saved["remote_voice"]["grpc_addr"], "10.0.0.7:50051");
    assert_eq!(saved["doubao"]["app_id"], "app-1");
    // The whole read sent back is no change; `inference` alone is the address too.
    let echoed = put_settings(&s, saved.clone(), 200).await["settings"].clone();
    assert_eq!(echoed, saved);
    let alias = json!({ "inference": { "grpc_addr": "10.0.0.8:50051" } });
    let moved = put_settings(&s, alias, 200).await["settings"].clone();
    assert_eq!(moved["remote_voice"]["grpc_addr"], "10.0.0.8:50051");
    // Only the form (it sends `livekit`) has its blanks skipped: elsewhere "" clears.
    let cleared = json!({ "inference": {}, "doubao": { "app_id": "" } });
    let cleared = put_settings(&s, cleared, 200).await["settings"].clone();
    assert_eq!(cleared["doubao"]["app_id"], "");
    assert_eq!(cleared["remote_voice"]["grpc_addr"], "10.0.0.8:50051");
}

/// The original front end always sends its `livekit` and `inference` sections, and every field
/// of its form, blank ones as "". Its body saves: `livekit` is ignored, `inference.grpc_addr`
/// is the remote voice service, a blank value changes nothing; an unknown section still fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_original_front_ends_settings_body_saves() {
    let s = Server::start().await;
    let secret = "sk-front-end-secret-1234";
    put_settings(
        &s,
        json!({ "llm": { "api_key": secret, "model": "m0" } }),
        200,
    )
    .await;
    let front_end = json!({
        "llm": { "provider": "", "base_url": "", "api_key": "", "model": "m1" },
        "livekit": { "url": "ws://127.0.0.1:7880", "api_key": "devkey", "api_secret": "" },
        "inference": { "grpc_addr": "127.0.0.1:50051" },
    });
    let saved = put_settings(&s, front_end, 200).await["settings"].clone();
    assert_eq!(saved["llm"]["model"], "m1");
    assert_eq!(
        saved["llm"]["api_key_set"], true,
        "a blank secret keeps the secret: {saved}"
    );
    assert_eq!(
        saved["llm"]["provider"], "local",
        "a blank provider keeps it: {saved}"
    );
    assert_eq!(saved["remote_voice"]["grpc_addr"], "127.0.0.1:50051");
    assert!(saved.get("livekit").is_none(), "{saved}");
    assert_eq!(
        saved["inference"], saved["remote_voice"],
        "a read names the address in force as the front end knows it"
    );
    assert_eq!(s.get_json(SETTINGS, 200).await, saved, "in force");
    // A blank address keeps the one set; our own section wins over the alias.
    let blank = json!({ "livekit": {}, "inference": { "grpc_addr": "" } });
    let kept = put_settings(&s, blank, 200).await["settings"].clone();
    assert_eq!(kept["remote_voice"]["grpc_addr"], "127.0.0.1:50051");
    let both = json!({
        "inference": { "grpc_addr": "10.0.0.9:50051" },
        "remote_voice": { "grpc_addr": "10.0.0.8:50051" },
    });
    let ours = put_settings(&s, both, 200).await["settings"].clone();
    assert_eq!(ours["remote_voice"]["grpc_addr"], "10.0.0.8:50051");
    // Still checked: an address that is none, and a section neither server knows.
    let bad_address = json!({ "livekit": {}, "inference": { "grpc_addr": "not a host:port:x" } });
    assert_error(&put_settings(&s, bad_address, 400).await);
    let unknown = json!({ "livekit": {}, "nope": { "x": 1 } });
    assert_error(&put_settings(&s, unknown, 400).await);
    assert_eq!(
        s.get_json(SETTINGS, 200).await["remote_voice"],
        ours["remote_voice"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_settings_are_refused_whole() {
    let s = Server::start().await;
    put_settings(&s, json!({ "llm": { "model": "kept" } }), 200).await;
    let before = s.get_json(SETTINGS, 200).await;
    for patch in [
        json!({ "nope": {} }),
        json!({ "llm": { "nope": 1 } }),
        json!({ "llm": { "base_url": "not a url" } }),
        json!({ "llm": { "base_url": "ftp://10.0.0.2/v1" } }),
        json!({ "llm": { "temperature": 3 } }),
        json!({ "llm": { "temperature": "hot" } }),
        json!({ "llm": { "model": "new", "provider": "acme" } }),
        json!({ "llm": { "model": "a\u{7}b" } }),
        json!({ "kiosk": { "language": "en\nfr" } }),
        json!({ "kiosk": { "volume": 101 } }),
        json!({ "kiosk": { "character_id": uuid::Uuid::new_v4().to_string() } }),
        json!({ "llm": "fast" }),
        json!([1]),
        json!("settings"),
    ] {
        assert_error(&put_settings(&s, patch.clone(), 400).await);
        assert_eq!(
            s.get_json(SETTINGS, 200).await,
            before,
            "{patch} changed nothing"
        );
    }
    assert_error(
        &expect(
            s.put(SETTINGS)
                .header("content-type", "application/json")
                .body("{\"llm\":"),
            400,
        )
        .await,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_survive_a_restart() {
    let s = Server::start().await;
    let patch = json!({
        "llm": { "model": "persisted", "api_key": "sk-persisted-secret-0001" },
        "kiosk": { "volume": 42 },
    });
    let saved = put_settings(&s, patch, 200).await["settings"].clone();
    let dir = s.stop().await;
    let s = Server::start_in(dir, |_| {}).await;
    assert_eq!(s.get_json(SETTINGS, 200).await, saved);
}

// ---------------------------------------------------------------- settings test

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_test_reports_each_local_check() {
    let s = Server::start().await;
    let (status, answer) = test_settings(&s).await;
    for c in answer["checks"].as_array().unwrap() {
        assert!(
            c["name"].is_string() && c["ok"].is_boolean() && c["latency_ms"].is_u64(),
            "{c}"
        );
    }
    assert_eq!(check(&answer, "llm:local")["ok"], true);
    assert_eq!(check(&answer, "asr:local")["ok"], asr_model_installed());
    assert_eq!(check(&answer, "tts:local")["ok"], espeak_installed());
    let all_ok = answer["checks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["ok"] == true);
    if all_ok {
        assert_eq!((status, &answer["status"]), (200, &json!("ok")), "{answer}");
    } else {
        assert_eq!(
            (status, &answer["status"]),
            (503, &json!("error")),
            "{answer}"
        );
        assert_error(&answer);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_test_fails_fast_on_a_closed_port_and_passes_on_a_listener() {
    let s = Server::start().await;
    let url = format!("http://127.0.0.1:{}/v1", closed_port());
    put_settings(
        &s,
        json!({ "llm": { "provider": "openai", "base_url": url } }),
        200,
    )
    .await;
    let started = Instant::now();
    let (status, answer) = test_settings(&s).await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "answered in {:?}",
        started.elapsed()
    );
    assert_eq!(
        (status, &answer["status"]),
        (503, &json!("error")),
        "{answer}"
    );
    assert_error(&answer);
    let failed = check(&answer, "llm:openai");
    assert_eq!(failed["ok"], false);
    assert!(
        failed["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{failed}"
    );

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    put_settings(&s, json!({ "llm": { "base_url": url } }), 200).await;
    let (_, answer) = test_settings(&s).await;
    let passed = check(&answer, "llm:openai");
    assert_eq!(passed["ok"], true, "{answer}");
    assert!(passed.get("error").is_none(), "{passed}");
}

// ---------------------------------------------------------------- avatar model and launch config

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avatar_model_is_cached_video() {
    let s = Server::start().await;
    let model = s.get_json("/api/v1/config/avatar-model", 200).await;
    assert_eq!(
        keys(&model),
        [
            "active_model",
            "avatar_enabled",
            "config_status",
            "configured_default_model",
            "models"
        ]
    );
    assert_eq!(model["active_model"], "cached_video");
    assert_eq!(model["avatar_enabled"], false);
    assert!(
        model["models"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["id"] == "cached_video"),
        "{model}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launch_config_lists_sections_and_running_values() {
    let s = Server::start_with(|c| c.ptt.line = 5).await;
    let launch = s.get_json(LAUNCH, 200).await;
    let sections = launch["sections"].as_array().unwrap();
    let names: Vec<&str> = sections
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["audio", "ptt", "display", "network", "storage"]);
    for section in sections {
        assert!(
            section["title"].is_string() && section["badge"].is_string(),
            "{section}"
        );
        for p in section["params"].as_array().unwrap() {
            for key in ["name", "path", "value", "readonly", "requires_restart"] {
                assert!(p.get(key).is_some(), "{key} missing in {p}");
            }
            assert!(p.get("pending").is_none(), "nothing saved yet: {p}");
        }
    }
    assert_eq!(
        launch_param(&launch, "ptt.line")["value"],
        5,
        "the running value"
    );
    assert_eq!(launch_param(&launch, "network.listen")["readonly"], true);
    assert_eq!(
        launch_param(&launch, "network.listen")["value"],
        "127.0.0.1:0"
    );
    assert_eq!(launch_param(&launch, "ptt.line")["readonly"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launch_updates_are_checked_whole_and_apply_after_a_restart() {
    let s = Server::start().await;
    let saved = put_launch(&s, json!([{ "path": "ptt.line", "value": 22 }]), 200).await;
    assert_eq!(
        saved,
        json!({ "status": "saved", "requires_restart": true })
    );
    let line = launch_param(&s.get_json(LAUNCH, 200).await, "ptt.line").clone();
    assert_eq!(
        (&line["value"], &line["pending"]),
        (&json!(17), &json!(22)),
        "saved for the next start"
    );

    for params in [
        json!([{ "path": "ptt.nope", "value": 1 }]),
        json!([{ "path": "network.listen", "value": "0.0.0.0:80" }]),
        json!([{ "path": "storage.data_dir", "value": "/tmp" }]),
        json!([{ "path": "ptt.line", "value": "seventeen" }]),
        json!([{ "path": "display.backend", "value": "vga" }]),
        json!([{ "path": "ptt.debounce_ms", "value": 30 }, { "path": "ptt.active_low", "value": "yes" }]),
        json!([]),
    ] {
        assert_error(&put_launch(&s, params, 400).await);
    }
    assert_error(&s.put_json(LAUNCH, json!({ "path": "ptt.line" }), 400).await);
    let launch = s.get_json(LAUNCH, 200).await;
    assert!(
        launch_param(&launch, "ptt.debounce_ms")
            .get("pending")
            .is_none(),
        "all or nothing"
    );
    assert_eq!(launch_param(&launch, "ptt.line")["pending"], 22);

    let dir = s.stop().await;
    let s = Server::start_in(dir, |_| {}).await;
    let line = launch_param(&s.get_json(LAUNCH, 200).await, "ptt.line").clone();
    assert_eq!(
        line["value"], 22,
        "the saved value is in force after a restart"
    );
    assert!(line.get("pending").is_none(), "{line}");
}

// ---------------------------------------------------------------- CORS

fn assert_cors(res: &reqwest::Response, what: &str) {
    let header = |name: &str| {
        res.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    assert_eq!(
        header("access-control-allow-origin").as_deref(),
        Some("*"),
        "{what}"
    );
    assert_eq!(
        header("access-control-allow-methods").as_deref(),
        Some("GET, POST, PUT, DELETE, OPTIONS"),
        "{what}"
    );
    assert_eq!(
        header("access-control-allow-headers").as_deref(),
        Some("Content-Type, Authorization"),
        "{what}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_headers_are_on_every_answer() {
    let s = Server::start().await;
    let unknown_task = format!("/api/v1/tasks/{}", uuid::Uuid::new_v4());
    let cases = [
        (s.get("/api/v1/health"), 200, false),
        (
            s.post("/api/v1/sessions").json(&json!({ "mode": "chat" })),
            400,
            true,
        ),
        (s.get(&unknown_task), 404, true),
        (s.get("/api/v1/nope"), 404, true),
        (s.get("/not/even/api"), 404, true),
        (s.delete("/api/v1/health"), 405, true),
        (s.http.patch(s.url("/api/v1/sessions")), 405, true),
    ];
    for (req, status, is_error) in cases {
        let res = req.send().await.unwrap();
        let what = format!("{} {}", res.url().path(), res.status());
        assert_eq!(res.status().as_u16(), status, "{what}");
        assert_cors(&res, &what);
        if is_error {
            assert_error(&res.json().await.unwrap());
        }
    }

    for path in [
        "/api/v1/health",
        "/api/v1/sessions",
        "/api/v1/unknown/path",
        "/ws/chat/x",
        "/",
    ] {
        let res = s
            .http
            .request(reqwest::Method::OPTIONS, s.url(path))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "OPTIONS {path}");
        assert_cors(&res, &format!("OPTIONS {path}"));
        assert_eq!(
            res.bytes().await.unwrap().len(),
            0,
            "OPTIONS {path} has no body"
        );
    }
}

// ---------------------------------------------------------------- voice test

async fn test_voice(s: &Server, provider: &str, voice: &str, status: u16) -> Value {
    let body = json!({ "voice_provider": provider, "voice_type": voice });
    s.post_json("/api/v1/characters/test-voice", body, status)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn voice_test_reports_unknown_down_and_rejecting_providers() {
    let s = Server::start().await;
    assert_error(&test_voice(&s, "acme", "en-us", 400).await);
    assert_error(&test_voice(&s, "local", "en-us; rm -rf /", 400).await);
    assert_error(&test_voice(&s, "openai", "alloy", 503).await);

    if espeak_installed() {
        assert_eq!(
            test_voice(&s, "local", "en-us", 200).await,
            json!({ "status": "ok" })
        );
        // A voice espeak-ng does not list is refused before anything runs.
        assert_error(&test_voice(&s, "local", "zz-no-such-voice-42", 400).await);
    } else {
        println!("espeak-ng is not installed: the local voice test must say the provider is down");
        assert_error(&test_voice(&s, "local", "en-us", 503).await);
    }
}

// ---------------------------------------------------------------- internal routes

/// A non-loopback IPv4 address of this machine, if it has one.
fn lan_address() -> Option<Ipv4Addr> {
    let by_route = UdpSocket::bind("0.0.0.0:0")
        .and_then(|sock| {
            sock.connect("10.255.255.255:1")
                .and_then(|()| sock.local_addr())
        })
        .ok()
        .and_then(|addr| match addr.ip() {
            IpAddr::V4(ip) => Some(ip),
            IpAddr::V6(_) => None,
        });
    let by_hostname = || {
        let out = std::process::Command::new("hostname")
            .arg("-I")
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|w| w.parse::<Ipv4Addr>().ok())
            .find(|ip| !ip.is_loopback() && !ip.is_unspecified())
    };
    by_route
        .filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
        .or_else(by_hostname)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_routes_need_loopback_or_the_token() {
    let Some(ip) = lan_address() else {
        println!("skipped: this machine has no non-loopback IPv4 address");
        return;
    };
    let s = Server::start_with(|c| {
        c.listen = "0.0.0.0:0".parse().unwrap();
        c.access.internal_token = Some("tok".into());
    })
    .await;
    let remote = |path: &str| format!("http://{ip}:{}{path}", s.addr.port());
    let events = format!("/api/v1/internal/tasks/{}/events", uuid::Uuid::new_v4());
    let search = format!(
        "/api/v1/internal/characters/{}/knowledge/search",
        s.default_character().await
    );
    let post = |path: &str| s.http.post(remote(path)).json(&json!({ "query": "hours" }));

    expect(s.http.get(remote("/api/v1/health")), 200).await;
    for path in [&events, &search] {
        assert_error(&expect(post(path), 401).await);
        assert_error(&expect(post(path).bearer_auth("wrong"), 401).await);
        assert_error(&expect(post(path).header("authorization", "tok"), 401).await);
    }
    assert_error(&expect(post(&events).bearer_auth("tok"), 404).await);
    expect(post(&search).bearer_auth("tok"), 200).await;
    assert_error(&expect(s.post(&events).json(&json!({})), 404).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_routes_refuse_any_token_when_none_is_configured() {
    let Some(ip) = lan_address() else {
        println!("skipped: this machine has no non-loopback IPv4 address");
        return;
    };
    let s = Server::start_with(|c| c.listen = "0.0.0.0:0".parse().unwrap()).await;
    let path = format!("/api/v1/internal/tasks/{}/events", uuid::Uuid::new_v4());
    let url = format!("http://{ip}:{}{path}", s.addr.port());
    for token in ["", "tok"] {
        let req = s.http.post(&url).bearer_auth(token).json(&json!({}));
        assert_error(&expect(req, 401).await);
    }
}
