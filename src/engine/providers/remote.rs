//! Another VoiceLLMService over gRPC: the kiosk as a client of the same proto it serves. Each
//! turn opens a Converse stream, sends the config (persona, voice, recent history as
//! `dialog_context`) and the user's text or speech, and relays what comes back.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::{OmniContext, OmniEvent, OmniInput, ProviderError};
use crate::engine::pcm;
use crate::proto::voice_llm_input::Input;
use crate::proto::voice_llm_service_client::VoiceLlmServiceClient;
use crate::proto::{AudioChunk, VoiceLlmConfig, VoiceLlmDialogContextItem, VoiceLlmInput};

/// Speech is sent in chunks of this many samples (100 ms at 16 kHz).
const SEND_CHUNK: usize = 1_600;

fn endpoint(addr: &str) -> String {
    if addr.contains("://") {
        addr.to_string()
    } else {
        format!("http://{addr}")
    }
}

fn status_error(s: tonic::Status) -> ProviderError {
    match s.code() {
        tonic::Code::Unavailable => ProviderError::Unavailable(s.message().to_string()),
        tonic::Code::DeadlineExceeded => ProviderError::Timeout(s.message().to_string()),
        _ => ProviderError::Failed(format!("{}: {}", s.code(), s.message())),
    }
}

/// Opens a client, failing within `timeout`.
pub async fn connect(
    addr: &str,
    timeout: Duration,
) -> Result<VoiceLlmServiceClient<tonic::transport::Channel>, ProviderError> {
    let ep = tonic::transport::Endpoint::from_shared(endpoint(addr))
        .map_err(|e| ProviderError::Unavailable(format!("bad address {addr}: {e}")))?
        .connect_timeout(timeout);
    let channel = tokio::time::timeout(timeout, ep.connect())
        .await
        .map_err(|_| ProviderError::Timeout(format!("no connection to {addr} in time")))?
        .map_err(|e| ProviderError::Unavailable(format!("cannot connect to {addr}: {e}")))?;
    Ok(VoiceLlmServiceClient::new(channel))
}

/// Runs one turn on the remote service, sending what it answers to `out`.
pub async fn converse(
    addr: &str,
    input: &OmniInput,
    ctx: &OmniContext,
    timeout: Duration,
    out: &mpsc::Sender<OmniEvent>,
) -> Result<(), ProviderError> {
    let mut client = connect(addr, timeout).await?;
    let config = VoiceLlmConfig {
        system_prompt: ctx.instructions.clone(),
        voice: ctx.voice.clone(),
        temperature: ctx.temperature,
        bot_name: ctx.bot_name.clone(),
        dialog_context: ctx
            .history
            .iter()
            .map(|(role, text)| VoiceLlmDialogContextItem {
                role: role.clone(),
                text: text.clone(),
                timestamp: 0,
            })
            .collect(),
        ..Default::default()
    };
    let mut inputs = vec![VoiceLlmInput {
        input: Some(Input::Config(config)),
    }];
    match input {
        OmniInput::Text(t) => inputs.push(VoiceLlmInput {
            input: Some(Input::Text(t.clone())),
        }),
        OmniInput::Audio(pcm) => {
            let chunks: Vec<&[i16]> = pcm.chunks(SEND_CHUNK).collect();
            for (i, c) in chunks.iter().enumerate() {
                inputs.push(VoiceLlmInput {
                    input: Some(Input::Audio(AudioChunk {
                        data: pcm::samples_to_le(c),
                        sample_rate: pcm::RECOGNISER_RATE as i32,
                        channels: 1,
                        format: "pcm_s16le".into(),
                        is_final: i + 1 == chunks.len(),
                        timestamp_ms: 0,
                    })),
                });
            }
        }
    }
    // The request stream stays open until the answer is complete, so the remote does not
    // take a closed input as the end of the conversation.
    let (tx, rx) = mpsc::channel(inputs.len() + 1);
    for i in inputs {
        let _ = tx.try_send(i);
    }
    let mut outputs = tokio::time::timeout(timeout, client.converse(ReceiverStream::new(rx)))
        .await
        .map_err(|_| ProviderError::Timeout("the remote service did not answer in time".into()))?
        .map_err(status_error)?
        .into_inner();
    let mut streamed_text = false;
    loop {
        let next = tokio::time::timeout(timeout, outputs.message())
            .await
            .map_err(|_| ProviderError::Timeout("the remote service stopped answering".into()))?
            .map_err(status_error)?;
        let Some(o) = next else {
            return Err(ProviderError::Failed(
                "the remote service ended the stream before its final output".into(),
            ));
        };
        if !o.user_transcript.is_empty()
            && out
                .send(OmniEvent::UserText(o.user_transcript.clone()))
                .await
                .is_err()
        {
            return Ok(());
        }
        if let Some(a) = &o.audio
            && !a.data.is_empty()
        {
            let mono = pcm::downmix(&pcm::samples_from_le(&a.data), a.channels.max(1) as u16);
            let pcm = pcm::resample(&mono, a.sample_rate.max(1) as u32, pcm::OUTPUT_RATE);
            if out.send(OmniEvent::Audio(pcm)).await.is_err() {
                return Ok(());
            }
        }
        if o.is_final {
            // The final output repeats the whole reply; it is news only if nothing streamed.
            if !streamed_text && !o.transcript.is_empty() {
                let _ = out.send(OmniEvent::Delta(o.transcript.clone())).await;
            }
            drop(tx);
            return Ok(());
        }
        if !o.transcript.is_empty() {
            streamed_text = true;
            if out
                .send(OmniEvent::Delta(o.transcript.clone()))
                .await
                .is_err()
            {
                return Ok(());
            }
        }
    }
}
