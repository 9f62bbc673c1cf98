//! Provider and kiosk settings: one document, changed by partial updates, applied at once.
//!
//! Secrets (API keys, tokens) are stored as given but never leave through the API: reads show a
//! mask and a `<field>_set` flag, and sending the mask back leaves the secret unchanged.

mod fleet;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::error::{Result, bad};
use super::hours::Hours;
use super::language::{self, Language, Phrase, Wording};
use super::providers::{Choice, Endpoint, Provider, ProviderError, Stage, wyoming};
use super::{Engine, is_id};
use crate::engine::CharacterId;
use crate::store::tables::SETTINGS;
use crate::store::{self, Store};
pub use fleet::FleetSettings;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub llm: Llm,
    pub asr: Asr,
    pub tts: Tts,
    pub realtime: Realtime,
    pub remote_voice: RemoteVoice,
    pub model_providers: ModelProviders,
    pub doubao: Doubao,
    pub kiosk: Kiosk,
    pub hours: Hours,
    /// The fleet server this kiosk polls (hawkBit DDI); off by default.
    pub fleet: FleetSettings,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Llm {
    pub provider: String,
    pub base_url: String,
    pub api_key: String,
    pub model: String,
    pub temperature: f64,
    pub max_tokens: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Asr {
    pub provider: String,
    pub base_url: String,
    pub api_key: String,
    pub model: String,
    pub language: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Tts {
    pub provider: String,
    pub base_url: String,
    pub api_key: String,
    pub model: String,
    pub voice: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Realtime {
    pub provider: String,
    pub base_url: String,
    pub api_key: String,
    pub model: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RemoteVoice {
    pub grpc_addr: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ModelProviders {
    pub openai_api_key: String,
    pub dashscope_api_key: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Doubao {
    pub app_id: String,
    pub access_token: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Kiosk {
    pub character_id: String,
    pub volume: u8,
    /// The assistive speaker's volume (`audio.assistive_playback_device`), 0..100: a hearing
    /// loop or headphones want another level than the room's speaker.
    pub assistive_volume: u8,
    /// The default language (the first of `languages`; kept for clients that know only it).
    pub language: String,
    /// The museum's languages in the order the screen offers them; the first is the default a
    /// visit starts in (docs/languages.md).
    pub languages: Vec<Language>,
    /// Staff's wording of the kiosk's own lines, per language, over the built-in ones.
    pub lines: Wording,
}

impl Default for Llm {
    fn default() -> Self {
        Llm {
            provider: "local".into(),
            base_url: String::new(),
            api_key: String::new(),
            model: String::new(),
            temperature: 0.7,
            max_tokens: 512,
        }
    }
}

impl Default for Asr {
    fn default() -> Self {
        Asr {
            provider: "local".into(),
            base_url: String::new(),
            api_key: String::new(),
            model: String::new(),
            language: "en".into(),
        }
    }
}

impl Default for Tts {
    fn default() -> Self {
        Tts {
            provider: "local".into(),
            base_url: String::new(),
            api_key: String::new(),
            model: String::new(),
            voice: "en-us".into(),
        }
    }
}

/// Languages a kiosk offers at most: more rows than a visitor reads through on a screen.
pub const MAX_LANGUAGES: usize = 12;

impl Kiosk {
    /// Keeps `language` (what older clients set) and `languages` one story: a new list makes
    /// its first the default; a new default alone moves to the front of the list.
    fn follow_language(&mut self, list_sent: bool) -> Result<()> {
        if list_sent {
            if let Some(first) = self.languages.first() {
                self.language = first.tag().to_string();
            }
        } else if !self.language.is_empty() {
            let default = Language::parse(&self.language)
                .ok_or_else(|| bad("kiosk.language must be a language tag such as en or zh-CN"))?;
            self.languages.retain(|l| *l != default);
            self.languages.insert(0, default);
        }
        if self.languages.is_empty() {
            return Err(bad("kiosk.languages must name at least one language"));
        }
        if self.languages.len() > MAX_LANGUAGES {
            return Err(bad(format!(
                "kiosk.languages: at most {MAX_LANGUAGES} languages"
            )));
        }
        for (i, l) in self.languages.iter().enumerate() {
            if self.languages[..i].contains(l) {
                return Err(bad(format!("kiosk.languages names {l} twice")));
            }
        }
        if self.lines.len() > MAX_LANGUAGES {
            return Err(bad(format!(
                "kiosk.lines: at most {MAX_LANGUAGES} languages"
            )));
        }
        language::check_wording(&self.lines).map_err(bad)
    }
}

impl Default for Kiosk {
    fn default() -> Self {
        Kiosk {
            character_id: String::new(),
            volume: 80,
            assistive_volume: 80,
            language: "en".into(),
            languages: vec![Language::english()],
            lines: Wording::new(),
        }
    }
}

/// The secret fields, as (section, field).
const SECRETS: &[(&str, &str)] = &[
    ("llm", "api_key"),
    ("asr", "api_key"),
    ("tts", "api_key"),
    ("realtime", "api_key"),
    ("model_providers", "openai_api_key"),
    ("model_providers", "dashscope_api_key"),
    ("doubao", "access_token"),
    ("fleet", "target_token"),
];

/// The section only the original front end sends (its media server; the kiosk has none): a body
/// holding it is that front end's form, read as its own server reads it.
const LIVEKIT: &str = "livekit";

/// The original front end's name for `remote_voice.grpc_addr` (its voice service). A read shows
/// it, so that front end's form shows the address in force and sends it back unchanged.
const INFERENCE: &str = "inference";

/// A body naming the original front end's sections as an update of ours. `inference.grpc_addr`
/// is `remote_voice.grpc_addr` unless the body names that too (its other fields are ignored);
/// `livekit` is dropped. A body holding `livekit` is that front end's form, which sends every
/// field, blank ones as `""`; its server skips empty values, so there an empty string changes
/// nothing. Any other section still has to be one of ours.
fn from_original_front_end(patch: &Map<String, Value>) -> Map<String, Value> {
    let form = patch.contains_key(LIVEKIT);
    let mut ours = Map::new();
    for (section, fields) in patch {
        if [LIVEKIT, INFERENCE].contains(&section.as_str()) {
            continue;
        }
        let fields = match fields {
            Value::Object(f) if form => Value::Object(
                f.iter()
                    .filter(|(_, v)| v.as_str() != Some(""))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
            other => other.clone(),
        };
        ours.insert(section.clone(), fields);
    }
    let grpc_addr = patch
        .get(INFERENCE)
        .and_then(|i| i.get("grpc_addr"))
        .filter(|a| a.as_str() != Some(""));
    if let Some(addr) = grpc_addr {
        let remote = ours
            .entry("remote_voice")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(remote) = remote.as_object_mut() {
            remote.entry("grpc_addr").or_insert_with(|| addr.clone());
        }
    }
    ours
}

/// The sections with a `base_url` and the `api_key` sent to it.
const KEYED_SERVICES: [&str; 4] = ["llm", "asr", "tts", "realtime"];

/// How a secret is shown: its first three and last four characters when it is long enough for
/// that to reveal little, else only that it is set.
pub fn mask(secret: &str) -> String {
    let chars: Vec<char> = secret.chars().collect();
    match chars.len() {
        0 => String::new(),
        n if n >= 12 => format!(
            "{}…{}",
            chars[..3].iter().collect::<String>(),
            chars[n - 4..].iter().collect::<String>()
        ),
        _ => "…".into(),
    }
}

/// A section of the settings that says where a provider is reached over the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Llm,
    Asr,
    Tts,
    Realtime,
    RemoteVoice,
}

impl Service {
    /// What it is, for messages.
    fn what(self) -> &'static str {
        match self {
            Service::Llm => "the language model",
            Service::Asr => "speech recognition",
            Service::Tts => "speech synthesis",
            Service::Realtime => "the realtime service",
            Service::RemoteVoice => "the remote voice service",
        }
    }
}

/// The settings the engine runs with, swapped whole on every update.
/// The settings in force, and the bell of everyone who follows them (the fleet client).
pub struct Live(tokio::sync::watch::Sender<Arc<Settings>>);

impl Live {
    pub fn load(store: &Store) -> Result<Live> {
        let tx = store.read()?;
        let saved: Option<Settings> = store::get(&tx.open_table(SETTINGS)?, "settings")?;
        Ok(Live(tokio::sync::watch::Sender::new(Arc::new(
            saved.unwrap_or_default(),
        ))))
    }
}

impl Settings {
    /// The provider of `stage` in force when a character chooses none. Unset ("") is the
    /// offline engine; any other value was checked when it was stored.
    pub fn provider(&self, stage: Stage) -> Choice {
        let id = match stage {
            Stage::Llm => &self.llm.provider,
            Stage::Asr => &self.asr.provider,
            Stage::Tts => &self.tts.provider,
        };
        Choice::parse(id).unwrap_or(Choice::Kiosk(Provider::Local))
    }

    /// The model configured for `service` ("" for the remote voice service, which picks its own).
    pub fn model(&self, service: Service) -> &str {
        match service {
            Service::Llm => &self.llm.model,
            Service::Asr => &self.asr.model,
            Service::Tts => &self.tts.model,
            Service::Realtime => &self.realtime.model,
            Service::RemoteVoice => "",
        }
    }

    /// Where `service` is reached; `Unavailable` when it has no address configured.
    pub fn endpoint(&self, service: Service) -> Result<Endpoint<'_>, ProviderError> {
        let (address, api_key) = match service {
            Service::Llm => (self.llm.base_url.as_str(), self.llm.api_key.as_str()),
            Service::Asr => (self.asr.base_url.as_str(), self.asr.api_key.as_str()),
            Service::Tts => (self.tts.base_url.as_str(), self.tts.api_key.as_str()),
            Service::Realtime => (
                self.realtime.base_url.as_str(),
                self.realtime.api_key.as_str(),
            ),
            Service::RemoteVoice => (self.remote_voice.grpc_addr.as_str(), ""),
        };
        if address.is_empty() {
            return Err(ProviderError::Unavailable(format!(
                "{} has no address configured",
                service.what()
            )));
        }
        Ok(Endpoint {
            address,
            api_key,
            model: self.model(service),
        })
    }

    /// The document as the API shows it: secrets masked, with a `<field>_set` flag beside them,
    /// and the original front end's `inference` beside `remote_voice`.
    pub fn masked(&self) -> Value {
        let mut v = serde_json::to_value(self).expect("settings serialise");
        for (section, field) in SECRETS {
            let obj = v[section].as_object_mut().expect("sections are objects");
            let secret = obj[*field].as_str().unwrap_or("").to_string();
            obj.insert(field.to_string(), Value::String(mask(&secret)));
            obj.insert(format!("{field}_set"), Value::Bool(!secret.is_empty()));
        }
        v[INFERENCE] = json!({ "grpc_addr": self.remote_voice.grpc_addr });
        v
    }

    /// Applies a partial update: absent fields stay, `null` resets a field to its default, and
    /// a secret sent back as its mask stays unchanged. A body of the original front end is
    /// read as its server reads it (see [`from_original_front_end`]).
    pub(super) fn merged(&self, patch: &Value) -> Result<Settings> {
        let patch = patch
            .as_object()
            .ok_or_else(|| bad("settings must be a JSON object"))?;
        let translated;
        let patch = if patch.contains_key(LIVEKIT) || patch.contains_key(INFERENCE) {
            translated = from_original_front_end(patch);
            &translated
        } else {
            patch
        };
        let mut doc = serde_json::to_value(self).expect("settings serialise");
        let before = doc.clone();
        let defaults = serde_json::to_value(Settings::default()).expect("settings serialise");
        // Sections whose secret this update sets (a new value or `null`), not sends back masked.
        let mut keyed = Vec::new();
        for (section, fields) in patch {
            let current = doc
                .get_mut(section)
                .and_then(Value::as_object_mut)
                .ok_or_else(|| bad(format!("unknown settings section {section:?}")))?;
            let fields = match fields {
                Value::Object(f) => f,
                Value::Null => &Map::new(),
                _ => return Err(bad(format!("{section} must be an object"))),
            };
            for (field, value) in fields {
                // What a read shows beside a secret: accepted back, and changes nothing.
                if let Some(flag_of) = field.strip_suffix("_set")
                    && SECRETS.contains(&(section.as_str(), flag_of))
                    && value.is_boolean()
                {
                    continue;
                }
                let secret = SECRETS.contains(&(section.as_str(), field.as_str()));
                let Some(slot) = current.get_mut(field) else {
                    return Err(bad(format!("unknown setting {section}.{field}")));
                };
                if has_control(value) {
                    return Err(bad(format!(
                        "{section}.{field} contains control characters"
                    )));
                }
                match value {
                    Value::Null => *slot = defaults[section][field].clone(),
                    Value::String(s) if secret && *s == mask(slot.as_str().unwrap_or("")) => {
                        continue;
                    }
                    Value::String(s) if secret && s.contains('…') => {
                        return Err(bad(format!(
                            "{section}.{field} looks like a masked value; send the whole secret"
                        )));
                    }
                    v => *slot = v.clone(),
                }
                if secret {
                    keyed.push(section.as_str());
                }
            }
        }
        // A key goes only to the address it was given for: a new address without a new key
        // clears the key, so an administrator session cannot redirect it to another host.
        for section in KEYED_SERVICES {
            if doc[section]["base_url"] != before[section]["base_url"] && !keyed.contains(&section)
            {
                doc[section]["api_key"] = Value::String(String::new());
            }
        }
        // The same rule for the fleet server's target token.
        if doc["fleet"]["server_url"] != before["fleet"]["server_url"] && !keyed.contains(&"fleet")
        {
            doc["fleet"]["target_token"] = Value::String(String::new());
        }
        // And the allowance of plain HTTP: accepted for one address, asked again for another.
        if doc["fleet"]["server_url"] != before["fleet"]["server_url"]
            && patch
                .get("fleet")
                .and_then(|f| f.get("allow_insecure_http"))
                .is_none()
        {
            doc["fleet"]["allow_insecure_http"] = Value::Bool(false);
        }
        let mut s: Settings =
            serde_json::from_value(doc).map_err(|e| bad(format!("invalid settings: {e}")))?;
        let kiosk = patch.get("kiosk");
        s.kiosk
            .follow_language(kiosk.is_some_and(|k| k.get("languages").is_some()))?;
        s.validate()?;
        Ok(s)
    }

    /// The museum's languages, the default first.
    pub fn languages(&self) -> &[Language] {
        &self.kiosk.languages
    }

    /// The kiosk's line `phrase` in `language`, staff's wording first (see `language::line`).
    pub fn line(&self, language: &Language, phrase: Phrase) -> String {
        language::line(
            &self.kiosk.lines,
            language,
            phrase,
            &self.default_language(),
        )
    }

    /// The language a visit starts in.
    pub fn default_language(&self) -> Language {
        self.kiosk
            .languages
            .first()
            .cloned()
            .unwrap_or_else(Language::english)
    }

    fn validate(&self) -> Result<()> {
        for (name, provider) in [
            ("llm", &self.llm.provider),
            ("asr", &self.asr.provider),
            ("tts", &self.tts.provider),
            ("realtime", &self.realtime.provider),
        ] {
            if !provider.is_empty() && Choice::parse(provider).is_none() {
                return Err(bad(format!(
                    "{name}.provider must be one of {}",
                    Provider::ids()
                )));
            }
        }
        check_url("llm.base_url", &self.llm.base_url, &["http", "https"])?;
        // A Wyoming server is reached over plain TCP, and only it: tcp:// given to an HTTP
        // provider (or http:// to Wyoming) is refused when it is saved, not at the next turn.
        for (name, provider, url) in [
            ("asr", &self.asr.provider, &self.asr.base_url),
            ("tts", &self.tts.provider, &self.tts.base_url),
        ] {
            if Provider::from_id(provider) == Some(Provider::Wyoming) {
                if !url.is_empty() && wyoming::address(url).is_err() {
                    return Err(bad(format!(
                        "{name}.base_url must be tcp://host:port for the Wyoming provider, such as tcp://192.168.1.10:10300"
                    )));
                }
            } else {
                check_url(&format!("{name}.base_url"), url, &["http", "https"])?;
            }
        }
        check_url(
            "realtime.base_url",
            &self.realtime.base_url,
            &["http", "https", "ws", "wss"],
        )?;
        let grpc = &self.remote_voice.grpc_addr;
        if !grpc.is_empty() {
            let with_scheme = if grpc.contains("://") {
                grpc.clone()
            } else {
                format!("http://{grpc}")
            };
            check_url("remote_voice.grpc_addr", &with_scheme, &["http", "https"])?;
        }
        if !(0.0..=2.0).contains(&self.llm.temperature) {
            return Err(bad("llm.temperature must be between 0 and 2"));
        }
        if !(1..=32_768).contains(&self.llm.max_tokens) {
            return Err(bad("llm.max_tokens must be between 1 and 32768"));
        }
        if self.kiosk.volume > 100 {
            return Err(bad("kiosk.volume must be between 0 and 100"));
        }
        if self.kiosk.assistive_volume > 100 {
            return Err(bad("kiosk.assistive_volume must be between 0 and 100"));
        }
        for (name, lang) in [
            ("asr.language", &self.asr.language),
            ("kiosk.language", &self.kiosk.language),
        ] {
            if lang.len() > 16
                || !lang
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(bad(format!(
                    "{name} must be a language tag such as en or zh-CN"
                )));
            }
        }
        crate::engine::voice::check_stored(&self.tts.voice)
            .map_err(|e| bad(format!("tts.voice: {e}")))?;
        if !self.kiosk.character_id.is_empty() && !is_id(&self.kiosk.character_id) {
            return Err(bad("kiosk.character_id must be a character id"));
        }
        check_url(
            "fleet.server_url",
            &self.fleet.server_url,
            &["http", "https"],
        )?;
        self.fleet.validate()?;
        self.hours.validate()
    }
}

fn has_control(v: &Value) -> bool {
    match v {
        Value::String(s) => s.chars().any(char::is_control),
        Value::Array(a) => a.iter().any(has_control),
        Value::Object(o) => o.values().any(has_control),
        _ => false,
    }
}

fn check_url(name: &str, url: &str, schemes: &[&str]) -> Result<()> {
    if url.is_empty() {
        return Ok(());
    }
    let ok = url.parse::<axum::http::Uri>().ok().is_some_and(|u| {
        u.scheme_str().is_some_and(|s| schemes.contains(&s))
            && u.authority().is_some_and(|a| !a.host().is_empty())
    });
    if ok {
        Ok(())
    } else {
        Err(bad(format!(
            "{name} must be a URL such as http://192.168.1.10:8000/v1"
        )))
    }
}

impl Engine {
    /// The settings in force now.
    pub fn settings(&self) -> Arc<Settings> {
        self.settings.0.borrow().clone()
    }

    /// The settings in force, marked changed whenever an update is stored: a client that
    /// follows them (the fleet client) wakes at once.
    pub fn watch_settings(&self) -> tokio::sync::watch::Receiver<Arc<Settings>> {
        self.settings.0.subscribe()
    }

    /// Applies a partial update, stores it and puts it in force for the next call of every
    /// provider, without a restart.
    pub fn update_settings(&self, patch: &Value) -> Result<Arc<Settings>> {
        let tx = self.store.write()?;
        let current = self.settings();
        let next = current.merged(patch)?;
        if next.kiosk.character_id != current.kiosk.character_id
            && !next.kiosk.character_id.is_empty()
        {
            CharacterId::parse(&next.kiosk.character_id)
                .and_then(|id| self.character_record(&id))
                .map_err(|_| bad("kiosk.character_id names no character"))?;
        }
        tx.open_table(SETTINGS)?
            .insert("settings", store::to_json(&next).as_slice())?;
        tx.commit()?;
        let next = Arc::new(next);
        self.settings.0.send_replace(next.clone());
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn masks_show_little() {
        assert_eq!(mask("sk-1234567890abcd"), "sk-…abcd");
        assert_eq!(mask("short"), "…");
        assert_eq!(mask(""), "");
        let s = Settings {
            llm: Llm {
                api_key: "sk-1234567890abcd".into(),
                ..Llm::default()
            },
            ..Settings::default()
        };
        let m = s.masked();
        assert_eq!(m["llm"]["api_key"], "sk-…abcd");
        assert_eq!(m["llm"]["api_key_set"], true);
        assert_eq!(m["asr"]["api_key_set"], false);
        assert!(!m.to_string().contains("1234567890"));
    }

    #[test]
    fn partial_update_rules() {
        let s = Settings {
            llm: Llm {
                api_key: "sk-1234567890abcd".into(),
                model: "m".into(),
                ..Llm::default()
            },
            ..Settings::default()
        };
        let same = s.merged(&json!({"llm": {"api_key": "sk-…abcd"}})).unwrap();
        assert_eq!(same.llm.api_key, "sk-1234567890abcd");
        let cleared = s
            .merged(&json!({"llm": {"api_key": null, "model": null}}))
            .unwrap();
        assert_eq!(cleared.llm.api_key, "");
        assert_eq!(cleared.llm.model, "");
        let changed = s.merged(&json!({"llm": {"temperature": 1.5}})).unwrap();
        assert_eq!(changed.llm.temperature, 1.5);
        assert_eq!(changed.llm.api_key, s.llm.api_key);
        for bad in [
            json!({"nope": {}}),
            json!({"llm": {"nope": 1}}),
            json!({"llm": {"temperature": 3}}),
            json!({"llm": {"temperature": "hot"}}),
            json!({"llm": {"base_url": "ftp://x"}}),
            json!({"llm": {"base_url": "not a url"}}),
            json!({"llm": {"model": "a\u{7}b"}}),
            json!({"llm": {"api_key": "sk-…zzzz"}}),
            json!({"kiosk": {"volume": 101}}),
            json!({"kiosk": {"assistive_volume": 101}}),
            json!({"kiosk": {"assistive_volume": -1}}),
            json!({"llm": {"provider": "acme"}}),
            json!([1]),
        ] {
            assert!(s.merged(&bad).is_err(), "{bad}");
        }
        assert!(
            s.merged(&json!({"llm": {"base_url": "http://10.0.0.2:11434/v1"}}))
                .is_ok()
        );
        assert!(
            s.merged(&json!({"llm": {"base_url": "ws://x/v1"}}))
                .is_err()
        );
    }

    #[test]
    fn tcp_addresses_are_for_the_wyoming_provider_only() {
        let s = Settings::default();
        let wyoming = json!({
            "asr": {"provider": "wyoming", "base_url": "tcp://10.0.0.5:10300"},
            "tts": {"provider": "wyoming", "base_url": "tcp://10.0.0.5:10200"},
        });
        let saved = s.merged(&wyoming).unwrap();
        assert_eq!(saved.provider(Stage::Asr), Choice::Kiosk(Provider::Wyoming));
        assert_eq!(saved.tts.base_url, "tcp://10.0.0.5:10200");
        for bad in [
            json!({"asr": {"provider": "openai", "base_url": "tcp://10.0.0.5:10300"}}),
            json!({"tts": {"base_url": "tcp://10.0.0.5:10200"}}),
            json!({"llm": {"base_url": "tcp://10.0.0.5:10300"}}),
            json!({"asr": {"provider": "wyoming", "base_url": "http://10.0.0.5:10300"}}),
            json!({"asr": {"provider": "wyoming", "base_url": "tcp://10.0.0.5"}}),
            json!({"tts": {"provider": "wyoming", "base_url": "tcp://10.0.0.5:10200/v1"}}),
        ] {
            assert!(s.merged(&bad).is_err(), "{bad}");
        }
        // Leaving Wyoming: the tcp:// address must go with it.
        assert!(
            saved
                .merged(&json!({"asr": {"provider": "openai"}}))
                .is_err()
        );
        assert!(
            saved
                .merged(
                    &json!({"asr": {"provider": "openai", "base_url": "http://10.0.0.5:8000/v1"}})
                )
                .is_ok()
        );
    }

    #[test]
    fn what_a_read_shows_can_be_written_back_unchanged() {
        let s = Settings {
            llm: Llm {
                api_key: "sk-1234567890abcd".into(),
                base_url: "http://10.0.0.2/v1".into(),
                ..Llm::default()
            },
            doubao: Doubao {
                access_token: "tok".into(),
                ..Doubao::default()
            },
            ..Settings::default()
        };
        assert_eq!(s.merged(&s.masked()).unwrap(), s);
        let flag = s.merged(&json!({"asr": {"api_key_set": true}})).unwrap();
        assert_eq!(flag, s, "a flag changes nothing");
        assert!(s.merged(&json!({"asr": {"model_set": true}})).is_err());
    }

    #[test]
    fn a_new_address_without_a_new_key_clears_the_key() {
        let s = Settings {
            llm: Llm {
                api_key: "sk-1234567890abcd".into(),
                base_url: "http://10.0.0.2/v1".into(),
                ..Llm::default()
            },
            ..Settings::default()
        };
        let elsewhere = json!({"llm": {"base_url": "http://attacker.example/v1"}});
        assert_eq!(s.merged(&elsewhere).unwrap().llm.api_key, "");
        let mut echoed = s.masked();
        echoed["llm"]["base_url"] = json!("http://attacker.example/v1");
        assert_eq!(
            s.merged(&echoed).unwrap().llm.api_key,
            "",
            "the mask is no key"
        );
        let with_key = json!({"llm": {"base_url": "http://b/v1", "api_key": "sk-new"}});
        assert_eq!(s.merged(&with_key).unwrap().llm.api_key, "sk-new");
        let same = json!({"llm": {"base_url": "http://10.0.0.2/v1", "model": "m"}});
        assert_eq!(s.merged(&same).unwrap().llm.api_key, s.llm.api_key);
    }
}
