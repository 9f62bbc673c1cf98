//! The `openai_realtime` provider against a fake of the OpenAI Realtime API: a real WebSocket
//! server on loopback that speaks its events (session.update, conversation.item.create,
//! input_audio_buffer.append/commit, response.create/cancel, conversation.item.truncate in; audio
//! and transcript deltas, input transcription, response.done out).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::Server;
use axum::Router;
use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use axum::routing::get;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as ClientMessage;

/// What the fake received, and how slowly it answers.
#[derive(Default)]
pub(crate) struct Fake {
    received: Mutex<Vec<Value>>,
    /// Pause between reply events (to interrupt a reply in the middle).
    pace_ms: u64,
}

async fn upgrade(State(fake): State<Arc<Fake>>, ws: WebSocketUpgrade) -> Response {
    ws.on_upgrade(move |socket| serve(fake, socket))
}

async fn serve(fake: Arc<Fake>, socket: WebSocket) {
    let (tx, mut rx) = socket.split();
    let tx = Arc::new(tokio::sync::Mutex::new(tx));
    let mut heard_audio = false;
    // Reading goes on while a reply is sent, so a cancel in the middle is received.
    while let Some(Ok(Message::Text(text))) = rx.next().await {
        let event: Value = serde_json::from_str(&text).expect("client sends JSON");
        let kind = event["type"].as_str().unwrap_or("").to_string();
        fake.received.lock().unwrap().push(event);
        match kind.as_str() {
            "input_audio_buffer.append" => heard_audio = true,
            "response.create" => {
                tokio::spawn(reply(fake.clone(), tx.clone(), heard_audio));
            }
            _ => {}
        }
    }
}

type Sink = futures_util::stream::SplitSink<WebSocket, Message>;

async fn reply(fake: Arc<Fake>, tx: Arc<tokio::sync::Mutex<Sink>>, heard_audio: bool) {
    let mut events = Vec::new();
    if heard_audio {
        events.push(json!({"type": "conversation.item.input_audio_transcription.completed", "item_id": "user1", "transcript": "when does the museum close"}));
    }
    let pcm: Vec<u8> = (0..4_800i16)
        .flat_map(|i| ((i % 64) * 200).to_le_bytes())
        .collect();
    for words in ["The museum ", "closes at six."] {
        events.push(
            json!({"type": "response.audio_transcript.delta", "item_id": "reply1", "delta": words}),
        );
        events.push(json!({"type": "response.audio.delta", "item_id": "reply1", "content_index": 0, "delta": STANDARD.encode(&pcm)}));
    }
    events.push(json!({"type": "response.done"}));
    for e in events {
        if fake.pace_ms > 0 {
            tokio::time::sleep(Duration::from_millis(fake.pace_ms)).await;
        }
        if tx
            .lock()
            .await
            .send(Message::text(e.to_string()))
            .await
            .is_err()
        {
            return;
        }
    }
}

pub(crate) async fn start_fake(pace_ms: u64) -> (String, Arc<Fake>) {
    let fake = Arc::new(Fake {
        pace_ms,
        ..Fake::default()
    });
    let app = Router::new()
        .route("/v1/realtime", get(upgrade))
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/v1"), fake)
}

async fn realtime_kiosk(base_url: &str) -> (Server, String) {
    let s = Server::start().await;
    s.put_json(
        "/api/v1/settings",
        json!({"llm": {"provider": "openai_realtime"}, "realtime": {"provider": "openai_realtime", "base_url": base_url, "api_key": "sk-realtime-test-key", "model": "gpt-realtime"}}),
        200,
    )
    .await;
    let v = s.post_json("/api/v1/sessions", json!({}), 201).await;
    let id = v["session_id"].as_str().unwrap().to_string();
    (s, id)
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The chat WebSocket of character `id`.
async fn chat(s: &Server, id: &str) -> Socket {
    let url = format!("ws://{}/ws/chat/{id}", s.addr);
    tokio_tungstenite::connect_async(url).await.unwrap().0
}

async fn send_json(ws: &mut Socket, v: Value) {
    ws.send(ClientMessage::text(v.to_string())).await.unwrap();
}

async fn next_json(ws: &mut Socket) -> Option<Value> {
    loop {
        match tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .ok()??
        {
            Ok(ClientMessage::Text(t)) => return serde_json::from_str(&t).ok(),
            Ok(_) => continue,
            Err(_) => return None,
        }
    }
}

fn kinds(fake: &Fake) -> Vec<String> {
    fake.received
        .lock()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_turn_speaks_through_the_realtime_api() {
    let (base, fake) = start_fake(0).await;
    let (s, id) = realtime_kiosk(&base).await;
    let mut ws = chat(&s, &id).await;
    send_json(&mut ws, json!({"type": "audio_output", "enabled": true})).await;
    send_json(
        &mut ws,
        json!({"type": "text_input", "text": "When does it close?"}),
    )
    .await;
    let mut audio = 0;
    let final_text = loop {
        match tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .expect("reply in time")
            .unwrap()
            .unwrap()
        {
            ClientMessage::Binary(b) => audio += b.len(),
            ClientMessage::Text(t) => {
                let v: Value = serde_json::from_str(&t).unwrap();
                if v["type"] == "transcript" && v["speaker"] == "assistant" && v["is_final"] == true
                {
                    break v["text"].as_str().unwrap().to_string();
                }
            }
            _ => {}
        }
    };
    assert_eq!(final_text, "The museum closes at six.");
    assert_eq!(
        audio,
        2 * 4_800 * 2,
        "both audio deltas reached the socket as 24 kHz PCM"
    );
    let k = kinds(&fake);
    assert_eq!(k.first().map(String::as_str), Some("session.update"));
    assert!(
        k.contains(&"conversation.item.create".into())
            && k.last().map(String::as_str) == Some("response.create"),
        "{k:?}"
    );
    let first = fake.received.lock().unwrap()[0].clone();
    assert_eq!(first["session"]["input_audio_format"], "pcm16");
    assert!(
        first["session"]["instructions"]
            .as_str()
            .unwrap()
            .contains("Docent")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speech_goes_up_as_pcm16_and_the_transcription_comes_back() {
    let (base, fake) = start_fake(0).await;
    let (s, id) = realtime_kiosk(&base).await;
    let mut ws = chat(&s, &id).await;
    send_json(
        &mut ws,
        json!({"type": "audio_start", "sample_rate": 16000}),
    )
    .await;
    ws.send(ClientMessage::binary(vec![0u8; 32_000]))
        .await
        .unwrap();
    send_json(&mut ws, json!({"type": "audio_end"})).await;
    let mut user = None;
    while let Some(v) = next_json(&mut ws).await {
        if v["type"] == "transcript" && v["speaker"] == "user" {
            user = v["text"].as_str().map(str::to_string);
        }
        if v["type"] == "transcript" && v["speaker"] == "assistant" && v["is_final"] == true {
            break;
        }
    }
    assert_eq!(user.as_deref(), Some("when does the museum close"));
    let received = fake.received.lock().unwrap().clone();
    let appended: usize = received
        .iter()
        .filter(|e| e["type"] == "input_audio_buffer.append")
        .map(|e| STANDARD.decode(e["audio"].as_str().unwrap()).unwrap().len())
        .sum();
    assert_eq!(
        appended,
        24_000 * 2,
        "one second of 16 kHz speech arrives as 24 kHz pcm16"
    );
    assert!(
        received
            .iter()
            .any(|e| e["type"] == "input_audio_buffer.commit")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_cancels_and_truncates_the_reply() {
    let (base, fake) = start_fake(300).await;
    let (s, id) = realtime_kiosk(&base).await;
    let mut ws = chat(&s, &id).await;
    send_json(&mut ws, json!({"type": "audio_output", "enabled": true})).await;
    send_json(
        &mut ws,
        json!({"type": "text_input", "text": "Tell me everything"}),
    )
    .await;
    loop {
        if let ClientMessage::Binary(_) = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            break;
        }
    }
    send_json(&mut ws, json!({"type": "interrupt"})).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    loop {
        let k = kinds(&fake);
        if k.contains(&"conversation.item.truncate".into()) {
            assert!(k.contains(&"response.cancel".into()), "{k:?}");
            let truncate = fake
                .received
                .lock()
                .unwrap()
                .iter()
                .find(|e| e["type"] == "conversation.item.truncate")
                .cloned()
                .unwrap();
            assert_eq!(truncate["item_id"], "reply1");
            assert_eq!(
                truncate["audio_end_ms"], 200,
                "cut where the played audio ended (one 200 ms delta)"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no cancel/truncate sent: {k:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(s);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_realtime_service_gives_an_error_and_an_apology() {
    let (s, id) = realtime_kiosk("http://127.0.0.1:9/v1").await;
    let mut ws = chat(&s, &id).await;
    send_json(&mut ws, json!({"type": "text_input", "text": "hello"})).await;
    let mut code = None;
    while let Some(v) = next_json(&mut ws).await {
        if v["type"] == "error" {
            code = v["code"].as_str().map(str::to_string);
        }
        if v["type"] == "transcript" && v["speaker"] == "assistant" && v["is_final"] == true {
            assert!(v["text"].as_str().unwrap().contains("sorry"));
            break;
        }
    }
    assert_eq!(code.as_deref(), Some("provider_unavailable"));
}
