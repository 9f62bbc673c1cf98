//! `GET /metrics` (issue 35): who may read it (the administrator or a metrics key, never the
//! public nor a conversation key, and a metrics key opens nothing else), what a scripted visit
//! (a spoken question on the simulated button and microphone, then one chosen by touch) reads
//! back, and that `promtool` accepts a live scrape and the alert rules of docs/operations.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::choosing::{choose, guide_on_a_sim_kiosk, until};
use crate::device::{press, spoken, wait_status};
use crate::support::browser::Browser;
use crate::support::{Server, repo, sign_in};

const PASSWORD: &str = "metrics-test-password";

const FAQ: &str = "Visiting\n\n\
    Q: Can I bring my dog?\nA: Only guide dogs are allowed inside.\n\n\
    Q: Is there free wifi?\nA: Yes, the network is called Harbour Guest.\n";

/// The exposition format's content type.
const TEXT_0_0_4: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Creates a client key of `scope` (none: the default) as the administrator; returns the key.
async fn key(s: &Server, scope: Option<&str>) -> String {
    let mut body = json!({ "name": format!("{scope:?}") });
    if let Some(scope) = scope {
        body["scope"] = json!(scope);
    }
    let created = s.post_json("/api/v1/client-keys", body, 201).await;
    assert_eq!(
        created["scope"],
        scope.unwrap_or("conversation"),
        "{created}"
    );
    created["key"].as_str().unwrap().to_string()
}

/// `GET path` with `bearer` (or no credential) from a client of no session.
async fn get(s: &Server, path: &str, bearer: Option<&str>) -> reqwest::Response {
    let mut req = reqwest::Client::new().get(s.url(path));
    if let Some(token) = bearer {
        req = req.bearer_auth(token);
    }
    req.send().await.unwrap()
}

/// The samples of a scrape: `name{labels}` -> value.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// A scrape as the administrator: its text.
async fn scrape(s: &Server) -> String {
    let res = s.get("/metrics").send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], TEXT_0_0_4);
    res.text().await.unwrap()
}

#[tokio::test]
async fn only_the_administrator_and_a_metrics_key_read_the_metrics() {
    // Loopback is not trusted: the test's client is one of the LAN.
    let mut s = Server::start_with(|c| {
        c.access.admin_password = Some(PASSWORD.into());
        c.access.loopback_is_trusted = false;
        c.access.allow_plain_http_login = true;
    })
    .await;
    let cookie = sign_in(&s, PASSWORD).await;
    s.as_admin(&cookie);
    let conversation = key(&s, None).await;
    let metrics = key(&s, Some("metrics")).await;

    // Nobody, a conversation key, a wrong key: 401 with an error.
    for bearer in [None, Some(conversation.as_str()), Some("not-a-key")] {
        let res = get(&s, "/metrics", bearer).await;
        assert_eq!(res.status(), 401, "{bearer:?}");
        let v: Value = res.json().await.unwrap();
        assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{v}");
    }
    // The metrics key and the administrator (cookie): the text format.
    let res = get(&s, "/metrics", Some(&metrics)).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], TEXT_0_0_4);
    assert!(res.text().await.unwrap().contains("docent_visits_total 0"));
    let text = scrape(&s).await;
    assert!(
        text.contains("# TYPE docent_http_requests_total counter"),
        "{text}"
    );

    // The metrics key opens nothing else: an admin route and a conversation route refuse it as
    // they refuse an unknown key; the conversation key still converses.
    for path in [
        "/api/v1/settings",
        "/api/v1/client-keys",
        "/api/v1/sessions",
    ] {
        let res = get(&s, path, Some(&metrics)).await;
        assert_eq!(res.status(), 401, "{path}");
    }
    assert_eq!(
        get(&s, "/api/v1/sessions", Some(&conversation))
            .await
            .status(),
        200
    );

    // The keys list says each one's scope.
    let keys = s.get_json("/api/v1/client-keys", 200).await;
    let scopes: Vec<&str> = keys["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["scope"].as_str().unwrap())
        .collect();
    assert_eq!(scopes, ["conversation", "metrics"], "{keys}");
    // An unknown scope is refused.
    s.post_json(
        "/api/v1/client-keys",
        json!({"name": "x", "scope": "all"}),
        400,
    )
    .await;

    // The refusals above were counted under their route class.
    let text = scrape(&s).await;
    let m = samples(&text);
    assert!(
        m["docent_http_requests_total{class=\"metrics\",code=\"4xx\"}"] >= 3.0,
        "{text}"
    );
    assert!(m["docent_http_requests_total{class=\"metrics\",code=\"2xx\"}"] >= 2.0);
    assert!(m["docent_http_requests_total{class=\"admin\",code=\"4xx\"}"] >= 2.0);
}

/// The console's System page makes a metrics key (a choice beside its name), shows it once,
/// and lists each key with its scope; the key reads the metrics.
#[tokio::test]
async fn the_console_makes_a_metrics_key_and_lists_its_scope() {
    let mut s = Server::start_with(|c| c.access.admin_password = Some(PASSWORD.into())).await;
    let cookie = sign_in(&s, PASSWORD).await;
    s.as_admin(&cookie);
    key(&s, None).await;
    let mut b = Browser::launch().await;
    b.sign_in_page(&s.base, PASSWORD).await;
    b.goto(&s.url("/console/system")).await;
    b.wait_for_page("/console/system").await;
    b.wait_until("document.querySelectorAll('#keys tr').length === 1")
        .await;
    b.type_into("key-name", "prometheus").await;
    b.eval("document.getElementById('key-scope').value = 'metrics'")
        .await;
    b.click("#new-key button[type=submit]").await;
    b.wait_until("document.querySelectorAll('#keys tr').length === 2")
        .await;
    let scopes = b
        .eval("[...document.querySelectorAll('#keys tr')].map((r) => r.cells[1].textContent)")
        .await;
    assert_eq!(scopes, json!(["Conversation", "Metrics"]));
    let made = b
        .eval("document.getElementById('key-made').textContent")
        .await;
    let made = made.as_str().unwrap();
    let key = made.rsplit(' ').next().unwrap();
    assert!(made.contains("prometheus"), "{made}");
    assert_eq!(get(&s, "/metrics", Some(key)).await.status(), 200, "{made}");
}

/// A visitor asks aloud (the simulated button and microphone), then chooses the same question
/// on the screen: the metrics count one visit, a question by voice and one by touch (asked
/// again), two answers, one recognition and one wait for the first audio.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visit_by_voice_and_touch_is_counted() {
    let (s, cid) = guide_on_a_sim_kiosk(PASSWORD).await;
    s.knowledge_ready(&cid, "faq.txt", FAQ).await;
    let questions = json!({ "questions": ["Can I bring my dog?", "Is there free wifi?"] });
    let path = format!("/api/v1/characters/{cid}/screen-questions");
    assert_eq!(
        s.put(&path).json(&questions).send().await.unwrap().status(),
        200
    );
    s.put_json(
        "/api/v1/settings",
        json!({"kiosk": {"character_id": cid}}),
        200,
    )
    .await;
    let before = samples(&scrape(&s).await);
    assert_eq!(before["docent_visits_total"], 0.0);
    assert_eq!(before["docent_device_up{part=\"audio\"}"], 1.0);
    assert_eq!(before["docent_device_up{part=\"button\"}"], 1.0);
    assert_eq!(before["docent_open"], 1.0, "no opening hours: always open");

    // Aloud, once the kiosk loop follows the character: press, speak, release; the reply
    // plays to its end.
    let d = until(&s, "the kiosk's character", |d| {
        d["character_id"] == cid.as_str()
    })
    .await;
    let mic = d["sim_audio"]["mic"].as_str().unwrap().to_string();
    let (question, spoken_for) = spoken("Can I bring my dog?");
    std::fs::write(&mic, &question).unwrap();
    press(&s, true).await;
    wait_status(&s, "listening", Duration::from_secs(2)).await;
    tokio::time::sleep(spoken_for + Duration::from_millis(200)).await;
    press(&s, false).await;
    wait_status(&s, "speaking", Duration::from_secs(40)).await;
    wait_status(&s, "idle", Duration::from_secs(40)).await;

    // By touch: the question screen, its first row.
    choose(&s, json!({"touch": {"x": 0.5, "y": 0.5}})).await;
    let d = until(&s, "the question screen", |d| !d["questions"].is_null()).await;
    assert_eq!(d["questions"]["rows"][0], "Can I bring my dog?", "{d}");
    // The buttons' "choose" asks the question pointed at (the first).
    choose(&s, json!("choose")).await;
    until(&s, "speaking", |d| d["status"] == "speaking").await;
    until(&s, "idle again", |d| d["status"] == "idle").await;

    let text = scrape(&s).await;
    let m = samples(&text);
    let at = |series: &str| {
        *m.get(series)
            .unwrap_or_else(|| panic!("{series} is scraped:\n{text}"))
    };
    assert_eq!(at("docent_visits_total"), 1.0, "{text}");
    assert_eq!(at("docent_questions_total{via=\"voice\"}"), 1.0, "{text}");
    assert_eq!(at("docent_questions_total{via=\"touch\"}"), 1.0, "{text}");
    assert_eq!(at("docent_questions_total{via=\"text\"}"), 0.0, "{text}");
    let answers = at("docent_answers_total{outcome=\"answered\"}")
        + at("docent_answers_total{outcome=\"unanswered\"}");
    assert_eq!(answers, 2.0, "{text}");
    assert!(
        at("docent_answers_total{outcome=\"answered\"}") >= 1.0,
        "the touch: {text}"
    );
    assert_eq!(at("docent_recognition_seconds_count"), 1.0, "{text}");
    assert_eq!(at("docent_first_audio_seconds_count"), 1.0, "{text}");
    assert!(at("docent_first_audio_seconds_sum") > 0.0, "{text}");
    assert!(
        at("docent_provider_calls_total{stage=\"asr\"}") >= 1.0,
        "{text}"
    );
    assert!(
        at("docent_provider_calls_total{stage=\"tts\"}") >= 2.0,
        "{text}"
    );
    assert_eq!(
        at("docent_provider_failures_total{stage=\"asr\"}"),
        0.0,
        "{text}"
    );
    assert_eq!(at("docent_sessions_open"), 1.0, "the visit: {text}");
    assert!(at("docent_http_requests_total{class=\"internal\",code=\"2xx\"}") >= 4.0);
    assert!(at("docent_resident_memory_bytes") > 1e6, "{text}");
    assert!(at("docent_data_free_bytes") > 0.0, "{text}");
    assert_eq!(
        at("docent_data_reserve_bytes"),
        docent::config::Config::default().storage.data_reserve_bytes as f64
    );
    assert!(text.contains("docent_firmware_info{"), "{text}");
    // The offline recogniser says how sure it was of each word.
    assert_eq!(at("docent_recognition_confidence_count"), 1.0, "{text}");
    // A question asked again in the visit (if the recogniser heard the same words) is counted.
    assert!(at("docent_questions_asked_again_total") <= 1.0, "{text}");
}

/// `promtool`, which `./x test` installs (Debian's `prometheus` package).
fn promtool(args: &[&str], stdin: Option<&str>) -> std::process::Output {
    let mut child = Command::new("promtool")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("promtool runs ({e}): `./x test` (or `./x setup`) installs Debian's prometheus")
        });
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

#[tokio::test]
async fn promtool_accepts_a_live_scrape() {
    let mut s = Server::start_with(|c| c.access.admin_password = Some(PASSWORD.into())).await;
    let cookie = sign_in(&s, PASSWORD).await;
    s.as_admin(&cookie);
    // A session and a message so that every kind of series has samples.
    let cid = s.default_character().await;
    s.session(&cid).await;
    let text = scrape(&s).await;
    let out = promtool(&["check", "metrics"], Some(&text));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "promtool check metrics: {said}\n{text}"
    );
    assert_eq!(said.trim(), "", "no lint: {said}");
    // And docs/operations.md says what each one means.
    let doc = std::fs::read_to_string(repo().join("docs/operations.md")).unwrap();
    for family in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let name = family.split(' ').next().unwrap();
        assert!(
            doc.contains(&format!("`{name}`")),
            "docs/operations.md does not describe {name}"
        );
    }
}

#[test]
fn promtool_accepts_the_alert_rules() {
    let rules = repo().join("docs/operations/alerts.yml");
    let out = promtool(&["check", "rules", rules.to_str().unwrap()], None);
    assert!(
        out.status.success(),
        "promtool check rules: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
