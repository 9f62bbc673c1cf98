//! One conversation turn, whichever door it came in by: user input (text, or speech that is
//! recognised) -> knowledge retrieval -> reply streamed as text deltas -> speech synthesised
//! sentence by sentence while the reply still streams -> audio to every watcher. An omni
//! provider replaces recognition, reply and speech in one (`omni`); the others run them as
//! separate stages (`standard`).
//!
//! A turn runs as one task. A newer turn, an interrupt or the session's end cancels it: the
//! task's future is dropped, which aborts its provider requests and kills its helper processes,
//! and the live session refuses anything it still tries to publish. What was said before the cut
//! is stored as the assistant's message.

mod ask;
mod audio_out;
mod omni;
mod recorded;
mod sentences;
mod standard;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::Engine;
use super::error::{Result, bad};
use super::history::Mark;
use super::knowledge::SearchResult;
use super::language::{Language, Phrase};
use super::live::{ErrorCode, Event, LiveSession, Overrides, Status};
use super::metrics::Outcome;
use super::providers::{
    Choice, Foreign, NOT_ON_THIS_KIOSK, Provider, ProviderError, Stage, StreamBounds,
};
use super::voice::{Voice, offline_listing, offline_voices};
use crate::store::records::Character;
use audio_out::AudioOut;

pub use ask::Asked;

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
    voice: Voice,
    timeout: Duration,
    /// Stages whose chosen provider this kiosk does not have (their field above is then the
    /// offline engine, which says so).
    missing: Vec<(Stage, Foreign)>,
    /// Bounds of a streamed reply.
    stream: StreamBounds,
    /// The visit's language (the museum's default until chosen or heard), and that default.
    language: Language,
    default_language: Language,
    /// Whether the museum offers more than one language (a language model is then told which
    /// to answer in).
    several_languages: bool,
}

/// A turn in progress: the session it publishes to, its number, its plan, and what the
/// assistant has said so far (stored as a partial message if the turn is cut short).
struct Turn {
    engine: Arc<Engine>,
    live: Arc<LiveSession>,
    seq: u64,
    plan: Plan,
    said: Mutex<String>,
    /// A message of this turn could not be stored (reported once).
    unsaved: AtomicBool,
    /// When a spoken question ended (the turn began), until its reply's first audio is timed.
    spoken: Mutex<Option<Instant>>,
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
        // While the user speaks, the offline recogniser's model is made ready: after a change
        // of knowledge, building it would otherwise delay the reply by seconds on a small board.
        let engine = self.clone();
        let live = live.clone();
        tokio::task::spawn_blocking(move || {
            if engine.plan(&live).is_ok_and(|p| p.asr.recognises_offline()) {
                let _ = engine.recogniser_model(&live.character_id);
            }
        });
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
        let spoken = matches!(input, TurnInput::Audio(_)).then(Instant::now);
        tokio::spawn(async move {
            let plan = match engine.plan(&live) {
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
            let turn = Turn {
                engine,
                live,
                seq,
                plan,
                said: Mutex::new(String::new()),
                unsaved: AtomicBool::new(false),
                spoken: Mutex::new(spoken),
            };
            let mut turn = turn;
            let finished = tokio::select! {
                biased;
                _ = cancel.cancelled() => false,
                _ = turn.run(input) => true,
            };
            if !finished {
                let partial = turn.said.lock().expect("said lock").trim().to_string();
                if !partial.is_empty() {
                    turn.store("assistant", partial).await;
                }
            }
        });
    }

    /// The providers and voice of the session's next turn: a client's override, else the
    /// character's choice, else the settings'. Stored ids were checked when they were stored; a
    /// client's override is checked here.
    fn plan(&self, live: &LiveSession) -> Result<Plan> {
        let character = self.character_record(&live.character_id)?;
        let overrides = live.overrides();
        let (llm, asr, tts, missing) = self.providers(&character, &overrides)?;
        let speaker = speaker(llm, tts);
        let settings = self.settings();
        let default_language = settings.default_language();
        let language = live.language().unwrap_or_else(|| default_language.clone());
        let voice = match overrides.voice {
            Some(v) if v.provider() == speaker => v,
            _ => {
                let stored = if !language.same_as(&default_language)
                    && let Some(v) = voice_of_language(&character, speaker, &language)
                {
                    v
                } else if character.voice_type.is_empty() {
                    settings.tts.voice.clone()
                } else {
                    character.voice_type.clone()
                };
                Voice::parse(speaker, &stored).unwrap_or_else(|e| {
                    // Without espeak-ng there is no offline voice at all (and no speech).
                    if speaker != Provider::Local || !offline_voices().is_empty() {
                        tracing::warn!(
                            character = %character.id,
                            "the stored voice is not one of {speaker}'s ({e}); its default voice speaks"
                        );
                    }
                    Voice::default_of(speaker)
                })
            }
        };
        Ok(Plan {
            llm,
            asr,
            tts,
            voice,
            timeout: Duration::from_millis(self.config.providers.timeout_ms),
            stream: self.stream_bounds(),
            character,
            missing,
            several_languages: settings.languages().len() > 1,
            language,
            default_language,
        })
    }

    /// The providers of a turn (llm, asr, tts) and the stages whose chosen provider this kiosk
    /// does not have.
    #[allow(clippy::type_complexity)]
    fn providers(
        &self,
        character: &Character,
        overrides: &Overrides,
    ) -> Result<(Provider, Provider, Provider, Vec<(Stage, Foreign)>)> {
        let mut missing = Vec::new();
        // The first id named, else the settings' provider of the stage; one this kiosk does
        // not have is noted, and the turn says so.
        let mut chosen = |stage: Stage, ids: &[&str]| -> Result<Provider> {
            Ok(match self.provider_for(stage, ids)? {
                Choice::Kiosk(p) => p,
                Choice::Foreign(f) => {
                    missing.push((stage, f));
                    Provider::Local
                }
            })
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
        Ok((llm, asr, tts, missing))
    }

    /// Checks a client's voice for a session's turns, with `overrides` (the provider a client
    /// chose included) in force: a voice of the provider that will speak.
    pub fn session_voice(
        &self,
        live: &LiveSession,
        overrides: &Overrides,
        name: &str,
    ) -> Result<Voice> {
        let character = self.character_record(&live.character_id)?;
        let (llm, _, tts, _) = self.providers(&character, overrides)?;
        Voice::parse(speaker(llm, tts), name)
    }
}

/// The character's voice for `language` (not the default): the one staff chose for it, else,
/// for the offline engine, espeak-ng's voice of that language.
fn voice_of_language(c: &Character, speaker: Provider, language: &Language) -> Option<String> {
    let chosen = c.voices.get(language.tag()).or_else(|| {
        c.voices.iter().find_map(|(tag, v)| {
            Language::parse(tag)
                .filter(|l| l.same_as(language))
                .map(|_| v)
        })
    });
    if let Some(v) = chosen {
        return Some(v.clone());
    }
    if speaker != Provider::Local {
        return None;
    }
    let voices = offline_listing();
    voices
        .iter()
        .find(|v| v.language == language.tag().to_ascii_lowercase())
        .or_else(|| voices.iter().find(|v| v.language == language.primary()))
        .or_else(|| {
            voices
                .iter()
                .find(|v| v.language.starts_with(&format!("{}-", language.primary())))
        })
        .map(|v| v.language.clone())
}

/// The provider whose voice speaks a turn's reply: an omni provider speaks for itself.
fn speaker(llm: Provider, tts: Provider) -> Provider {
    if llm.is_omni() { llm } else { tts }
}

impl Engine {
    /// How long a streamed reply may keep a turn (or an admin's question) waiting.
    fn stream_bounds(&self) -> StreamBounds {
        let ms = |bound: Option<u64>| {
            Duration::from_millis(bound.unwrap_or(self.config.providers.timeout_ms))
        };
        StreamBounds {
            first_byte: ms(self.config.providers.first_byte_timeout_ms),
            between_chunks: ms(self.config.providers.chunk_timeout_ms),
        }
    }

    /// The provider of `stage`: the first id named, else the settings' provider of the stage.
    fn provider_for(&self, stage: Stage, ids: &[&str]) -> Result<Choice> {
        match ids.iter().find(|id| !id.is_empty()) {
            None => Ok(self.settings().provider(stage)),
            Some(id) => Choice::parse(id).ok_or_else(|| {
                bad(format!(
                    "provider must be one of {}, not {id:?}",
                    Provider::ids()
                ))
            }),
        }
    }
}

impl Turn {
    /// The kiosk's line `phrase` in the visit's language, naming the character.
    fn say(&self, phrase: Phrase) -> String {
        let plan = &self.plan;
        let name = self
            .live
            .overrides()
            .bot_name
            .unwrap_or_else(|| plan.character.name.clone());
        self.engine
            .settings()
            .line(&plan.language, phrase)
            .replace("{name}", &name)
    }

    /// The recogniser heard the visit's language: it is the visit's from now on (one of the
    /// museum's; the default stays when it heard another), and this turn replies in it.
    async fn heard_language(&mut self, heard: Option<Language>) {
        let Some(heard) = heard else { return };
        if self.live.language().is_some() || heard.same_as(&self.plan.language) {
            return;
        }
        let settings = self.engine.settings();
        let Some(offered) = settings
            .languages()
            .iter()
            .find(|l| l.same_as(&heard))
            .cloned()
        else {
            return;
        };
        let (engine, live) = (self.engine.clone(), self.live.clone());
        let set = tokio::task::spawn_blocking(move || {
            engine.set_visit_language(&live, &offered)?;
            engine.plan(&live)
        })
        .await;
        match set {
            Ok(Ok(plan)) => self.plan = plan,
            Ok(Err(e)) => {
                tracing::warn!(session = %self.live.id, "the language heard is not kept: {e}")
            }
            Err(_) => {}
        }
    }

    /// The turn in order: recognise (or take the text), reply, store both sides of it.
    async fn run(&mut self, input: TurnInput) {
        self.status(Status::Processing);
        if let Some((stage, foreign)) = self.missing_for(&input) {
            if let TurnInput::Text {
                text,
                stored: false,
            } = input
            {
                self.store("user", text).await;
            }
            self.not_on_this_kiosk(stage, foreign).await;
            return;
        }
        if self.plan.llm.is_omni() && !matches!(input, TurnInput::Greeting) {
            self.run_omni(input).await;
            return;
        }
        // A typed question is stored while the reply is already being generated.
        let mut unstored = false;
        // How sure the recogniser was of each word; nothing for typed text.
        let mut sure = Vec::new();
        let question = match input {
            TurnInput::Greeting => {
                let text = if self.plan.language.same_as(&self.plan.default_language) {
                    greeting(&self.plan.character, &self.live.overrides())
                } else {
                    self.say(Phrase::Greeting)
                };
                self.reply_fixed(&text).await;
                // Stored whole: a cancel from here on must not store it again as a partial.
                self.said_stored();
                self.store("assistant", text).await;
                self.status(Status::Idle);
                return;
            }
            TurnInput::Text { text, stored } => {
                unstored = !stored;
                text
            }
            TurnInput::Audio(_)
                if self.plan.asr.recognises_offline()
                    && !self.plan.language.same_as(&Language::english()) =>
            {
                // The offline recogniser knows English words only: it says so, rather than
                // guess English words into another language's speech.
                let line = self.say(Phrase::HearsEnglishOnly);
                self.reply_fixed(&line).await;
                self.status(Status::Idle);
                return;
            }
            TurnInput::Audio(pcm) => {
                let plan = &self.plan;
                let language = self.live.language();
                let began = Instant::now();
                let heard = self
                    .engine
                    .recognise(
                        plan.asr,
                        &self.live.character_id,
                        &pcm,
                        plan.timeout,
                        language.as_ref(),
                    )
                    .await;
                if let Ok(heard) = &heard {
                    self.engine.metrics.recognised(began.elapsed(), &heard.sure);
                }
                match heard {
                    Ok(heard) if !heard.text.trim().is_empty() => {
                        self.heard_language(heard.language).await;
                        self.live.user_said(self.seq, &heard.text);
                        self.store_marked("user", heard.text.clone(), Mark::Spoken)
                            .await;
                        sure = heard.sure;
                        heard.text
                    }
                    Ok(_) => {
                        let line = self.say(Phrase::NotHeard);
                        self.reply_fixed(&line).await;
                        self.status(Status::Idle);
                        return;
                    }
                    Err(e) => {
                        self.fail(ErrorCode::AsrFailed, &e).await;
                        return;
                    }
                }
            }
        };
        let store_question = async {
            if unstored {
                self.store("user", question.clone()).await;
            }
        };
        if let Some(recorded) = self.recorded(&question).await {
            let (_, text) = tokio::join!(store_question, self.play_recorded(recorded));
            self.replied(text, true).await;
            return;
        }
        let (_, replied) = tokio::join!(store_question, self.reply(&question, &sure));
        match replied {
            Ok((text, matched)) => self.replied(text, matched).await,
            Err((code, e)) => self.fail(code, &e).await,
        }
    }

    /// The reply is over: stored whole, before the final (so a client that sees the final finds
    /// it in the history; a cancel from here on must not store it again as a partial), then the
    /// final, then idle.
    async fn replied(&self, text: String, matched: bool) {
        self.said_stored();
        if !self.live.staff {
            self.engine.metrics.answer(if matched {
                Outcome::Answered
            } else {
                Outcome::Unanswered
            });
        }
        if !text.is_empty() {
            self.store_reply(text.clone(), matched).await;
        }
        self.publish(Event::Transcript {
            speaker: "assistant",
            text,
            is_final: true,
            turn_seq: self.seq,
        });
        self.status(Status::Idle);
    }

    /// The first stage this input needs whose provider this kiosk does not have.
    fn missing_for(&self, input: &TurnInput) -> Option<(Stage, Foreign)> {
        let needs: &[Stage] = match input {
            TurnInput::Greeting => &[Stage::Tts],
            TurnInput::Text { .. } => &[Stage::Llm, Stage::Tts],
            TurnInput::Audio(_) => &[Stage::Llm, Stage::Asr, Stage::Tts],
        };
        let missing = &self.plan.missing;
        needs
            .iter()
            .find_map(|need| missing.iter().find(|(stage, _)| stage == need).copied())
    }

    /// A turn that needs a provider this kiosk does not have: an `error` event naming it, and
    /// the character says so (in the offline voice), instead of failing silently.
    async fn not_on_this_kiosk(&self, stage: Stage, foreign: Foreign) {
        self.publish(Event::Error {
            message: format!(
                "{} provider {} {NOT_ON_THIS_KIOSK}",
                stage.name(),
                foreign.id()
            ),
            code: ErrorCode::ProviderUnavailable,
            turn_seq: self.seq,
        });
        let part = match stage {
            Stage::Llm => "brain",
            Stage::Asr => "hearing",
            Stage::Tts => "voice",
        };
        let line = format!("I'm sorry, this character's {part} {NOT_ON_THIS_KIOSK}.");
        self.reply_fixed(&line).await;
        self.said_stored();
        self.store("assistant", line).await;
        self.status(Status::Idle);
    }

    /// Publishes an event of this turn, if it is still the current one.
    fn publish(&self, event: Event) -> bool {
        self.live.publish(self.seq, event)
    }

    fn status(&self, status: Status) {
        self.live.set_status(self.seq, status);
    }

    /// Stores a message of this turn. A turn whose history cannot be written (a full data
    /// partition) still speaks; it logs its first failure only.
    async fn store(&self, role: &'static str, text: String) {
        self.store_marked(role, text, Mark::Plain).await;
    }

    /// Stores the reply, marked when the knowledge did not answer its question.
    async fn store_reply(&self, text: String, matched: bool) {
        let mark = if matched {
            Mark::Plain
        } else {
            Mark::Unmatched
        };
        self.store_marked("assistant", text, mark).await;
    }

    async fn store_marked(&self, role: &'static str, text: String, mark: Mark) {
        let stored = self
            .engine
            .store_message(&self.live, role, text, self.seq, mark)
            .await;
        if let Err(e) = stored
            && !self.unsaved.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(session = %self.live.id, turn = self.seq, "the turn's history is not stored: {e}");
        }
    }

    /// The reply's first audio: timed once, from the end of a spoken question.
    fn first_audio(&self) {
        let spoken = self.spoken.lock().expect("spoken lock").take();
        if let Some(began) = spoken {
            self.engine.metrics.first_audio(began.elapsed());
        }
    }

    /// A sentence was spoken: it counts as said.
    fn said_sentence(&self, text: &str) {
        let mut s = self.said.lock().expect("said lock");
        if !s.is_empty() {
            s.push(' ');
        }
        s.push_str(text.trim());
    }

    /// A piece of the reply's text reached the watchers without speech of its own.
    fn said_delta(&self, delta: &str) {
        self.said.lock().expect("said lock").push_str(delta);
    }

    /// The reply was stored whole: nothing is left to store if the turn is cut now.
    fn said_stored(&self) {
        self.said.lock().expect("said lock").clear();
    }

    /// Says a fixed line (greeting, "didn't catch that", apology) as text and, if wanted, speech.
    async fn reply_fixed(&self, text: &str) {
        self.publish(Event::AssistantMessage {
            text: text.to_string(),
            turn_seq: self.seq,
        });
        if self.live.audio_wanted() {
            let mut out = AudioOut::new(self);
            match self.speak_sentence(&mut out, text).await {
                Ok(()) => out.end(),
                Err(e) => tracing::warn!("cannot speak a fixed line: {e}"),
            }
        }
        // The final comes last, after the audio, as for any reply.
        self.publish(Event::Transcript {
            speaker: "assistant",
            text: text.to_string(),
            is_final: true,
            turn_seq: self.seq,
        });
    }

    /// Reports a failed turn: an `error` event, a spoken apology where audio is wanted, idle.
    async fn fail(&self, code: ErrorCode, e: &ProviderError) {
        let code = if matches!(e, ProviderError::Unavailable(_)) {
            ErrorCode::ProviderUnavailable
        } else {
            code
        };
        // What went wrong is for the log: a provider's answer or a helper's messages may
        // quote anything (a file it read, a key it was sent); watchers get a fixed line.
        tracing::warn!(session = %self.live.id, turn = self.seq, ?code, "turn failed: {e}");
        self.publish(Event::Error {
            message: failure_message(code, e).into(),
            code,
            turn_seq: self.seq,
        });
        let line = self.say(Phrase::Apology);
        self.reply_fixed(&line).await;
        self.status(Status::Idle);
    }

    fn instructions(&self, passages: &[SearchResult]) -> String {
        let plan = &self.plan;
        let answer_in = (plan.several_languages || !plan.language.same_as(&Language::english()))
            .then_some(&plan.language);
        instructions(&plan.character, &self.live.overrides(), passages, answer_in)
    }
}

/// What watchers are told of a failed turn: fixed text by stage and kind, never the provider's.
fn failure_message(code: ErrorCode, e: &ProviderError) -> &'static str {
    match (code, e) {
        (_, ProviderError::Timeout(_)) => "the provider did not answer in time",
        (ErrorCode::ProviderUnavailable, _) => "the provider cannot be reached",
        (ErrorCode::AsrFailed, _) => "speech recognition failed",
        (ErrorCode::TtsFailed, _) => "speech synthesis failed",
        (_, ProviderError::Garbage(_)) => "the provider sent an answer that is not understood",
        _ => "the reply failed",
    }
}

/// The system prompt: the character's persona (with a client's overrides), how to speak (in
/// `answer_in`, when the museum has more than English), and the knowledge passages retrieved
/// for the question.
fn instructions(
    c: &Character,
    o: &Overrides,
    passages: &[SearchResult],
    answer_in: Option<&Language>,
) -> String {
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
    if let Some(language) = answer_in {
        system.push_str(&format!(
            "\nAnswer in {} (language tag {language}), the visitor's language, whatever language the knowledge below is written in.",
            language.english_name()
        ));
    }
    if !passages.is_empty() {
        system.push_str("\n\nKnowledge you may use:");
        for (i, p) in passages.iter().enumerate() {
            system.push_str(&format!("\n[{}] ({}) {}", i + 1, p.title, p.content));
        }
    }
    system
}

fn greeting(c: &Character, o: &Overrides) -> String {
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
