//! The closed set of providers and the stages of a turn they serve. Records, settings and the API
//! keep provider ids as strings; they become a `Provider` where the engine reads them, so that
//! every place deciding something per provider is an exhaustive match the compiler checks when a
//! provider is added.

use serde::Serialize;

use crate::engine::settings::Service;

/// A provider a character or the settings may name. Its serde name is its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, utoipa::ToSchema)]
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
    /// A Wyoming server on the LAN (wyoming-faster-whisper, wyoming-piper): recognition and
    /// speech only.
    Wyoming,
}

/// A stage of a standard turn, each with its own provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
    pub const ALL: [Provider; 5] = [
        Provider::Local,
        Provider::Openai,
        Provider::OpenaiRealtime,
        Provider::Remote,
        Provider::Wyoming,
    ];

    /// The id stored in records and settings and used by the API.
    pub fn id(self) -> &'static str {
        match self {
            Provider::Local => "local",
            Provider::Openai => "openai",
            Provider::OpenaiRealtime => "openai_realtime",
            Provider::Remote => "remote",
            Provider::Wyoming => "wyoming",
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
            Provider::Local | Provider::Openai | Provider::Wyoming => false,
            Provider::OpenaiRealtime | Provider::Remote => true,
        }
    }

    /// Whether it is offered for `stage` in the components list. A provider chosen for a stage
    /// it does not serve leaves that stage to the offline engine.
    pub fn serves(self, stage: Stage) -> bool {
        match self {
            Provider::Local | Provider::Openai => true,
            Provider::OpenaiRealtime | Provider::Remote => stage == Stage::Llm,
            Provider::Wyoming => stage != Stage::Llm,
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
            (Provider::Wyoming, Stage::Asr) => "Wyoming speech recognition",
            (Provider::Wyoming, Stage::Tts) => "Wyoming speech synthesis",
            (Provider::Wyoming, Stage::Llm) => "Wyoming (speech only)",
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
            // Recognition and speech only: a reply is left to the offline engine.
            Provider::Wyoming => match stage {
                Stage::Llm => None,
                Stage::Asr => Some(Service::Asr),
                Stage::Tts => Some(Service::Tts),
            },
        }
    }

    /// Whether, chosen for speech, it synthesises a text only whole (one request per text), so
    /// that a long sentence is sent clause by clause to start sounding sooner. The offline
    /// synthesiser passes its speech on as it writes it; a Wyoming server (piper) synthesises
    /// the whole text before its first chunk.
    pub fn speaks_whole(self) -> bool {
        match self {
            Provider::Openai | Provider::Wyoming => true,
            Provider::Local | Provider::OpenaiRealtime | Provider::Remote => false,
        }
    }

    /// Whether, chosen for recognition, the offline recogniser does the work (the providers
    /// that recognise nothing themselves leave it to it; see `Engine::recognise`).
    pub fn recognises_offline(self) -> bool {
        match self {
            Provider::Local | Provider::OpenaiRealtime | Provider::Remote => true,
            Provider::Openai | Provider::Wyoming => false,
        }
    }
}

/// A provider of the original CyberVerse front end that this kiosk does not have. Its front end,
/// run unmodified against the kiosk, sends these ids; they are stored (so the rest of a character
/// or of the settings saves) and a turn that needs one says that it is not available here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Foreign {
    /// Alibaba's Qwen (chat, recognition, speech).
    Qwen,
    /// ByteDance's Doubao (chat, recognition, speech).
    Doubao,
    /// Qwen Omni: listens, answers and speaks in one.
    QwenOmni,
}

impl Foreign {
    pub const ALL: [Foreign; 3] = [Foreign::Qwen, Foreign::Doubao, Foreign::QwenOmni];

    /// The id the original front end sends.
    pub fn id(self) -> &'static str {
        match self {
            Foreign::Qwen => "qwen",
            Foreign::Doubao => "doubao",
            Foreign::QwenOmni => "qwen_omni",
        }
    }

    /// The stages the original offers it for.
    pub fn serves(self, stage: Stage) -> bool {
        match self {
            Foreign::Qwen | Foreign::Doubao => true,
            Foreign::QwenOmni => stage == Stage::Llm,
        }
    }

    /// Its name in the components list.
    pub fn name(self) -> &'static str {
        match self {
            Foreign::Qwen => "Qwen (not available on this kiosk)",
            Foreign::Doubao => "Doubao (not available on this kiosk)",
            Foreign::QwenOmni => "Qwen Omni (not available on this kiosk)",
        }
    }
}

/// A provider id as records and settings may hold it: one this kiosk has, or a known one of the
/// original front end that it does not have. Any other id is refused when it is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Kiosk(Provider),
    Foreign(Foreign),
}

impl Choice {
    /// The choice this id names, if it names one.
    pub fn parse(id: &str) -> Option<Choice> {
        Provider::from_id(id).map(Choice::Kiosk).or_else(|| {
            Foreign::ALL
                .into_iter()
                .find(|f| f.id() == id)
                .map(Choice::Foreign)
        })
    }

    pub fn id(self) -> &'static str {
        match self {
            Choice::Kiosk(p) => p.id(),
            Choice::Foreign(f) => f.id(),
        }
    }
}

impl Serialize for Choice {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.id())
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

#[cfg(test)]
mod tests {
    use super::{Choice, Foreign, Provider};

    #[test]
    fn ids_are_the_serde_names_and_parse_back() {
        for p in Provider::ALL {
            assert_eq!(serde_json::to_value(p).unwrap(), p.id());
            assert_eq!(Provider::from_id(p.id()), Some(p));
        }
        assert_eq!(Provider::from_id("acme"), None);
        assert_eq!(Provider::from_id(""), None);
        assert_eq!(
            Provider::ids(),
            "local, openai, openai_realtime, remote, wyoming"
        );
    }

    #[test]
    fn the_originals_ids_parse_as_foreign_and_others_not_at_all() {
        assert_eq!(Choice::parse("qwen"), Some(Choice::Foreign(Foreign::Qwen)));
        assert_eq!(
            Choice::parse("doubao"),
            Some(Choice::Foreign(Foreign::Doubao))
        );
        assert_eq!(
            Choice::parse("qwen_omni"),
            Some(Choice::Foreign(Foreign::QwenOmni))
        );
        assert_eq!(
            Choice::parse("openai"),
            Some(Choice::Kiosk(Provider::Openai))
        );
        assert_eq!(Choice::parse("acme"), None);
        assert_eq!(Choice::parse("Qwen"), None);
        for f in Foreign::ALL {
            assert_eq!(serde_json::to_value(Choice::Foreign(f)).unwrap(), f.id());
        }
    }
}
