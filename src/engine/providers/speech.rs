//! The voices each speech provider offers: the list the console's voice picker shows, and the
//! check that refuses a character's voice its provider does not have before it is saved.

use serde::Serialize;

use super::{CHECK_TIMEOUT, Choice, Provider, wyoming};
use crate::engine::Engine;
use crate::engine::error::{Error, Result, bad};
use crate::engine::settings::Service;

/// One voice a provider offers.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Voice {
    /// What a character's `voice_type` names it by.
    pub id: String,
    /// How a person reads it ("English (America)").
    pub name: String,
}

/// The voices of one provider.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Voices {
    pub provider: Provider,
    pub voices: Vec<Voice>,
    /// Whether a voice outside the list is refused (the provider's own list), or the list only
    /// suggests (an OpenAI-compatible server may have voices of its own).
    pub closed: bool,
}

/// OpenAI's speech voices; an OpenAI-compatible server may offer others.
const OPENAI: [&str; 11] = [
    "alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer", "verse",
];
/// OpenAI Realtime's voices.
const REALTIME: [&str; 8] = [
    "alloy", "ash", "ballad", "coral", "echo", "sage", "shimmer", "verse",
];

fn named(ids: &[&str]) -> Vec<Voice> {
    ids.iter()
        .map(|id| Voice {
            id: (*id).to_string(),
            name: (*id).to_string(),
        })
        .collect()
}

/// espeak-ng's voices for the picker (`None` when espeak-ng is not installed). Blocking: the
/// first call runs `espeak-ng --voices`.
pub fn espeak_voices() -> Option<Vec<Voice>> {
    let listed = crate::engine::voice::offline_listing();
    (!listed.is_empty()).then(|| {
        listed
            .iter()
            .map(|v| Voice {
                id: v.language.clone(),
                name: v.name.replace('_', " "),
            })
            .collect()
    })
}

/// Refuses, before a character is saved, a voice that its provider is known not to have: the
/// offline engine's voices are listed here; other providers' lists are the servers' and are
/// checked by the voice test. An empty voice is the provider's default. Blocking (the first
/// call lists espeak-ng's voices).
pub fn check_saved_voice(provider: &str, voice: &str) -> Result<()> {
    if voice.is_empty() || Choice::parse(provider) != Some(Choice::Kiosk(Provider::Local)) {
        return Ok(());
    }
    let Some(voices) = espeak_voices() else {
        // Without espeak-ng there is nothing to check against (and nothing will speak).
        return Ok(());
    };
    if voices
        .iter()
        .any(|v| v.id.eq_ignore_ascii_case(voice) || v.name.replace(" ", "_") == voice)
    {
        Ok(())
    } else {
        Err(bad(format!(
            "the offline engine has no voice {voice:?} (voice_type); choose one of its voices, such as en-us"
        )))
    }
}

impl Engine {
    /// The voices `provider` offers (the settings' speech provider when ""): espeak-ng's for the
    /// offline engine, a Wyoming server's as it describes itself, OpenAI's known voices.
    pub async fn voices(&self, provider: &str) -> Result<Voices> {
        let provider = match provider {
            "" => self.settings().provider(super::Stage::Tts),
            id => Choice::parse(id)
                .ok_or_else(|| bad(format!("provider must be one of {}", Provider::ids())))?,
        };
        let provider = match provider {
            Choice::Kiosk(p) => p,
            Choice::Foreign(f) => {
                return Err(Error::Unavailable(format!(
                    "{} {}",
                    f.id(),
                    super::NOT_ON_THIS_KIOSK
                )));
            }
        };
        let (voices, closed) = match provider {
            Provider::Local => {
                let listed = tokio::task::spawn_blocking(espeak_voices)
                    .await
                    .ok()
                    .flatten()
                    .ok_or_else(|| Error::Unavailable("espeak-ng is not installed".into()))?;
                (listed, true)
            }
            Provider::Wyoming => {
                // Whatever went wrong, the list is not to be had now.
                let unavailable =
                    |e: super::ProviderError| Error::Unavailable(format!("no list of voices: {e}"));
                let s = self.settings();
                let ep = s.endpoint(Service::Tts).map_err(unavailable)?;
                let info = wyoming::describe(ep.address, CHECK_TIMEOUT)
                    .await
                    .map_err(unavailable)?;
                let ids: Vec<&str> = info
                    .voices
                    .iter()
                    .map(String::as_str)
                    .filter(|v| v.len() <= crate::engine::voice::VOICE_NAME_MAX)
                    .collect();
                (named(&ids), true)
            }
            Provider::Openai => (named(&OPENAI), false),
            Provider::OpenaiRealtime => (named(&REALTIME), false),
            // Another kiosk's service speaks in the voice its own settings choose.
            Provider::Remote => (Vec::new(), false),
        };
        Ok(Voices {
            provider,
            voices,
            closed,
        })
    }
}
