//! A reply from an omni provider, which listens, answers and speaks by itself: the turn only
//! gives it the conversation and relays what it streams back.

use tokio::sync::mpsc;

use super::audio_out::AudioOut;
use super::sentences::Sentences;
use super::{Turn, TurnInput};
use crate::engine::history::Mark;
use crate::engine::live::{ErrorCode, Event, Status};
use crate::engine::providers::{OmniContext, OmniEvent, OmniInput};

impl Turn {
    /// Runs the turn on the plan's omni provider. A greeting is not asked of it.
    pub(super) async fn run_omni(&self, input: TurnInput) {
        let plan = &self.plan;
        let (input, passages) = match input {
            TurnInput::Text { text, stored } => {
                if !stored {
                    self.store("user", text.clone()).await;
                }
                let passages = self
                    .engine
                    .search_knowledge(&plan.character.id, &text, Some(3), Some(&plan.language))
                    .unwrap_or_default();
                (OmniInput::Text(text), passages)
            }
            TurnInput::Audio(pcm) => (OmniInput::Audio(pcm), Vec::new()),
            TurnInput::Greeting => return,
        };
        let o = self.live.overrides();
        let history = self
            .engine
            .recent_history(&self.live.id, &plan.character.id)
            .unwrap_or_default()
            .into_iter()
            .map(|m| (m.role.to_string(), m.content))
            .collect();
        let ctx = OmniContext {
            instructions: self.instructions(&passages),
            voice: plan.voice.name().to_string(),
            bot_name: o
                .bot_name
                .clone()
                .unwrap_or_else(|| plan.character.name.clone()),
            temperature: o
                .temperature
                .unwrap_or(self.engine.settings().llm.temperature as f32),
            history,
        };
        let (tx, mut rx) = mpsc::channel::<OmniEvent>(64);
        // Owns the sender, so the relay ends when the provider does.
        let ask = async move {
            self.engine
                .converse(plan.llm, &input, &ctx, plan.timeout, &tx)
                .await
        };
        let relay = async {
            let mut whole = String::new();
            let mut out = AudioOut::new(self);
            // The reply's text comes beside its audio: each sentence is captioned from the
            // audio that had come when its first words did.
            let mut sentences = Sentences::default();
            let mut sentence_at: Option<u64> = None;
            while let Some(event) = rx.recv().await {
                match event {
                    OmniEvent::UserText(text) if !text.is_empty() => {
                        self.live.user_said(self.seq, &text);
                        // What the provider heard: a spoken question.
                        self.store_marked("user", text, Mark::Spoken).await;
                    }
                    OmniEvent::UserText(_) => {}
                    OmniEvent::Delta(d) => {
                        whole.push_str(&d);
                        let at = *sentence_at.get_or_insert(out.position());
                        for sentence in sentences.push(&d) {
                            out.caption(&sentence, at);
                            sentence_at = None;
                        }
                        if sentence_at.is_none() && sentences.pending() {
                            sentence_at = Some(out.position());
                        }
                        self.said_delta(&d);
                        self.publish(Event::Transcript {
                            speaker: "assistant",
                            text: d,
                            is_final: false,
                            turn_seq: self.seq,
                        });
                    }
                    OmniEvent::Audio(pcm) if self.live.audio_wanted() => {
                        out.start();
                        out.send_all(&pcm);
                    }
                    OmniEvent::Audio(_) => {}
                }
            }
            for sentence in sentences.finish() {
                out.caption(&sentence, sentence_at.unwrap_or_else(|| out.position()));
            }
            out.end();
            whole.trim().to_string()
        };
        let (asked, text) = tokio::join!(ask, relay);
        match asked {
            Ok(()) => {
                self.publish(Event::Transcript {
                    speaker: "assistant",
                    text: text.clone(),
                    is_final: true,
                    turn_seq: self.seq,
                });
                // Stored whole: a cancel from here on must not store it again as a partial.
                self.said_stored();
                if !text.is_empty() {
                    self.store("assistant", text).await;
                }
                self.status(Status::Idle);
            }
            Err(e) => self.fail(ErrorCode::LlmFailed, &e).await,
        }
    }
}
