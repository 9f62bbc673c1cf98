//! The OpenAI Realtime API over WebSocket: one connection per turn carrying the persona
//! (`session.update`), the recent history and the user's text or 24 kHz PCM
//! (`input_audio_buffer.append` / `commit`), then `response.create`; the reply's audio and
//! transcript stream back. A turn cancelled mid-reply sends `response.cancel` and
//! `conversation.item.truncate` (at the audio played so far) before the connection closes.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::{Mutex, mpsc};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::Endpoint;
use super::{OmniContext, OmniEvent, OmniInput, ProviderError};
use crate::engine::pcm;

type Sink = SplitSink<WebSocketStream<MaybeTlsStream<TcpStream>>, Message>;

/// Speech is appended in pieces of this many samples (500 ms at 24 kHz).
const APPEND_SAMPLES: usize = 12_000;

/// The realtime URL for a base URL such as `https://api.openai.com/v1`.
pub fn url(base_url: &str, model: &str) -> String {
    let base = base_url.trim_end_matches('/');
    let base = base
        .strip_prefix("https://")
        .map(|r| format!("wss://{r}"))
        .or_else(|| base.strip_prefix("http://").map(|r| format!("ws://{r}")))
        .unwrap_or_else(|| base.to_string());
    format!("{base}/realtime?model={model}")
}

/// Sends the cancellation of an unfinished reply when a turn is dropped mid-way.
struct CancelOnDrop {
    sink: Arc<Mutex<Sink>>,
    /// The assistant item being spoken and how many ms of its audio were received.
    item: Option<(String, u64)>,
    done: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let sink = self.sink.clone();
        let item = self.item.take();
        tokio::spawn(async move {
            let mut sink = sink.lock().await;
            let _ = sink.send(text(json!({"type": "response.cancel"}))).await;
            if let Some((item_id, ms)) = item {
                let truncate = json!({"type": "conversation.item.truncate", "item_id": item_id, "content_index": 0, "audio_end_ms": ms});
                let _ = sink.send(text(truncate)).await;
            }
            let _ = sink.close().await;
        });
    }
}

fn text(v: Value) -> Message {
    Message::text(v.to_string())
}

fn ws_error(e: tokio_tungstenite::tungstenite::Error) -> ProviderError {
    use tokio_tungstenite::tungstenite::Error as E;
    match e {
        E::Io(e) => ProviderError::Unavailable(format!("cannot reach the realtime service: {e}")),
        E::Http(res) => ProviderError::Failed(format!(
            "the realtime service refused the connection: {}",
            res.status()
        )),
        other => ProviderError::Failed(format!("realtime connection failed: {other}")),
    }
}

/// Runs one turn on the Realtime API, sending what it answers to `out`.
pub async fn converse(
    ep: &Endpoint<'_>,
    input: &OmniInput,
    ctx: &OmniContext,
    timeout: Duration,
    out: &mpsc::Sender<OmniEvent>,
) -> Result<(), ProviderError> {
    let mut request = url(ep.address, ep.model)
        .into_client_request()
        .map_err(|e| ProviderError::Unavailable(format!("bad realtime address: {e}")))?;
    if !ep.api_key.is_empty() {
        let auth = format!("Bearer {}", ep.api_key)
            .parse()
            .map_err(|_| ProviderError::Failed("the API key is not a valid header value".into()))?;
        request.headers_mut().insert("authorization", auth);
    }
    request
        .headers_mut()
        .insert("openai-beta", "realtime=v1".parse().expect("static header"));
    let (ws, _) = tokio::time::timeout(timeout, tokio_tungstenite::connect_async(request))
        .await
        .map_err(|_| ProviderError::Timeout("the realtime service did not answer in time".into()))?
        .map_err(ws_error)?;
    let (sink, mut stream) = ws.split();
    let sink = Arc::new(Mutex::new(sink));
    let mut guard = CancelOnDrop {
        sink: sink.clone(),
        item: None,
        done: false,
    };

    let mut opening = vec![json!({
        "type": "session.update",
        "session": {
            "modalities": ["text", "audio"],
            "instructions": ctx.instructions,
            "voice": ctx.voice,
            "input_audio_format": "pcm16",
            "output_audio_format": "pcm16",
            "input_audio_transcription": {"model": "whisper-1"},
            "turn_detection": null,
            "temperature": ctx.temperature,
        }
    })];
    for (role, content) in &ctx.history {
        let kind = if role == "assistant" {
            "text"
        } else {
            "input_text"
        };
        opening.push(json!({"type": "conversation.item.create", "item": {"type": "message", "role": role, "content": [{"type": kind, "text": content}]}}));
    }
    match input {
        OmniInput::Text(t) => opening.push(json!({"type": "conversation.item.create", "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]}})),
        OmniInput::Audio(pcm) => {
            let pcm = pcm::resample(pcm, pcm::RECOGNISER_RATE, pcm::OUTPUT_RATE);
            opening.push(json!({"type": "input_audio_buffer.clear"}));
            for piece in pcm.chunks(APPEND_SAMPLES) {
                opening.push(json!({"type": "input_audio_buffer.append", "audio": STANDARD.encode(pcm::samples_to_le(piece))}));
            }
            opening.push(json!({"type": "input_audio_buffer.commit"}));
        }
    }
    opening.push(json!({"type": "response.create", "response": {"modalities": ["text", "audio"]}}));
    {
        let mut sink = sink.lock().await;
        for event in opening {
            sink.send(text(event)).await.map_err(ws_error)?;
        }
    }

    loop {
        let msg = tokio::time::timeout(timeout, stream.next())
            .await
            .map_err(|_| ProviderError::Timeout("the realtime service stopped answering".into()))?;
        let msg = match msg {
            None => {
                return Err(ProviderError::Failed(
                    "the realtime service closed the connection".into(),
                ));
            }
            Some(m) => m.map_err(ws_error)?,
        };
        let Message::Text(raw) = msg else { continue };
        let event: Value = serde_json::from_str(&raw).map_err(|_| {
            ProviderError::Garbage("the realtime service sent a frame that is not JSON".into())
        })?;
        let send = match event["type"].as_str().unwrap_or("") {
            "response.audio.delta" => {
                let bytes = STANDARD
                    .decode(event["delta"].as_str().unwrap_or(""))
                    .map_err(|_| ProviderError::Garbage("audio delta is not base64".into()))?;
                let samples = pcm::samples_from_le(&bytes);
                let item_id = event["item_id"].as_str().unwrap_or("").to_string();
                let ms = samples.len() as u64 * 1000 / pcm::OUTPUT_RATE as u64;
                guard.item = Some(match guard.item.take() {
                    Some((id, played)) if id == item_id => (id, played + ms),
                    _ => (item_id, ms),
                });
                Some(OmniEvent::Audio(samples))
            }
            "response.audio_transcript.delta" | "response.text.delta" => Some(OmniEvent::Delta(
                event["delta"].as_str().unwrap_or("").to_string(),
            )),
            "conversation.item.input_audio_transcription.completed" => Some(OmniEvent::UserText(
                event["transcript"]
                    .as_str()
                    .unwrap_or("")
                    .trim()
                    .to_string(),
            )),
            "response.done" => {
                guard.done = true;
                let _ = sink.lock().await.close().await;
                return Ok(());
            }
            "error" => {
                guard.done = true;
                let message = event["error"]["message"]
                    .as_str()
                    .unwrap_or("realtime error")
                    .to_string();
                return Err(ProviderError::Failed(message));
            }
            _ => None,
        };
        if let Some(e) = send
            && out.send(e).await.is_err()
        {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::url;

    #[test]
    fn realtime_urls() {
        assert_eq!(
            url("https://api.openai.com/v1", "gpt-4o-realtime"),
            "wss://api.openai.com/v1/realtime?model=gpt-4o-realtime"
        );
        assert_eq!(
            url("http://10.0.0.2:8000/v1/", "m"),
            "ws://10.0.0.2:8000/v1/realtime?model=m"
        );
        assert_eq!(url("wss://x/v1", "m"), "wss://x/v1/realtime?model=m");
    }
}
