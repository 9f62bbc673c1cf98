//! Crash safety: a client streams writes (characters, messages, task events) while the real
//! `docent` binary is SIGKILLed at random moments, 20 times. After each restart the store must
//! open cleanly and every write that was acknowledged must be there, with what was acknowledged.
//!
//! The kill delays come from a seeded xorshift generator. The seed is printed first (cargo shows
//! it when the test fails) and `CRASH_SEED=<n>` replays a run.

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Process, Running};

const CYCLES: u32 = 20;
/// How long the writers run before the kill, in milliseconds.
const KILL_AFTER_MS: Range<u64> = 50..400;
/// Concurrent writers of each kind (characters, messages, task events).
const WORKERS_PER_KIND: u32 = 2;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const HISTORY_PAGE: usize = 200;
const EVENTS_PAGE: usize = 500;

/// xorshift64*: tiny, deterministic, good enough to spread kill moments.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn in_range(&mut self, r: Range<u64>) -> u64 {
        r.start + self.next() % (r.end - r.start)
    }
}

/// `CRASH_SEED` if set, else the clock.
fn seed() -> u64 {
    match std::env::var("CRASH_SEED") {
        Ok(s) => s.parse().expect("CRASH_SEED is a u64"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock after 1970")
            .as_nanos() as u64,
    }
}

/// Starts the binary on `data_dir` and waits for its "listening" line.
async fn start(data_dir: &Path) -> Running {
    Process::new().data_dir(data_dir).start().await
}

/// The records the message and event writers append to, created before the first kill.
#[derive(Clone)]
struct Fixture {
    character_id: String,
    session_id: String,
    task_id: String,
}

/// Every write the server acknowledged, with what it acknowledged.
#[derive(Default)]
struct Acked {
    characters: Vec<String>,
    /// Message text -> turn_seq.
    messages: HashMap<String, u64>,
    /// Event seq -> event message.
    events: HashMap<u64, String>,
}

impl Acked {
    fn total(&self) -> usize {
        self.characters.len() + self.messages.len() + self.events.len()
    }

    fn record(&mut self, ack: Ack) {
        match ack {
            Ack::Character(id) => self.characters.push(id),
            Ack::Message(text, turn_seq) => {
                self.messages.insert(text, turn_seq);
            }
            Ack::Event(seq, message) => {
                let previous = self.events.insert(seq, message);
                assert!(previous.is_none(), "event seq {seq} acknowledged twice");
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Character,
    Message,
    Event,
}

enum Ack {
    Character(String),
    Message(String, u64),
    Event(u64, String),
}

/// A client of one server process.
struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    fn new(server: &Running) -> Client {
        // reqwest is built without a default TLS crypto provider; the server process installs
        // its own, this one needs one too before building a client (even for plain HTTP).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .expect("http client");
        Client {
            http,
            base: server.base(),
        }
    }

    /// POSTs `body`; a transport error is returned (the server may be dead), an unexpected
    /// status from a live server fails the test.
    async fn post(&self, path: &str, body: Value, want: u16) -> reqwest::Result<Value> {
        let res = self
            .http
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await?;
        let status = res.status().as_u16();
        let text = res.text().await?;
        assert_eq!(status, want, "POST {path}: {text}");
        Ok(serde_json::from_str(&text).expect("JSON answer"))
    }

    async fn get(&self, path: &str) -> Value {
        let res = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        assert_eq!(res.status(), 200, "GET {path}");
        res.json().await.expect("JSON answer")
    }

    async fn fixture(&self) -> Fixture {
        let c = self
            .post(
                "/api/v1/characters",
                json!({ "name": "crash historian" }),
                201,
            )
            .await
            .unwrap();
        let character_id = c["id"].as_str().unwrap().to_string();
        let s = self
            .post(
                "/api/v1/sessions",
                json!({ "character_id": character_id }),
                201,
            )
            .await
            .unwrap();
        let session_id = s["session_id"].as_str().unwrap().to_string();
        let task_id = uuid::Uuid::new_v4().to_string();
        let body = json!({ "session_id": session_id, "user_request": "survive crashes" });
        self.post(
            &format!("/api/v1/internal/tasks/{task_id}/events"),
            body,
            200,
        )
        .await
        .unwrap();
        Fixture {
            character_id,
            session_id,
            task_id,
        }
    }

    /// One write of `kind`, labelled `label`; `Ok` only once the answer was fully read.
    async fn write(&self, fx: &Fixture, kind: Kind, label: String) -> reqwest::Result<Ack> {
        match kind {
            Kind::Character => {
                let body = json!({ "name": format!("crash {label}") });
                let c = self.post("/api/v1/characters", body, 201).await?;
                Ok(Ack::Character(c["id"].as_str().unwrap().to_string()))
            }
            Kind::Message => {
                let path = format!("/api/v1/sessions/{}/message", fx.session_id);
                let r = self.post(&path, json!({ "text": label }), 202).await?;
                Ok(Ack::Message(label, r["turn_seq"].as_u64().unwrap()))
            }
            Kind::Event => {
                let path = format!("/api/v1/internal/tasks/{}/events", fx.task_id);
                let body = json!({ "status": "running", "message": label });
                let r = self.post(&path, body, 200).await?;
                Ok(Ack::Event(r["event"]["seq"].as_u64().unwrap(), label))
            }
        }
    }

    /// Writes until the server stops answering, recording each acknowledgement.
    async fn stream(self, fx: Fixture, kind: Kind, worker: String, acked: Arc<Mutex<Acked>>) {
        for n in 0.. {
            match self.write(&fx, kind, format!("{worker}-{n}")).await {
                Ok(ack) => acked.lock().unwrap().record(ack),
                Err(_) => return,
            }
        }
    }
}

/// What the store holds after a restart.
struct Found {
    characters: Vec<String>,
    /// User message text -> turn_seq, from the whole history of the fixture character.
    messages: HashMap<String, u64>,
    /// Event messages in seq order (index 0 is seq 1).
    events: Vec<(u64, String)>,
}

impl Found {
    async fn read(c: &Client, fx: &Fixture) -> Found {
        let all = c.get("/api/v1/characters").await;
        let characters = all
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_string())
            .collect();
        Found {
            characters,
            messages: history(c, &fx.character_id).await,
            events: events(c, &fx.task_id).await,
        }
    }

    fn total(&self) -> usize {
        self.characters.len() + self.messages.len() + self.events.len()
    }

    /// Asserts that every acknowledged write is stored as acknowledged and that task events run
    /// 1..=n without gaps; returns how many acknowledged writes were found.
    fn check(&self, acked: &Acked, context: &str) -> usize {
        for id in &acked.characters {
            assert!(
                self.characters.contains(id),
                "{context}: character {id} lost"
            );
        }
        for (text, turn_seq) in &acked.messages {
            assert_eq!(
                self.messages.get(text),
                Some(turn_seq),
                "{context}: message {text:?}"
            );
        }
        for (i, (seq, _)) in self.events.iter().enumerate() {
            assert_eq!(*seq, i as u64 + 1, "{context}: task events have a gap");
        }
        for (seq, message) in &acked.events {
            let stored = self.events.get(*seq as usize - 1).map(|(_, m)| m);
            assert_eq!(stored, Some(message), "{context}: task event {seq}");
        }
        acked.total()
    }
}

/// The user's messages in the whole conversation history of a character: content -> turn_seq.
/// (Replies are not checked: they are written by the engine, not acknowledged to the client.)
async fn history(c: &Client, character_id: &str) -> HashMap<String, u64> {
    let mut out = HashMap::new();
    let mut before = String::new();
    loop {
        let path = format!(
            "/api/v1/characters/{character_id}/conversations/messages?limit={HISTORY_PAGE}&before={before}"
        );
        let page = c.get(&path).await;
        for m in page["messages"].as_array().unwrap() {
            if m["role"] != "user" {
                continue;
            }
            let text = m["content"].as_str().unwrap().to_string();
            let previous = out.insert(text, m["turn_seq"].as_u64().unwrap());
            assert!(previous.is_none(), "a history message is repeated");
        }
        match page["next_cursor"].as_str() {
            Some(cursor) if page["has_more"] == true => before = cursor.to_string(),
            _ => return out,
        }
    }
}

/// Every event of a task in seq order, as (seq, message).
async fn events(c: &Client, task_id: &str) -> Vec<(u64, String)> {
    let mut out: Vec<(u64, String)> = Vec::new();
    loop {
        let after = out.last().map_or(0, |e| e.0);
        let path = format!("/api/v1/tasks/{task_id}/events?after_seq={after}&limit={EVENTS_PAGE}");
        let page = c.get(&path).await;
        let events = page["events"].as_array().unwrap();
        out.extend(events.iter().map(|e| {
            let message = e["message"].as_str().unwrap().to_string();
            (e["seq"].as_u64().unwrap(), message)
        }));
        if events.len() < EVENTS_PAGE {
            return out;
        }
    }
}

/// Starts the writers of every kind against `server`.
fn spawn_writers(
    server: &Running,
    fx: &Fixture,
    cycle: u32,
    acked: &Arc<Mutex<Acked>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut writers = Vec::new();
    for kind in [Kind::Character, Kind::Message, Kind::Event] {
        for w in 0..WORKERS_PER_KIND {
            let worker = format!("{kind:?}-c{cycle}-w{w}");
            let client = Client::new(server);
            writers.push(tokio::spawn(client.stream(
                fx.clone(),
                kind,
                worker,
                acked.clone(),
            )));
        }
    }
    writers
}

/// Restarts on `dir` and checks that the store opened cleanly and kept every acknowledged
/// write; returns the server and what its store holds.
async fn restart_and_check(
    dir: &Path,
    fx: &Fixture,
    acked: &Mutex<Acked>,
    context: &str,
) -> (Running, Found) {
    let server = start(dir).await;
    let errors = server.errors();
    assert!(
        errors.is_empty(),
        "{context}: startup reported errors: {errors:#?}"
    );
    let client = Client::new(&server);
    assert_eq!(
        client.get("/api/v1/health").await["status"],
        "ok",
        "{context}"
    );
    let found = Found::read(&client, fx).await;
    found.check(&acked.lock().unwrap(), context);
    (server, found)
}

/// Lets the writers run for `delay_ms`, SIGKILLs the server mid-stream and waits for the
/// writers to notice.
async fn kill_while_writing(
    mut server: Running,
    fx: &Fixture,
    cycle: u32,
    delay_ms: u64,
    acked: &Arc<Mutex<Acked>>,
) {
    let before = acked.lock().unwrap().total();
    let writers = spawn_writers(&server, fx, cycle, acked);
    tokio::time::sleep(Duration::from_millis(delay_ms)).await;
    server.kill().await;
    for w in writers {
        w.await.expect("writer");
    }
    let during = acked.lock().unwrap().total() - before;
    println!("crash: cycle {cycle}: killed after {delay_ms} ms, {during} writes acknowledged");
}

fn summary(acked: &Acked, found: &Found) -> String {
    format!(
        "crash: {CYCLES} cycles, {} writes acknowledged ({} characters, {} messages, {} task events), \
         {} found after the last restart ({} records stored in all)",
        acked.total(),
        acked.characters.len(),
        acked.messages.len(),
        acked.events.len(),
        found.check(acked, "final"),
        found.total(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_sigkill() {
    let seed = seed();
    println!("crash: seed {seed} (replay with CRASH_SEED={seed})");
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(dir.path()).await;
    let fx = Client::new(&server).fixture().await;
    let acked = Arc::new(Mutex::new(Acked::default()));
    let mut found = None;
    for cycle in 1..=CYCLES {
        let delay_ms = rng.in_range(KILL_AFTER_MS);
        kill_while_writing(server, &fx, cycle, delay_ms, &acked).await;
        let context = format!("seed {seed}, after kill {cycle}");
        let (next, f) = restart_and_check(dir.path(), &fx, &acked, &context).await;
        server = next;
        found = Some(f);
    }
    server.kill().await;
    let acked = acked.lock().unwrap();
    assert!(acked.total() > 0, "seed {seed}: no write was acknowledged");
    println!("{}", summary(&acked, &found.expect("at least one cycle")));
}
