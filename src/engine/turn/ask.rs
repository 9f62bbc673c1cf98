//! "What would it answer": a question answered as a visitor's turn would be (the same
//! retrieval, the same provider, the same persona), without a session, a history or speech,
//! and without storing anything, so an administrator can check the knowledge.

use std::sync::Arc;

use serde::Serialize;
use tokio::sync::mpsc;

use super::instructions;
use super::standard::chat_request;
use crate::engine::CharacterId;
use crate::engine::Engine;
use crate::engine::error::Result;
use crate::engine::knowledge::SearchResult;
use crate::engine::live::Overrides;
use crate::engine::providers::{Choice, Provider, Stage, provider_error};
use crate::engine::sessions::message_text;

/// What the kiosk would answer to a question.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Asked {
    /// The passages retrieved, best first.
    pub passages: Vec<SearchResult>,
    /// The reply's text.
    pub answer: String,
    /// Whether the knowledge answered (false: the reply is the "I don't know" line, or a
    /// language model's answer without any passage).
    pub matched: bool,
    /// The provider that wrote the answer (`local` also when an omni provider is chosen: its
    /// spoken reply cannot be had as text alone).
    pub provider: &'static str,
}

impl Engine {
    /// Answers `question` as the character's next turn would, storing nothing.
    pub async fn ask_knowledge(
        self: &Arc<Self>,
        character_id: &str,
        question: &str,
    ) -> Result<Asked> {
        let question = message_text("question", question)?;
        let character = &self.character_record(&CharacterId::parse(character_id)?)?;
        // A brain this kiosk does not have answers as the offline engine would.
        let llm = match self.provider_for(Stage::Llm, &[&character.components.llm])? {
            Choice::Kiosk(p) => p,
            Choice::Foreign(_) => Provider::Local,
        };
        let shown = if llm == Provider::Openai {
            llm
        } else {
            Provider::Local
        };
        let (relay, mut relayed) = mpsc::channel::<String>(64);
        // The reply's deltas, gathered while it is generated.
        let collect = async {
            let mut answer = String::new();
            while let Some(d) = relayed.recv().await {
                answer.push_str(&d);
            }
            answer
        };
        let chat = |passages: &[SearchResult]| {
            chat_request(
                self,
                instructions(character, &Overrides::default(), passages, None),
                Vec::new(),
                question,
                None,
            )
        };
        let generate = async move {
            self.answer_question(
                character,
                llm,
                (question, &[], None, &self.settings().default_language()),
                chat,
                self.stream_bounds(),
                &relay,
            )
            .await
        };
        let (generated, answer) = tokio::join!(generate, collect);
        let (passages, matched) = generated.map_err(provider_error)?;
        Ok(Asked {
            passages,
            answer: answer.trim().to_string(),
            matched,
            provider: shown.id(),
        })
    }
}
