//! Any OpenAI-compatible server (OpenAI, Ollama, llama.cpp, vLLM, LocalAI, Speaches): chat
//! completions streamed as server-sent events, `/audio/transcriptions` and `/audio/speech`.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{ChatRequest, Endpoint, ProviderError, StreamBounds};
use crate::engine::pcm;

impl Endpoint<'_> {
    fn url(&self, path: &str) -> String {
        format!("{}/{path}", self.address.trim_end_matches('/'))
    }

    fn request(&self, client: &reqwest::Client, path: &str) -> reqwest::RequestBuilder {
        let req = client.post(self.url(path));
        if self.api_key.is_empty() {
            req
        } else {
            req.bearer_auth(self.api_key)
        }
    }
}

fn send_error(e: reqwest::Error) -> ProviderError {
    if e.is_timeout() {
        ProviderError::Timeout(format!("no answer in time: {e}"))
    } else if e.is_connect() {
        ProviderError::Unavailable(format!("cannot connect: {e}"))
    } else {
        ProviderError::Failed(format!("request failed: {e}"))
    }
}

/// Longest provider error message passed on (its first line only).
const MESSAGE_MAX: usize = 120;

/// Turns a non-success answer into a short status line: the status and the first line of an
/// OpenAI-style `error.message`, if any. Any other body is only logged: the address is the
/// administrator's to choose, so echoing whatever answers there would let the kiosk read other
/// services on its network for whoever can change a setting.
async fn check(res: reqwest::Response) -> Result<reqwest::Response, ProviderError> {
    if res.status().is_success() {
        return Ok(res);
    }
    let status = res.status();
    let body = res.text().await.unwrap_or_default();
    let message = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| {
            v["error"]["message"]
                .as_str()
                .or(v["error"].as_str())
                .map(|m| {
                    m.lines()
                        .next()
                        .unwrap_or("")
                        .chars()
                        .take(MESSAGE_MAX)
                        .collect()
                })
        })
        .unwrap_or_else(|| {
            let excerpt: String = body.chars().take(300).collect();
            tracing::warn!(
                "provider answered {status} with a body that is not an error: {excerpt:?}"
            );
            "no error message".to_string()
        });
    Err(if status.is_server_error() && status.as_u16() == 503 {
        ProviderError::Unavailable(format!("{status}: {message}"))
    } else {
        ProviderError::Failed(format!("{status}: {message}"))
    })
}

/// Streams a chat completion, sending each text delta to `out`. `bounds` limit the wait for the
/// first bytes and between chunks; a cut connection or a line that is not a completion chunk
/// ends the reply with an error.
pub async fn chat(
    client: &reqwest::Client,
    ep: &Endpoint<'_>,
    req: &ChatRequest,
    bounds: StreamBounds,
    out: &mpsc::Sender<String>,
) -> Result<(), ProviderError> {
    let messages: Vec<Value> = req
        .messages
        .iter()
        .map(|m| json!({"role": m.role, "content": m.content}))
        .collect();
    let body = json!({
        "model": ep.model,
        "messages": messages,
        "temperature": req.temperature,
        "max_tokens": req.max_tokens,
        "stream": true,
    });
    let res = tokio::time::timeout(
        bounds.first_byte,
        ep.request(client, "chat/completions").json(&body).send(),
    )
    .await
    .map_err(|_| ProviderError::Timeout("the language model did not answer in time".into()))?
    .map_err(send_error)?;
    let mut stream = check(res).await?.bytes_stream();
    let mut buf: Vec<u8> = Vec::new();
    let mut idle = bounds.first_byte;
    loop {
        let chunk = match tokio::time::timeout(idle, stream.next()).await {
            Err(_) => {
                return Err(ProviderError::Timeout(
                    "the language model stopped streaming".into(),
                ));
            }
            Ok(None) => return Ok(()),
            Ok(Some(chunk)) => chunk.map_err(send_error)?,
        };
        idle = bounds.between_chunks;
        buf.extend_from_slice(&chunk);
        while let Some(end) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let Some(data) = line.trim().strip_prefix("data:") else {
                continue;
            };
            let data = data.trim();
            if data == "[DONE]" {
                return Ok(());
            }
            let event: Value = serde_json::from_str(data).map_err(|_| {
                ProviderError::Garbage(format!(
                    "not a completion chunk: {}",
                    &data.chars().take(80).collect::<String>()
                ))
            })?;
            if let Some(err) = event.get("error") {
                return Err(ProviderError::Failed(
                    err["message"].as_str().unwrap_or("model error").to_string(),
                ));
            }
            if let Some(delta) = event["choices"][0]["delta"]["content"].as_str()
                && !delta.is_empty()
                && out.send(delta.to_string()).await.is_err()
            {
                return Ok(());
            }
        }
    }
}

/// Transcribes 16 kHz mono speech in `language`; without one, the recogniser detects it and
/// says which (`verbose_json`, Whisper's; a model that has no such format, such as
/// gpt-4o-transcribe, is asked again for plain JSON). Returns the text and the language heard.
pub async fn transcribe(
    client: &reqwest::Client,
    ep: &Endpoint<'_>,
    pcm: &[i16],
    language: &str,
    timeout: Duration,
) -> Result<(String, Option<String>), ProviderError> {
    let wav = pcm::wav_bytes(pcm, pcm::RECOGNISER_RATE);
    let detect = language.is_empty();
    let mut answer = transcription(client, ep, &wav, language, detect, timeout).await;
    if detect && matches!(&answer, Err(ProviderError::Failed(m)) if m.starts_with("400")) {
        answer = transcription(client, ep, &wav, language, false, timeout).await;
    }
    let body = answer?;
    let text = body["text"]
        .as_str()
        .map(|t| t.trim().to_string())
        .ok_or_else(|| ProviderError::Garbage("transcription without text".into()))?;
    Ok((text, body["language"].as_str().map(str::to_string)))
}

/// One transcription request; `verbose` asks for the language heard too.
async fn transcription(
    client: &reqwest::Client,
    ep: &Endpoint<'_>,
    wav: &[u8],
    language: &str,
    verbose: bool,
    timeout: Duration,
) -> Result<Value, ProviderError> {
    let file = reqwest::multipart::Part::bytes(wav.to_vec())
        .file_name("speech.wav")
        .mime_str("audio/wav")
        .expect("valid mime");
    let mut form = reqwest::multipart::Form::new()
        .part("file", file)
        .text("model", ep.model.to_string());
    if !language.is_empty() {
        form = form.text("language", language.to_string());
    }
    if verbose {
        form = form.text("response_format", "verbose_json");
    }
    let res = tokio::time::timeout(
        timeout,
        ep.request(client, "audio/transcriptions")
            .multipart(form)
            .send(),
    )
    .await
    .map_err(|_| ProviderError::Timeout("speech recognition did not answer in time".into()))?
    .map_err(send_error)?;
    tokio::time::timeout(timeout, check(res).await?.json())
        .await
        .map_err(|_| ProviderError::Timeout("speech recognition did not answer in time".into()))?
        .map_err(|e| ProviderError::Garbage(format!("not a transcription: {e}")))
}

/// Synthesises speech as 24 kHz mono samples; accepts raw PCM (OpenAI's `pcm` format, 24 kHz)
/// or a WAV answer at any rate.
pub async fn speak(
    client: &reqwest::Client,
    ep: &Endpoint<'_>,
    text: &str,
    voice: &str,
    timeout: Duration,
) -> Result<Vec<i16>, ProviderError> {
    let body =
        json!({ "model": ep.model, "voice": voice, "input": text, "response_format": "pcm" });
    let fetch = async {
        let res = check(
            ep.request(client, "audio/speech")
                .json(&body)
                .send()
                .await
                .map_err(send_error)?,
        )
        .await?;
        let wav = res
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.contains("wav"));
        let bytes = res.bytes().await.map_err(send_error)?;
        Ok::<_, ProviderError>((wav || bytes.starts_with(b"RIFF"), bytes))
    };
    let (is_wav, bytes) = tokio::time::timeout(timeout, fetch)
        .await
        .map_err(|_| ProviderError::Timeout("speech synthesis did not answer in time".into()))??;
    if is_wav {
        let wav = pcm::parse_wav(&bytes).map_err(ProviderError::Garbage)?;
        let mono = pcm::downmix(&wav.samples, wav.channels);
        Ok(pcm::resample(&mono, wav.rate, pcm::OUTPUT_RATE))
    } else if bytes.len() % 2 == 1 || bytes.is_empty() {
        Err(ProviderError::Garbage("speech is not 16-bit PCM".into()))
    } else {
        Ok(pcm::samples_from_le(&bytes))
    }
}
