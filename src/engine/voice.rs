//! Voices: the one checked type for a voice that a client or an administrator chooses (a gRPC
//! `config.voice`, a character's `voice_type`, the settings' `tts.voice`, a voice test).
//!
//! A voice of the offline engine becomes an argument of espeak-ng, which takes a path there as
//! readily as a name (and prints the lines of a file it cannot parse); so a [`Voice`] exists only
//! for a voice the engine lists ([`offline_voices`]). A voice of a network provider only goes
//! into a request to the provider the administrator configured, and is a plain name (letters,
//! digits, `-`, `_`). Nothing else parses: no chosen string reaches a helper's command line or a
//! file path.

use std::sync::OnceLock;

use super::error::{Result, bad};
use super::providers::{Provider, find_program};

/// Longest voice name taken (espeak-ng reads 40 characters of it).
pub const VOICE_NAME_MAX: usize = 64;
/// The offline engine's voice when none is chosen.
pub const OFFLINE_DEFAULT: &str = "en-us";

/// A voice of one speech provider, checked; the empty name is the provider's default voice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Voice {
    provider: Provider,
    name: String,
}

impl Voice {
    /// Checks `name` as a voice of `provider`: for the offline engine, one of
    /// [`offline_voices`]; for any other provider, a plain name. "" is the default voice.
    pub fn parse(provider: Provider, name: &str) -> Result<Voice> {
        let name = name.trim();
        let ok = name.is_empty()
            || match provider {
                Provider::Local => offline_voices().iter().any(|v| v == name),
                Provider::Openai
                | Provider::OpenaiRealtime
                | Provider::Remote
                | Provider::Wyoming => is_plain_name(name),
            };
        if ok {
            Ok(Voice {
                provider,
                name: name.to_string(),
            })
        } else if provider == Provider::Local {
            Err(bad(format!(
                "voice must be one of the voices espeak-ng lists, such as {OFFLINE_DEFAULT}"
            )))
        } else {
            Err(bad(format!(
                "voice must be a name of letters, digits, - and _ (at most {VOICE_NAME_MAX})"
            )))
        }
    }

    /// The default voice of `provider`.
    pub fn default_of(provider: Provider) -> Voice {
        Voice {
            provider,
            name: String::new(),
        }
    }

    pub fn provider(&self) -> Provider {
        self.provider
    }

    /// The name as chosen ("" for the provider's default).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The voice argument for espeak-ng: this voice when it is one of the offline engine's,
    /// else the offline default (a network provider's voice means nothing to espeak-ng).
    pub fn offline_name(&self) -> &str {
        if self.provider == Provider::Local && !self.name.is_empty() {
            &self.name
        } else {
            OFFLINE_DEFAULT
        }
    }
}

/// Checks a stored choice (a character's `voice_type`, the settings' `tts.voice`), whose
/// provider may change after it is saved: a voice that some provider could have (one the
/// offline engine lists, or a plain name). Where it is used, it is parsed again for the
/// provider that speaks (a turn's plan), and a voice that is not that provider's is not used.
pub fn check_stored(name: &str) -> Result<()> {
    let name = name.trim();
    if name.is_empty() || is_plain_name(name) || offline_voices().iter().any(|v| v == name) {
        Ok(())
    } else {
        Err(bad(format!(
            "voice must be one of the voices espeak-ng lists (such as {OFFLINE_DEFAULT}) or a \
             name of letters, digits, - and _ (at most {VOICE_NAME_MAX})"
        )))
    }
}

fn is_plain_name(name: &str) -> bool {
    name.len() <= VOICE_NAME_MAX
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The voices of the offline engine: the languages and voice names `espeak-ng --voices` lists
/// (empty when espeak-ng is not installed).
pub fn offline_voices() -> &'static [String] {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let mut names: Vec<String> = Vec::new();
        for v in offline_listing() {
            for name in [&v.language, &v.name] {
                if !names.contains(name) {
                    names.push(name.clone());
                }
            }
        }
        names
    })
}

/// One voice of `espeak-ng --voices`, as the console's voice picker shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The language that names it ("en-us").
    pub language: String,
    /// espeak-ng's name of the voice ("English_(America)").
    pub name: String,
}

/// espeak-ng's voices, one per language, read once: the installed voices do not change while
/// the kiosk runs. Blocking: the first call runs `espeak-ng --voices`.
pub fn offline_listing() -> &'static [Listed] {
    static LISTING: OnceLock<Vec<Listed>> = OnceLock::new();
    LISTING.get_or_init(|| {
        let Some(program) = find_program("espeak-ng") else {
            return Vec::new();
        };
        match std::process::Command::new(program)
            .arg("--voices")
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
        {
            Ok(out) => parse_listing(&String::from_utf8_lossy(&out.stdout)),
            Err(e) => {
                tracing::warn!("cannot list espeak-ng's voices: {e}");
                Vec::new()
            }
        }
    })
}

/// The voices of an `espeak-ng --voices` listing (columns: Pty Language Age/Gender VoiceName
/// File ...), one per language, each named without a path separator or a dot.
fn parse_listing(listing: &str) -> Vec<Listed> {
    let plain = |name: &str| name.len() <= VOICE_NAME_MAX && !name.contains(['/', '\\', '.']);
    let mut voices: Vec<Listed> = Vec::new();
    for line in listing.lines().skip(1) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let (Some(language), Some(name)) = (cols.get(1), cols.get(3)) else {
            continue;
        };
        if plain(language) && plain(name) && !voices.iter().any(|v| v.language == *language) {
            voices.push(Listed {
                language: language.to_string(),
                name: name.to_string(),
            });
        }
    }
    voices
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_gives_names_only() {
        let listing = "Pty Language       Age/Gender VoiceName          File                 Other Languages\n \
             5  af              --/M      Afrikaans          gmw/af\n \
             2  en-us           --/M      English_(America)  gmw/en-US            (en 10)\n \
             5  x/../y          --/M      ../etc             ../../etc/passwd\n";
        let listed = |language: &str, name: &str| Listed {
            language: language.into(),
            name: name.into(),
        };
        assert_eq!(
            parse_listing(listing),
            [
                listed("af", "Afrikaans"),
                listed("en-us", "English_(America)")
            ]
        );
    }

    #[test]
    fn only_listed_offline_voices_and_plain_network_names_parse() {
        for hostile in [
            "../../../../data/tls/key.pem",
            "/etc/passwd",
            "en-us/../../x",
            "en-us+../../x",
            "..",
            "a b",
            "-v",
        ] {
            assert!(Voice::parse(Provider::Local, hostile).is_err(), "{hostile}");
        }
        for hostile in ["../x", "a/b", "a.b", "a b", "x\ny", &"a".repeat(65)] {
            assert!(
                Voice::parse(Provider::Openai, hostile).is_err(),
                "{hostile}"
            );
            assert!(check_stored(hostile).is_err(), "{hostile}");
        }
        assert_eq!(
            Voice::parse(Provider::Wyoming, "en_US-lessac-medium")
                .unwrap()
                .name(),
            "en_US-lessac-medium"
        );
        assert_eq!(
            Voice::parse(Provider::Local, "").unwrap().offline_name(),
            "en-us"
        );
        assert_eq!(
            Voice::parse(Provider::Openai, "alloy")
                .unwrap()
                .offline_name(),
            "en-us",
            "a network voice never reaches espeak-ng"
        );
        if !offline_voices().is_empty() {
            assert_eq!(
                Voice::parse(Provider::Local, "en-us")
                    .unwrap()
                    .offline_name(),
                "en-us"
            );
        }
    }
}
