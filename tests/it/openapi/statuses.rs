//! The statuses generated data cannot reach, provoked on purpose against a real `docent` of
//! their own: the generic ones for every operation that documents them, derived from the
//! document (no credentials -> 401, a cookie write from no origin -> 403, a `text/plain` body
//! -> 415, a body over the bounds -> 413, malformed JSON -> 400), then the specific ones one by
//! one. What the server answered is read from its access log, like schemathesis' run.

use std::collections::BTreeSet;

use reqwest::{Method, RequestBuilder};
use serde_json::Value;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::{ACCESS_LOG, METHODS, Pair, answered, client, concrete_path, kiosks};
use crate::support::{Process, Running};

pub const PASSWORD: &str = "statuses-test-password";
pub const INTERNAL_TOKEN: &str = "statuses-internal-token";

/// Bodies larger than every bound of the probe's server (its `[limits]` below).
const OVER: usize = 300 << 10;

/// The probe's server: loopback is not trusted (so the guards answer 401 as to a LAN client),
/// an internal token for the internal routes, one live WebSocket, small body bounds, and
/// `extra` top-level keys.
pub fn config(extra: &str) -> String {
    format!(
        "access.loopback_is_trusted = false\nsessions.max = 1\nsessions.message_burst = 1\n\
         access.internal_token = \"{INTERNAL_TOKEN}\"\n\
         access.allow_plain_http_login = true\nconnections.max_websockets = 1\n{extra}\n\
         [limits]\njson_bytes = 65536\nimage_bytes = 65536\nknowledge_file_bytes = 65536\n\
         knowledge_request_bytes = 65536\nvideo_bytes = 65536\nbackup_bytes = 65536\n\
         recording_bytes = 65536\n\
         [update]\nmax_bundle_bytes = 65536\n"
    )
}

/// A running probe: the server, its admin token, and every answer that was not the one asked
/// for.
pub struct Probe {
    pub server: Running,
    pub base: String,
    pub http: reqwest::Client,
    pub token: String,
    pub wrong: Vec<String>,
}

impl Probe {
    pub async fn start() -> Probe {
        Probe::launch(Process::new(), &config("")).await
    }

    /// A kiosk of `process` with the configuration `toml`, its administrator signed in.
    pub async fn launch(process: Process, toml: &str) -> Probe {
        let server = process
            .env("ADMIN_PASSWORD", PASSWORD)
            .env("DOCENT_LOG", ACCESS_LOG)
            .config(toml)
            .start()
            .await;
        let base = server.base();
        let http = client();
        let res = http
            .post(format!("{base}/api/auth"))
            .json(&serde_json::json!({ "password": PASSWORD }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let cookie = res.headers()["set-cookie"].to_str().unwrap().to_string();
        let token = cookie
            .split(';')
            .next()
            .and_then(|c| c.split_once('='))
            .unwrap()
            .1
            .to_string();
        Probe {
            server,
            base,
            http,
            token,
            wrong: Vec::new(),
        }
    }

    pub fn request(&self, method: &str, path: &str) -> RequestBuilder {
        self.http.request(
            method.to_uppercase().parse().unwrap(),
            format!("{}{path}", self.base),
        )
    }

    /// A request with the credentials `op` asks for: the admin token, or the internal token for
    /// internal routes.
    fn authed(&self, method: &str, path: &str, op: &Value) -> RequestBuilder {
        let admin = op["security"]
            .as_array()
            .is_some_and(|s| s.iter().any(|r| r.get("admin_session").is_some()));
        let token = if admin { &self.token } else { INTERNAL_TOKEN };
        self.request(method, path).bearer_auth(token)
    }

    /// Sends `req`; an answer other than `status` is noted as wrong.
    pub async fn expect(&mut self, what: &str, req: RequestBuilder, status: u16) -> String {
        match req.send().await {
            Ok(res) => {
                let got = res.status().as_u16();
                let body = res.text().await.unwrap_or_default();
                if got != status {
                    let mut cut = body.len().min(200);
                    while !body.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    self.wrong.push(format!(
                        "{what}: wanted {status}, got {got} {}",
                        &body[..cut]
                    ));
                }
                body
            }
            Err(e) => {
                self.wrong.push(format!("{what}: wanted {status}, got {e}"));
                String::new()
            }
        }
    }

    /// What the server answered so far.
    pub fn answered(&self) -> BTreeSet<Pair> {
        answered(&self.server.stderr())
    }
}

/// The request body's media type of an operation, if it takes one.
fn body_type(op: &Value) -> Option<&str> {
    op["requestBody"]["content"]
        .as_object()?
        .keys()
        .next()
        .map(String::as_str)
}

/// Operations whose 401 is not about credentials (`specific` provokes it): a wrong password,
/// and `POST /api/data`, which answers 405 to anything but `?seed=1` first.
const PUBLIC_401: &[(&str, &str)] = &[("post", "/api/auth"), ("post", "/api/data")];

/// The generic statuses, for every operation that documents them.
pub async fn generic(p: &mut Probe, doc: &Value) {
    for (path, item) in doc["paths"].as_object().unwrap() {
        for m in METHODS {
            let Some(op) = item.get(m) else { continue };
            let documents = |s: &str| op["responses"].get(s).is_some();
            // A variant that is one, so the body is read before the character is looked up.
            let concrete = concrete_path(path).replace("/x/x/x", "/x/idle/x");
            let what = |s: &str| format!("{} {path} {s}", m.to_uppercase());
            let body = body_type(op);
            let writes = m != "get";
            if documents("401") && !PUBLIC_401.contains(&(m, path.as_str())) {
                let mut req = p.request(m, &concrete);
                if body == Some("application/json") {
                    req = req.json(&serde_json::json!({}));
                }
                p.expect(&what("401"), req, 401).await;
            }
            if documents("403") && writes {
                // A write with the session cookie and no origin: a forged cross-site write. The
                // route refuses it for want of credentials (the cookie is set aside), after any
                // check that comes first: `POST /api/data` answers 405 without `?seed=1`.
                let target = if (m, path.as_str()) == ("post", "/api/data") {
                    format!("{concrete}?seed=1")
                } else {
                    concrete.clone()
                };
                let req = p
                    .request(m, &target)
                    .header("cookie", format!("docent_session={}", p.token));
                p.expect(&what("403"), req, 403).await;
            }
            if let Some(media) = body {
                if documents("415") && media != "multipart/form-data" {
                    let req = p
                        .authed(m, &concrete, op)
                        .header("content-type", "text/plain")
                        .body("hello");
                    p.expect(&what("415"), req, 415).await;
                }
                if documents("413") {
                    let media = if media == "multipart/form-data" {
                        "multipart/form-data; boundary=x"
                    } else {
                        media
                    };
                    let req = p
                        .authed(m, &concrete, op)
                        .header("content-type", media)
                        .body(vec![b' '; OVER]);
                    p.expect(&what("413"), req, 413).await;
                }
                if documents("400") && media == "application/json" {
                    let req = p
                        .authed(m, &concrete, op)
                        .header("content-type", media)
                        .body("{\"unterminated\": ");
                    p.expect(&what("400"), req, 400).await;
                }
            }
        }
    }
}

/// Every pair the probes produced, and what they got wrong.
pub async fn provoke_all(doc: &Value) -> (BTreeSet<Pair>, Vec<String>) {
    let probe = async {
        let mut p = Probe::start().await;
        generic(&mut p, doc).await;
        specific(&mut p).await;
        (p.answered(), p.wrong)
    };
    let setup = async {
        let mut p = Probe::setup().await;
        in_setup_mode(&mut p).await;
        (p.answered(), p.wrong)
    };
    let (probe, setup, providers, logins, maintenance, content, full, updates) = tokio::join!(
        probe,
        setup,
        kiosks::providers(),
        kiosks::logins(),
        kiosks::maintenance(),
        kiosks::content(),
        kiosks::full_disk(),
        kiosks::updates()
    );
    let mut pairs = BTreeSet::new();
    let mut wrong = Vec::new();
    for (answered, missed) in [
        probe,
        setup,
        providers,
        logins,
        maintenance,
        content,
        full,
        updates,
    ] {
        pairs.extend(answered);
        wrong.extend(missed);
    }
    (pairs, wrong)
}

const UNKNOWN: &str = "00000000-0000-4000-8000-000000000000";

/// The statuses of particular states: seeded data, full capacities, spent budgets.
async fn specific(p: &mut Probe) {
    use serde_json::json;
    let t = p.token.clone();
    let admin = |p: &Probe, m: Method, path: &str| {
        p.http
            .request(m, format!("{}{path}", p.base))
            .bearer_auth(&t)
    };
    let internal = |p: &Probe, m: Method, path: &str| {
        p.http
            .request(m, format!("{}{path}", p.base))
            .bearer_auth(INTERNAL_TOKEN)
    };
    // No RAUC on this machine, and no reboot path: the update routes say so.
    for (what, path) in [
        (
            "POST /api/v1/system/update without RAUC 503",
            "/api/v1/system/update",
        ),
        (
            "POST /api/v1/system/update/install without RAUC 503",
            "/api/v1/system/update/install",
        ),
        (
            "POST /api/v1/system/reboot without a reboot path 503",
            "/api/v1/system/reboot",
        ),
    ] {
        let req = admin(p, Method::POST, path);
        let req = if path.ends_with("install") {
            req.json(&json!({ "force": false }))
        } else if path.ends_with("reboot") {
            req.json(&json!({ "when": "now" }))
        } else {
            req.header("content-type", "application/octet-stream")
                .body(vec![0u8; 16])
        };
        p.expect(what, req, 503).await;
    }
    // Availability: a period it keeps, and one it does not.
    for (query, status) in [("", 200), ("?days=0", 400), ("?days=401", 400)] {
        let path = format!("/api/v1/system/availability{query}");
        p.expect(
            &format!("GET {path} {status}"),
            admin(p, Method::GET, &path),
            status,
        )
        .await;
    }
    // Nothing scheduled for the closing: a cancel says so all the same.
    for path in ["/api/v1/system/update/install", "/api/v1/system/reboot"] {
        let body = p
            .expect(
                &format!("DELETE {path} 200"),
                admin(p, Method::DELETE, path),
                200,
            )
            .await;
        let status: Value = serde_json::from_str(&body).unwrap_or_default();
        assert_eq!(status["scheduled_install"], Value::Null, "{body}");
        assert_eq!(status["scheduled_reboot"], Value::Null, "{body}");
    }
    // A character with an image, idle clips and a knowledge file.
    let body = p
        .expect(
            "POST /api/v1/characters 201",
            admin(p, Method::POST, "/api/v1/characters").json(&json!({ "name": "Probe" })),
            201,
        )
        .await;
    let c = serde_json::from_str::<Value>(&body).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let chr = format!("/api/v1/characters/{c}");
    p.expect(
        "PUT /api/v1/characters/{id} 200",
        admin(p, Method::PUT, &chr).json(&json!({ "name": "Probe two" })),
        200,
    )
    .await;
    let avatar = reqwest::multipart::Form::new().part(
        "avatar",
        reqwest::multipart::Part::bytes(crate::support::PNG.to_vec()).file_name("face.png"),
    );
    p.expect(
        "POST avatar 200",
        admin(p, Method::POST, &format!("{chr}/avatar")).multipart(avatar),
        200,
    )
    .await;
    let text = reqwest::multipart::Form::new().part(
        "avatar",
        reqwest::multipart::Part::bytes(b"hello".to_vec()).file_name("face.png"),
    );
    p.expect(
        "POST avatar that is no image 415",
        admin(p, Method::POST, &format!("{chr}/avatar")).multipart(text),
        415,
    )
    .await;
    let images: Value = serde_json::from_str(
        &p.expect(
            "GET images",
            admin(p, Method::GET, &format!("{chr}/images")),
            200,
        )
        .await,
    )
    .unwrap();
    let image = images[0]["filename"].as_str().unwrap().to_string();
    let imgbase = image.rsplit_once('.').unwrap().0.to_string();
    let clip = crate::support::mp4_h264();
    let legacy = format!("{chr}/idle-videos/{imgbase}/clip.mp4");
    let variant = format!("{chr}/idle-videos/{imgbase}/idle/clip.mp4");
    for (what, path) in [("legacy", &legacy), ("variant", &variant)] {
        p.expect(
            &format!("PUT idle clip ({what}) 201"),
            admin(p, Method::PUT, path)
                .header("content-type", "application/octet-stream")
                .body(clip.clone()),
            201,
        )
        .await;
        p.expect(
            &format!("PUT idle clip ({what}) of an undecodable image name 400"),
            admin(p, Method::PUT, &path.replace(&imgbase, "%FF"))
                .header("content-type", "application/octet-stream")
                .body(clip.clone()),
            400,
        )
        .await;
        p.expect(
            &format!("PUT idle clip ({what}) unknown character 404"),
            admin(p, Method::PUT, &path.replace(&c, UNKNOWN))
                .header("content-type", "application/octet-stream")
                .body(clip.clone()),
            404,
        )
        .await;
    }
    // Files: whole, a range, an unsatisfiable range, and not modified.
    let avatar_path = format!("/api/v1/avatars/{c}_{image}");
    let image_path = format!("{chr}/images/{image}");
    for path in [&avatar_path, &image_path, &legacy, &variant] {
        let res = p.request("get", path).send().await.unwrap();
        let status = res.status().as_u16();
        let etag = res.headers().get("etag").cloned();
        if status != 200 || etag.is_none() {
            p.wrong.push(format!("GET {path}: {status}, etag {etag:?}"));
            continue;
        }
        p.expect(
            &format!("GET {path} 206"),
            p.request("get", path).header("range", "bytes=0-0"),
            206,
        )
        .await;
        p.expect(
            &format!("GET {path} 416"),
            p.request("get", path).header("range", "bytes=99999999-"),
            416,
        )
        .await;
        p.expect(
            &format!("GET {path} 304"),
            p.request("get", path)
                .header("if-none-match", etag.unwrap()),
            304,
        )
        .await;
    }
    // Names that are not names.
    for (m, path) in [
        (Method::GET, format!("/api/v1/characters/{}", "%FF")),
        (Method::DELETE, format!("/api/v1/characters/{}", "%FF")),
        (Method::GET, "/api/v1/characters/%FF/images".into()),
        (Method::GET, "/api/v1/characters/%FF/knowledge".into()),
        (Method::GET, format!("/api/v1/avatars/{}", "%FF")),
        (Method::GET, format!("{chr}/images/%FF")),
        (Method::PUT, format!("{chr}/images/%FF/activate")),
        (Method::GET, format!("{chr}/idle-videos/%FF/clip.mp4")),
        (Method::GET, format!("{chr}/idle-videos/{imgbase}/idle/%FF")),
        (Method::DELETE, format!("{chr}/knowledge/%FF")),
        (Method::POST, format!("{chr}/knowledge/%FF/reindex")),
        (Method::DELETE, "/api/v1/client-keys/%FF".into()),
        (Method::DELETE, "/api/v1/sessions/%FF".into()),
        (Method::GET, "/api/v1/tasks/%FF".into()),
        (
            Method::GET,
            format!("/api/v1/tasks/{UNKNOWN}/artifacts/%FF"),
        ),
    ] {
        p.expect(&format!("{m} {path} 400"), admin(p, m.clone(), &path), 400)
            .await;
    }
    // Knowledge: search, a file that is kept but cannot be indexed, delete.
    let file = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(b"# Hours\n\nThe museum opens at nine.\n".to_vec())
            .file_name("hours.md"),
    );
    let uploaded: Value = serde_json::from_str(
        &p.expect(
            "POST knowledge file 201",
            admin(p, Method::POST, &format!("{chr}/knowledge/files")).multipart(file),
            201,
        )
        .await,
    )
    .unwrap();
    let source = super::find_id(&uploaded).unwrap();
    let picture = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(crate::support::PNG.to_vec()).file_name("plan.png"),
    );
    let picture: Value = serde_json::from_str(
        &p.expect(
            "POST knowledge picture 201",
            admin(p, Method::POST, &format!("{chr}/knowledge/files")).multipart(picture),
            201,
        )
        .await,
    )
    .unwrap();
    let picture = super::find_id(&picture).unwrap();
    p.expect(
        "reindex a file that cannot be indexed 400",
        admin(
            p,
            Method::POST,
            &format!("{chr}/knowledge/{picture}/reindex"),
        ),
        400,
    )
    .await;
    p.expect(
        "knowledge search 200",
        internal(
            p,
            Method::POST,
            &format!("/api/v1/internal/characters/{c}/knowledge/search"),
        )
        .json(&json!({ "query": "hours" })),
        200,
    )
    .await;
    p.expect(
        "knowledge search 404",
        internal(
            p,
            Method::POST,
            &format!("/api/v1/internal/characters/{UNKNOWN}/knowledge/search"),
        )
        .json(&json!({ "query": "hours" })),
        404,
    )
    .await;
    // Sessions, messages and tasks.
    p.expect(
        "POST /api/v1/sessions unknown character 404",
        admin(p, Method::POST, "/api/v1/sessions").json(&json!({ "character_id": UNKNOWN })),
        404,
    )
    .await;
    let key: Value = serde_json::from_str(
        &p.expect(
            "POST client key 201",
            admin(p, Method::POST, "/api/v1/client-keys").json(&json!({ "name": "probe" })),
            201,
        )
        .await,
    )
    .unwrap();
    let key = key["key"].as_str().unwrap().to_string();
    let session: Value = serde_json::from_str(
        &p.expect(
            "POST /api/v1/sessions 201",
            p.request("post", "/api/v1/sessions")
                .bearer_auth(&key)
                .json(&json!({ "character_id": c })),
            201,
        )
        .await,
    )
    .unwrap();
    let session = session["session_id"].as_str().unwrap().to_string();
    p.expect(
        "POST message 202",
        p.request("post", &format!("/api/v1/sessions/{session}/message"))
            .bearer_auth(&key)
            .json(&json!({ "text": "hello" })),
        202,
    )
    .await;
    p.expect(
        "POST message 429 (sessions.message_burst = 1)",
        p.request("post", &format!("/api/v1/sessions/{session}/message"))
            .bearer_auth(&key)
            .json(&json!({ "text": "hello again" })),
        429,
    )
    .await;
    p.expect(
        "POST /api/v1/sessions 503 (sessions.max = 1)",
        admin(p, Method::POST, "/api/v1/sessions").json(&json!({ "character_id": c })),
        503,
    )
    .await;
    p.expect(
        "PUT /api/v1/characters/{id} 404",
        admin(p, Method::PUT, &format!("/api/v1/characters/{UNKNOWN}"))
            .json(&json!({ "name": "Nobody" })),
        404,
    )
    .await;
    // What is not there: an unknown character, image, clip or session (generated ids reach
    // these only by chance, and the seeded ids pinned for the run never do).
    let nobody = format!("/api/v1/characters/{UNKNOWN}");
    for (m, path) in [
        (Method::GET, nobody.clone()),
        (Method::GET, format!("{nobody}/images")),
        (Method::GET, format!("{nobody}/knowledge")),
        (Method::GET, format!("{nobody}/statistics")),
        (Method::GET, format!("{nobody}/conversations/messages")),
        (Method::GET, format!("{nobody}/conversations/unmatched")),
        (Method::GET, format!("{nobody}/conversations/export")),
        (Method::GET, format!("/api/v1/avatars/{UNKNOWN}_{image}")),
        (Method::GET, format!("{chr}/images/absent.png")),
        (Method::PUT, format!("{chr}/images/absent.png/activate")),
        (
            Method::DELETE,
            format!("{chr}/conversations/visits/{UNKNOWN}"),
        ),
        (
            Method::GET,
            format!("{chr}/idle-videos/{imgbase}/idle/absent.mp4"),
        ),
    ] {
        p.expect(&format!("{m} {path} 404"), admin(p, m.clone(), &path), 404)
            .await;
    }
    p.expect(
        "POST knowledge/ask unknown character 404",
        admin(p, Method::POST, &format!("{nobody}/knowledge/ask"))
            .json(&json!({ "question": "When do you open?" })),
        404,
    )
    .await;
    p.expect(
        "POST message unknown session 404",
        admin(
            p,
            Method::POST,
            &format!("/api/v1/sessions/{UNKNOWN}/message"),
        )
        .json(&json!({ "text": "hello" })),
        404,
    )
    .await;
    let avatar = reqwest::multipart::Form::new().part(
        "avatar",
        reqwest::multipart::Part::bytes(crate::support::PNG.to_vec()).file_name("face.png"),
    );
    p.expect(
        "POST avatar unknown character 404",
        admin(p, Method::POST, &format!("{nobody}/avatar")).multipart(avatar),
        404,
    )
    .await;
    let file = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(b"# Hours\n\nNine to five.\n".to_vec())
            .file_name("hours.md"),
    );
    p.expect(
        "POST knowledge file unknown character 404",
        admin(p, Method::POST, &format!("{nobody}/knowledge/files")).multipart(file),
        404,
    )
    .await;
    for m in [Method::GET, Method::PUT] {
        let path = format!("/api/v1/characters/{UNKNOWN}/screen-questions");
        let req = admin(p, m.clone(), &path).json(&json!({ "questions": [] }));
        p.expect(&format!("{m} screen-questions 404"), req, 404)
            .await;
    }
    p.expect(
        "GET screen-questions of an id that is not one 400",
        admin(p, Method::GET, "/api/v1/characters/%FF/screen-questions"),
        400,
    )
    .await;
    // Recorded answers: one stored for an FAQ question once its file is indexed, played back,
    // deleted; and what is not there or not a name.
    let faq = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(b"Q: When do you open?\nA: At nine.\n".to_vec())
            .file_name("faq.md"),
    );
    p.expect(
        "POST FAQ file 201",
        admin(p, Method::POST, &format!("{chr}/knowledge/files")).multipart(faq),
        201,
    )
    .await;
    let wav = docent::engine::pcm::wav_bytes(&[1_000i16; 12_000], 24_000);
    let recording = |wav: &[u8]| {
        reqwest::multipart::Form::new()
            .text("question", "When do you open?")
            .part(
                "file",
                reqwest::multipart::Part::bytes(wav.to_vec()).file_name("open.wav"),
            )
    };
    let mut stored: Option<Value> = None;
    for _ in 0..200 {
        let res = admin(p, Method::POST, &format!("{chr}/recordings"))
            .multipart(recording(&wav))
            .send()
            .await
            .unwrap();
        if res.status() == 201 {
            stored = res.json().await.ok();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let stored = stored.expect("a recording stored once the FAQ is indexed");
    let url = stored["url"].as_str().unwrap().to_string();
    p.expect("GET recording 200", admin(p, Method::GET, &url), 200)
        .await;
    p.expect("DELETE recording 204", admin(p, Method::DELETE, &url), 204)
        .await;
    for (m, path) in [
        (Method::GET, format!("{nobody}/recordings")),
        (Method::GET, format!("{chr}/recordings/{UNKNOWN}")),
        (Method::DELETE, format!("{chr}/recordings/{UNKNOWN}")),
    ] {
        p.expect(&format!("{m} {path} 404"), admin(p, m.clone(), &path), 404)
            .await;
    }
    p.expect(
        "POST recording unknown character 404",
        admin(p, Method::POST, &format!("{nobody}/recordings")).multipart(recording(&wav)),
        404,
    )
    .await;
    for (m, path) in [
        (Method::GET, "/api/v1/characters/%FF/recordings".to_string()),
        (Method::GET, format!("{chr}/recordings/%FF")),
        (Method::DELETE, format!("{chr}/recordings/%FF")),
    ] {
        p.expect(&format!("{m} {path} 400"), admin(p, m.clone(), &path), 400)
            .await;
    }
    for (m, path, body) in [
        (Method::GET, "faq", None),
        (
            Method::PUT,
            "faq",
            Some(("application/json", "{\"entries\": []}")),
        ),
        (Method::GET, "faq.csv", None),
        (
            Method::PUT,
            "faq.csv",
            Some(("text/csv", "id,question:en,answer:en\r\n")),
        ),
    ] {
        let mut req = admin(p, m.clone(), &format!("{nobody}/{path}"));
        if let Some((media, text)) = body {
            req = req.header("content-type", media).body(text);
        }
        p.expect(&format!("{m} {path} unknown character 404"), req, 404)
            .await;
        if m == Method::GET {
            let bad = format!("/api/v1/characters/%FF/{path}");
            p.expect(
                &format!("GET {path} of an id that is not one 400"),
                admin(p, Method::GET, &bad),
                400,
            )
            .await;
        }
    }
    p.expect(
        "PUT faq.csv 200",
        admin(p, Method::PUT, &format!("{chr}/faq.csv"))
            .header("content-type", "text/csv")
            .body("id,question:en,answer:en\r\n,When do you open?,At nine.\r\n"),
        200,
    )
    .await;
    for (m, path) in [
        (Method::GET, format!("/api/v1/tasks/{UNKNOWN}")),
        (Method::GET, format!("/api/v1/tasks/{UNKNOWN}/events")),
        (
            Method::GET,
            format!("/api/v1/tasks/{UNKNOWN}/artifacts/{UNKNOWN}"),
        ),
    ] {
        p.expect(&format!("{m} {path} 404"), admin(p, m.clone(), &path), 404)
            .await;
    }
    p.expect(
        "POST task events unknown session 404",
        internal(
            p,
            Method::POST,
            &format!("/api/v1/internal/tasks/{UNKNOWN}/events"),
        )
        .json(&json!({ "session_id": UNKNOWN, "user_request": "x" })),
        404,
    )
    .await;
    p.expect(
        "POST task artifact unknown task 404",
        internal(
            p,
            Method::POST,
            &format!("/api/v1/internal/tasks/{UNKNOWN}/artifacts"),
        )
        .json(&json!({ "content": "x" })),
        404,
    )
    .await;
    let task = "0f7c2a4e-8d1b-4c3a-9e5f-6a7b8c9d0e1f";
    p.expect(
        "POST task events 200",
        internal(
            p,
            Method::POST,
            &format!("/api/v1/internal/tasks/{task}/events"),
        )
        .json(&json!({ "session_id": session, "user_request": "find the hours" })),
        200,
    )
    .await;
    p.expect(
        "POST task artifact 201",
        internal(
            p,
            Method::POST,
            &format!("/api/v1/internal/tasks/{task}/artifacts"),
        )
        .json(&json!({ "content": "nine to five" })),
        201,
    )
    .await;
    // The WebSocket: an upgrade, a plain GET, and one too many.
    let ws = format!("ws://{}/ws/chat/{session}", p.server.addr);
    let mut upgrade = ws.clone().into_client_request().unwrap();
    upgrade
        .headers_mut()
        .insert("authorization", format!("Bearer {key}").parse().unwrap());
    match tokio_tungstenite::connect_async(upgrade).await {
        Ok((socket, _)) => {
            super::kiosks::websockets(p, &session, &key).await;
            drop(socket);
        }
        Err(e) => p.wrong.push(format!("WebSocket upgrade: {e}")),
    }
    p.expect(
        "GET /ws/chat/{id} without upgrade headers 400",
        admin(p, Method::GET, &format!("/ws/chat/{session}")),
        400,
    )
    .await;
    // The visit forgotten (its question "hello" goes); then nothing to purge of a character
    // that is not there.
    p.expect(
        "DELETE a visit 200",
        admin(
            p,
            Method::DELETE,
            &format!("{chr}/conversations/visits/{session}"),
        ),
        200,
    )
    .await;
    p.expect(
        "DELETE messages of an unknown character 404",
        admin(
            p,
            Method::DELETE,
            &format!("/api/v1/characters/{UNKNOWN}/conversations/messages"),
        ),
        404,
    )
    .await;

    // Site document.
    p.expect(
        "POST /api/data?seed=1 200",
        admin(p, Method::POST, "/api/data?seed=1"),
        200,
    )
    .await;
    let site = p
        .expect("GET /api/data 200", p.request("get", "/api/data"), 200)
        .await;
    p.expect(
        "PUT /api/data 200",
        admin(p, Method::PUT, "/api/data")
            .header("content-type", "application/json")
            .body(site),
        200,
    )
    .await;
    p.expect(
        "POST /api/data?seed=1 without credentials 401",
        p.request("post", "/api/data?seed=1"),
        401,
    )
    .await;
    p.expect(
        "POST /api/data without seed 405",
        admin(p, Method::POST, "/api/data"),
        405,
    )
    .await;
    p.expect(
        "POST /api/auth wrong password 401",
        p.request("post", "/api/auth")
            .json(&json!({ "password": "wrong" })),
        401,
    )
    .await;
    // Deletions of what exists.
    for path in [
        &variant,
        &legacy,
        &format!("{chr}/knowledge/{source}"),
        &image_path,
    ] {
        p.expect(
            &format!("DELETE {path} 204"),
            admin(p, Method::DELETE, path),
            204,
        )
        .await;
    }
    super::kiosks::on_the_probe(p).await;
    p.expect(
        "DELETE /api/auth 200",
        p.request("delete", "/api/auth")
            .header("cookie", format!("docent_session={}", p.token))
            .header("origin", p.base.clone()),
        200,
    )
    .await;
}

impl Probe {
    /// A kiosk in setup mode (no administrator password, loopback trusted), without the site
    /// image store and without devices.
    async fn setup() -> Probe {
        let server = Process::new()
            .env("DOCENT_LOG", ACCESS_LOG)
            .args(["--devices", "none"])
            .config("storage.image_store = false\n")
            .start()
            .await;
        Probe {
            base: server.base(),
            server,
            http: client(),
            token: String::new(),
            wrong: Vec::new(),
        }
    }
}

/// Setup mode: no password to log in with or change, no image store, no devices.
async fn in_setup_mode(p: &mut Probe) {
    use serde_json::json;
    p.expect(
        "POST /api/auth in setup mode 500",
        p.request("post", "/api/auth")
            .json(&json!({ "password": "anything" })),
        500,
    )
    .await;
    p.expect(
        "PUT /api/auth/password in setup mode 409",
        p.request("put", "/api/auth/password")
            .json(&json!({ "current": "a", "new": "a-long-new-password" })),
        409,
    )
    .await;
    for (m, path) in [
        ("get", "/api/img/"),
        ("get", "/api/img/a.png"),
        ("put", "/api/img/"),
        ("put", "/api/img/a.png"),
        ("delete", "/api/img/"),
        ("delete", "/api/img/a.png"),
    ] {
        let what = format!("{m} {path} without the image store 500");
        p.expect(&what, p.request(m, path), 500).await;
    }
    p.expect(
        "POST ptt without devices 503",
        p.request("post", "/api/v1/internal/device/ptt")
            .json(&json!({ "pressed": true })),
        503,
    )
    .await;
    p.expect(
        "POST choose without devices 503",
        p.request("post", "/api/v1/internal/device/choose")
            .json(&json!("next")),
        503,
    )
    .await;
    for path in ["/api/v1/internal/device/snapshot", "/api/v1/kiosk/snapshot"] {
        p.expect(
            &format!("GET {path} not simulated 409"),
            p.request("get", path),
            409,
        )
        .await;
    }
}
