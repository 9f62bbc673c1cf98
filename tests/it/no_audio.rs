//! Visitors' voices are never stored (issue 36, docs/privacy.md): spoken turns through every kind
//! of provider the rigs offer (the offline engine, an OpenAI-compatible fake, a fake of the
//! Realtime API, a fake Wyoming server, another kiosk as the remote gRPC provider), then the
//! data directories, the redb files and what the temp dir gained are searched for any run of the
//! spoken samples and for a WAV header.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use fake_openai::{Chat, FakeOpenAi, Transcription};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::support::Server;
use crate::support::fake_wyoming::{FakeWyoming, Mode};

/// Spoken turns per provider kind.
const TURNS: usize = 20;
/// The run of samples looked for: 64 bytes, 32 samples (2 ms at 16 kHz).
const WINDOW: usize = 64;

/// One second of 16 kHz mono "speech" (pcm_s16le) no other program makes: noise from a seeded
/// generator, loud enough not to be silence.
fn voice(seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..16_000)
        .flat_map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (((x >> 48) as i16) / 4).to_le_bytes()
        })
        .collect()
}

/// The spoken samples cut into windows, found by their first 8 bytes. Any copy of 2 windows'
/// length (128 bytes) of the samples, at any offset, holds one whole window.
struct Needles(HashMap<[u8; 8], Vec<[u8; WINDOW]>>);

impl Needles {
    fn of(voices: &[Vec<u8>]) -> Needles {
        let mut map: HashMap<[u8; 8], Vec<[u8; WINDOW]>> = HashMap::new();
        for v in voices {
            for w in v.chunks_exact(WINDOW) {
                let w: [u8; WINDOW] = w.try_into().unwrap();
                map.entry(w[..8].try_into().unwrap()).or_default().push(w);
            }
        }
        Needles(map)
    }

    /// Where in `bytes` a window of the samples is, if anywhere.
    fn find_in(&self, bytes: &[u8]) -> Option<usize> {
        (0..bytes.len().saturating_sub(WINDOW - 1)).find(|&i| {
            let head: [u8; 8] = bytes[i..i + 8].try_into().unwrap();
            self.0
                .get(&head)
                .is_some_and(|ws| ws.iter().any(|w| &bytes[i..i + WINDOW] == w))
        })
    }
}

/// Where in `bytes` a WAV header (`RIFF????WAVE`) is, if anywhere.
fn wav_header(bytes: &[u8]) -> Option<usize> {
    bytes
        .windows(12)
        .position(|w| &w[..4] == b"RIFF" && &w[8..] == b"WAVE")
}

/// The regular files under `dir` (symbolic links not followed; unreadable directories skipped),
/// changed at or after `since` when given.
fn files(dir: &Path, since: Option<SystemTime>, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(meta) = e.path().symlink_metadata() else {
            continue;
        };
        if meta.is_dir() {
            files(&e.path(), since, out);
        } else if meta.is_file()
            && since.is_none_or(|t| meta.modified().is_ok_and(|m| m >= t))
            && meta.len() < 1 << 30
        {
            out.push(e.path());
        }
    }
}

/// What the search found: `file: what` for each finding.
fn search(dirs: &[&Path], temp_since: SystemTime, needles: &Needles) -> Vec<String> {
    let mut found = Vec::new();
    let mut ours = Vec::new();
    for dir in dirs {
        files(dir, None, &mut ours);
    }
    assert!(
        ours.iter().any(|f| f.ends_with("docent.redb")),
        "the redb files are searched: {ours:?}"
    );
    for f in &ours {
        let Ok(bytes) = std::fs::read(f) else {
            continue;
        };
        if let Some(at) = needles.find_in(&bytes) {
            found.push(format!("{}: the spoken samples at byte {at}", f.display()));
        }
        if let Some(at) = wav_header(&bytes) {
            found.push(format!("{}: a WAV header at byte {at}", f.display()));
        }
    }
    // The temp dir is shared with every other program: only what changed during the run, and
    // only the samples (which no other program has) are looked for.
    let mut temp = Vec::new();
    files(&std::env::temp_dir(), Some(temp_since), &mut temp);
    for f in temp.iter().filter(|f| !ours.contains(f)) {
        let Ok(bytes) = std::fs::read(f) else {
            continue;
        };
        if let Some(at) = needles.find_in(&bytes) {
            found.push(format!("{}: the spoken samples at byte {at}", f.display()));
        }
    }
    found
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Speaks `pcm` in `turns` turns of a new session (of `character`, or the kiosk's), each one
/// over when its reply's audio ended or an error was said.
async fn speak(s: &Server, character: Option<&str>, pcm: &[u8], turns: usize, what: &str) {
    let body = match character {
        Some(c) => json!({ "character_id": c }),
        None => json!({}),
    };
    let v = s.post_json("/api/v1/sessions", body, 201).await;
    let id = v["session_id"].as_str().unwrap();
    let (mut ws, _): (Socket, _) =
        tokio_tungstenite::connect_async(format!("ws://{}/ws/chat/{id}", s.addr))
            .await
            .unwrap();
    let send = |v: Value| Message::text(v.to_string());
    ws.send(send(json!({"type": "audio_output", "enabled": true})))
        .await
        .unwrap();
    let mut heard = 0;
    let mut errors = Vec::new();
    for turn in 0..turns {
        ws.send(send(json!({"type": "audio_start", "sample_rate": 16000, "channels": 1, "format": "pcm_s16le"})))
            .await
            .unwrap();
        for piece in pcm.chunks(3_200) {
            ws.send(Message::binary(piece.to_vec())).await.unwrap();
        }
        ws.send(send(json!({"type": "audio_end"}))).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let msg = tokio::time::timeout(left, ws.next())
                .await
                .unwrap_or_else(|_| panic!("{what}: turn {turn} did not end"))
                .unwrap()
                .unwrap();
            let Message::Text(t) = msg else { continue };
            let v: Value = serde_json::from_str(&t).unwrap();
            match v["type"].as_str().unwrap_or("") {
                "transcript" if v["speaker"] == "user" => heard += 1,
                "audio_end" => break,
                // The apology that follows is spoken: its end ends the turn.
                "error" => errors.push(format!("turn {turn}: {v}")),
                _ => {}
            }
        }
    }
    eprintln!("{what}: {turns} spoken turns, {heard} heard");
    assert!(
        errors.is_empty(),
        "{what}: every turn reached its provider: {errors:?}"
    );
}

async fn put_settings(s: &Server, settings: Value) {
    s.put_json("/api/v1/settings", settings, 200).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_spoken_sample_and_no_wav_is_stored_by_any_provider() {
    let started = SystemTime::now() - Duration::from_secs(1);
    let voices: Vec<Vec<u8>> = (1..=5).map(voice).collect();
    let needles = Needles::of(&voices);

    // The offline engine (the default).
    let offline = Server::start().await;
    speak(&offline, None, &voices[0], TURNS, "offline").await;

    // An OpenAI-compatible service for every stage.
    let fake = FakeOpenAi::start().await;
    fake.set_transcription(Transcription::text("Where is the cafe?"));
    fake.set_chat(Chat::reply("On the ground floor."));
    let openai = Server::start().await;
    let base = fake.base_url();
    put_settings(
        &openai,
        json!({
            "llm": {"provider": "openai", "base_url": base, "api_key": "sk-test-llm", "model": "fake-chat"},
            "asr": {"provider": "openai", "base_url": base, "api_key": "sk-test-asr", "model": "fake-whisper"},
            "tts": {"provider": "openai", "base_url": base, "api_key": "sk-test-tts", "model": "fake-tts", "voice": "alloy"},
        }),
    )
    .await;
    let c = openai
        .post_json(
            "/api/v1/characters",
            json!({"name": "Ada", "voice_provider": "openai", "voice_type": "alloy",
                "components": {"llm": "openai", "asr": "openai", "tts": "openai"}}),
            201,
        )
        .await;
    speak(&openai, c["id"].as_str(), &voices[1], TURNS, "openai").await;
    assert_eq!(
        fake.transcriptions().len(),
        TURNS,
        "the fake heard each turn"
    );

    // The Realtime API.
    let (realtime_url, _realtime) = crate::realtime_provider::start_fake(0).await;
    let realtime = Server::start().await;
    put_settings(
        &realtime,
        json!({"llm": {"provider": "openai_realtime"}, "realtime": {"provider": "openai_realtime",
            "base_url": realtime_url, "api_key": "sk-realtime-test-key", "model": "gpt-realtime"}}),
    )
    .await;
    speak(&realtime, None, &voices[2], TURNS, "realtime").await;

    // A Wyoming server for recognition and speech.
    let wyoming_fake = FakeWyoming::start(Mode::Normal).await;
    let wyoming = Server::start().await;
    put_settings(
        &wyoming,
        json!({
            "asr": {"provider": "wyoming", "base_url": wyoming_fake.url, "language": "en"},
            "tts": {"provider": "wyoming", "base_url": wyoming_fake.url},
        }),
    )
    .await;
    let c = wyoming
        .post_json(
            "/api/v1/characters",
            json!({"name": "Ada", "voice_provider": "wyoming", "voice_type": "en_US-fake-medium"}),
            201,
        )
        .await;
    speak(&wyoming, c["id"].as_str(), &voices[3], TURNS, "wyoming").await;

    // Another kiosk as the remote voice service over gRPC.
    // Each turn is a message and (today) a session of its own on the backend: its bounds
    // allow them all.
    let backend = Server::start_with(|c| {
        c.sessions.message_burst = 100;
        c.sessions.max = 100;
        c.sessions.max_per_client = 100;
    })
    .await;
    let remote = Server::start().await;
    put_settings(
        &remote,
        json!({"llm": {"provider": "remote"}, "remote_voice": {"grpc_addr": backend.addr.to_string()}}),
    )
    .await;
    speak(&remote, None, &voices[4], TURNS, "remote").await;

    let kiosks = [&offline, &openai, &realtime, &wyoming, &backend, &remote];
    let dirs: Vec<&Path> = kiosks.iter().map(|s| s.dir.path()).collect();
    let found = search(&dirs, started, &needles);
    assert!(found.is_empty(), "audio was stored:\n{}", found.join("\n"));
}

#[test]
fn the_search_finds_samples_and_wav_headers_where_they_are() {
    let voices = vec![voice(7)];
    let needles = Needles::of(&voices);
    // 128 bytes of the samples at an odd offset inside other bytes.
    let mut bytes = vec![0u8; 1001];
    bytes.extend_from_slice(&voices[0][4_002..4_130]);
    bytes.extend_from_slice(&[1u8; 500]);
    assert!(needles.find_in(&bytes).is_some());
    assert!(needles.find_in(&voice(8)).is_none(), "another voice");
    assert!(
        needles.find_in(&bytes[..1_060]).is_none(),
        "a run too short"
    );
    let mut wav = b"junkRIFF\x24\x00\x00\x00WAVEfmt ".to_vec();
    wav.extend_from_slice(&[0u8; 16]);
    assert_eq!(wav_header(&wav), Some(4));
    assert_eq!(wav_header(b"RIFF....AVI "), None);
}
