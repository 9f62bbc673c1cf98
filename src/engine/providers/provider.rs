//! The closed set of providers and the stages of a turn they serve. Records, settings and the API
//! keep provider ids as strings; they become a `Provider` where the engine reads them, so that
//! every place deciding something per provider is an exhaustive match the compiler checks when a
//! provider is added.

use serde::Serialize;

use crate::engine::settings::Service;

/// A provider a character or the settings may name. Its serde name is its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    /// The offline engine: espeak-ng, PocketSphinx, answers from the knowledge.
    Local,
    /// Any OpenAI-compatible server: chat, transcription, speech.
    Openai,
    /// OpenAI Realtime over WebSocket: listens, answers and speaks in one.
    OpenaiRealtime,
    /// Another VoiceLLMService over gRPC: listens, answers and speaks in one.
    Remote,
}

/// A stage of a standard turn, each with its own provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The reply (language model).
    Llm,
    /// Speech recognition.
    Asr,
    /// Speech synthesis.
    Tts,
}

impl Stage {
    pub const ALL: [Stage; 3] = [Stage::Llm, Stage::Asr, Stage::Tts];

    /// Its name in the settings and the API.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Llm => "llm",
            Stage::Asr => "asr",
            Stage::Tts => "tts",
        }
    }
}

impl Provider {
    /// Every provider, in the order the components list shows them.
    pub const ALL: [Provider; 4] = [
        Provider::Local,
        Provider::Openai,
        Provider::OpenaiRealtime,
        Provider::Remote,
    ];

    /// The id stored in records and settings and used by the API.
    pub fn id(self) -> &'static str {
        match self {
            Provider::Local => "local",
            Provider::Openai => "openai",
            Provider::OpenaiRealtime => "openai_realtime",
            Provider::Remote => "remote",
        }
    }

    /// The provider with this id.
    pub fn from_id(id: &str) -> Option<Provider> {
        Provider::ALL.into_iter().find(|p| p.id() == id)
    }

    /// The ids a client may send, for error messages: "local, openai, ...".
    pub fn ids() -> String {
        Provider::ALL.map(Provider::id).join(", ")
    }

    /// Whether it takes the user's input and answers with speech itself, replacing
    /// recognition, reply and synthesis in one (chosen as the `llm` provider).
    pub fn is_omni(self) -> bool {
        match self {
            Provider::Local | Provider::Openai => false,
            Provider::OpenaiRealtime | Provider::Remote => true,
        }
    }

    /// Whether it is offered for `stage` in the components list. A provider chosen for a stage
    /// it does not serve leaves that stage to the offline engine.
    pub fn serves(self, stage: Stage) -> bool {
        match self {
            Provider::Local | Provider::Openai => true,
            Provider::OpenaiRealtime | Provider::Remote => stage == Stage::Llm,
        }
    }

    /// Its name in the components list of `stage`.
    pub fn name(self, stage: Stage) -> &'static str {
        match (self, stage) {
            (Provider::Local, Stage::Llm) => "Offline knowledge answers",
            (Provider::Local, Stage::Asr) => "Offline recogniser (PocketSphinx)",
            (Provider::Local, Stage::Tts) => "Offline speech (espeak-ng)",
            (Provider::Openai, Stage::Llm) => "OpenAI-compatible chat",
            (Provider::Openai, Stage::Asr) => "OpenAI-compatible transcription",
            (Provider::Openai, Stage::Tts) => "OpenAI-compatible speech",
            (Provider::OpenaiRealtime, _) => "OpenAI Realtime",
            (Provider::Remote, _) => "Remote VoiceLLMService",
        }
    }

    /// The settings section saying where it is reached when chosen for `stage`; `None` for the
    /// offline engine, which runs in the process.
    pub fn service(self, stage: Stage) -> Option<Service> {
        match self {
            Provider::Local => None,
            Provider::Openai => Some(match stage {
                Stage::Llm => Service::Llm,
                Stage::Asr => Service::Asr,
                Stage::Tts => Service::Tts,
            }),
            Provider::OpenaiRealtime => Some(Service::Realtime),
            Provider::Remote => Some(Service::RemoteVoice),
        }
    }

    /// Whether, chosen for speech, it synthesises a text only whole (one request per text), so
    /// that a long sentence is sent clause by clause to start sounding sooner. The offline
    /// synthesiser passes its speech on as it writes it.
    pub fn speaks_whole(self) -> bool {
        match self {
            Provider::Openai => true,
            Provider::Local | Provider::OpenaiRealtime | Provider::Remote => false,
        }
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

#[cfg(test)]
mod tests {
    use super::Provider;

    #[test]
    fn ids_are_the_serde_names_and_parse_back() {
        for p in Provider::ALL {
            assert_eq!(serde_json::to_value(p).unwrap(), p.id());
            assert_eq!(Provider::from_id(p.id()), Some(p));
        }
        assert_eq!(Provider::from_id("acme"), None);
        assert_eq!(Provider::from_id(""), None);
        assert_eq!(Provider::ids(), "local, openai, openai_realtime, remote");
    }
}
