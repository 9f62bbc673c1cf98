//! A standard reply: knowledge retrieval, the reply streamed from the language model, and each
//! sentence synthesised while the rest still streams, so that speech starts early.

use tokio::sync::mpsc;

use super::Turn;
use super::audio_out::AudioOut;
use super::sentences::{Sentences, clauses};
use crate::engine::knowledge::SearchResult;
use crate::engine::live::{ErrorCode, Event};
use crate::engine::providers::{ChatMessage, ChatRequest, Prompt, ProviderError};
use crate::engine::spoken::for_speech;
use crate::store::records::Character;

impl Turn {
    /// Generates the reply to `question` (`sure`: how sure the recogniser was of its words),
    /// streaming text and speech as it comes; returns the whole text.
    pub(super) async fn reply(
        &self,
        question: &str,
        sure: &[(String, f64)],
    ) -> Result<String, (ErrorCode, ProviderError)> {
        let plan = &self.plan;
        let (tx, mut rx) = mpsc::channel::<String>(64);
        // Owns the sender, so the stream ends for the speaker when generation ends.
        let generate = async move {
            let prompt = Prompt {
                character_id: &plan.character.id,
                question,
                sure,
                fallback: fallback(&plan.character),
            };
            // Knowledge is retrieved here only for a language model; the offline engine
            // retrieves its own.
            let chat = || {
                let passages = self
                    .engine
                    .search_knowledge(&plan.character.id, question, Some(3))
                    .unwrap_or_default();
                self.chat_request(question, &passages)
            };
            self.engine
                .generate(plan.llm, prompt, chat, plan.timeout, &tx)
                .await
        };
        let speak = self.speak_stream(&mut rx);
        let (generated, spoken) = tokio::join!(generate, speak);
        generated.map_err(|e| (ErrorCode::LlmFailed, e))?;
        let text = spoken.map_err(|e| (ErrorCode::TtsFailed, e))?;
        Ok(text)
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
        let mut messages = vec![ChatMessage {
            role: "system",
            content: self.instructions(passages),
        }];
        messages.extend(
            self.engine
                .recent_history(&self.live.id, &self.plan.character.id)
                .unwrap_or_default(),
        );
        if messages
            .last()
            .is_none_or(|m| m.role != "user" || m.content != question)
        {
            messages.push(ChatMessage {
                role: "user",
                content: question.to_string(),
            });
        }
        let settings = self.engine.settings();
        ChatRequest {
            messages,
            temperature: self
                .live
                .overrides()
                .temperature
                .unwrap_or(settings.llm.temperature as f32),
            max_tokens: settings.llm.max_tokens,
        }
    }
}

/// What the offline engine says when its knowledge has nothing relevant.
fn fallback(c: &Character) -> String {
    format!(
        "I'm sorry, I don't know about that. I'm {}; ask me about the exhibition and what I know of it.",
        c.name
    )
}
