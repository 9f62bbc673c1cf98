//! A standard reply: knowledge retrieval, the reply streamed from the language model, and each
//! sentence synthesised while the rest still streams, so that speech starts early.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::Turn;
use super::audio_out::AudioOut;
use super::sentences::{Sentences, clauses};
use crate::engine::knowledge::SearchResult;
use crate::engine::language::{Language, Phrase};
use crate::engine::live::{ErrorCode, Event};
use crate::engine::providers::{
    ChatMessage, ChatRequest, Prompt, Provider, ProviderError, StreamBounds,
};
use crate::engine::spoken::for_speech;
use crate::engine::{CharacterId, Engine};
use crate::store::records::Character;

/// Passages given to the language model (or the offline engine) for a question.
const PASSAGES: usize = 3;

impl Engine {
    /// Retrieves the passages for `question` (with how sure the recogniser was of each of its
    /// words, none when typed; and the live session it is asked in, if any) and generates the reply, its text sent to `out`
    /// as it comes; `chat` builds a language model's conversation from the passages. Returns
    /// the passages and whether the knowledge answered the question: a language model needs a
    /// passage, the offline engine a passage it can answer from.
    pub(super) async fn answer_question(
        self: &Arc<Self>,
        character: &Character,
        llm: Provider,
        (question, sure, session_id, language): (&str, &[(String, f64)], Option<&str>, &Language),
        chat: impl FnOnce(&[SearchResult]) -> ChatRequest,
        bounds: StreamBounds,
        out: &mpsc::Sender<String>,
    ) -> Result<(Vec<SearchResult>, bool), ProviderError> {
        let passages = {
            let (engine, id, q) = (self.clone(), character.id.clone(), question.to_string());
            let language = language.clone();
            tokio::task::spawn_blocking(move || {
                engine.search_knowledge(&id, &q, Some(PASSAGES), Some(&language))
            })
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default()
        };
        let prompt = Prompt {
            character_id: &CharacterId::of_record(&character.id),
            session_id,
            question,
            sure,
            fallback: self
                .settings()
                .line(language, Phrase::DontKnow)
                .replace("{name}", &character.name),
            language,
        };
        let answered = self
            .generate(llm, prompt, || chat(&passages), bounds, out)
            .await?;
        // A language model needs a passage; the offline engine finds its own topic.
        let matched = answered && (llm != Provider::Openai || !passages.is_empty());
        Ok((passages, matched))
    }
}

impl Turn {
    /// Generates the reply to `question` (`sure`: how sure the recogniser was of its words),
    /// streaming text and speech as it comes; returns the whole text and whether the knowledge
    /// answered the question.
    pub(super) async fn reply(
        &self,
        question: &str,
        sure: &[(String, f64)],
    ) -> Result<(String, bool), (ErrorCode, ProviderError)> {
        let plan = &self.plan;
        let (tx, mut rx) = mpsc::channel::<String>(64);
        // Owns the sender, so the stream ends for the speaker when generation ends.
        let generate = async move {
            let chat = |passages: &[SearchResult]| self.chat_request(question, passages);
            self.engine
                .answer_question(
                    &plan.character,
                    plan.llm,
                    (question, sure, Some(&self.live.id), &plan.language),
                    chat,
                    plan.stream,
                    &tx,
                )
                .await
        };
        let speak = self.speak_stream(&mut rx);
        let (generated, spoken) = tokio::join!(generate, speak);
        let (_, matched) = generated.map_err(|e| (ErrorCode::LlmFailed, e))?;
        let text = spoken.map_err(|e| (ErrorCode::TtsFailed, e))?;
        Ok((text, matched))
    }

    /// Publishes text deltas as they arrive and speaks each finished sentence while the rest
    /// still streams. Returns the whole text.
    async fn speak_stream(&self, rx: &mut mpsc::Receiver<String>) -> Result<String, ProviderError> {
        let mut whole = String::new();
        let mut splitter = Sentences::default();
        let mut out = AudioOut::new(self);
        let speaking = self.live.audio_wanted();
        loop {
            let delta = rx.recv().await;
            let sentences = match &delta {
                Some(d) => {
                    whole.push_str(d);
                    self.publish(Event::Transcript {
                        speaker: "assistant",
                        text: d.clone(),
                        is_final: false,
                        turn_seq: self.seq,
                    });
                    if !speaking {
                        self.said_delta(d);
                    }
                    splitter.push(d)
                }
                None => splitter.finish(),
            };
            if speaking {
                for sentence in sentences {
                    self.speak_sentence(&mut out, &sentence).await?;
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
    pub(super) async fn speak_sentence(
        &self,
        out: &mut AudioOut<'_>,
        sentence: &str,
    ) -> Result<(), ProviderError> {
        let plan = &self.plan;
        let spoken = for_speech(sentence);
        let pieces = if plan.tts.speaks_whole() {
            clauses(&spoken)
        } else {
            vec![spoken.as_str()]
        };
        for piece in pieces {
            if !out.current() {
                break;
            }
            self.engine
                .speak(plan.tts, piece, &plan.voice, plan.timeout, out)
                .await?;
        }
        Ok(())
    }

    /// The conversation sent to a language model: persona and knowledge, recent history, the
    /// question.
    fn chat_request(&self, question: &str, passages: &[SearchResult]) -> ChatRequest {
        let history = self
            .engine
            .recent_history(&self.live.id, &self.plan.character.id)
            .unwrap_or_default();
        chat_request(
            &self.engine,
            self.instructions(passages),
            history,
            question,
            self.live.overrides().temperature,
        )
    }
}

/// A language model's conversation: the instructions, the earlier messages, the question (unless
/// the history already ends with it), at the client's temperature or the settings'.
pub(super) fn chat_request(
    engine: &Engine,
    instructions: String,
    history: Vec<ChatMessage>,
    question: &str,
    temperature: Option<f32>,
) -> ChatRequest {
    let mut messages = vec![ChatMessage {
        role: "system",
        content: instructions,
    }];
    messages.extend(history);
    if messages
        .last()
        .is_none_or(|m| m.role != "user" || m.content != question)
    {
        messages.push(ChatMessage {
            role: "user",
            content: question.to_string(),
        });
    }
    let settings = engine.settings();
    ChatRequest {
        messages,
        temperature: temperature.unwrap_or(settings.llm.temperature as f32),
        max_tokens: settings.llm.max_tokens,
    }
}
