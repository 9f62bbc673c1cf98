//! The voices each speech provider offers: the list the console's voice picker shows, and the
//! check that refuses a character's voice its provider does not have before it is saved.

use std::sync::OnceLock;

use serde::Serialize;

use super::{CHECK_TIMEOUT, Choice, Provider, find_program, wyoming};
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

/// The longest voice name accepted from any list.
const NAME_MAX: usize = 64;

fn named(ids: &[&str]) -> Vec<Voice> {
    ids.iter()
        .map(|id| Voice {
            id: (*id).to_string(),
            name: (*id).to_string(),
        })
        .collect()
}

/// espeak-ng's voices, read once (the installed voices do not change while the kiosk runs):
/// `None` when espeak-ng is not installed or does not answer. Blocking: the first call runs
/// `espeak-ng --voices`.
pub fn espeak_voices() -> Option<&'static [Voice]> {
    static VOICES: OnceLock<Option<Vec<Voice>>> = OnceLock::new();
    VOICES
        .get_or_init(|| {
            let out = std::process::Command::new(find_program("espeak-ng")?)
                .arg("--voices")
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .output()
                .ok()
                .filter(|o| o.status.success())?;
            Some(parse_espeak(&String::from_utf8_lossy(&out.stdout)))
        })
        .as_deref()
}

/// The voices of `espeak-ng --voices`: columns Pty, Language, Age/Gender, VoiceName, File;
/// a voice is named by its language ("en-us"), one per language.
fn parse_espeak(listing: &str) -> Vec<Voice> {
    let mut voices: Vec<Voice> = Vec::new();
    for line in listing.lines().skip(1) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let (Some(id), Some(name)) = (cols.get(1), cols.get(3)) else {
            continue;
        };
        if id.len() > NAME_MAX || voices.iter().any(|v| v.id == *id) {
            continue;
        }
        voices.push(Voice {
            id: (*id).to_string(),
            name: name.replace('_', " "),
        });
    }
    voices
}

/// Whether espeak-ng's listing knows `voice` by its language, its name or its file.
pub fn espeak_knows(listing: &str, voice: &str) -> bool {
    listing.lines().skip(1).any(|line| {
        let cols: Vec<&str> = line.split_whitespace().collect();
        cols.get(1) == Some(&voice)
            || cols.get(3) == Some(&voice)
            || cols
                .get(4)
                .is_some_and(|f| f.rsplit('/').next() == Some(voice))
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
                (listed.to_vec(), true)
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
                    .filter(|v| v.len() <= NAME_MAX)
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

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING: &str =
        "Pty Language       Age/Gender VoiceName          File                 Other Languages
 5  af              --/M      Afrikaans          gmw/af
 2  en-us           --/M      English_(America)  gmw/en-US            (en 3)
 5  en-us           --/M      English_(America)_x gmw/en-US-x
";

    #[test]
    fn espeak_voices_are_read_one_per_language() {
        let v = parse_espeak(LISTING);
        assert_eq!(
            v,
            vec![
                Voice {
                    id: "af".into(),
                    name: "Afrikaans".into()
                },
                Voice {
                    id: "en-us".into(),
                    name: "English (America)".into()
                },
            ]
        );
        assert!(espeak_knows(LISTING, "en-us"));
        assert!(espeak_knows(LISTING, "en-US"));
        assert!(espeak_knows(LISTING, "Afrikaans"));
        assert!(!espeak_knows(LISTING, "klingon"));
    }
}
