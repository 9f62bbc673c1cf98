//! The `fleet` section of the settings: where the fleet server is and who this kiosk is to it.
//! The fleet client (`crate::fleet`) reads it; the engine keeps and checks it like any section.

use serde::{Deserialize, Serialize};

use crate::engine::error::{Result, bad};
use crate::engine::{Engine, content};

/// The `fleet` section of the settings: where the server is and who this kiosk is to it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct FleetSettings {
    /// Off by default: a kiosk polls nothing until an administrator sets a server.
    pub enabled: bool,
    /// `https://hawkbit.example:8443` (the DDI paths are added to it).
    pub server_url: String,
    /// A plain `http://` server_url is refused unless this says so: the target token (and
    /// every bundle) then crosses the network in clear. Cleared when the address changes.
    pub allow_insecure_http: bool,
    pub tenant: String,
    /// The target's controller id on the server; empty: the kiosk's mDNS host name.
    pub controller_id: String,
    /// The target's security token (`Authorization: TargetToken ...`); a secret, never shown.
    pub target_token: String,
    /// The fleet's Ed25519 public key (base64 of its 32 bytes): content bundles must be signed
    /// by its private key.
    pub content_public_key: String,
    /// The distribution set name reported for an update installed from the console.
    pub distribution: String,
    /// Polling paused by an administrator (kept across restarts).
    pub paused: bool,
}

impl Default for FleetSettings {
    fn default() -> Self {
        FleetSettings {
            enabled: false,
            server_url: String::new(),
            allow_insecure_http: false,
            tenant: "DEFAULT".into(),
            controller_id: String::new(),
            target_token: String::new(),
            content_public_key: String::new(),
            distribution: "docent".into(),
            paused: false,
        }
    }
}

impl FleetSettings {
    /// The tenant and controller id become path segments of every request: only plain names.
    pub(super) fn validate(&self) -> Result<()> {
        let name = |s: &str| {
            s.len() <= 64
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
                && !s.starts_with('.')
        };
        if self.tenant.is_empty() || !name(&self.tenant) {
            return Err(bad(
                "fleet.tenant must be 1 to 64 letters, digits, '-', '_' or '.'",
            ));
        }
        if !name(&self.controller_id) {
            return Err(bad(
                "fleet.controller_id must be at most 64 letters, digits, '-', '_' or '.'",
            ));
        }
        if self.distribution.is_empty() || self.distribution.len() > 64 {
            return Err(bad("fleet.distribution must be 1 to 64 characters"));
        }
        if !self.content_public_key.is_empty() && content::public_key(self).is_err() {
            return Err(bad(
                "fleet.content_public_key must be the base64 of an Ed25519 public key (32 bytes)",
            ));
        }
        // Credentials go in the token, never in the address (which the console shows).
        if self.server_url.contains('@') {
            return Err(bad(
                "fleet.server_url must not hold a user name or password",
            ));
        }
        if self.enabled && self.server_url.is_empty() {
            return Err(bad("fleet.server_url is needed to turn the fleet on"));
        }
        self.check_transport()
    }

    /// A plain-HTTP server only when the administrator accepted what it costs. Checked when
    /// the settings are saved and again before a request (settings saved by an older version).
    pub(crate) fn check_transport(&self) -> Result<()> {
        let plain = self
            .server_url
            .get(..7)
            .is_some_and(|s| s.eq_ignore_ascii_case("http://"));
        if plain && !self.allow_insecure_http {
            return Err(bad(
                "fleet.server_url is plain http://: the target token and every bundle would cross \
                 the network in clear, for anyone on it to read the token and pose as this kiosk; \
                 use https://, or set fleet.allow_insecure_http = true to accept that",
            ));
        }
        Ok(())
    }
}

impl Engine {
    /// Pauses or resumes the fleet client's polling (kept in the settings, so across restarts;
    /// the client follows the settings at once).
    pub fn set_fleet_paused(&self, paused: bool) -> Result<FleetSettings> {
        let next = self.update_settings(&serde_json::json!({"fleet": {"paused": paused}}))?;
        Ok(next.fleet.clone())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::engine::settings::Settings;

    #[test]
    fn fleet_settings_are_checked_and_the_token_follows_only_its_server() {
        let s = Settings::default();
        for bad in [
            json!({"fleet": {"tenant": ""}}),
            json!({"fleet": {"tenant": "a/b"}}),
            json!({"fleet": {"controller_id": "../x"}}),
            json!({"fleet": {"controller_id": "a?b"}}),
            json!({"fleet": {"server_url": "ftp://x"}}),
            json!({"fleet": {"server_url": "https://user:pw@fleet.example"}}),
            json!({"fleet": {"enabled": true}}),
            json!({"fleet": {"content_public_key": "c2hvcnQ="}}),
            json!({"fleet": {"server_url": "http://fleet.example"}}),
            json!({"fleet": {"server_url": "HTTP://fleet.example"}}),
        ] {
            assert!(s.merged(&bad).is_err(), "{bad}");
        }
        let on = s
            .merged(
                &json!({"fleet": {"enabled": true, "server_url": "https://fleet.example:8443",
                "controller_id": "hall-b.1", "target_token": "0123456789abcdef0123"}}),
            )
            .unwrap();
        assert_eq!(on.fleet.target_token, "0123456789abcdef0123");
        let shown = on.masked();
        assert_eq!(shown["fleet"]["target_token_set"], true);
        assert!(!shown.to_string().contains("0123456789abcdef"));
        let moved = on
            .merged(&json!({"fleet": {"server_url": "https://elsewhere.example"}}))
            .unwrap();
        assert_eq!(
            moved.fleet.target_token, "",
            "the token never follows a new address"
        );
        let plain = s
            .merged(&json!({"fleet": {"server_url": "http://10.0.0.5:8080",
                "allow_insecure_http": true}}))
            .unwrap();
        assert!(plain.fleet.allow_insecure_http);
        assert!(
            plain
                .merged(&json!({"fleet": {"server_url": "http://10.0.0.6:8080"}}))
                .is_err(),
            "the allowance never follows a new address"
        );
        let secure = plain
            .merged(&json!({"fleet": {"server_url": "https://fleet.example"}}))
            .unwrap();
        assert!(!secure.fleet.allow_insecure_http);
    }
}
