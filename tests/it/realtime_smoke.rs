//! First end-to-end checks of the realtime doors (WebSocket and gRPC) with the offline engine.

use std::time::Duration;

use crate::support::{Server, config_then_text};
use docent::proto::VoiceLlmConfig;
use docent::proto::voice_llm_service_client::VoiceLlmServiceClient;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

async fn session(s: &Server) -> String {
    let v = s.post_json("/api/v1/sessions", json!({}), 201).await;
    v["session_id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_text_turn_streams_transcript_and_audio() {
    let s = Server::start().await;
    let id = session(&s).await;
    let url = format!("ws://{}/ws/chat/{id}", s.addr);
    let (mut ws, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    let first: Value = match ws.next().await.unwrap().unwrap() {
        Message::Text(t) => serde_json::from_str(&t).unwrap(),
        other => panic!("{other:?}"),
    };
    assert_eq!(first["type"], "session");
    ws.send(Message::text(
        json!({"type": "audio_output", "enabled": true}).to_string(),
    ))
    .await
    .unwrap();
    ws.send(Message::text(
        json!({"type": "text_input", "text": "hello there"}).to_string(),
    ))
    .await
    .unwrap();
    let mut audio_bytes = 0;
    let mut final_text = None;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while final_text.is_none() {
        let msg = tokio::time::timeout_at(deadline, ws.next())
            .await
            .expect("reply in time")
            .unwrap()
            .unwrap();
        match msg {
            Message::Binary(b) => audio_bytes += b.len(),
            Message::Text(t) => {
                let v: Value = serde_json::from_str(&t).unwrap();
                if v["type"] == "transcript" && v["speaker"] == "assistant" && v["is_final"] == true
                {
                    final_text = Some(v["text"].as_str().unwrap().to_string());
                }
            }
            _ => {}
        }
    }
    assert!(final_text.unwrap_or_default().len() > 5);
    if docent::engine::providers::local_tts_available() {
        assert!(audio_bytes > 1000, "speech was sent");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_text_turn_ends_with_a_final_output() {
    let s = Server::start().await;
    let mut client = VoiceLlmServiceClient::connect(format!("http://{}", s.addr))
        .await
        .unwrap();
    let (tx, inputs) = config_then_text(VoiceLlmConfig::default(), "hello").await;
    let mut outputs = client.converse(inputs).await.unwrap().into_inner();
    let mut got_final = false;
    while let Some(out) = tokio::time::timeout(Duration::from_secs(10), outputs.next())
        .await
        .unwrap()
    {
        let out = out.unwrap();
        if out.is_final {
            assert!(!out.transcript.is_empty());
            assert!(!out.question_id.is_empty() && !out.reply_id.is_empty());
            got_final = true;
            break;
        }
    }
    assert!(got_final);
    drop(tx);
}

/// One kiosk uses another as its `remote` provider: the reply (and its speech) comes from the
/// second kiosk's engine over gRPC.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_provider_relays_another_kiosk() {
    let backend = Server::start().await;
    let front = Server::start().await;
    front
        .put_json(
            "/api/v1/settings",
            json!({"llm": {"provider": "remote"}, "remote_voice": {"grpc_addr": backend.addr.to_string()}}),
            200,
        )
        .await;
    let id = session(&front).await;
    front
        .post_json(
            &format!("/api/v1/sessions/{id}/message"),
            json!({"text": "hello"}),
            202,
        )
        .await;
    let cid = front.default_character().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let h = front.history(&cid).await;
        let msgs = h["messages"].as_array().unwrap().clone();
        if let Some(reply) = msgs.iter().find(|m| m["role"] == "assistant") {
            assert!(
                reply["content"].as_str().unwrap().contains("Docent"),
                "{reply}"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no reply relayed: {msgs:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The backend kept its own record of the conversation it answered.
    let bid = backend.default_character().await;
    let h = backend.history(&bid).await;
    assert!(
        h["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["content"] == "hello")
    );
}
