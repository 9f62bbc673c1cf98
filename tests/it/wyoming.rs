//! The Wyoming provider against a fake speech server built on the `wyoming` package's own
//! server classes, over a real socket: a spoken turn recognised and spoken by it, the settings
//! and voice tests, and servers that misbehave.

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::support::fake_wyoming::{FakeWyoming, Mode, RATE, TONE};
use crate::support::{Server, check};

const VOICE: &str = "en_US-fake-medium";

/// A kiosk whose recognition and speech both go to the Wyoming server at `url` (the settings'
/// providers), with a character that speaks in one of the server's voices; its id.
async fn kiosk(url: &str, provider_timeout_ms: u64) -> (Server, String) {
    let s = Server::start_with(|c| c.providers.timeout_ms = provider_timeout_ms).await;
    s.put_json(
        "/api/v1/settings",
        json!({
            "asr": {"provider": "wyoming", "base_url": url, "language": "en"},
            "tts": {"provider": "wyoming", "base_url": url},
        }),
        200,
    )
    .await;
    let c = s
        .post_json(
            "/api/v1/characters",
            json!({"name": "Ada", "voice_provider": "wyoming", "voice_type": VOICE}),
            201,
        )
        .await;
    let id = c["id"].as_str().unwrap().to_string();
    (s, id)
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens a session's WebSocket with reply audio on.
async fn chat(s: &Server, character: &str) -> Socket {
    let v = s
        .post_json("/api/v1/sessions", json!({"character_id": character}), 201)
        .await;
    let id = v["session_id"].as_str().unwrap();
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{}/ws/chat/{id}", s.addr))
        .await
        .unwrap();
    ws.send(Message::text(
        json!({"type": "audio_output", "enabled": true}).to_string(),
    ))
    .await
    .unwrap();
    ws
}

/// Sends `samples` of 16 kHz speech as one utterance; when its end went out.
async fn say(ws: &mut Socket, samples: usize) -> Instant {
    ws.send(Message::text(
        json!({"type": "audio_start", "sample_rate": 16000}).to_string(),
    ))
    .await
    .unwrap();
    let pcm: Vec<u8> = (0..samples)
        .flat_map(|i| (((i % 40) as i16 - 20) * 300).to_le_bytes())
        .collect();
    ws.send(Message::binary(pcm)).await.unwrap();
    ws.send(Message::text(json!({"type": "audio_end"}).to_string()))
        .await
        .unwrap();
    Instant::now()
}

/// What a turn sent back, up to its end (`audio_end`, or an error and the apology's end).
#[derive(Default, Debug)]
struct Reply {
    user: Option<String>,
    samples: Vec<i16>,
    errors: Vec<String>,
    /// From the end of the utterance to the transcript (recognition).
    heard: Option<Duration>,
    /// From the end of the utterance to the first reply audio (recognition, reply, the first
    /// piece's synthesis).
    first_audio: Option<Duration>,
}

async fn reply(ws: &mut Socket, sent: Instant, wait: Duration) -> Reply {
    let mut r = Reply::default();
    let deadline = Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let msg = tokio::time::timeout(left, ws.next())
            .await
            .unwrap_or_else(|_| panic!("the turn ended within {wait:?}: {r:?}"))
            .unwrap()
            .unwrap();
        match msg {
            Message::Binary(b) => {
                r.first_audio.get_or_insert_with(|| sent.elapsed());
                r.samples
                    .extend(b.chunks(2).map(|p| i16::from_le_bytes([p[0], p[1]])));
            }
            Message::Text(t) => {
                let v: Value = serde_json::from_str(&t).unwrap();
                match v["type"].as_str().unwrap_or("") {
                    "transcript" if v["speaker"] == "user" => {
                        r.user = v["text"].as_str().map(str::to_string);
                        r.heard.get_or_insert_with(|| sent.elapsed());
                    }
                    "error" => r.errors.push(v["message"].as_str().unwrap_or("").into()),
                    "avatar_status" if v["status"] == "idle" && !r.errors.is_empty() => {
                        return r;
                    }
                    "audio_end" => return r,
                    _ => {}
                }
            }
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spoken_turn_is_recognised_and_spoken_by_the_wyoming_server() {
    let fake = FakeWyoming::start(Mode::Normal).await;
    let (s, ada) = kiosk(&fake.url, 15_000).await;
    let mut ws = chat(&s, &ada).await;
    let sent = say(&mut ws, 24_000).await;
    let r = reply(&mut ws, sent, Duration::from_secs(20)).await;
    assert!(r.errors.is_empty(), "{r:?}");
    // The transcript depends on the audio the server got: all of it, at 16 kHz.
    assert_eq!(r.user.as_deref(), Some("I said 24000 samples"));
    let log = fake.log();
    let heard: Vec<&Value> = log.iter().filter(|e| e["event"] == "transcribe").collect();
    assert_eq!(heard.len(), 1, "{log:?}");
    assert_eq!(heard[0]["rate"], 16_000);
    assert_eq!(heard[0]["language"], "en");
    // The reply audio is the server's tone, resampled from 22.05 to 24 kHz, piece by piece.
    let spoken: Vec<&Value> = log.iter().filter(|e| e["event"] == "synthesize").collect();
    assert!(!spoken.is_empty(), "{log:?}");
    assert!(spoken.iter().all(|e| e["voice"] == VOICE), "{log:?}");
    let expected: u64 = spoken
        .iter()
        .map(|e| e["samples"].as_u64().unwrap() * 24_000 / RATE as u64)
        .sum();
    assert_eq!(r.samples.len() as u64, expected);
    assert!(
        r.samples.iter().all(|&x| x == TONE),
        "only the server's samples"
    );
    // The figures: more turns of the same.
    let (mut heard, mut first) = (vec![r.heard.unwrap()], vec![r.first_audio.unwrap()]);
    for _ in 0..9 {
        let sent = say(&mut ws, 24_000).await;
        let r = reply(&mut ws, sent, Duration::from_secs(20)).await;
        assert_eq!(r.user.as_deref(), Some("I said 24000 samples"), "{r:?}");
        heard.push(r.heard.unwrap());
        first.push(r.first_audio.unwrap());
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2].as_micros() as f64 / 1000.0
    };
    eprintln!(
        "wyoming turns (10, 1.5 s of speech each): end of speech to transcript {:.1} ms, to first reply audio {:.1} ms (medians)",
        median(&mut heard),
        median(&mut first)
    );
}

/// Runs the settings test; returns the HTTP status and the answer.
async fn settings_test(s: &Server) -> (u16, Value, Duration) {
    let started = Instant::now();
    let res = s.post("/api/v1/settings/test").send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap(), started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_settings_and_voice_tests_ask_the_wyoming_server() {
    let fake = FakeWyoming::start(Mode::Normal).await;
    let (s, _) = kiosk(&fake.url, 15_000).await;
    let (status, answer, _) = settings_test(&s).await;
    assert_eq!(status, 200, "{answer}");
    let asr = check(&answer, "asr:wyoming");
    assert_eq!(asr["ok"], true);
    assert!(asr["latency_ms"].is_u64());
    assert_eq!(asr["detail"], "Wyoming speech recognition: fake-whisper");
    assert_eq!(
        check(&answer, "tts:wyoming")["detail"],
        "Wyoming speech synthesis: fake-piper"
    );
    // The voice test looks for the voice in what the server lists.
    let voice = |v: &str| json!({"voice_provider": "wyoming", "voice_type": v});
    s.post_json("/api/v1/characters/test-voice", voice(VOICE), 200)
        .await;
    let missing = s
        .post_json("/api/v1/characters/test-voice", voice("en_GB-nobody"), 502)
        .await;
    assert!(
        missing["error"].as_str().unwrap().contains("no voice"),
        "{missing}"
    );

    // A closed port: a clear error, at once.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    s.put_json(
        "/api/v1/settings",
        json!({"asr": {"base_url": format!("tcp://127.0.0.1:{closed}")}}),
        200,
    )
    .await;
    let (status, answer, took) = settings_test(&s).await;
    assert_eq!(status, 503, "{answer}");
    let error = answer["error"].as_str().unwrap();
    assert!(
        error.starts_with("asr:wyoming: cannot connect to 127.0.0.1:"),
        "{error}"
    );
    assert_eq!(check(&answer, "tts:wyoming")["ok"], true);
    assert!(took < Duration::from_secs(3), "{took:?}");

    // Addresses: tcp:// only for Wyoming, and Wyoming only at tcp://.
    for bad in [
        json!({"asr": {"base_url": "http://127.0.0.1:10300"}}),
        json!({"asr": {"provider": "openai"}}),
        json!({"llm": {"base_url": "tcp://127.0.0.1:10300"}}),
    ] {
        let v = s.put_json("/api/v1/settings", bad.clone(), 400).await;
        assert!(
            v["error"].as_str().unwrap().contains("base_url"),
            "{bad}: {v}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misbehaving_server_is_an_error_not_a_hang() {
    for (mode, says) in [
        (Mode::Garbage, "does not speak Wyoming"),
        (Mode::LongHeader, "header longer than"),
        (Mode::HugePayload, "payload_length over"),
        (Mode::Hang, "did not answer within"),
    ] {
        let fake = FakeWyoming::start(mode).await;
        let (s, ada) = kiosk(&fake.url, 1_000).await;
        let (status, answer, took) = settings_test(&s).await;
        assert_eq!(status, 503, "{mode:?}: {answer}");
        let error = answer["error"].as_str().unwrap();
        assert!(error.contains(says), "{mode:?}: {error}");
        assert!(took < Duration::from_secs(5), "{mode:?}: {took:?}");
        // A turn: recognition fails, and the turn ends; the watchers are told a fixed line
        // (what a server sent is for the log only).
        let mut ws = chat(&s, &ada).await;
        let sent = say(&mut ws, 8_000).await;
        let r = reply(&mut ws, sent, Duration::from_secs(10)).await;
        let fixed = [
            "speech recognition failed",
            "the provider did not answer in time",
            "the provider cannot be reached",
        ];
        assert!(
            r.errors
                .first()
                .is_some_and(|e| fixed.contains(&e.as_str())),
            "{mode:?}: {r:?}"
        );
        assert!(r.samples.is_empty(), "{mode:?}");
        s.get_json("/api/v1/health", 200).await;
    }
}
