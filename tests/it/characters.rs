//! Characters over real HTTP, against http-api.md: CRUD and its validation, avatar images, idle
//! clips, how stored files are served, path safety on every file route, body bounds and the
//! paged conversation history.

use std::collections::{BTreeSet, HashSet};
use std::time::{Duration, Instant};

use crate::support::{PNG, Server, mp4_h264, upload_avatar};
use docent_test_support::testclip;
use futures_util::future::join_all;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Smallest files that the server recognises by their signature.
const JPEG: &[u8] = &[
    0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, b'J', b'F', b'I', b'F', 0x00, 0xFF, 0xD9,
];
const GIF: &[u8] = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;";
const WEBP: &[u8] =
    b"RIFF\x16\x00\x00\x00WEBPVP8L\x0a\x00\x00\x00\x2f\x00\x00\x00\x00\x00\x00\x00\x00\x00";

/// Every field of a Character in a response (http-api.md, Resources), with this kiosk's own:
/// `not_on_this_kiosk` and the voice of each language (`voices`, docs/languages.md).
const CHARACTER_FIELDS: &[&str] = &[
    "id",
    "name",
    "description",
    "avatar_image",
    "use_face_crop",
    "mode",
    "voice_provider",
    "voice_type",
    "components",
    "speaking_style",
    "personality",
    "welcome_message",
    "system_prompt",
    "tags",
    "images",
    "active_image",
    "image_mode",
    "created_at",
    "updated_at",
    "idle_video_url",
    "idle_video_urls",
    "not_on_this_kiosk",
    "voices",
];

/// Path segments that could name something outside the store (or do not decode), as sent on
/// the wire.
const BAD_SEGMENTS: &[&str] = &[
    "..",
    "%2E%2E",
    "%2e%2e",
    "a%2Fb",
    "..%2F..%2Fetc%2Fpasswd",
    "a%5Cb",
    "a%00b",
    "%00",
    "a%FFb",
];

// ---------------------------------------------------------------------------------------------
// Responses and requests

/// A whole response, from reqwest or from a raw socket.
struct Reply {
    status: u16,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    /// Asserts the status; `what` names the request in the failure message.
    fn expect(self, status: u16, what: &str) -> Reply {
        assert_eq!(self.status, status, "{what}: {}", self.text());
        self
    }

    /// Asserts an API error: the status and a non-empty `{"error": "..."}` body.
    fn expect_json_error(self, status: u16, what: &str) -> Reply {
        let r = self.expect(status, what);
        assert!(
            r.header("content-type").starts_with("application/json"),
            "{what}: {}",
            r.header("content-type")
        );
        let error = r.json()["error"].as_str().map(str::to_owned);
        assert!(error.is_some_and(|e| !e.is_empty()), "{what}: {}", r.text());
        r
    }

    /// Asserts a file route's error: the status and a short `text/plain` body.
    fn expect_plain_error(self, status: u16, what: &str) -> Reply {
        let r = self.expect(status, what);
        assert!(
            r.header("content-type").starts_with("text/plain"),
            "{what}: {}",
            r.header("content-type")
        );
        assert!(
            !r.body.is_empty() && r.body.len() < 200,
            "{what}: {}",
            r.text()
        );
        r
    }
}

async fn send(req: reqwest::RequestBuilder) -> Reply {
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    let body = res.bytes().await.unwrap().to_vec();
    Reply {
        status,
        headers,
        body,
    }
}

/// Sends one HTTP/1.1 request over a plain socket so that the path reaches the server byte for
/// byte: reqwest's URL parser resolves `..`, `%2E%2E` and `%2e%2e` segments before sending.
async fn raw(s: &Server, method: &str, path: &str, body: &[u8]) -> Reply {
    let mut stream = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        s.addr,
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf).await.unwrap();
    let end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete response head");
    let head = std::str::from_utf8(&buf[..end]).unwrap();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let mut headers = HeaderMap::new();
    for line in lines {
        let (name, value) = line.split_once(':').unwrap();
        headers.append(
            HeaderName::from_bytes(name.trim().as_bytes()).unwrap(),
            HeaderValue::from_str(value.trim()).unwrap(),
        );
    }
    let body = buf[end + 4..].to_vec();
    let reply = Reply {
        status,
        headers,
        body,
    };
    let declared: usize = reply
        .header("content-length")
        .parse()
        .expect("raw replies carry a Content-Length");
    assert_eq!(reply.body.len(), declared, "{method} {path}");
    reply
}

/// Posts a JSON body given as text (so it can be malformed) to `path`.
async fn post_text(s: &Server, path: &str, body: impl Into<String>) -> Reply {
    send(
        s.post(path)
            .header("content-type", "application/json")
            .body(body.into()),
    )
    .await
}

async fn put_text(s: &Server, path: &str, body: impl Into<String>) -> Reply {
    send(
        s.put(path)
            .header("content-type", "application/json")
            .body(body.into()),
    )
    .await
}

/// A body sent with `Transfer-Encoding: chunked` (no Content-Length), in pieces of 500 bytes.
fn chunked_body(bytes: &[u8]) -> reqwest::Body {
    let pieces: Vec<Result<Vec<u8>, std::io::Error>> =
        bytes.chunks(500).map(|c| Ok(c.to_vec())).collect();
    reqwest::Body::wrap_stream(futures_util::stream::iter(pieces))
}

// ---------------------------------------------------------------------------------------------
// Characters, images and clips

fn character_path(id: &str) -> String {
    format!("/api/v1/characters/{id}")
}

fn image_path(id: &str, filename: &str) -> String {
    format!("/api/v1/characters/{id}/images/{filename}")
}

fn avatar_path(id: &str, filename: &str) -> String {
    format!("/api/v1/avatars/{id}_{filename}")
}

/// An idle clip's URL, with or without the variant segment.
fn clip_path(id: &str, imgbase: &str, variant: Option<&str>, filename: &str) -> String {
    match variant {
        Some(v) => format!("/api/v1/characters/{id}/idle-videos/{imgbase}/{v}/{filename}"),
        None => format!("/api/v1/characters/{id}/idle-videos/{imgbase}/{filename}"),
    }
}

async fn character_count(s: &Server) -> usize {
    s.get_json("/api/v1/characters", 200)
        .await
        .as_array()
        .unwrap()
        .len()
}

async fn get_character(s: &Server, id: &str) -> Value {
    s.get_json(&character_path(id), 200).await
}

/// Posts `bytes` as the `avatar` field under a client-chosen file name and media type.
async fn upload_as(s: &Server, id: &str, bytes: &[u8], file_name: &str, mime: &str) -> Reply {
    let part = Part::bytes(bytes.to_vec())
        .file_name(file_name.to_string())
        .mime_str(mime)
        .unwrap();
    send(
        s.post(&format!("/api/v1/characters/{id}/avatar"))
            .multipart(Form::new().part("avatar", part)),
    )
    .await
}

async fn put_clip(s: &Server, path: &str, bytes: Vec<u8>) -> Reply {
    send(s.put(path).header("content-type", "video/mp4").body(bytes)).await
}

async fn image_names(s: &Server, id: &str) -> Vec<String> {
    let list = s
        .get_json(&format!("/api/v1/characters/{id}/images"), 200)
        .await;
    list.as_array()
        .unwrap()
        .iter()
        .map(|i| i["filename"].as_str().unwrap().to_string())
        .collect()
}

/// Blob files in the data directory: what an upload leaves on disk.
fn blob_files(s: &Server) -> usize {
    std::fs::read_dir(s.dir.path().join("blobs"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_type().unwrap().is_file())
        .count()
}

/// A PNG of exactly `len` bytes (signature, then padding).
fn png_of_len(len: usize) -> Vec<u8> {
    let mut bytes = PNG.to_vec();
    bytes.resize(len, 0);
    bytes
}

/// A valid H.264 MP4 grown by a trailing `free` box to `len` bytes (or just past its own size).
fn mp4_of_len(len: usize) -> Vec<u8> {
    let mut bytes = mp4_h264();
    let pad = len.saturating_sub(bytes.len()).max(8);
    bytes.extend_from_slice(&(pad as u32).to_be_bytes());
    bytes.extend_from_slice(b"free");
    bytes.resize(bytes.len() + pad - 8, 0);
    bytes
}

fn assert_timestamp(v: &Value) {
    let t = v.as_str().unwrap_or_else(|| panic!("not a timestamp: {v}"));
    assert!(
        t.ends_with('Z') && humantime::parse_rfc3339(t).is_ok(),
        "not RFC 3339 UTC: {t}"
    );
}

/// Checks how a stored file is served: its bytes and type, a strong ETag that `If-None-Match`
/// honours with 304, a byte range with 206 and an unsatisfiable range with 416.
async fn assert_serves(s: &Server, path: &str, bytes: &[u8], content_type: &str) {
    let full = send(s.get(path)).await.expect(200, path);
    assert_eq!(full.body, bytes, "{path}");
    assert_eq!(full.header("content-type"), content_type, "{path}");
    let etag = full.header("etag").to_string();
    assert!(
        etag.len() > 2 && etag.starts_with('"') && etag.ends_with('"'),
        "{path}: etag {etag:?}"
    );

    let cached = send(s.get(path).header("if-none-match", &etag))
        .await
        .expect(304, path);
    assert!(cached.body.is_empty(), "{path}: a 304 has no body");
    assert_eq!(cached.header("etag"), etag);
    let stale = send(s.get(path).header("if-none-match", "\"something-else\"")).await;
    assert_eq!(stale.expect(200, path).body, bytes);

    let part = send(s.get(path).header("range", "bytes=0-3"))
        .await
        .expect(206, path);
    assert_eq!(part.body, &bytes[..4], "{path}");
    assert_eq!(
        part.header("content-range"),
        format!("bytes 0-3/{}", bytes.len())
    );
    let tail = send(s.get(path).header("range", "bytes=-2"))
        .await
        .expect(206, path);
    assert_eq!(tail.body, &bytes[bytes.len() - 2..], "{path}");

    let beyond = send(
        s.get(path)
            .header("range", format!("bytes={}-", bytes.len() + 10)),
    )
    .await;
    let beyond = beyond.expect(416, path);
    assert_eq!(
        beyond.header("content-range"),
        format!("bytes */{}", bytes.len())
    );
}

// ---------------------------------------------------------------------------------------------
// Sessions and history

/// Says `text` in a session and waits until its turn has settled, i.e. the assistant's reply of
/// that turn is in the character's history. Every `say` thus adds exactly two messages, the
/// user's and then the reply (the offline provider always answers), and no later `say` in the
/// session can cancel a turn still running. Returns the turn number.
async fn say(s: &Server, character: &str, session: &str, text: &str) -> u64 {
    let path = format!("/api/v1/sessions/{session}/message");
    let r = s.post_json(&path, json!({ "text": text }), 202).await;
    assert_eq!(r["status"], "queued");
    let turn = r["turn_seq"]
        .as_u64()
        .unwrap_or_else(|| panic!("no turn number: {r}"));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !replied(s, character, session, turn).await {
        assert!(
            Instant::now() < deadline,
            "no reply to {text:?} (session {session}, turn {turn}) within 5 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    turn
}

/// Whether the assistant's reply of `turn` in `session` is stored. Walks the history from the
/// newest message back to the user's message of that turn, which precedes its reply.
async fn replied(s: &Server, character: &str, session: &str, turn: u64) -> bool {
    let mut query = "limit=200".to_string();
    loop {
        let page = history(s, character, &query).await;
        for m in messages(&page).iter().rev() {
            if m["session_id"] == session && m["turn_seq"] == turn {
                match m["role"].as_str() {
                    Some("assistant") => return true,
                    Some("user") => return false,
                    _ => {}
                }
            }
        }
        let cursor = page["next_cursor"].as_str().unwrap_or_else(|| {
            panic!("the user's message of turn {turn} in session {session} is not in the history")
        });
        query = format!("limit=200&before={cursor}");
    }
}

fn history_path(character: &str, query: &str) -> String {
    format!("/api/v1/characters/{character}/conversations/messages?{query}")
}

async fn history(s: &Server, character: &str, query: &str) -> Value {
    s.get_json(&history_path(character, query), 200).await
}

fn messages(page: &Value) -> &[Value] {
    page["messages"].as_array().unwrap()
}

/// What the user said, in order, leaving out the assistant's replies.
fn user_contents(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect()
}

/// Checks that `messages` are settled turns, one after another: each user message is followed
/// at once by the assistant's reply of the same session and turn, and there is nothing else.
fn assert_settled_turns(messages: &[Value]) {
    assert!(
        messages.len().is_multiple_of(2),
        "every turn is a message and its reply: {messages:#?}"
    );
    for pair in messages.chunks(2) {
        let (said, reply) = (&pair[0], &pair[1]);
        assert_eq!(said["role"], "user", "{pair:#?}");
        assert_eq!(reply["role"], "assistant", "{pair:#?}");
        assert_eq!(reply["session_id"], said["session_id"], "{pair:#?}");
        assert_eq!(reply["turn_seq"], said["turn_seq"], "{pair:#?}");
        assert!(!reply["content"].as_str().unwrap().is_empty(), "{pair:#?}");
    }
}

// =============================================================================================
// 1. CRUD

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_answers_201_with_every_field() {
    let s = Server::start().await;
    let body = json!({
        "name": "  Ada  ",
        "description": "Mathematician",
        "use_face_crop": true,
        "mode": "voice_llm",
        "voice_provider": "openai",
        "voice_type": "alloy",
        "components": { "llm": "openai", "asr": "local", "tts": "local" },
        "speaking_style": "precise",
        "personality": "curious",
        "welcome_message": "Hello",
        "system_prompt": "You are Ada.",
        "tags": ["math", "history"],
        "image_mode": "random",
        "images": [{ "filename": "evil.png", "orig_name": "x", "added_at": "2020-01-01T00:00:00Z" }],
        "active_image": "evil.png",
        "avatar_image": "/etc/passwd",
    });
    let c = s.post_json("/api/v1/characters", body, 201).await;
    let keys: BTreeSet<&str> = c.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        CHARACTER_FIELDS.iter().copied().collect::<BTreeSet<_>>()
    );
    let id = c["id"].as_str().unwrap();
    assert_eq!(uuid::Uuid::parse_str(id).unwrap().get_version_num(), 4);
    assert_eq!(c["name"], "Ada", "the name is stored trimmed");
    assert_eq!(c["mode"], "omni", "voice_llm is accepted as omni");
    assert_eq!(
        c["components"],
        json!({ "llm": "openai", "asr": "local", "tts": "local" })
    );
    for (field, want) in [
        ("description", json!("Mathematician")),
        ("use_face_crop", json!(true)),
        ("voice_provider", json!("openai")),
        ("voice_type", json!("alloy")),
        ("speaking_style", json!("precise")),
        ("personality", json!("curious")),
        ("welcome_message", json!("Hello")),
        ("system_prompt", json!("You are Ada.")),
        ("tags", json!(["math", "history"])),
        ("image_mode", json!("random")),
        // Read-only fields: the client's copies are ignored.
        ("images", json!([])),
        ("active_image", json!("")),
        ("avatar_image", json!("")),
        ("idle_video_url", json!("")),
        ("idle_video_urls", json!([])),
    ] {
        assert_eq!(c[field], want, "{field}");
    }
    assert_timestamp(&c["created_at"]);
    assert_eq!(c["created_at"], c["updated_at"]);
    assert_eq!(get_character(&s, id).await, c);

    let minimal = s
        .post_json("/api/v1/characters", json!({ "name": "Bo" }), 201)
        .await;
    assert_eq!(minimal["mode"], "standard");
    assert_eq!(minimal["image_mode"], "fixed");
    assert_eq!(minimal["use_face_crop"], false);
    assert_eq!(
        minimal["components"],
        json!({ "llm": "", "asr": "", "tts": "" })
    );
    assert_eq!(minimal["tags"], json!([]));
    assert_eq!(minimal["description"], "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_refuses_bad_input_with_400_and_stores_nothing() {
    let s = Server::start().await;
    let before = character_count(&s).await;
    let cases: Vec<(&str, String)> = vec![
        ("blank name", r#"{"name":"   "}"#.into()),
        ("no name", r#"{"description":"nameless"}"#.into()),
        (
            "name of 101 chars",
            json!({ "name": "a".repeat(101) }).to_string(),
        ),
        (
            "name of 101 non-ASCII chars",
            json!({ "name": "é".repeat(101) }).to_string(),
        ),
        ("unknown mode", r#"{"name":"A","mode":"chat"}"#.into()),
        ("mode in capitals", r#"{"name":"A","mode":"OMNI"}"#.into()),
        (
            "unknown image_mode",
            r#"{"name":"A","image_mode":"shuffle"}"#.into(),
        ),
        (
            "unknown voice_provider",
            r#"{"name":"A","voice_provider":"acme"}"#.into(),
        ),
        (
            "unknown component provider",
            r#"{"name":"A","components":{"llm":"acme"}}"#.into(),
        ),
        ("truncated JSON", r#"{"name":"#.into()),
        ("not JSON", "name=A".into()),
        ("empty body", String::new()),
        ("name is a number", r#"{"name":5}"#.into()),
        ("tags is a string", r#"{"name":"A","tags":"x"}"#.into()),
        ("tags of numbers", r#"{"name":"A","tags":[1,2]}"#.into()),
        (
            "use_face_crop is a string",
            r#"{"name":"A","use_face_crop":"yes"}"#.into(),
        ),
        (
            "components is a string",
            r#"{"name":"A","components":"local"}"#.into(),
        ),
        ("body is an array", r#"[{"name":"A"}]"#.into()),
        ("body is a string", r#""A""#.into()),
        ("body is null", "null".into()),
    ];
    for (what, body) in cases {
        post_text(&s, "/api/v1/characters", body)
            .await
            .expect_json_error(400, what);
    }
    assert_eq!(
        character_count(&s).await,
        before,
        "no character was created"
    );

    // The bounds themselves are accepted: 100 characters (not bytes), surrounding blanks trimmed.
    let long = "é".repeat(100);
    let c = s
        .post_json(
            "/api/v1/characters",
            json!({ "name": format!("  {long}  ") }),
            201,
        )
        .await;
    assert_eq!(c["name"], long);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_is_oldest_first_and_get_one_is_200_or_404() {
    let s = Server::start().await;
    let mut ids = vec![s.default_character().await];
    for i in 0..15 {
        ids.push(s.character(&format!("c{i:02}")).await);
    }
    let list = s.get_json("/api/v1/characters", 200).await;
    let listed: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ids, "oldest first, in creation order");
    for c in list.as_array().unwrap() {
        assert_eq!(&get_character(&s, c["id"].as_str().unwrap()).await, c);
    }

    let unknown = uuid::Uuid::new_v4().to_string();
    for id in [unknown.as_str(), "nope"] {
        send(s.get(&character_path(id)))
            .await
            .expect_json_error(404, "GET unknown character");
    }
}

/// The list is the largest answer the console polls: a browser (which accepts gzip) gets it
/// compressed, the same list as without, and a new one after a change; a client that refuses
/// gzip gets it plain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_is_gzipped_for_a_client_that_accepts_it() {
    use std::io::Read;
    let s = Server::start().await;
    for i in 0..10 {
        s.character(&format!("c{i:02}")).await;
    }
    let fetch = |accept: &'static str| {
        let request = s
            .get("/api/v1/characters")
            .header("accept-encoding", accept);
        async move {
            let res = request.send().await.unwrap();
            assert_eq!(res.status(), 200);
            let headers = res.headers().clone();
            (headers, res.bytes().await.unwrap())
        }
    };
    let gunzip = |bytes: &[u8]| {
        let mut json = Vec::new();
        flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut json)
            .expect("a gzip stream");
        json
    };
    let vary = |h: &HeaderMap| -> Vec<String> {
        h.get_all("vary")
            .iter()
            .map(|v| v.to_str().unwrap().to_ascii_lowercase())
            .collect()
    };

    let (plain_headers, plain) = fetch("identity").await;
    assert!(plain_headers.get("content-encoding").is_none());
    assert_eq!(vary(&plain_headers), ["accept-encoding", "origin"]);
    for accept in ["gzip, deflate, br, zstd", "br;q=1.0, gzip;q=0.8"] {
        let (headers, gzipped) = fetch(accept).await;
        assert_eq!(headers["content-encoding"], "gzip", "{accept}");
        assert_eq!(headers["content-type"], "application/json");
        assert_eq!(vary(&headers), ["accept-encoding", "origin"]);
        assert_eq!(gunzip(&gzipped), plain, "the same list");
        assert!(
            gzipped.len() * 3 < plain.len(),
            "{} bytes of {}",
            gzipped.len(),
            plain.len()
        );
    }
    let (refused, _) = fetch("gzip;q=0, identity").await;
    assert!(refused.get("content-encoding").is_none());

    let added = s.character("after").await;
    let (_, gzipped) = fetch("gzip").await;
    let list: Value = serde_json::from_slice(&gunzip(&gzipped)).unwrap();
    let last = list.as_array().unwrap().last().unwrap();
    assert_eq!(
        last["id"],
        added.as_str(),
        "compressed again after a change"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_replaces_the_editable_fields_only() {
    let s = Server::start().await;
    let full = json!({
        "name": "Ada", "description": "d", "use_face_crop": true, "mode": "omni",
        "voice_provider": "openai", "voice_type": "alloy",
        "components": { "llm": "openai", "asr": "openai", "tts": "openai" },
        "speaking_style": "s", "personality": "p", "welcome_message": "w", "system_prompt": "sp",
        "tags": ["t"], "image_mode": "random",
    });
    let id = s.post_json("/api/v1/characters", full, 201).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    upload_avatar(&s, &id, PNG, 200).await;
    let before = get_character(&s, &id).await;
    assert_eq!(before["active_image"], "img_001.png");

    let replaced = s
        .put_json(
            &character_path(&id),
            json!({
                "name": " Lovelace ",
                "mode": "standard",
                "images": [],
                "active_image": "evil.png",
                "avatar_image": "/etc/passwd",
            }),
            200,
        )
        .await;
    assert_eq!(replaced["name"], "Lovelace");
    assert_eq!(replaced["mode"], "standard");
    for field in [
        "description",
        "voice_provider",
        "voice_type",
        "speaking_style",
        "personality",
        "welcome_message",
        "system_prompt",
    ] {
        assert_eq!(
            replaced[field], "",
            "omitted text field {field} becomes empty"
        );
    }
    assert_eq!(replaced["tags"], json!([]));
    assert_eq!(replaced["use_face_crop"], false);
    assert_eq!(replaced["image_mode"], "fixed");
    assert_eq!(
        replaced["components"],
        json!({ "llm": "", "asr": "", "tts": "" })
    );
    for field in ["id", "images", "active_image", "avatar_image", "created_at"] {
        assert_eq!(
            replaced[field], before[field],
            "{field} is not changed by PUT"
        );
    }
    assert!(replaced["updated_at"].as_str() >= before["updated_at"].as_str());
    assert_eq!(get_character(&s, &id).await, replaced);

    let path = character_path(&id);
    for (what, body) in [
        ("blank name", r#"{"name":" "}"#.to_string()),
        (
            "name of 101 chars",
            json!({ "name": "x".repeat(101) }).to_string(),
        ),
        ("unknown mode", r#"{"name":"A","mode":"chat"}"#.into()),
        (
            "unknown image_mode",
            r#"{"name":"A","image_mode":"all"}"#.into(),
        ),
        (
            "unknown voice_provider",
            r#"{"name":"A","voice_provider":"acme"}"#.into(),
        ),
        ("invalid JSON", "{".into()),
        ("wrong type", r#"{"name":"A","tags":{}}"#.into()),
    ] {
        put_text(&s, &path, body).await.expect_json_error(400, what);
    }
    assert_eq!(
        get_character(&s, &id).await,
        replaced,
        "a refused PUT changes nothing"
    );

    let unknown = character_path(&uuid::Uuid::new_v4().to_string());
    put_text(&s, &unknown, r#"{"name":"A"}"#)
        .await
        .expect_json_error(404, "PUT unknown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_removes_the_character_and_everything_it_owns() {
    let s = Server::start().await;
    let doomed = s.character("Doomed").await;
    let kept = s.character("Kept").await;
    for id in [&doomed, &kept] {
        upload_avatar(&s, id, PNG, 200).await;
        put_clip(
            &s,
            &clip_path(id, "img_001", Some("idle"), "loop.mp4"),
            mp4_h264(),
        )
        .await
        .expect(201, "clip");
    }
    upload_as(&s, &doomed, JPEG, "b.jpg", "image/jpeg")
        .await
        .expect(200, "second image");
    let doomed_sessions = [s.session(&doomed).await, s.session(&doomed).await];
    let kept_session = s.session(&kept).await;
    for (i, sid) in doomed_sessions.iter().enumerate() {
        say(&s, &doomed, sid, &format!("doomed {i}")).await;
    }
    say(&s, &kept, &kept_session, "kept").await;
    assert_eq!(blob_files(&s), 5);
    let doomed_history = history(&s, &doomed, "").await;
    assert_eq!(
        user_contents(messages(&doomed_history)),
        ["doomed 0", "doomed 1"]
    );
    assert_settled_turns(messages(&doomed_history));

    let res = send(s.delete(&character_path(&doomed)))
        .await
        .expect(204, "DELETE");
    assert!(res.body.is_empty());
    send(s.get(&character_path(&doomed)))
        .await
        .expect_json_error(404, "GET after DELETE");
    send(s.delete(&character_path(&doomed)))
        .await
        .expect_json_error(404, "DELETE twice");
    let listed = s.get_json("/api/v1/characters", 200).await;
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["id"] != doomed.as_str())
    );

    for path in [
        image_path(&doomed, "img_001.png"),
        image_path(&doomed, "img_002.jpg"),
        avatar_path(&doomed, "img_001.png"),
        clip_path(&doomed, "img_001", Some("idle"), "loop.mp4"),
    ] {
        send(s.get(&path)).await.expect_plain_error(404, &path);
    }
    send(s.get(&format!("/api/v1/characters/{doomed}/images")))
        .await
        .expect_json_error(404, "images");
    send(s.get(&history_path(&doomed, "")))
        .await
        .expect_json_error(404, "history");

    let sessions = s.get_json("/api/v1/sessions", 200).await;
    let open: HashSet<&str> = sessions
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        open,
        HashSet::from([kept_session.as_str()]),
        "the character's sessions ended"
    );
    let path = format!("/api/v1/sessions/{}/message", doomed_sessions[0]);
    s.post_json(&path, json!({ "text": "anyone?" }), 404).await;

    // Nothing of the other character went with it.
    assert_serves(&s, &image_path(&kept, "img_001.png"), PNG, "image/png").await;
    send(s.get(&clip_path(&kept, "img_001", Some("idle"), "loop.mp4")))
        .await
        .expect(200, "kept clip");
    let kept_history = history(&s, &kept, "").await;
    assert_eq!(user_contents(messages(&kept_history)), ["kept"]);
    assert_settled_turns(messages(&kept_history));
    assert_eq!(
        blob_files(&s),
        2,
        "the deleted character's files are gone from disk"
    );

    // Its history is gone from the store, not just unreachable.
    let dir = s.stop().await;
    let store = docent::store::Store::open(dir.path(), 1 << 20).unwrap();
    let tx = store.read().unwrap();
    let messages = tx.open_table(docent::store::tables::MESSAGES).unwrap();
    let count = |id: &str| messages.range((id, 0)..=(id, u64::MAX)).unwrap().count();
    assert_eq!(count(&doomed), 0);
    assert_eq!(count(&kept), 2, "the message and its reply");
}

// =============================================================================================
// 2. Avatar upload

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avatars_are_recognised_by_content_and_named_in_sequence() {
    let s = Server::start().await;
    let id = s.character("Gallery").await;
    let cases = [
        (PNG, "photo.gif", "image/gif", "img_001.png", "image/png"),
        (JPEG, "photo.png", "image/png", "img_002.jpg", "image/jpeg"),
        (
            GIF,
            "anim.webp",
            "application/octet-stream",
            "img_003.gif",
            "image/gif",
        ),
        (WEBP, "pic.jpg", "image/jpeg", "img_004.webp", "image/webp"),
    ];
    for (bytes, claimed_name, claimed_type, stored, served_type) in cases {
        let r = upload_as(&s, &id, bytes, claimed_name, claimed_type)
            .await
            .expect(200, stored)
            .json();
        assert_eq!(
            r,
            json!({ "path": image_path(&id, stored), "filename": stored })
        );
        let served = send(s.get(&image_path(&id, stored)))
            .await
            .expect(200, stored);
        assert_eq!(served.body, bytes);
        assert_eq!(served.header("content-type"), served_type);
    }

    let c = get_character(&s, &id).await;
    assert_eq!(
        c["active_image"], "img_001.png",
        "the first image becomes active"
    );
    assert_eq!(c["avatar_image"], avatar_path(&id, "img_001.png"));
    assert_serves(&s, c["avatar_image"].as_str().unwrap(), PNG, "image/png").await;
    let images = c["images"].as_array().unwrap();
    let orig: Vec<(&str, &str)> = images
        .iter()
        .map(|i| {
            (
                i["filename"].as_str().unwrap(),
                i["orig_name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        orig,
        [
            ("img_001.png", "photo.gif"),
            ("img_002.jpg", "photo.png"),
            ("img_003.gif", "anim.webp"),
            ("img_004.webp", "pic.jpg")
        ]
    );
    images.iter().for_each(|i| assert_timestamp(&i["added_at"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avatar_uploads_that_are_refused_store_nothing() {
    let s = Server::start_with(|c| c.limits.image_bytes = 1000).await;
    let id = s.character("Picky").await;
    let avatar = format!("/api/v1/characters/{id}/avatar");

    for (what, bytes) in [
        (
            "SVG named .png",
            &b"<svg xmlns=\"http://www.w3.org/2000/svg\"/>"[..],
        ),
        ("text", &b"hello, world"[..]),
        ("truncated PNG signature", &PNG[..4]),
        ("empty", &b""[..]),
    ] {
        upload_as(&s, &id, bytes, "face.png", "image/png")
            .await
            .expect_json_error(415, what);
    }
    upload_as(&s, &id, &png_of_len(1001), "big.png", "image/png")
        .await
        .expect_json_error(413, "over the bound");

    let wrong_field = Form::new().part("file", Part::bytes(PNG.to_vec()).file_name("face.png"));
    send(s.post(&avatar).multipart(wrong_field))
        .await
        .expect_json_error(400, "no avatar field");
    let text_only = Form::new().text("name", "face");
    send(s.post(&avatar).multipart(text_only))
        .await
        .expect_json_error(400, "text field only");
    post_text(&s, &avatar, r#"{"avatar":"x"}"#)
        .await
        .expect_json_error(400, "not multipart");

    let unknown = uuid::Uuid::new_v4().to_string();
    for who in [unknown.as_str(), "nope"] {
        upload_as(&s, who, PNG, "face.png", "image/png")
            .await
            .expect_json_error(404, "unknown character");
    }

    assert!(image_names(&s, &id).await.is_empty());
    assert_eq!(blob_files(&s), 0, "no file was left behind");
    assert_eq!(get_character(&s, &id).await["avatar_image"], "");

    // At the bound exactly the image is accepted, so it was the size that counted above.
    let r = upload_as(&s, &id, &png_of_len(1000), "edge.png", "image/png")
        .await
        .expect(200, "at the bound");
    assert_eq!(r.json()["filename"], "img_001.png");
    assert_eq!(blob_files(&s), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_uploads_get_distinct_names() {
    let s = Server::start().await;
    let id = s.character("Crowd").await;
    let replies = join_all((0..10).map(|_| upload_as(&s, &id, PNG, "face.png", "image/png"))).await;
    let names: BTreeSet<String> = replies
        .into_iter()
        .map(|r| {
            r.expect(200, "upload").json()["filename"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let expected: BTreeSet<String> = (1..=10).map(|n| format!("img_{n:03}.png")).collect();
    assert_eq!(names, expected);
    assert_eq!(image_names(&s, &id).await.len(), 10);
    assert_eq!(get_character(&s, &id).await["active_image"], "img_001.png");
    assert_eq!(blob_files(&s), 10);
}

// =============================================================================================
// 3. Images

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_are_listed_served_activated_and_deleted() {
    let s = Server::start().await;
    let id = s.character("Poser").await;
    for (bytes, name) in [(PNG, "a.png"), (JPEG, "b.jpg"), (GIF, "c.gif")] {
        upload_as(&s, &id, bytes, name, "application/octet-stream")
            .await
            .expect(200, name);
    }
    let list = s
        .get_json(&format!("/api/v1/characters/{id}/images"), 200)
        .await;
    assert_eq!(list[0]["url"], image_path(&id, "img_001.png"));
    assert_eq!(list[0]["orig_name"], "a.png");
    assert_eq!(
        image_names(&s, &id).await,
        ["img_001.png", "img_002.jpg", "img_003.gif"]
    );
    assert_serves(&s, &image_path(&id, "img_001.png"), PNG, "image/png").await;
    assert_serves(&s, &image_path(&id, "img_002.jpg"), JPEG, "image/jpeg").await;
    send(s.get(&image_path(&id, "img_009.png")))
        .await
        .expect_plain_error(404, "unknown image");
    let unknown = uuid::Uuid::new_v4().to_string();
    send(s.get(&image_path(&unknown, "img_001.png")))
        .await
        .expect_plain_error(404, "unknown character");
    send(s.get(&format!("/api/v1/characters/{unknown}/images")))
        .await
        .expect_json_error(404, "list");

    let activate = |f: &str| format!("/api/v1/characters/{id}/images/{f}/activate");
    let a = send(s.put(&activate("img_002.jpg")))
        .await
        .expect(200, "activate")
        .json();
    assert_eq!(
        a,
        json!({
            "active_image": "img_002.jpg",
            "avatar_image": avatar_path(&id, "img_002.jpg"),
            "idle_video_url": "",
            "idle_video_urls": [],
        })
    );
    assert_eq!(
        image_names(&s, &id).await,
        ["img_002.jpg", "img_001.png", "img_003.gif"],
        "active first"
    );
    let c = get_character(&s, &id).await;
    assert_eq!(
        (&c["active_image"], &c["avatar_image"]),
        (&a["active_image"], &a["avatar_image"])
    );
    assert_serves(&s, &avatar_path(&id, "img_002.jpg"), JPEG, "image/jpeg").await;
    send(s.put(&activate("img_009.png")))
        .await
        .expect_json_error(404, "activate unknown image");
    let other = format!("/api/v1/characters/{unknown}/images/img_001.png/activate");
    send(s.put(&other))
        .await
        .expect_json_error(404, "activate on unknown character");
    assert_eq!(get_character(&s, &id).await["active_image"], "img_002.jpg");

    // Deleting the active image activates the next one by name, wrapping to the first.
    let delete = |s: &Server, f: &str| s.delete(&image_path(&id, f));
    assert!(
        send(delete(&s, "img_002.jpg"))
            .await
            .expect(204, "delete")
            .body
            .is_empty()
    );
    send(s.get(&image_path(&id, "img_002.jpg")))
        .await
        .expect_plain_error(404, "deleted image");
    send(s.get(&avatar_path(&id, "img_002.jpg")))
        .await
        .expect_plain_error(404, "deleted avatar");
    send(delete(&s, "img_002.jpg"))
        .await
        .expect_json_error(404, "delete twice");
    assert_eq!(get_character(&s, &id).await["active_image"], "img_003.gif");
    send(delete(&s, "img_003.gif"))
        .await
        .expect(204, "delete last");
    let c = get_character(&s, &id).await;
    assert_eq!(c["active_image"], "img_001.png");
    assert_eq!(c["avatar_image"], avatar_path(&id, "img_001.png"));
    send(delete(&s, "img_001.png"))
        .await
        .expect(204, "delete only");
    let c = get_character(&s, &id).await;
    assert_eq!(
        (c["active_image"].as_str(), c["avatar_image"].as_str()),
        (Some(""), Some(""))
    );
    assert_eq!(c["images"], json!([]));
    assert_eq!(blob_files(&s), 0);
    send(s.delete(&image_path(&unknown, "img_001.png")))
        .await
        .expect_json_error(404, "unknown character");
}

// =============================================================================================
// 4. Idle clips

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_clips_are_uploaded_listed_served_and_deleted() {
    let s = Server::start().await;
    let id = s.character("Mover").await;
    upload_avatar(&s, &id, PNG, 200).await;
    upload_as(&s, &id, JPEG, "b.jpg", "image/jpeg")
        .await
        .expect(200, "second image");
    let mp4 = mp4_h264();

    let idle = clip_path(&id, "img_001", Some("idle"), "calm.mp4");
    let plain = clip_path(&id, "img_001", None, "loop.mp4");
    let speaking = clip_path(&id, "img_001", Some("speaking"), "talk.mp4");
    let wide = clip_path(&id, "img_001", Some("800x480"), "wide.mp4");
    let other = clip_path(&id, "img_002", Some("idle"), "other.mp4");
    for path in [&speaking, &plain, &wide, &idle, &other] {
        let r = put_clip(&s, path, mp4.clone())
            .await
            .expect(201, path)
            .json();
        assert_eq!(r["size"], mp4.len());
    }
    assert_eq!(blob_files(&s), 7);

    let c = get_character(&s, &id).await;
    assert_eq!(
        c["idle_video_url"],
        idle.as_str(),
        "the idle variant comes first"
    );
    let urls: Vec<&str> = c["idle_video_urls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap())
        .collect();
    assert_eq!(urls[..2], [idle.as_str(), plain.as_str()]);
    assert_eq!(
        urls[2..].iter().copied().collect::<HashSet<_>>(),
        HashSet::from([speaking.as_str(), wide.as_str()])
    );
    for url in &urls {
        assert_eq!(
            send(s.get(url))
                .await
                .expect(200, url)
                .header("content-type"),
            "video/mp4"
        );
    }
    assert_serves(&s, &idle, &mp4, "video/mp4").await;
    assert_serves(&s, &plain, &mp4, "video/mp4").await;

    let refusals = [
        (415, "not MP4", idle.clone(), b"not a video at all".to_vec()),
        (415, "an image", idle.clone(), PNG.to_vec()),
        (
            404,
            "unknown imgbase",
            clip_path(&id, "img_999", Some("idle"), "x.mp4"),
            mp4.clone(),
        ),
        (
            404,
            "unknown imgbase, no variant",
            clip_path(&id, "img_999", None, "x.mp4"),
            mp4.clone(),
        ),
        (
            400,
            "variant huge",
            clip_path(&id, "img_001", Some("huge"), "x.mp4"),
            mp4.clone(),
        ),
        (
            400,
            "variant Idle",
            clip_path(&id, "img_001", Some("Idle"), "x.mp4"),
            mp4.clone(),
        ),
        (
            400,
            "variant 800x",
            clip_path(&id, "img_001", Some("800x"), "x.mp4"),
            mp4.clone(),
        ),
        (
            404,
            "unknown character",
            clip_path(&uuid::Uuid::new_v4().to_string(), "img_001", None, "x.mp4"),
            mp4.clone(),
        ),
    ];
    for (status, what, path, bytes) in refusals {
        put_clip(&s, &path, bytes)
            .await
            .expect_json_error(status, what);
    }
    assert_serves(&s, &idle, &mp4, "video/mp4").await;
    assert_eq!(blob_files(&s), 7, "refused clips leave no file");
    send(s.get(&clip_path(&id, "img_001", Some("huge"), "x.mp4")))
        .await
        .expect_plain_error(404, "never stored");

    // Uploading to the same name replaces the clip, and a cached copy is no longer current.
    let old_etag = send(s.get(&idle)).await.header("etag").to_string();
    let longer = mp4_of_len(mp4.len() + 100);
    put_clip(&s, &idle, longer.clone())
        .await
        .expect(201, "replace");
    let fresh = send(s.get(&idle).header("if-none-match", &old_etag)).await;
    assert_eq!(fresh.expect(200, "replaced").body, longer);
    assert_eq!(blob_files(&s), 7, "the replaced file is gone");

    // The character's URLs follow the active image.
    let activate = format!("/api/v1/characters/{id}/images/img_002.jpg/activate");
    let a = send(s.put(&activate)).await.expect(200, "activate").json();
    assert_eq!(a["idle_video_url"], other.as_str());
    assert_eq!(a["idle_video_urls"], json!([other]));

    for path in [&speaking, &plain] {
        assert!(send(s.delete(path)).await.expect(204, path).body.is_empty());
        send(s.get(path)).await.expect_plain_error(404, path);
        send(s.delete(path)).await.expect_json_error(404, path);
    }
    assert_eq!(blob_files(&s), 5);

    // Deleting an image takes its clips with it, and only its clips.
    send(s.delete(&image_path(&id, "img_001.png")))
        .await
        .expect(204, "delete image");
    for path in [&idle, &wide] {
        send(s.get(path)).await.expect_plain_error(404, path);
    }
    send(s.get(&other)).await.expect(200, "other image's clip");
    assert_eq!(blob_files(&s), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_clips_over_the_bound_are_refused_with_413() {
    let s = Server::start_with(|c| c.limits.video_bytes = 8000).await;
    let id = s.character("Bounded").await;
    upload_avatar(&s, &id, PNG, 200).await;
    let fits = clip_path(&id, "img_001", Some("idle"), "fits.mp4");
    put_clip(&s, &fits, mp4_of_len(8000))
        .await
        .expect(201, "at the bound");

    let big = mp4_of_len(8001);
    assert!(big.len() > 8000);
    let declared = clip_path(&id, "img_001", Some("idle"), "big.mp4");
    put_clip(&s, &declared, big.clone())
        .await
        .expect_json_error(413, "with Content-Length");
    let chunked = clip_path(&id, "img_001", None, "streamed.mp4");
    send(s.put(&chunked).body(chunked_body(&big)))
        .await
        .expect_json_error(413, "chunked");

    for path in [&declared, &chunked] {
        send(s.get(path)).await.expect_plain_error(404, path);
    }
    assert_eq!(blob_files(&s), 2, "only the avatar and the clip that fits");
}

/// Frames of `w`x`h` (YUV 4:2:0), black with a white rectangle over the top-left `share` of each
/// side when `on`.
fn boxed(w: usize, h: usize, share: (f32, f32), on: bool) -> Vec<u8> {
    let mut yuv = testclip::solid_yuv(w, h, (0, 0, 0));
    let (bw, bh) = ((w as f32 * share.0) as usize, (h as f32 * share.1) as usize);
    if on {
        for row in yuv[..w * h].chunks_mut(w).take(bh) {
            row[..bw].fill(235);
        }
    }
    yuv
}

/// An MP4 of `frames` (true: the rectangle lit) at 10 frames a second, encoded by the encoder the
/// test clips use.
fn flashing_clip(share: (f32, f32), frames: &[bool]) -> Vec<u8> {
    let (w, h) = (160, 96);
    let aus = testclip::encode(w, h, 10.0, frames.iter().map(|&on| boxed(w, h, share, on)))
        .expect("encode");
    let samples: Vec<_> = aus.into_iter().map(|au| (au, 100)).collect();
    testclip::mux(w as u16, h as u16, 1000, &samples).expect("mux")
}

/// WCAG 2.3.1 (issue 31, point 5): a clip that flashes more than three times in one second over
/// more than a quarter of the frame is refused with the second named; slower or smaller flashes,
/// and calm clips, are stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_clips_that_flash_are_refused_naming_the_second() {
    let s = Server::start().await;
    let id = s.character("Strobe").await;
    upload_avatar(&s, &id, PNG, 200).await;
    let full = (1.0, 1.0);

    // 2 s black, then black and white every 100 ms for 2 s (5 flashes a second), then black.
    let mut strobe = vec![false; 20];
    strobe.extend((0..20).map(|i| i % 2 == 0));
    strobe.extend([false; 20]);
    let path = clip_path(&id, "img_001", Some("idle"), "strobe.mp4");
    let r = put_clip(&s, &path, flashing_clip(full, &strobe))
        .await
        .expect_json_error(400, "a 10 Hz strobe");
    let error = r.json()["error"].as_str().unwrap().to_string();
    assert!(
        error.contains("flashes 5 times between 2.0 s and 3.0 s over 100 % of the frame"),
        "{error}"
    );
    send(s.get(&path))
        .await
        .expect_plain_error(404, "never stored");
    assert_eq!(
        blob_files(&s),
        1,
        "only the avatar: the refused clip left no file"
    );

    // Two frames, black and white: calm on its own, a strobe as it loops.
    let r = put_clip(&s, &path, flashing_clip(full, &[false, true]))
        .await
        .expect_json_error(400, "a strobe across the loop");
    let error = r.json()["error"].as_str().unwrap().to_string();
    assert!(error.contains("between 0.1 s and 1.1 s"), "{error}");
    assert!(error.contains("loops back to its start"), "{error}");

    // Stored: the same strobe at 2.5 flashes a second, the 10 Hz strobe over a fifth of the
    // frame, the moving test clip of the display bench and slow solid colours.
    let slow: Vec<bool> = (0..60).map(|i| (i / 2) % 2 == 0).collect();
    let calm = [
        ("slow.mp4", flashing_clip(full, &slow)),
        ("small.mp4", flashing_clip((0.4, 0.5), &strobe)),
        (
            "moving.mp4",
            testclip::moving_clip(320, 192, 25, 100, true).unwrap(),
        ),
        (
            "colours.mp4",
            testclip::solid_clip(64, 48, 400, &[(255, 0, 0), (0, 255, 0), (0, 0, 255)]).unwrap(),
        ),
    ];
    for (name, mp4) in calm {
        let path = clip_path(&id, "img_001", None, name);
        put_clip(&s, &path, mp4.clone()).await.expect(201, name);
        assert_serves(&s, &path, &mp4, "video/mp4").await;
    }
    assert_eq!(blob_files(&s), 5);

    // More frames than the check decodes (7200): refused before decoding any, at once.
    let au = testclip::encode(16, 16, 25.0, [testclip::solid_yuv(16, 16, (9, 9, 9))]).unwrap();
    let samples = vec![(au[0].clone(), 40); 7201];
    let long = testclip::mux(16, 16, 1000, &samples).unwrap();
    let started = Instant::now();
    let r = put_clip(&s, &path, long)
        .await
        .expect_json_error(400, "too many frames");
    let error = r.json()["error"].as_str().unwrap().to_string();
    assert!(
        error.contains("too long to check for flashes: 7201 frames"),
        "{error}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(blob_files(&s), 5);
}

// =============================================================================================
// 5. Path traversal

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsafe_path_segments_are_refused_on_every_file_route() {
    let s = Server::start().await;
    let id = s.character("Fortress").await;
    upload_avatar(&s, &id, PNG, 200).await;
    let mp4 = mp4_h264();
    for path in [
        clip_path(&id, "img_001", Some("idle"), "clip.mp4"),
        clip_path(&id, "img_001", None, "clip.mp4"),
    ] {
        put_clip(&s, &path, mp4.clone()).await.expect(201, &path);
    }
    let files = blob_files(&s);

    let chars = format!("/api/v1/characters/{id}");
    // Each route with `{}` where the segment under test goes, and the good value of that segment.
    let clip_routes = [
        (format!("{chars}/idle-videos/{{}}/idle/clip.mp4"), "img_001"),
        (format!("{chars}/idle-videos/img_001/{{}}/clip.mp4"), "idle"),
        (format!("{chars}/idle-videos/img_001/idle/{{}}"), "clip.mp4"),
        (format!("{chars}/idle-videos/{{}}/clip.mp4"), "img_001"),
        (format!("{chars}/idle-videos/img_001/{{}}"), "clip.mp4"),
    ];
    let mut file_gets = vec![
        (format!("{chars}/images/{{}}"), "img_001.png".to_string()),
        (
            "/api/v1/avatars/{}".to_string(),
            format!("{id}_img_001.png"),
        ),
        (
            format!("/api/v1/avatars/{id}_{{}}"),
            "img_001.png".to_string(),
        ),
    ];
    file_gets.extend(
        clip_routes
            .iter()
            .map(|(t, good)| (t.clone(), good.to_string())),
    );
    let mut json_routes = vec![
        ("DELETE", format!("{chars}/images/{{}}")),
        ("PUT", format!("{chars}/images/{{}}/activate")),
    ];
    for (template, _) in &clip_routes {
        json_routes.push(("PUT", template.clone()));
        json_routes.push(("DELETE", template.clone()));
    }

    // The requests reach the routes: with a good segment every file is served.
    for (template, good) in &file_gets {
        let path = template.replace("{}", good);
        raw(&s, "GET", &path, b"").await.expect(200, &path);
    }

    for bad in BAD_SEGMENTS {
        for (template, _) in &file_gets {
            let path = template.replace("{}", bad);
            raw(&s, "GET", &path, b"")
                .await
                .expect_plain_error(400, &format!("GET {path}"));
        }
        for (method, template) in &json_routes {
            let path = template.replace("{}", bad);
            let body: &[u8] = if *method == "PUT" { &mp4 } else { b"" };
            raw(&s, method, &path, body)
                .await
                .expect_json_error(400, &format!("{method} {path}"));
        }
    }

    // Nothing was deleted, activated or stored by the refused requests.
    for (template, good) in &file_gets {
        let path = template.replace("{}", good);
        raw(&s, "GET", &path, b"").await.expect(200, &path);
    }
    assert_eq!(blob_files(&s), files);
    assert_eq!(get_character(&s, &id).await["active_image"], "img_001.png");
}

// =============================================================================================
// 6. JSON body bound

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_bodies_over_the_bound_are_refused_with_413() {
    let s = Server::start_with(|c| c.limits.json_bytes = 2000).await;
    let before = character_count(&s).await;
    let shell = json!({ "name": "Big", "description": "" })
        .to_string()
        .len();
    let body_of_len =
        |len: usize| json!({ "name": "Big", "description": "x".repeat(len - shell) }).to_string();
    let big = body_of_len(3000);
    assert_eq!(big.len(), 3000);

    post_text(&s, "/api/v1/characters", big.clone())
        .await
        .expect_json_error(413, "POST with Content-Length");
    let chunked = s
        .post("/api/v1/characters")
        .header("content-type", "application/json");
    send(chunked.body(chunked_body(big.as_bytes())))
        .await
        .expect_json_error(413, "POST chunked");
    assert_eq!(
        character_count(&s).await,
        before,
        "no character was created"
    );

    let id = s.character("Small").await;
    let original = get_character(&s, &id).await;
    put_text(&s, &character_path(&id), big)
        .await
        .expect_json_error(413, "PUT");
    assert_eq!(get_character(&s, &id).await, original);

    let fits = post_text(&s, "/api/v1/characters", body_of_len(2000))
        .await
        .expect(201, "at the bound");
    assert_eq!(
        fits.json()["description"].as_str().unwrap().len(),
        2000 - shell
    );
}

// =============================================================================================
// 7. Conversation history

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_pages_cover_every_message_once_while_new_ones_arrive() {
    let s = Server::start().await;
    let id = s.character("Historian").await;
    let sessions = [
        s.session(&id).await,
        s.session(&id).await,
        s.session(&id).await,
    ];
    let mut said = Vec::new();
    for i in 0..27 {
        let text = format!("message {i:02}");
        let turn = say(&s, &id, &sessions[i % 3], &text).await;
        assert_eq!(turn, (i / 3 + 1) as u64, "{text}");
        said.push(text);
    }
    // Everything there is to page through: each turn is the message and its reply.
    let everything = history(&s, &id, "limit=200").await;
    assert_eq!(everything["has_more"], false);
    let everything = messages(&everything).to_vec();
    assert_settled_turns(&everything);
    assert_eq!(everything.len(), 2 * said.len());

    let mut pages: Vec<Value> = Vec::new();
    let mut query = "limit=4".to_string();
    loop {
        let page = history(&s, &id, &query).await;
        // A turn arriving while the client pages must not move the pages it has yet to read.
        say(
            &s,
            &id,
            &sessions[pages.len() % 3],
            &format!("late {}", pages.len()),
        )
        .await;
        if query.contains("before=") {
            assert_eq!(
                history(&s, &id, &query).await,
                page,
                "a page is stable: {query}"
            );
        }
        let has_more = page["has_more"].as_bool().unwrap();
        assert!(messages(&page).len() <= 4);
        pages.push(page.clone());
        if !has_more {
            assert!(page["next_cursor"].is_null());
            break;
        }
        assert_eq!(messages(&page).len(), 4, "only the last page is short");
        let cursor = page["next_cursor"]
            .as_str()
            .expect("a cursor while there is more");
        query = format!("limit=4&before={cursor}");
        assert!(pages.len() < 30, "paging does not end");
    }
    assert_eq!(pages.len(), everything.len().div_ceil(4));
    let now = history(&s, &id, "limit=200").await;
    assert_eq!(
        messages(&now).len(),
        everything.len() + 2 * pages.len(),
        "the late turns arrived while paging"
    );

    // Read newest page last, the pages put back together are the history as it was when paging
    // began: every message exactly once, pages newest first, each page oldest to newest. The
    // late turns are in none of them.
    let union: Vec<Value> = pages
        .iter()
        .rev()
        .flat_map(|p| messages(p).iter().cloned())
        .collect();
    assert_eq!(union, everything, "every message exactly once, in order");
    for m in &union {
        // The message's fields, plus `unmatched: true` on a reply the knowledge did not answer
        // (absent otherwise).
        let mut keys: BTreeSet<&str> = m.as_object().unwrap().keys().map(String::as_str).collect();
        if keys.remove("unmatched") {
            assert_eq!(
                (&m["role"], &m["unmatched"]),
                (&json!("assistant"), &json!(true))
            );
        }
        assert_eq!(
            keys,
            BTreeSet::from(["session_id", "role", "content", "timestamp", "turn_seq"])
        );
        assert_timestamp(&m["timestamp"]);
    }
    assert_settled_turns(&union);
    assert_eq!(user_contents(&union), said, "in the order said");
    for (i, (pair, text)) in union.chunks(2).zip(&said).enumerate() {
        assert_eq!(pair[0]["session_id"], sessions[i % 3].as_str(), "{text}");
        assert_eq!(pair[0]["turn_seq"], (i / 3 + 1) as u64, "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_limit_is_clamped_and_bad_queries_are_refused() {
    const SAYS: usize = 26;
    let s = Server::start().await;
    let id = s.character("Chatty").await;
    let empty = history(&s, &id, "").await;
    assert_eq!(
        empty,
        json!({ "messages": [], "next_cursor": null, "has_more": false })
    );

    let sessions: Vec<String> = join_all((0..4).map(|_| s.session(&id))).await;
    // Four sessions talk at once; each says its own messages in order, one turn at a time.
    join_all(sessions.iter().enumerate().map(|(n, sid)| {
        let (s, id) = (&s, &id);
        async move {
            for i in 0..SAYS {
                let turn = say(s, id, sid, &format!("s{n} m{i}")).await;
                assert_eq!(turn, i as u64 + 1);
            }
        }
    }))
    .await;
    // Each turn is the message and its reply: just over one page at the largest limit.
    let total = 4 * SAYS * 2;
    assert!(total > 200);

    let newest = history(&s, &id, "limit=0").await;
    assert_eq!(messages(&newest).len(), 1, "limit 0 is clamped to 1");
    assert_eq!(newest["has_more"], true);
    assert_eq!(
        messages(&history(&s, &id, "").await).len(),
        50,
        "default limit"
    );

    let first = history(&s, &id, "limit=1000").await;
    assert_eq!(messages(&first).len(), 200, "limit 1000 is clamped to 200");
    assert_eq!(first["has_more"], true);
    let cursor = first["next_cursor"].as_str().unwrap();
    let rest = history(&s, &id, &format!("limit=1000&before={cursor}")).await;
    assert_eq!(rest["has_more"], false);
    assert!(rest["next_cursor"].is_null());
    let all: Vec<Value> = messages(&rest)
        .iter()
        .chain(messages(&first))
        .cloned()
        .collect();
    // A turn is one message and one reply: (session, role, turn) names a message.
    let mut seen = HashSet::new();
    let repeated: Vec<&Value> = all
        .iter()
        .filter(|m| !seen.insert((&m["session_id"], &m["role"], &m["turn_seq"])))
        .collect();
    assert!(repeated.is_empty(), "stored more than once: {repeated:#?}");
    assert_eq!(all.len(), total);
    assert_eq!(messages(&rest).len(), total - 200);
    assert_eq!(messages(&newest)[0], all[total - 1]);
    for (n, sid) in sessions.iter().enumerate() {
        let own: Vec<Value> = all
            .iter()
            .filter(|m| m["session_id"] == sid.as_str())
            .cloned()
            .collect();
        assert_settled_turns(&own);
        let expected: Vec<String> = (0..SAYS).map(|i| format!("s{n} m{i}")).collect();
        assert_eq!(
            user_contents(&own),
            expected,
            "session {n} in the order said"
        );
    }

    for query in [
        "before=not-a-cursor!",
        "before=AAAA",
        "before=%00",
        "limit=abc",
        "limit=-1",
    ] {
        send(s.get(&history_path(&id, query)))
            .await
            .expect_json_error(400, query);
    }
    let unknown = uuid::Uuid::new_v4().to_string();
    for who in [unknown.as_str(), "nope"] {
        send(s.get(&history_path(who, "limit=4")))
            .await
            .expect_json_error(404, who);
    }
}

// =============================================================================================
// The original front end's provider ids

/// The original CyberVerse front end sends its own provider ids: they are stored as "not
/// available on this kiosk" (the rest of the character saves), shown so in the character,
/// components and health, and a turn that needs one says so; any other id is still refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_originals_provider_ids_are_kept_as_not_available_and_a_turn_says_so() {
    let s = Server::start().await;
    let c = s
        .post_json(
            "/api/v1/characters",
            json!({
                "name": "Qin", "welcome_message": "Hi",
                "voice_provider": "doubao", "voice_type": "zh_female",
                "components": { "llm": "qwen", "asr": "local", "tts": "doubao" },
            }),
            201,
        )
        .await;
    let id = c["id"].as_str().unwrap().to_string();
    assert_eq!(c["voice_provider"], "doubao");
    assert_eq!(c["components"]["llm"], "qwen");
    assert_eq!(
        c["not_on_this_kiosk"],
        json!([
            { "field": "voice_provider", "provider": "doubao" },
            { "field": "components.llm", "provider": "qwen" },
            { "field": "components.tts", "provider": "doubao" },
        ])
    );
    // The omni id of the original too; an id it never had is refused and changes nothing.
    let mut edit = c.clone();
    edit["components"]["llm"] = json!("qwen_omni");
    let saved = s
        .put_json(&format!("/api/v1/characters/{id}"), edit, 200)
        .await;
    assert_eq!(saved["components"]["llm"], "qwen_omni");
    let mut bad = saved.clone();
    bad["components"]["llm"] = json!("qwen_max");
    let r = s
        .put(&format!("/api/v1/characters/{id}"))
        .json(&bad)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let now = s.get_json(&format!("/api/v1/characters/{id}"), 200).await;
    assert_eq!(now["components"]["llm"], "qwen_omni");

    let health = s.get_json("/api/v1/health", 200).await;
    let listed = health["characters_not_on_this_kiosk"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{health}");
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(listed[0]["fields"][1]["provider"], "qwen_omni");

    let components = s.get_json("/api/v1/components", 200).await;
    let llm = components["llm"].as_array().unwrap();
    let omni = llm
        .iter()
        .find(|o| o["id"] == "qwen_omni")
        .expect("qwen_omni listed");
    assert_eq!(omni["available"], false);
    assert_eq!(omni["on_this_kiosk"], false);
    let local = llm.iter().find(|o| o["id"] == "local").unwrap();
    assert_eq!(local["on_this_kiosk"], true);
    assert!(
        !components["asr"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["id"] == "qwen_omni"),
        "qwen_omni only listens as part of an omni exchange: {components}"
    );

    // A typed question needs the brain: the character says it is not available here.
    let session = s.session(&id).await;
    say(&s, &id, &session, "Who built the wall?").await;
    let page = history(&s, &id, "limit=10").await;
    let reply = messages(&page).last().unwrap();
    assert_eq!(reply["role"], "assistant");
    assert_eq!(
        reply["content"],
        "I'm sorry, this character's brain is not available on this kiosk."
    );

    // A voice test of it answers 503 naming it; no sample is made.
    let r = s
        .post("/api/v1/characters/test-voice")
        .header("accept", "audio/wav")
        .json(&json!({ "voice_provider": "doubao", "voice_type": "x" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("doubao is not available on this kiosk")
    );
}

/// Settings naming the original's providers save, and health says they are not available.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_with_the_originals_provider_ids_save_and_health_says_not_available() {
    let s = Server::start().await;
    s.put_json(
        "/api/v1/settings",
        json!({ "tts": { "provider": "doubao" } }),
        200,
    )
    .await;
    let r = s
        .put("/api/v1/settings")
        .json(&json!({ "llm": { "provider": "acme" } }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let health = s.get_json("/api/v1/health", 200).await;
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(health["providers"]["tts"]["provider"], "doubao");
    assert_eq!(health["providers"]["tts"]["ok"], false);
    assert!(
        health["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == "tts: doubao is not available on this kiosk"),
        "{health}"
    );
    let components = s.get_json("/api/v1/components", 200).await;
    let tts = components["tts"].as_array().unwrap();
    let doubao = tts.iter().find(|o| o["id"] == "doubao").unwrap();
    assert_eq!(doubao["default"], true, "{components}");
}

/// "Play a sample": asked for audio, the voice test answers a WAV of the chosen voice that a
/// browser can play; asked as before, the JSON check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_voice_answers_a_playable_sample_when_asked_for_audio() {
    let s = Server::start().await;
    let r = s
        .post("/api/v1/characters/test-voice")
        .header("accept", "audio/wav")
        .json(&json!({ "voice_provider": "local", "voice_type": "en-us" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "audio/wav");
    let wav = r.bytes().await.unwrap();
    assert_eq!(&wav[..4], b"RIFF");
    assert_eq!(&wav[8..12], b"WAVE");
    let rate = u32::from_le_bytes(wav[24..28].try_into().unwrap());
    assert_eq!(rate, 24_000);
    // Over a second of speech, not silence.
    let samples: Vec<i16> = wav[44..]
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect();
    assert!(samples.len() > 24_000, "{} samples", samples.len());
    assert!(
        samples.iter().any(|v| v.unsigned_abs() > 1000),
        "a sample that is silent"
    );
    let plain = s
        .post_json(
            "/api/v1/characters/test-voice",
            json!({ "voice_provider": "local", "voice_type": "en-us" }),
            200,
        )
        .await;
    assert_eq!(plain, json!({ "status": "ok" }));
    let r = s
        .post("/api/v1/characters/test-voice")
        .header("accept", "audio/wav")
        .json(&json!({ "voice_provider": "remote", "voice_type": "" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
}
