//! One conversation turn, whichever door it came in by: user input (text, or speech that is
//! recognised) -> knowledge retrieval -> reply streamed as text deltas -> speech synthesised
//! sentence by sentence while the reply still streams -> audio to every watcher.
//!
//! A turn runs as one task. A newer turn, an interrupt or the session's end cancels it: the
//! task's future is dropped, which aborts its provider requests and kills its helper processes,
//! and the live session refuses anything it still tries to publish. What was said before the cut
//! is stored as the assistant's message.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Engine;
use super::error::{Result, bad};
use super::knowledge::SearchResult;
use super::live::{ErrorCode, Event, LiveSession, Status};
use super::providers::{
    ChatMessage, ChatRequest, OmniContext, OmniEvent, OmniInput, Prompt, Provider, ProviderError,
    Speech, Stage,
};
use super::sessions::append_message;
use crate::engine::audio;
use crate::store;
use crate::store::records::{Character, Message, Session};
use crate::store::tables::{MESSAGES, SESSIONS};

/// Reply audio is published in chunks of this many samples (100 ms at 24 kHz).
const AUDIO_CHUNK_SAMPLES: usize = 2_400;
/// Characters of earlier conversation sent to the language model at most.
const HISTORY_MAX_CHARS: usize = 6_000;
const APOLOGY: &str = "I'm sorry, I can't answer that right now. Please try again in a moment.";
const NOT_HEARD: &str = "Sorry, I didn't catch that. Could you say it again?";

/// What starts a turn.
#[derive(Debug)]
pub enum TurnInput {
    /// Text the user typed; `stored` when the caller already put it in the history.
    Text { text: String, stored: bool },
    /// Mono 16 kHz speech.
    Audio(Vec<i16>),
    /// The welcome message, spoken once when a client is ready.
    Greeting,
}

/// The providers and voice a turn runs with.
struct Plan {
    character: Character,
    llm: Provider,
    asr: Provider,
    tts: Provider,
    voice: String,
    timeout: Duration,
}

impl Engine {
    /// Starts a turn in `live`, cancelling the one running; returns its number.
    pub fn start_turn(self: &Arc<Self>, live: &Arc<LiveSession>, input: TurnInput) -> u64 {
        let (seq, cancel) = live.next_turn();
        self.spawn_turn(live.clone(), seq, cancel, input);
        seq
    }

    /// The user started speaking: any reply in progress stops, and watchers see `listening`.
    pub fn listen(self: &Arc<Self>, live: &Arc<LiveSession>) -> u64 {
        let (seq, _) = live.next_turn();
        live.set_status(seq, Status::Listening);
        seq
    }

    /// Cancels the current turn; the interrupt itself takes a turn number, which it returns.
    pub fn interrupt(self: &Arc<Self>, live: &Arc<LiveSession>) -> u64 {
        let (seq, _) = live.next_turn();
        live.set_status(seq, Status::Idle);
        let engine = self.clone();
        let id = live.id.clone();
        tokio::task::spawn_blocking(move || engine.save_turn_seq(&id, seq));
        seq
    }

    /// Runs a turn whose number the caller took with `LiveSession::next_turn` (so it could
    /// label the turn before any of its events).
    pub fn spawn_turn(
        self: &Arc<Self>,
        live: Arc<LiveSession>,
        seq: u64,
        cancel: CancellationToken,
        input: TurnInput,
    ) {
        let engine = self.clone();
        tokio::spawn(async move {
            let said = Arc::new(Mutex::new(String::new()));
            let finished = tokio::select! {
                biased;
                _ = cancel.cancelled() => false,
                _ = engine.run_turn(&live, seq, input, &said) => true,
            };
            if !finished {
                let partial = said.lock().expect("said lock").trim().to_string();
                if !partial.is_empty() {
                    engine.store_message(&live, "assistant", partial, seq).await;
                }
            }
        });
    }

    async fn run_turn(
        self: &Arc<Self>,
        live: &Arc<LiveSession>,
        seq: u64,
        input: TurnInput,
        said: &Arc<Mutex<String>>,
    ) {
        let plan = match self.plan(live) {
            Ok(p) => p,
            Err(e) => {
                live.publish(
                    seq,
                    Event::Error {
                        message: e.to_string(),
                        code: ErrorCode::BadRequest,
                        turn_seq: seq,
                    },
                );
                live.set_status(seq, Status::Idle);
                return;
            }
        };
        live.set_status(seq, Status::Processing);
        if plan.llm.is_omni() && !matches!(input, TurnInput::Greeting) {
            self.run_omni_turn(live, seq, &plan, input, said).await;
            return;
        }
        // A typed question is stored while the reply is already being generated.
        let mut unstored = false;
        let question = match input {
            TurnInput::Greeting => {
                let text = greeting(&plan.character, &live.overrides());
                self.reply_fixed(live, seq, &plan, &text, said).await;
                // Stored whole: a cancel from here on must not store it again as a partial.
                said.lock().expect("said lock").clear();
                self.store_message(live, "assistant", text, seq).await;
                live.set_status(seq, Status::Idle);
                return;
            }
            TurnInput::Text { text, stored } => {
                unstored = !stored;
                text
            }
            TurnInput::Audio(pcm) => match self
                .recognise(plan.asr, &plan.character.id, &pcm, plan.timeout)
                .await
            {
                Ok(text) if !text.trim().is_empty() => {
                    live.user_said(seq, &text);
                    self.store_message(live, "user", text.clone(), seq).await;
                    text
                }
                Ok(_) => {
                    self.reply_fixed(live, seq, &plan, NOT_HEARD, said).await;
                    live.set_status(seq, Status::Idle);
                    return;
                }
                Err(e) => {
                    self.fail(live, seq, &plan, ErrorCode::AsrFailed, &e, said)
                        .await;
                    return;
                }
            },
        };
        let store_question = async {
            if unstored {
                self.store_message(live, "user", question.clone(), seq)
                    .await;
            }
        };
        let (_, replied) = tokio::join!(
            store_question,
            self.reply(live, seq, &plan, &question, said)
        );
        match replied {
            Ok(text) => {
                // Stored whole, before the final (so a client that sees the final finds it in
                // the history); a cancel from here on must not store it again as a partial.
                said.lock().expect("said lock").clear();
                if !text.is_empty() {
                    self.store_message(live, "assistant", text.clone(), seq)
                        .await;
                }
                live.publish(
                    seq,
                    Event::Transcript {
                        speaker: "assistant",
                        text,
                        is_final: true,
                        turn_seq: seq,
                    },
                );
                live.set_status(seq, Status::Idle);
            }
            Err((code, e)) => self.fail(live, seq, &plan, code, &e, said).await,
        }
    }

    /// The providers and voice of the session's next turn: a client's override, else the
    /// character's choice, else the settings'. Stored ids were checked when they were stored; a
    /// client's override is checked here.
    fn plan(&self, live: &LiveSession) -> Result<Plan> {
        let character = self.character_record(&live.character_id)?;
        let settings = self.settings();
        let overrides = live.overrides();
        // The first id named, else the settings' provider of the stage.
        let chosen = |stage: Stage, ids: &[&str]| match ids.iter().find(|id| !id.is_empty()) {
            None => Ok(settings.provider(stage)),
            Some(id) => Provider::from_id(id).ok_or_else(|| {
                bad(format!(
                    "provider must be one of {}, not {id:?}",
                    Provider::ids()
                ))
            }),
        };
        let llm = chosen(
            Stage::Llm,
            &[
                overrides.provider.as_deref().unwrap_or_default(),
                &character.components.llm,
            ],
        )?;
        let asr = chosen(Stage::Asr, &[&character.components.asr])?;
        let tts = chosen(
            Stage::Tts,
            &[&character.components.tts, &character.voice_provider],
        )?;
        let voice = overrides.voice.clone().unwrap_or_else(|| {
            if character.voice_type.is_empty() {
                settings.tts.voice.clone()
            } else {
                character.voice_type.clone()
            }
        });
        Ok(Plan {
            llm,
            asr,
            tts,
            voice,
            timeout: Duration::from_millis(self.config.provider_timeout_ms),
            character,
        })
    }

    /// Generates the reply to `question`, streaming text and speech as it comes; returns the
    /// whole text.
    async fn reply(
        &self,
        live: &LiveSession,
        seq: u64,
        plan: &Plan,
        question: &str,
        said: &Arc<Mutex<String>>,
    ) -> Result<String, (ErrorCode, ProviderError)> {
        let passages = self
            .search_knowledge(&plan.character.id, question, Some(3))
            .unwrap_or_default();
        let (tx, mut rx) = mpsc::channel::<String>(64);
        // Owns the sender, so the stream ends for the speaker when generation ends.
        let generate = async move {
            let prompt = Prompt {
                question,
                passages: &passages,
                fallback: fallback(&plan.character),
            };
            let chat = || self.chat_request(live, plan, question, &passages);
            self.generate(plan.llm, prompt, chat, plan.timeout, &tx)
                .await
        };
        let speak = self.speak_stream(live, seq, plan, &mut rx, said);
        let (generated, spoken) = tokio::join!(generate, speak);
        generated.map_err(|e| (ErrorCode::LlmFailed, e))?;
        let text = spoken.map_err(|e| (ErrorCode::TtsFailed, e))?;
        Ok(text)
    }

    /// Publishes text deltas as they arrive and speaks each finished sentence while the rest
    /// still streams. Returns the whole text.
    async fn speak_stream(
        &self,
        live: &LiveSession,
        seq: u64,
        plan: &Plan,
        rx: &mut mpsc::Receiver<String>,
        said: &Arc<Mutex<String>>,
    ) -> Result<String, ProviderError> {
        let mut whole = String::new();
        let mut splitter = Sentences::default();
        let mut out = AudioOut::new(live, seq, said);
        let speaking = live.audio_wanted();
        loop {
            let delta = rx.recv().await;
            let sentences = match &delta {
                Some(d) => {
                    whole.push_str(d);
                    live.publish(
                        seq,
                        Event::Transcript {
                            speaker: "assistant",
                            text: d.clone(),
                            is_final: false,
                            turn_seq: seq,
                        },
                    );
                    if !speaking {
                        said.lock().expect("said lock").push_str(d);
                    }
                    splitter.push(d)
                }
                None => splitter.finish(),
            };
            if speaking {
                for sentence in sentences {
                    self.speak_sentence(&mut out, plan, &sentence).await?;
                }
            }
            if delta.is_none() {
                break;
            }
        }
        out.end();
        Ok(whole.trim().to_string())
    }

    /// Speaks one sentence, its audio published as soon as it can be: espeak-ng's as it writes
    /// it (it works clause by clause), a provider that answers whole (OpenAI speech) one piece
    /// of a long sentence at a time (see `clauses`), so that a long sentence starts sounding
    /// after its first clause rather than after all of it.
    async fn speak_sentence(
        &self,
        out: &mut AudioOut<'_>,
        plan: &Plan,
        sentence: &str,
    ) -> Result<(), ProviderError> {
        let pieces = if plan.tts.speaks_whole() {
            clauses(sentence)
        } else {
            vec![sentence]
        };
        for piece in pieces {
            if !out.current {
                break;
            }
            self.speak(plan.tts, piece, &plan.voice, plan.timeout, out)
                .await?;
        }
        Ok(())
    }

    /// Says a fixed line (greeting, "didn't catch that", apology) as text and, if wanted, speech.
    async fn reply_fixed(
        &self,
        live: &LiveSession,
        seq: u64,
        plan: &Plan,
        text: &str,
        said: &Arc<Mutex<String>>,
    ) {
        live.publish(
            seq,
            Event::AssistantMessage {
                text: text.to_string(),
                turn_seq: seq,
            },
        );
        if live.audio_wanted() {
            let mut out = AudioOut::new(live, seq, said);
            match self.speak_sentence(&mut out, plan, text).await {
                Ok(()) => out.end(),
                Err(e) => tracing::warn!("cannot speak a fixed line: {e}"),
            }
        }
        // The final comes last, after the audio, as for any reply.
        live.publish(
            seq,
            Event::Transcript {
                speaker: "assistant",
                text: text.to_string(),
                is_final: true,
                turn_seq: seq,
            },
        );
    }

    /// Reports a failed turn: an `error` event, a spoken apology where audio is wanted, idle.
    async fn fail(
        &self,
        live: &LiveSession,
        seq: u64,
        plan: &Plan,
        code: ErrorCode,
        e: &ProviderError,
        said: &Arc<Mutex<String>>,
    ) {
        let code = if matches!(e, ProviderError::Unavailable(_)) {
            ErrorCode::ProviderUnavailable
        } else {
            code
        };
        tracing::warn!(session = %live.id, turn = seq, ?code, "turn failed: {e}");
        live.publish(
            seq,
            Event::Error {
                message: e.to_string(),
                code,
                turn_seq: seq,
            },
        );
        self.reply_fixed(live, seq, plan, APOLOGY, said).await;
        live.set_status(seq, Status::Idle);
    }

    /// The conversation sent to a language model: persona and knowledge, recent history, the
    /// question.
    fn chat_request(
        &self,
        live: &LiveSession,
        plan: &Plan,
        question: &str,
        passages: &[SearchResult],
    ) -> ChatRequest {
        let system = instructions(live, plan, passages);
        let c = &plan.character;
        let o = live.overrides();
        let mut messages = vec![ChatMessage {
            role: "system",
            content: system,
        }];
        messages.extend(self.recent_history(&live.id, &c.id).unwrap_or_default());
        if messages
            .last()
            .is_none_or(|m| m.role != "user" || m.content != question)
        {
            messages.push(ChatMessage {
                role: "user",
                content: question.to_string(),
            });
        }
        let settings = self.settings();
        ChatRequest {
            messages,
            temperature: o.temperature.unwrap_or(settings.llm.temperature as f32),
            max_tokens: settings.llm.max_tokens,
        }
    }

    /// A turn on a provider that listens, answers and speaks by itself.
    async fn run_omni_turn(
        self: &Arc<Self>,
        live: &Arc<LiveSession>,
        seq: u64,
        plan: &Plan,
        input: TurnInput,
        said: &Arc<Mutex<String>>,
    ) {
        let (input, passages) = match input {
            TurnInput::Text { text, stored } => {
                if !stored {
                    self.store_message(live, "user", text.clone(), seq).await;
                }
                let passages = self
                    .search_knowledge(&plan.character.id, &text, Some(3))
                    .unwrap_or_default();
                (OmniInput::Text(text), passages)
            }
            TurnInput::Audio(pcm) => (OmniInput::Audio(pcm), Vec::new()),
            TurnInput::Greeting => return,
        };
        let o = live.overrides();
        let history = self
            .recent_history(&live.id, &plan.character.id)
            .unwrap_or_default()
            .into_iter()
            .map(|m| (m.role.to_string(), m.content))
            .collect();
        let ctx = OmniContext {
            instructions: instructions(live, plan, &passages),
            voice: plan.voice.clone(),
            bot_name: o
                .bot_name
                .clone()
                .unwrap_or_else(|| plan.character.name.clone()),
            temperature: o
                .temperature
                .unwrap_or(self.settings().llm.temperature as f32),
            history,
        };
        let (tx, mut rx) = mpsc::channel::<OmniEvent>(64);
        // Owns the sender, so the relay ends when the provider does.
        let ask = async move {
            self.converse(plan.llm, &input, &ctx, plan.timeout, &tx)
                .await
        };
        let relay = async {
            let mut whole = String::new();
            let mut audio_started = false;
            while let Some(event) = rx.recv().await {
                match event {
                    OmniEvent::UserText(text) if !text.is_empty() => {
                        live.user_said(seq, &text);
                        self.store_message(live, "user", text, seq).await;
                    }
                    OmniEvent::UserText(_) => {}
                    OmniEvent::Delta(d) => {
                        whole.push_str(&d);
                        said.lock().expect("said lock").push_str(&d);
                        live.publish(
                            seq,
                            Event::Transcript {
                                speaker: "assistant",
                                text: d,
                                is_final: false,
                                turn_seq: seq,
                            },
                        );
                    }
                    OmniEvent::Audio(pcm) if live.audio_wanted() => {
                        if !audio_started {
                            audio_started = true;
                            live.set_status(seq, Status::Speaking);
                            live.publish(seq, Event::AudioStart { turn_seq: seq });
                        }
                        for chunk in pcm.chunks(AUDIO_CHUNK_SAMPLES) {
                            live.publish(
                                seq,
                                Event::Audio {
                                    pcm: Bytes::from(audio::samples_to_le(chunk)),
                                    turn_seq: seq,
                                },
                            );
                        }
                    }
                    OmniEvent::Audio(_) => {}
                }
            }
            if audio_started {
                live.publish(seq, Event::AudioEnd { turn_seq: seq });
            }
            whole.trim().to_string()
        };
        let (asked, text) = tokio::join!(ask, relay);
        match asked {
            Ok(()) => {
                live.publish(
                    seq,
                    Event::Transcript {
                        speaker: "assistant",
                        text: text.clone(),
                        is_final: true,
                        turn_seq: seq,
                    },
                );
                // Stored whole: a cancel from here on must not store it again as a partial.
                said.lock().expect("said lock").clear();
                if !text.is_empty() {
                    self.store_message(live, "assistant", text, seq).await;
                }
                live.set_status(seq, Status::Idle);
            }
            Err(e) => {
                self.fail(live, seq, plan, ErrorCode::LlmFailed, &e, said)
                    .await
            }
        }
    }

    /// The session's latest messages, oldest first, within the configured bounds.
    fn recent_history(&self, session_id: &str, character_id: &str) -> Result<Vec<ChatMessage>> {
        let tx = self.store.read()?;
        let table = tx.open_table(MESSAGES)?;
        let mut out = Vec::new();
        let mut chars = 0;
        for item in table
            .range((character_id, 0)..=(character_id, u64::MAX))?
            .rev()
        {
            let m: Message = store::from_json(item?.1.value())?;
            if m.session_id != session_id {
                continue;
            }
            chars += m.content.len();
            if out.len() >= self.config.history_messages || chars > HISTORY_MAX_CHARS {
                break;
            }
            out.push(ChatMessage {
                role: if m.role == "user" {
                    "user"
                } else {
                    "assistant"
                },
                content: m.content,
            });
        }
        out.reverse();
        Ok(out)
    }

    /// Stores a message of turn `seq` (on the blocking pool; a deleted session stores nothing).
    async fn store_message(
        self: &Arc<Self>,
        live: &LiveSession,
        role: &'static str,
        text: String,
        seq: u64,
    ) {
        let engine = self.clone();
        let id = live.id.clone();
        let stored =
            tokio::task::spawn_blocking(move || engine.record_message(&id, role, &text, seq)).await;
        if let Ok(Err(e)) = stored {
            tracing::warn!(session = %live.id, "cannot store a {role} message: {e}");
        }
    }

    /// Appends to the history of a session and advances its stored turn number.
    pub(super) fn record_message(
        &self,
        session_id: &str,
        role: &str,
        text: &str,
        seq: u64,
    ) -> Result<()> {
        let tx = self.store.write()?;
        {
            let mut sessions = tx.open_table(SESSIONS)?;
            let Some(mut s) = store::get::<Session>(&sessions, session_id)? else {
                return Ok(());
            };
            s.turn_seq = s.turn_seq.max(seq);
            s.last_active_at = store::now();
            sessions.insert(session_id, store::to_json(&s).as_slice())?;
            append_message(&tx, &s.character_id, session_id, role, text, seq)?;
        }
        tx.commit()?;
        Ok(())
    }

    fn save_turn_seq(&self, session_id: &str, seq: u64) {
        let save = || -> Result<()> {
            let tx = self.store.write()?;
            {
                let mut sessions = tx.open_table(SESSIONS)?;
                let Some(mut s) = store::get::<Session>(&sessions, session_id)? else {
                    return Ok(());
                };
                s.turn_seq = s.turn_seq.max(seq);
                sessions.insert(session_id, store::to_json(&s).as_slice())?;
            }
            tx.commit()?;
            Ok(())
        };
        if let Err(e) = save() {
            tracing::warn!(session = %session_id, "cannot store the turn number: {e}");
        }
    }
}

/// The system prompt: the character's persona (with a client's overrides), how to speak, and
/// the knowledge passages retrieved for the question.
fn instructions(live: &LiveSession, plan: &Plan, passages: &[SearchResult]) -> String {
    let c = &plan.character;
    let o = live.overrides();
    let name = o.bot_name.as_deref().unwrap_or(&c.name);
    let mut system = format!("You are {name}, speaking aloud to a visitor at a kiosk.");
    for (label, value) in [
        ("About you", c.description.as_str()),
        ("Personality", c.personality.as_str()),
        (
            "Speaking style",
            o.speaking_style.as_deref().unwrap_or(&c.speaking_style),
        ),
        (
            "Preferred opening",
            o.welcome_message.as_deref().unwrap_or(&c.welcome_message),
        ),
    ] {
        if !value.trim().is_empty() {
            system.push_str(&format!("\n{label}: {}", value.trim()));
        }
    }
    let prompt = o.system_prompt.as_deref().unwrap_or(&c.system_prompt);
    if !prompt.trim().is_empty() {
        system.push_str("\n\n");
        system.push_str(prompt.trim());
    }
    system.push_str("\n\nAnswer in a few short spoken sentences, without lists or markup. If you do not know, say so.");
    if !passages.is_empty() {
        system.push_str("\n\nKnowledge you may use:");
        for (i, p) in passages.iter().enumerate() {
            system.push_str(&format!("\n[{}] ({}) {}", i + 1, p.title, p.content));
        }
    }
    system
}

fn greeting(c: &Character, o: &super::live::Overrides) -> String {
    let welcome = o.welcome_message.as_deref().unwrap_or(&c.welcome_message);
    if welcome.trim().is_empty() {
        format!(
            "Hello! I'm {}. What would you like to know?",
            o.bot_name.as_deref().unwrap_or(&c.name)
        )
    } else {
        welcome.trim().to_string()
    }
}

/// What the offline engine says when its knowledge has nothing relevant.
fn fallback(c: &Character) -> String {
    format!(
        "I'm sorry, I don't know about that. I'm {}; ask me about the exhibition and what I know of it.",
        c.name
    )
}

/// A turn's reply audio on its way to the watchers: the speaking status and `audio_start` with
/// the first samples, then chunks of `AUDIO_CHUNK_SAMPLES` as the samples are synthesised, and
/// `audio_end` once after the last.
struct AudioOut<'a> {
    live: &'a LiveSession,
    seq: u64,
    /// What has been spoken so far, stored if the turn is cut short.
    said: &'a Mutex<String>,
    started: bool,
    pending: Vec<i16>,
    /// Whether the turn is still the current one (it may publish).
    current: bool,
}

impl<'a> AudioOut<'a> {
    fn new(live: &'a LiveSession, seq: u64, said: &'a Mutex<String>) -> AudioOut<'a> {
        AudioOut {
            live,
            seq,
            said,
            started: false,
            pending: Vec::with_capacity(AUDIO_CHUNK_SAMPLES),
            current: true,
        }
    }

    fn send(&mut self, chunk: &[i16]) {
        self.current = self.current
            && self.live.publish(
                self.seq,
                Event::Audio {
                    pcm: Bytes::from(audio::samples_to_le(chunk)),
                    turn_seq: self.seq,
                },
            );
    }

    /// The reply's audio is over.
    fn end(&self) {
        if self.started {
            self.live
                .publish(self.seq, Event::AudioEnd { turn_seq: self.seq });
        }
    }
}

impl Speech for AudioOut<'_> {
    /// The speech of `text` starts: the turn is speaking, and `text` counts as said.
    fn begin(&mut self, text: &str) {
        if !self.started {
            self.started = true;
            self.live.set_status(self.seq, Status::Speaking);
            self.live
                .publish(self.seq, Event::AudioStart { turn_seq: self.seq });
        }
        let mut s = self.said.lock().expect("said lock");
        if !s.is_empty() {
            s.push(' ');
        }
        s.push_str(text.trim());
    }

    /// Publishes every whole chunk; false once the turn may publish no more.
    fn push(&mut self, samples: &[i16]) -> bool {
        self.pending.extend_from_slice(samples);
        let whole = self.pending.len() / AUDIO_CHUNK_SAMPLES * AUDIO_CHUNK_SAMPLES;
        let pending = std::mem::take(&mut self.pending);
        for chunk in pending[..whole].chunks(AUDIO_CHUNK_SAMPLES) {
            self.send(chunk);
        }
        if self.current {
            self.pending.extend_from_slice(&pending[whole..]);
        }
        self.current
    }

    /// Publishes what is left (the end of a sentence).
    fn flush(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        if !pending.is_empty() {
            self.send(&pending);
        }
    }
}

/// Cuts a long sentence into pieces synthesised one after the other, at clause boundaries (a
/// comma, semicolon or colon followed by a space, a dash followed by one (a hyphen only between
/// spaces); before " and " or " but " only where there is none): the first piece short, so that it sounds soon, the later
/// ones longer, as they are synthesised while the earlier ones play. A sentence of up to
/// `SPLIT_ABOVE` characters is one piece; numbers ("12,000", "3.5") are never cut. The pieces,
/// joined with spaces, are the sentence.
fn clauses(sentence: &str) -> Vec<&str> {
    /// Sentences up to this many characters are spoken whole.
    const SPLIT_ABOVE: usize = 70;
    /// Bounds of the first piece and of the later ones, in characters.
    const FIRST: (usize, usize) = (20, 60);
    const LATER: (usize, usize) = (40, 160);
    /// The last piece is never shorter than this.
    const MIN_TAIL: usize = 20;

    let text = sentence.trim();
    let chars = |s: &str| s.chars().count();
    if chars(text) <= SPLIT_ABOVE {
        return if text.is_empty() { vec![] } else { vec![text] };
    }
    // Where a piece may start (byte offsets), and whether the cut is at punctuation.
    let mut cuts: Vec<(usize, bool)> = Vec::new();
    let mut it = text.char_indices().peekable();
    let mut prev_space = false;
    while let Some((i, c)) = it.next() {
        let space_after = it.peek().is_some_and(|&(_, n)| n.is_whitespace());
        let strong = matches!(c, '，' | '；' | '：')
            || (space_after
                && (matches!(c, ',' | ';' | ':' | '—' | '–') || (c == '-' && prev_space)));
        if strong {
            let rest = text[i + c.len_utf8()..].trim_start();
            if !rest.is_empty() {
                cuts.push((text.len() - rest.len(), true));
            }
        } else if prev_space && c.is_alphabetic() {
            let word = text[i..]
                .split(|ch: char| !ch.is_alphabetic())
                .next()
                .unwrap_or("");
            if (word.eq_ignore_ascii_case("and") || word.eq_ignore_ascii_case("but"))
                && text[i + word.len()..].starts_with(char::is_whitespace)
                && cuts.last().is_none_or(|&(at, _)| at != i)
            {
                cuts.push((i, false));
            }
        }
        prev_space = c.is_whitespace();
    }
    let mut pieces = Vec::new();
    let mut start = 0;
    loop {
        let rest = &text[start..];
        let first = pieces.is_empty();
        let (min, max) = if first { FIRST } else { LATER };
        if !first && chars(rest) <= max {
            pieces.push(rest);
            break;
        }
        let len = |at: usize| chars(text[start..at].trim_end());
        let candidates = || {
            cuts.iter()
                .copied()
                .filter(|&(at, _)| at > start && len(at) >= min && chars(&text[at..]) >= MIN_TAIL)
        };
        let within = |strong: bool| {
            let mut c = candidates().filter(|&(at, s)| s == strong && len(at) <= max);
            // The first piece as short as it may be, the later ones as long.
            if first { c.next() } else { c.next_back() }
        };
        let beyond = |strong: bool| candidates().find(|&(_, s)| s == strong);
        let Some((at, _)) = within(true)
            .or_else(|| within(false))
            .or_else(|| beyond(true))
            .or_else(|| beyond(false))
        else {
            pieces.push(rest);
            break;
        };
        pieces.push(text[start..at].trim_end());
        start = at;
    }
    pieces
}

/// Cuts streamed text into sentences, so speech can start before the reply is complete.
#[derive(Default)]
struct Sentences {
    buf: String,
}

impl Sentences {
    /// Shortest piece worth synthesising on its own, in characters.
    const MIN_CHARS: usize = 12;

    fn push(&mut self, delta: &str) -> Vec<String> {
        self.buf.push_str(delta);
        let mut out = Vec::new();
        loop {
            let cut = self.buf.char_indices().find_map(|(i, c)| {
                let end = i + c.len_utf8();
                let boundary = matches!(c, '。' | '！' | '？' | '\n')
                    || (matches!(c, '.' | '!' | '?' | ';' | ':')
                        && self.buf[end..].starts_with(char::is_whitespace));
                (boundary && self.buf[..end].trim().chars().count() >= Self::MIN_CHARS)
                    .then_some(end)
            });
            let Some(end) = cut else { break };
            let sentence: String = self.buf.drain(..end).collect();
            out.push(sentence.trim().to_string());
        }
        out
    }

    fn finish(&mut self) -> Vec<String> {
        let rest = std::mem::take(&mut self.buf);
        let rest = rest.trim();
        if rest.is_empty() {
            Vec::new()
        } else {
            vec![rest.to_string()]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Sentences, clauses};

    const TICKETS: &str = "Tickets cost 12 euros for adults, 8 euros for students and 6 euros for \
        seniors, and children under twelve enter free of charge on every day of the week.";

    /// The pieces, put back together, are the sentence (up to whitespace).
    fn rejoin(pieces: &[&str]) -> String {
        pieces
            .join(" ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn words(s: &str) -> String {
        s.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn long_sentences_are_spoken_clause_by_clause() {
        assert_eq!(
            clauses(TICKETS),
            [
                "Tickets cost 12 euros for adults,",
                "8 euros for students and 6 euros for seniors, and children under twelve enter \
                 free of charge on every day of the week."
            ]
        );
        // Later pieces are longer than the first; each ends at a clause.
        let long = "The harbour museum, which opened in 1901, shows ship models, maps and \
            instruments in the old customs house; its lighthouse lens, made in Paris in 1872, \
            stands in the main hall, where visitors can walk around it, look through it and \
            read how it turned, night after night, for almost a hundred years, guiding ships \
            past the rocks at the mouth of the harbour.";
        let pieces = clauses(long);
        assert_eq!(rejoin(&pieces), words(long));
        assert!(pieces.len() >= 3, "{pieces:?}");
        assert_eq!(pieces[0], "The harbour museum, which opened in 1901,");
        for p in &pieces[1..pieces.len() - 1] {
            assert!(
                (41..=160).contains(&p.chars().count()),
                "later pieces are longer: {pieces:?}"
            );
        }
        for p in &pieces[..pieces.len() - 1] {
            assert!(p.ends_with([',', ';']), "cut at a clause: {pieces:?}");
        }
    }

    #[test]
    fn a_clause_without_punctuation_is_cut_before_and_or_but() {
        let s = "The keeper counted every ship that passed the harbour every night for forty \
            years and wrote each of them down in a thick leather book.";
        let pieces = clauses(s);
        assert_eq!(pieces.len(), 2, "{pieces:?}");
        assert!(pieces[1].starts_with("and wrote"), "{pieces:?}");
        assert_eq!(rejoin(&pieces), words(s));
        // A comma wins over a conjunction.
        let s = "The cafe on the first floor serves soup and sandwiches, cakes and coffee, \
            and it is open whenever the museum is.";
        assert_eq!(
            clauses(s)[0],
            "The cafe on the first floor serves soup and sandwiches,"
        );
        // "and" inside a word is no cut ("Andrew", "band", "butter").
        let s = "Andrew's brass band plays every Sunday morning on the butter market square \
            in front of the old town hall";
        assert_eq!(clauses(s), [s]);
    }

    #[test]
    fn short_sentences_and_numbers_stay_whole() {
        for s in [
            "We close at 6 pm.",
            "The museum closes at 6 pm on weekdays, and at 8 pm on weekends.",
            "",
        ] {
            let expected: Vec<&str> = if s.is_empty() { vec![] } else { vec![s] };
            assert_eq!(clauses(s), expected);
        }
        let s = "The archive holds 12,000 letters and 1,250 maps on 3.5 kilometres of \
            shelves: opening hours are 9:30 to 17:00, and entry costs 4,50 euros for everyone.";
        let pieces = clauses(s);
        assert!(pieces.len() > 1, "{pieces:?}");
        assert_eq!(rejoin(&pieces), words(s));
        for number in ["12,000", "1,250", "3.5", "9:30", "17:00", "4,50"] {
            assert!(
                pieces.iter().any(|p| p.contains(number)),
                "{number} is cut: {pieces:?}"
            );
        }
        // No last piece too short to sound natural.
        let s =
            "Tickets cost twelve euros for adults and eight euros for students on weekdays, too.";
        assert!(
            clauses(s).iter().all(|p| p.chars().count() >= 20),
            "{:?}",
            clauses(s)
        );
    }

    #[test]
    fn pieces_always_make_up_the_sentence() {
        let samples = [
            TICKETS,
            "  Spaces   around,   and   between  words  are  fine,  and  trailing  ones  too,  \
               even  with  many  clauses  in  a  row,  like  this  one.  ",
            "A dash — like this one — is a pause, and so is a hyphen - between spaces - but a \
             well-known compound is not, nor are long, long, long, long, long, long lists.",
            "博物馆早上九点开门，晚上六点关门，周五开放到晚上八点，儿童免费入场，成人门票十二欧元，学生八欧元，老人六欧元，欢迎大家来参观我们的灯塔展览。",
            "Supercalifragilisticexpialidociousandmore words that go on and on without any \
             punctuation whatsoever until the very end",
        ];
        for s in samples {
            let pieces = clauses(s);
            assert!(!pieces.is_empty());
            assert!(
                pieces.iter().all(|p| !p.is_empty() && *p == p.trim()),
                "{pieces:?}"
            );
            assert_eq!(
                rejoin(&pieces).replace(' ', ""),
                words(s).replace(' ', ""),
                "{pieces:?}"
            );
        }
    }

    #[test]
    fn sentences_are_cut_as_the_text_streams() {
        let mut s = Sentences::default();
        assert!(s.push("The museum closes").is_empty());
        assert!(
            s.push(" at 6 pm.").is_empty(),
            "no boundary until the next char proves it"
        );
        assert_eq!(
            s.push(" On Fridays it stays"),
            ["The museum closes at 6 pm."]
        );
        assert_eq!(
            s.push(" open until 8. Ok."),
            ["On Fridays it stays open until 8."]
        );
        assert_eq!(s.finish(), ["Ok."]);
        assert!(s.finish().is_empty());
    }

    #[test]
    fn numbers_and_short_pieces_do_not_split() {
        let mut s = Sentences::default();
        assert!(s.push("It costs 3.50 euros. ").len() == 1);
        let mut s = Sentences::default();
        assert_eq!(
            s.push("博物馆六点关门。明天见。"),
            ["博物馆六点关门。明天见。"]
        );
    }
}
