//! Launch configuration: the device and start-up parameters an administrator may change from
//! the web, saved in the store and applied over the config file at the next start.
//!
//! Most parameters map to a key of `Config`, so the type rules are the config file's own, and
//! take effect at the next start. A few map to a setting instead (the speakers' volumes,
//! `kiosk.volume` and `kiosk.assistive_volume`): those apply at once and need no restart.

use redb::ReadableTable;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Engine;
use super::error::{Result, bad};
use crate::config::{Config, DisplayBackend};
use crate::store::tables::LAUNCH;
use crate::store::{self, Store};

struct Param {
    path: &'static str,
    name: &'static str,
    /// Dotted key in `Config` (or in the settings, for a live parameter). The store keeps saved
    /// values under `path`, never this key, so moving a key in `Config` needs no migration.
    config_key: &'static str,
    readonly: bool,
    options: &'static [&'static str],
    /// A setting that applies at once (no restart).
    live: bool,
}

struct Section {
    key: &'static str,
    title: &'static str,
    badge: &'static str,
    params: &'static [Param],
}

const fn p(path: &'static str, name: &'static str, config_key: &'static str) -> Param {
    Param {
        path,
        name,
        config_key,
        readonly: false,
        options: &[],
        live: false,
    }
}

/// A parameter that is a setting (dotted key in `Settings`), applied at once.
const fn live(path: &'static str, name: &'static str, settings_key: &'static str) -> Param {
    Param {
        live: true,
        ..p(path, name, settings_key)
    }
}

const SECTIONS: &[Section] = &[
    Section {
        key: "audio",
        title: "Audio",
        badge: "ALSA",
        params: &[
            p(
                "audio.capture_device",
                "Microphone PCM",
                "audio.capture_device",
            ),
            p(
                "audio.playback_device",
                "Speaker PCM",
                "audio.playback_device",
            ),
            p(
                "audio.assistive_playback_device",
                "Assistive speaker PCM: hearing loop, headphones (empty: none)",
                "audio.assistive_playback_device",
            ),
            p(
                "audio.mixer_control",
                "Volume mixer control (empty: volume on the samples)",
                "audio.mixer_control",
            ),
            p(
                "audio.period_frames",
                "ALSA period (frames)",
                "audio.period_frames",
            ),
            p(
                "audio.buffer_frames",
                "ALSA buffer (frames)",
                "audio.buffer_frames",
            ),
            live("audio.volume", "Speaker volume (0-100)", "kiosk.volume"),
            live(
                "audio.assistive_volume",
                "Assistive speaker volume (0-100)",
                "kiosk.assistive_volume",
            ),
        ],
    },
    Section {
        key: "ptt",
        title: "Push-to-talk button",
        badge: "GPIO",
        params: &[
            p("ptt.chip", "GPIO chip", "ptt.chip"),
            p("ptt.line", "Button line", "ptt.line"),
            p("ptt.active_low", "Button is active low", "ptt.active_low"),
            p("ptt.debounce_ms", "Debounce (ms)", "ptt.debounce_ms"),
            p("ptt.led_line", "LED line (empty: none)", "ptt.led_line"),
            p(
                "ptt.key",
                "Keyboard key (evdev name, empty: none)",
                "ptt.key",
            ),
        ],
    },
    Section {
        key: "display",
        title: "Display",
        badge: "DRM/fbdev",
        params: &[
            Param {
                options: DisplayBackend::NAMES,
                ..p("display.backend", "Display output", "display.backend")
            },
            p(
                "display.device",
                "Display device (empty: first found)",
                "display.device",
            ),
        ],
    },
    Section {
        key: "network",
        title: "Network",
        badge: "HTTP/gRPC",
        params: &[Param {
            readonly: true,
            ..p("network.listen", "Listen address", "listen")
        }],
    },
    Section {
        key: "storage",
        title: "Storage",
        badge: "redb",
        params: &[
            Param {
                readonly: true,
                ..p("storage.data_dir", "Data directory", "data_dir")
            },
            p(
                "storage.image_store",
                "Site image store enabled",
                "storage.image_store",
            ),
            p(
                "storage.max_sessions",
                "Conversation sessions at once",
                "sessions.max",
            ),
        ],
    },
];

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct LaunchView {
    pub sections: Vec<SectionView>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SectionView {
    pub key: &'static str,
    pub title: &'static str,
    pub badge: &'static str,
    pub params: Vec<ParamView>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ParamView {
    pub name: &'static str,
    pub path: &'static str,
    /// What the running kiosk uses.
    pub value: Value,
    /// A saved value that takes effect at the next start, when it differs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<Value>,
    pub readonly: bool,
    pub requires_restart: bool,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub options: &'static [&'static str],
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct LaunchUpdate {
    pub params: Vec<ParamUpdate>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct ParamUpdate {
    pub path: String,
    pub value: Value,
}

fn find(path: &str) -> Option<&'static Param> {
    SECTIONS
        .iter()
        .flat_map(|s| s.params)
        .find(|p| p.path == path)
}

fn get_key<'a>(doc: &'a Value, key: &str) -> &'a Value {
    key.split('.').fold(doc, |v, k| &v[k])
}

fn set_key(doc: &mut Value, key: &str, value: Value) {
    let mut slot = doc;
    for k in key.split('.') {
        slot = &mut slot[k];
    }
    *slot = value;
}

/// Applies the saved parameters over a loaded config (at start). Saved values that no longer
/// fit the config (a parameter removed or retyped by an upgrade) are skipped with a warning.
pub fn apply_saved(store: &Store, config: Config) -> Result<Config> {
    let saved = saved(store)?;
    let mut doc = serde_json::to_value(&config).expect("config serialises");
    for (path, value) in saved {
        match find(&path).filter(|p| !p.readonly && !p.live) {
            Some(param) => {
                let mut trial = doc.clone();
                set_key(&mut trial, param.config_key, value);
                if serde_json::from_value::<Config>(trial.clone()).is_ok() {
                    doc = trial;
                } else {
                    tracing::warn!(
                        path,
                        "ignoring a saved launch parameter that no longer fits"
                    );
                }
            }
            None => tracing::warn!(path, "ignoring an unknown saved launch parameter"),
        }
    }
    Ok(serde_json::from_value(doc).expect("checked above"))
}

fn saved(store: &Store) -> Result<Vec<(String, Value)>> {
    let tx = store.read()?;
    let table = tx.open_table(LAUNCH)?;
    let mut out = Vec::new();
    for item in table.iter()? {
        let (k, v) = item?;
        out.push((k.value().to_string(), store::from_json(v.value())?));
    }
    Ok(out)
}

impl Engine {
    pub fn launch_config(&self) -> Result<LaunchView> {
        let running = serde_json::to_value(&self.config).expect("config serialises");
        let settings = serde_json::to_value(&*self.settings()).expect("settings serialise");
        let saved = saved(&self.store)?;
        let sections = SECTIONS
            .iter()
            .map(|s| SectionView {
                key: s.key,
                title: s.title,
                badge: s.badge,
                params: s
                    .params
                    .iter()
                    .map(|p| {
                        let source = if p.live { &settings } else { &running };
                        let value = get_key(source, p.config_key).clone();
                        let pending = saved
                            .iter()
                            .filter(|_| !p.live)
                            .find(|(path, _)| path == p.path)
                            .map(|(_, v)| v.clone())
                            .filter(|v| *v != value);
                        ParamView {
                            name: p.name,
                            path: p.path,
                            value,
                            pending,
                            readonly: p.readonly,
                            requires_restart: !p.live,
                            options: p.options,
                        }
                    })
                    .collect(),
            })
            .collect();
        Ok(LaunchView { sections })
    }

    /// Saves parameters for the next start (live ones apply at once): every one is checked
    /// before any is written. Returns whether any needs a restart.
    pub fn update_launch_config(&self, update: LaunchUpdate) -> Result<bool> {
        if update.params.is_empty() {
            return Err(bad("params must name at least one parameter"));
        }
        let mut trial = serde_json::to_value(apply_saved(&self.store, self.config.clone())?)
            .expect("config serialises");
        let mut live_patch = Value::Object(Default::default());
        let mut restart = false;
        for u in &update.params {
            let param =
                find(&u.path).ok_or_else(|| bad(format!("unknown parameter {}", u.path)))?;
            if param.readonly {
                return Err(bad(format!("{} is read-only", u.path)));
            }
            if param.live {
                set_key(&mut live_patch, param.config_key, u.value.clone());
                continue;
            }
            restart = true;
            if !param.options.is_empty()
                && !u.value.as_str().is_some_and(|v| param.options.contains(&v))
            {
                return Err(bad(format!(
                    "{} must be one of {}",
                    u.path,
                    param.options.join(", ")
                )));
            }
            set_key(&mut trial, param.config_key, u.value.clone());
            serde_json::from_value::<Config>(trial.clone())
                .map_err(|e| bad(format!("{}: wrong type: {e}", u.path)))?;
        }
        let has_live = live_patch.as_object().is_some_and(|o| !o.is_empty());
        if has_live {
            // Checked like any settings update before the launch values are written.
            self.settings().merged(&live_patch)?;
        }
        let tx = self.store.write()?;
        {
            let mut table = tx.open_table(LAUNCH)?;
            for u in update
                .params
                .iter()
                .filter(|u| find(&u.path).is_some_and(|p| !p.live))
            {
                table.insert(u.path.as_str(), store::to_json(&u.value).as_slice())?;
            }
        }
        tx.commit()?;
        if has_live {
            self.update_settings(&live_patch)?;
        }
        Ok(restart)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values are saved under their parameter's path, so a kiosk's saved values still apply
    /// after a key moved within `Config` (`max_sessions` to `sessions.max`).
    #[test]
    fn saved_values_apply_by_path_to_the_keys_where_they_now_live() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            data_dir: dir.path().to_path_buf(),
            ..Config::default()
        };
        let engine = Engine::open(config.clone()).unwrap();
        let update = |path: &str, value: Value| ParamUpdate {
            path: path.into(),
            value,
        };
        engine
            .update_launch_config(LaunchUpdate {
                params: vec![
                    update("storage.max_sessions", 3.into()),
                    update("storage.image_store", false.into()),
                ],
            })
            .unwrap();
        let applied = apply_saved(&engine.store, config).unwrap();
        assert_eq!(applied.sessions.max, 3);
        assert!(!applied.storage.image_store);
    }

    #[test]
    fn every_param_names_a_config_key() {
        let doc = serde_json::to_value(Config::default()).unwrap();
        for p in SECTIONS.iter().flat_map(|s| s.params).filter(|p| !p.live) {
            let mut probe = doc.clone();
            let current = get_key(&doc, p.config_key).clone();
            assert!(
                !current.is_null()
                    || p.path.ends_with("led_line")
                    || p.path.ends_with("key")
                    || p.path.ends_with("assistive_playback_device"),
                "{}",
                p.path
            );
            set_key(&mut probe, p.config_key, current);
            assert!(
                serde_json::from_value::<Config>(probe).is_ok(),
                "{}",
                p.path
            );
        }
    }
}
