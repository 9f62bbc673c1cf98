//! Each stage handed to the provider chosen for it. Every match here is exhaustive over
//! `Provider`: a new provider does not compile until each stage says what it does with it. A
//! provider chosen for a stage it does not serve leaves that stage to the offline engine.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::{
    ChatRequest, OmniContext, OmniEvent, OmniInput, Provider, ProviderError, Stage, StreamBounds,
    local, openai, realtime, remote, wyoming,
};
use crate::engine::language::Language;
use crate::engine::settings::Service;
use crate::engine::voice::Voice;
use crate::engine::{CharacterId, Engine};

/// What a reply is generated from.
pub struct Prompt<'a> {
    pub character_id: &'a CharacterId,
    /// The live session it is asked in (none for the console's "what would it answer"): the
    /// offline engine may ask which of two topics is meant, and the session's next question
    /// answers that.
    pub session_id: Option<&'a str>,
    pub question: &'a str,
    /// How sure the recogniser was of the question's words (none when it was typed).
    pub sure: &'a [(String, f64)],
    /// What the offline engine says when its knowledge answers nothing.
    pub fallback: String,
    /// The language the reply is in (the offline engine answers from the knowledge in it).
    pub language: &'a Language,
}

/// What the recogniser heard.
pub struct Heard {
    pub text: String,
    /// How sure it was of each word (0 to 1), when it says so.
    pub sure: Vec<(String, f64)>,
    /// The language it heard, when it says (a network recogniser asked to detect it).
    pub language: Option<Language>,
}

impl Heard {
    fn said((text, language): (String, Option<String>)) -> Heard {
        Heard {
            text,
            sure: Vec::new(),
            language: language.as_deref().and_then(Language::from_recogniser),
        }
    }
}

/// Where synthesised speech goes as it is made.
pub trait Speech {
    /// The speech of `text` starts.
    fn begin(&mut self, text: &str);
    /// More samples (mono 24 kHz); false once no more are wanted.
    fn push(&mut self, samples: &[i16]) -> bool;
    /// The speech of the text is complete.
    fn flush(&mut self);
}

impl Engine {
    /// Recognises mono 16 kHz speech in the visit's `language` (`None`: not chosen yet, and a
    /// network recogniser is asked to detect it when the museum offers several); the offline
    /// recogniser listens for the words of the character's knowledge, in English.
    pub(in crate::engine) async fn recognise(
        self: &Arc<Self>,
        provider: Provider,
        character_id: &CharacterId,
        pcm: &[i16],
        timeout: Duration,
        language: Option<&Language>,
    ) -> Result<Heard, ProviderError> {
        let s = self.settings();
        let hint = match language {
            Some(l) => l.primary().to_string(),
            None if s.languages().len() > 1 => String::new(),
            None => s.asr.language.clone(),
        };
        let heard: Result<Heard, ProviderError> = async {
            match provider {
                Provider::Openai => {
                    let ep = s.endpoint(Service::Asr)?;
                    openai::transcribe(&self.http, &ep, pcm, &hint, timeout)
                        .await
                        .map(Heard::said)
                }
                Provider::Wyoming => {
                    let ep = s.endpoint(Service::Asr)?;
                    wyoming::transcribe(ep.address, ep.model, &hint, pcm, timeout)
                        .await
                        .map(Heard::said)
                }
                Provider::Local | Provider::OpenaiRealtime | Provider::Remote => {
                    // Building the model reads the whole pronouncing dictionary (3.5 MB) and writes
                    // files: seconds on a slow board. On an async worker it would also hold up the
                    // tasks queued on that worker (a task a turn wakes, such as the kiosk loop, is
                    // queued there and no other worker takes it), so it runs on the blocking pool.
                    let engine = self.clone();
                    let id = character_id.clone();
                    let model = tokio::task::spawn_blocking(move || engine.recogniser_model(&id))
                        .await
                        .map_err(|e| {
                            ProviderError::Failed(format!(
                                "the recogniser's model was not built: {e}"
                            ))
                        })??;
                    // Both passes at once (two processes; a board has the cores): the closed one
                    // is wanted when the open one is unsure, and waiting for that would add its
                    // time to every such turn.
                    let scratch = self.scratch_dir();
                    let (open, closed) = tokio::join!(
                        local::transcribe(pcm, &model, &scratch, timeout),
                        local::closed_pass(pcm, &model, &scratch, timeout),
                    );
                    let open = open?;
                    // Without the closed pass, the open one still answers.
                    let closed = closed.unwrap_or_else(|e| {
                        tracing::warn!("the recogniser's closed pass failed: {e}");
                        None
                    });
                    let (engine, id) = (self.clone(), character_id.clone());
                    tokio::task::spawn_blocking(move || engine.offline_heard(&id, open, closed))
                        .await
                        .map_err(|e| {
                            ProviderError::Failed(format!("the speech was not weighed: {e}"))
                        })
                }
            }
        }
        .await;
        self.record_call(Stage::Asr, provider, &heard);
        heard
    }

    /// Generates a reply, its text sent to `out` as it comes. `chat` builds the conversation a
    /// language model is sent (only when one is asked). Returns false when the offline engine
    /// found nothing in the passages to answer with (it said its fallback).
    pub(in crate::engine) async fn generate(
        self: &Arc<Self>,
        provider: Provider,
        prompt: Prompt<'_>,
        chat: impl FnOnce() -> ChatRequest,
        bounds: StreamBounds,
        out: &mpsc::Sender<String>,
    ) -> Result<bool, ProviderError> {
        let answered: Result<bool, ProviderError> = async {
            match provider {
                Provider::Openai => {
                    let s = self.settings();
                    let ep = s.endpoint(Service::Llm)?;
                    openai::chat(&self.http, &ep, &chat(), bounds, out).await?;
                    Ok(true)
                }
                Provider::Local
                | Provider::OpenaiRealtime
                | Provider::Remote
                | Provider::Wyoming => {
                    let (engine, id) = (self.clone(), prompt.character_id.clone());
                    let (question, sure) = (prompt.question.to_string(), prompt.sure.to_vec());
                    let session = prompt.session_id.map(str::to_string);
                    let language = prompt.language.clone();
                    let answer = tokio::task::spawn_blocking(move || {
                        let asked = (question.as_str(), sure.as_slice());
                        engine.offline_reply_in(session.as_deref(), &id, asked, &language)
                    })
                    .await
                    .ok()
                    .flatten();
                    let answered = answer.is_some();
                    let text = answer.unwrap_or(prompt.fallback);
                    for word in text.split_inclusive(' ') {
                        if out.send(word.to_string()).await.is_err() {
                            break;
                        }
                    }
                    Ok(answered)
                }
            }
        }
        .await;
        self.record_call(Stage::Llm, provider, &answered);
        answered
    }

    /// Speaks `text` in `voice` into `out`. A voice of another provider than the one that
    /// speaks is not used: that provider's default voice speaks.
    pub(in crate::engine) async fn speak(
        &self,
        provider: Provider,
        text: &str,
        voice: &Voice,
        timeout: Duration,
        out: &mut impl Speech,
    ) -> Result<(), ProviderError> {
        let spoken: Result<(), ProviderError> = async {
            let own = if voice.provider() == provider {
                voice.name()
            } else {
                ""
            };
            match provider {
                Provider::Openai => {
                    let s = self.settings();
                    let ep = s.endpoint(Service::Tts)?;
                    let pcm = openai::speak(&self.http, &ep, text, own, timeout).await?;
                    out.begin(text);
                    if out.push(&pcm) {
                        out.flush();
                    }
                }
                Provider::Wyoming => {
                    let s = self.settings();
                    let ep = s.endpoint(Service::Tts)?;
                    wyoming::speak(ep.address, text, own, timeout, out).await?;
                }
                Provider::Local | Provider::OpenaiRealtime | Provider::Remote => {
                    let mut begun = false;
                    local::speak(text, voice, timeout, |pcm| {
                        if !begun {
                            begun = true;
                            out.begin(text);
                        }
                        out.push(pcm)
                    })
                    .await?;
                    out.flush();
                }
            }
            Ok(())
        }
        .await;
        self.record_call(Stage::Tts, provider, &spoken);
        spoken
    }

    /// Runs one exchange on an omni provider, sending what it answers to `out`.
    pub(in crate::engine) async fn converse(
        &self,
        provider: Provider,
        input: &OmniInput,
        ctx: &OmniContext,
        timeout: Duration,
        out: &mpsc::Sender<OmniEvent>,
    ) -> Result<(), ProviderError> {
        // An omni provider listens, answers and speaks: its calls count as the reply's.
        let answered: Result<(), ProviderError> = async {
            let s = self.settings();
            match provider {
                Provider::Remote => {
                    let ep = s.endpoint(Service::RemoteVoice)?;
                    remote::converse(ep.address, input, ctx, timeout, out).await
                }
                Provider::OpenaiRealtime => {
                    let ep = s.endpoint(Service::Realtime)?;
                    realtime::converse(&ep, input, ctx, timeout, out).await
                }
                Provider::Local | Provider::Openai | Provider::Wyoming => {
                    Err(ProviderError::Failed(format!(
                        "{provider} does not answer with its own speech"
                    )))
                }
            }
        }
        .await;
        self.record_call(Stage::Llm, provider, &answered);
        answered
    }
}
