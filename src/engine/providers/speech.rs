//! The voices each speech provider offers: the list the console's voice picker shows, and the
//! check that refuses a character's voice its provider does not have before it is saved.

use std::time::Duration;

use serde::Serialize;

use super::{
    CHECK_TIMEOUT, Choice, NOT_ON_THIS_KIOSK, Provider, Speech, Stage, local_tts_available, openai,
    provider_error, reachable, wyoming,
};
use crate::engine::Engine;
use crate::engine::error::{Error, Result, bad};
use crate::engine::settings::Service;
use crate::engine::{pcm, voice};

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

impl Engine {
    /// Checks that a provider accepts a voice: for the offline engine that the voice exists,
    /// for a remote provider that it can be reached.
    pub async fn test_voice(&self, provider: &str, voice: &str) -> Result<()> {
        let provider = match Choice::parse(provider) {
            Some(Choice::Kiosk(p)) => p,
            Some(Choice::Foreign(f)) => {
                return Err(Error::Unavailable(format!(
                    "{} {NOT_ON_THIS_KIOSK}",
                    f.id()
                )));
            }
            None => {
                return Err(bad(format!(
                    "voice_provider must be one of {}",
                    Provider::ids()
                )));
            }
        };
        if provider == Provider::Local && !local_tts_available() {
            return Err(Error::Unavailable("espeak-ng is not installed".into()));
        }
        // Checked before anything runs: a voice the kiosk does not list goes nowhere.
        let voice = voice::Voice::parse(provider, voice)?;
        let voice = voice.name();
        let s = self.settings();
        match provider {
            Provider::Local if voice.is_empty() => Err(bad(
                "voice_type must be an espeak-ng voice name such as en-us",
            )),
            // Listed: espeak-ng has it (see `voice::offline_voices`).
            Provider::Local => Ok(()),
            Provider::Openai => {
                // A minimal request: the provider must accept the voice, not only be reachable.
                let ep = s.endpoint(Service::Tts).map_err(provider_error)?;
                openai::speak(&self.http, &ep, "Hello.", voice, CHECK_TIMEOUT)
                    .await
                    .map(|_| ())
                    .map_err(provider_error)
            }
            Provider::OpenaiRealtime => reachable(&s, Service::Realtime).await,
            Provider::Remote => reachable(&s, Service::RemoteVoice).await,
            Provider::Wyoming => {
                let ep = s.endpoint(Service::Tts).map_err(provider_error)?;
                let info = wyoming::describe(ep.address, CHECK_TIMEOUT)
                    .await
                    .map_err(provider_error)?;
                if info.tts.is_empty() {
                    Err(Error::ProviderFailed(
                        "the Wyoming server offers no speech synthesis".into(),
                    ))
                } else if !voice.is_empty() && !info.voices.iter().any(|v| v == voice) {
                    Err(Error::ProviderFailed(format!(
                        "the Wyoming server has no voice {voice:?}"
                    )))
                } else {
                    Ok(())
                }
            }
        }
    }
}

/// What a voice sample says.
const SAMPLE_TEXT: &str = "Hello! This is how I sound. Ask me anything about the exhibition.";

/// Longest voice sample kept (mono 24 kHz samples, 20 s).
const SAMPLE_MAX: usize = 20 * pcm::OUTPUT_RATE as usize;

/// Collects a voice sample's speech, up to `SAMPLE_MAX` samples.
#[derive(Default)]
struct Sample(Vec<i16>);

impl Speech for Sample {
    fn begin(&mut self, _: &str) {}
    fn push(&mut self, samples: &[i16]) -> bool {
        let room = SAMPLE_MAX - self.0.len();
        self.0
            .extend_from_slice(&samples[..samples.len().min(room)]);
        self.0.len() < SAMPLE_MAX
    }
    fn flush(&mut self) {}
}

impl Engine {
    /// A short sentence spoken by `provider` (the settings' speech provider when "") in `voice`
    /// (the settings' voice when ""), as a WAV file, so an administrator can hear a voice before
    /// choosing it. The omni providers speak only in a conversation.
    pub async fn voice_sample(&self, provider: &str, voice: &str) -> Result<Vec<u8>> {
        let s = self.settings();
        let choice = if provider.is_empty() {
            s.provider(Stage::Tts)
        } else {
            Choice::parse(provider)
                .ok_or_else(|| bad(format!("voice_provider must be one of {}", Provider::ids())))?
        };
        let provider = match choice {
            Choice::Kiosk(p) => p,
            Choice::Foreign(f) => {
                return Err(Error::Unavailable(format!(
                    "{} {NOT_ON_THIS_KIOSK}",
                    f.id()
                )));
            }
        };
        if !provider.serves(Stage::Tts) {
            return Err(bad(format!(
                "{provider} speaks only in a conversation: try the character on the Try it page"
            )));
        }
        let voice = voice::Voice::parse(
            provider,
            if voice.is_empty() {
                s.tts.voice.as_str()
            } else {
                voice
            },
        )?;
        let timeout = Duration::from_millis(self.config.providers.timeout_ms);
        let mut sample = Sample::default();
        self.speak(provider, SAMPLE_TEXT, &voice, timeout, &mut sample)
            .await
            .map_err(provider_error)?;
        if sample.0.is_empty() {
            return Err(Error::ProviderFailed(format!(
                "{provider} produced no speech"
            )));
        }
        Ok(pcm::wav_bytes(&sample.0, pcm::OUTPUT_RATE))
    }

    /// `text` spoken by the settings' speech provider in its voice (the offline engine when
    /// that one speaks only in a conversation), mono at `pcm::OUTPUT_RATE`: what the kiosk
    /// says outside a conversation, such as that it is closed.
    pub async fn speak_line(&self, text: &str) -> Result<Vec<i16>> {
        let s = self.settings();
        let provider = match s.provider(Stage::Tts) {
            Choice::Kiosk(p) if p.serves(Stage::Tts) => p,
            _ => Provider::Local,
        };
        let timeout = Duration::from_millis(self.config.providers.timeout_ms);
        let mut line = Sample::default();
        // A stored voice that is not this provider's (or no longer listed): its default speaks.
        let voice = voice::Voice::parse(provider, &s.tts.voice)
            .unwrap_or_else(|_| voice::Voice::default_of(provider));
        self.speak(provider, text, &voice, timeout, &mut line)
            .await
            .map_err(provider_error)?;
        Ok(line.0)
    }
}
