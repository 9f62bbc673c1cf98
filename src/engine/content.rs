//! Content bundles: one kiosk's characters, images, clips, knowledge, site and settings (without
//! secrets or local settings) for the other kiosks of the fleet, signed with the fleet's key.
//!
//! A bundle is a tar archive of exactly three members, in this order: `docent-content.json`
//! (the manifest: format, content version, creation time, size and SHA-256 of the archive),
//! `docent-content.sig` (the Ed25519 signature of the manifest's bytes) and `content.tar` (a
//! backup archive, see `engine::backup`, whose own tables are empty). A kiosk checks the
//! signature with the fleet's public key, the archive against the manifest, then the archive
//! with the restore's checks, and puts its own records, secrets and local settings back before
//! the restore is committed; the next start applies it.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;

use base64::Engine as _;
use ring::signature::{self, Ed25519KeyPair, KeyPair, UnparsedPublicKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::engine::Engine;
use crate::engine::backup::append;
use crate::engine::error::{Error, Result, bad};
use crate::engine::settings::{FleetSettings, Settings};

const MANIFEST: &str = "docent-content.json";
const SIGNATURE: &str = "docent-content.sig";
const ARCHIVE: &str = "content.tar";
const FORMAT: &str = "docent-content";
const FORMAT_VERSION: u32 = 1;
const MANIFEST_BYTES: u64 = 16 << 10;
/// The newest bundle applied, in `fleet/` of the data directory (see [`Applied`]).
const APPLIED: &str = "content-applied.json";

/// Whether an administrator applies a bundle that is not newer than the last one applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// The fleet's deployments: an older or the same bundle is refused.
    Refuse,
    /// The console's `force`: the administrator rolls the content back on purpose.
    Force,
}

/// The newest bundle this kiosk applied. A bundle's version is its signed `created` time: an
/// older or equal one would roll the content back (a replay), so it is refused unless forced.
/// The newest is kept, not the last: a forced older bundle does not lower it.
#[derive(Debug, Serialize, Deserialize)]
struct Applied {
    created: String,
    content_version: String,
}

impl Applied {
    fn path(data_dir: &Path) -> std::path::PathBuf {
        data_dir.join("fleet").join(APPLIED)
    }

    fn load(data_dir: &Path) -> Option<Applied> {
        std::fs::read(Self::path(data_dir))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
    }

    /// Written to a temporary file, fsynced and renamed over the old one.
    fn save(&self, data_dir: &Path) -> Result<()> {
        let path = Self::path(data_dir);
        let dir = path.parent().expect("applied has a parent");
        std::fs::create_dir_all(dir)?;
        let tmp = dir.join(format!("{APPLIED}.tmp"));
        {
            let mut f = File::create(&tmp)?;
            f.write_all(&serde_json::to_vec_pretty(self).expect("applied serialises"))?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &path)?;
        File::open(dir)?.sync_all()?;
        Ok(())
    }
}

/// A manifest's signed creation time.
fn created(manifest: &Manifest) -> Result<std::time::SystemTime> {
    humantime::parse_rfc3339(&manifest.created)
        .map_err(|_| bad("the bundle's manifest has no readable creation time"))
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    format: String,
    version: u32,
    content_version: String,
    created: String,
    archive_bytes: u64,
    archive_sha256: String,
}

/// The fleet's public key from the settings.
pub fn public_key(settings: &FleetSettings) -> Result<Vec<u8>> {
    let key = base64::engine::general_purpose::STANDARD
        .decode(settings.content_public_key.trim())
        .map_err(|_| bad("the fleet's public key is not base64"))?;
    if key.len() != 32 {
        return Err(bad("the fleet's public key is not 32 bytes"));
    }
    Ok(key)
}

/// The signing key an administrator sends: the base64 of a 32-byte Ed25519 seed, or of a
/// PKCS#8 document (`openssl genpkey -algorithm ed25519 -outform DER`).
fn key_pair(encoded: &str) -> Result<Ed25519KeyPair> {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|_| bad("signing_key is not base64"))?;
    let pair = if raw.len() == 32 {
        Ed25519KeyPair::from_seed_unchecked(&raw)
    } else {
        Ed25519KeyPair::from_pkcs8_maybe_unchecked(&raw)
    };
    pair.map_err(|_| bad("signing_key is not an Ed25519 private key"))
}

/// A content version: what the console and the server show, so a plain short name.
fn check_version(v: &str) -> Result<()> {
    let ok = !v.is_empty()
        && v.len() <= 64
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'+'));
    if ok {
        Ok(())
    } else {
        Err(bad(
            "the content version must be 1 to 64 letters, digits, '.', '-', '_' or '+'",
        ))
    }
}

/// The settings a bundle carries: no secret, no fleet section, no local volume.
fn shared_settings(doc: &[u8]) -> Vec<u8> {
    let Ok(mut s) = serde_json::from_slice::<Settings>(doc) else {
        return serde_json::to_vec(&Settings::default()).expect("settings serialise");
    };
    s.llm.api_key.clear();
    s.asr.api_key.clear();
    s.tts.api_key.clear();
    s.realtime.api_key.clear();
    s.model_providers = Default::default();
    s.doubao.access_token.clear();
    s.fleet = FleetSettings::default();
    s.kiosk.volume = Settings::default().kiosk.volume;
    serde_json::to_vec(&s).expect("settings serialise")
}

/// The bundle's settings with this kiosk's secrets (each kept only where its address did not
/// change), its fleet section and its volume.
fn merged_settings(bundle: Option<&[u8]>, ours: Option<&[u8]>) -> Option<Vec<u8>> {
    let ours: Settings = ours
        .and_then(|b| serde_json::from_slice(b).ok())
        .unwrap_or_default();
    let mut s: Settings = bundle
        .and_then(|b| serde_json::from_slice(b).ok())
        .unwrap_or_default();
    let keep = |theirs: &str, mine: &str, key: &str| {
        if theirs == mine {
            key.to_string()
        } else {
            String::new()
        }
    };
    s.llm.api_key = keep(&s.llm.base_url, &ours.llm.base_url, &ours.llm.api_key);
    s.asr.api_key = keep(&s.asr.base_url, &ours.asr.base_url, &ours.asr.api_key);
    s.tts.api_key = keep(&s.tts.base_url, &ours.tts.base_url, &ours.tts.api_key);
    s.realtime.api_key = keep(
        &s.realtime.base_url,
        &ours.realtime.base_url,
        &ours.realtime.api_key,
    );
    s.model_providers = ours.model_providers;
    s.doubao.access_token = ours.doubao.access_token;
    s.fleet = ours.fleet;
    s.kiosk.volume = ours.kiosk.volume;
    Some(serde_json::to_vec(&s).expect("settings serialise"))
}

impl Engine {
    /// A new folder of its own in the scratch directory, for one export or apply.
    fn content_work_dir(&self) -> Result<std::path::PathBuf> {
        let work = self
            .scratch_dir()
            .join(format!("content-{}", super::new_id()));
        std::fs::create_dir_all(&work)?;
        Ok(work)
    }

    /// Writes this kiosk's content as a bundle signed with `signing_key` (see the module's
    /// documentation). The key is used and dropped, never stored or logged.
    pub fn export_content(&self, version: &str, signing_key: &str, out: impl Write) -> Result<()> {
        check_version(version)?;
        let pair = key_pair(signing_key)?;
        let work = self.content_work_dir()?;
        let result = (|| {
            let archive = work.join(ARCHIVE);
            let mut file = HashingWriter::new(File::create(&archive)?);
            self.write_archive(&mut file, |db| {
                Ok(crate::store::content::strip_to_content(
                    db,
                    shared_settings,
                )?)
            })?;
            let (bytes, sha) = file.finish()?;
            let manifest = Manifest {
                format: FORMAT.into(),
                version: FORMAT_VERSION,
                content_version: version.into(),
                created: crate::store::now(),
                archive_bytes: bytes,
                archive_sha256: sha,
            };
            let json = serde_json::to_vec_pretty(&manifest).expect("manifest serialises");
            let sig = pair.sign(&json);
            let mut tar = tar::Builder::new(out);
            append(&mut tar, MANIFEST, json.len() as u64, json.as_slice())?;
            append(&mut tar, SIGNATURE, 64, sig.as_ref())?;
            append(&mut tar, ARCHIVE, bytes, File::open(&archive)?)?;
            tar.into_inner()?.flush()?;
            tracing::info!(
                version,
                public_key = %base64::engine::general_purpose::STANDARD.encode(pair.public_key().as_ref()),
                "content bundle exported"
            );
            Ok(())
        })();
        let _ = std::fs::remove_dir_all(&work);
        result
    }

    /// Checks the bundle at `path` against the fleet's `public_key` (base64) and against the
    /// newest bundle applied (`replay`), then stages it through the restore's checks with this
    /// kiosk's own records kept. Returns its content version; the caller restarts the kiosk to
    /// apply it.
    pub fn apply_content(&self, path: &Path, public_key: &str, replay: Replay) -> Result<String> {
        let key = public_key_of(public_key)?;
        let data_dir = &self.config.data_dir;
        let work = self.content_work_dir()?;
        let result = (|| {
            let archive = work.join(ARCHIVE);
            let manifest = open_bundle(path, &key, &archive)?;
            let made = created(&manifest)?;
            let newest = Applied::load(data_dir);
            let last = newest
                .as_ref()
                .and_then(|a| humantime::parse_rfc3339(&a.created).ok());
            if let (Some(a), Some(last)) = (&newest, last)
                && made <= last
                && replay == Replay::Refuse
            {
                return Err(Error::Conflict(format!(
                    "this content bundle ({}, made {}) is not newer than the one applied last \
                     ({}, made {}): it would roll the content back; an administrator can force it",
                    manifest.content_version, manifest.created, a.content_version, a.created
                )));
            }
            self.restore_with(&archive, |staging| {
                Ok(self.store.keep_own(staging, merged_settings)?)
            })?;
            if last.is_none_or(|last| made > last) {
                Applied {
                    created: manifest.created.clone(),
                    content_version: manifest.content_version.clone(),
                }
                .save(data_dir)?;
            }
            tracing::info!(
                version = %crate::logs::Escaped(&manifest.content_version),
                "content bundle staged"
            );
            Ok(manifest.content_version)
        })();
        let _ = std::fs::remove_dir_all(&work);
        result
    }

    /// Characters stored (the fleet reports it).
    pub fn character_count(&self) -> Result<u64> {
        use redb::ReadableTableMetadata;
        let tx = self.store.read()?;
        Ok(tx.open_table(crate::store::tables::CHARACTERS)?.len()?)
    }
}

fn public_key_of(encoded: &str) -> Result<Vec<u8>> {
    if encoded.trim().is_empty() {
        return Err(Error::Forbidden(
            "no fleet public key is configured: content bundles cannot be checked".into(),
        ));
    }
    public_key(&FleetSettings {
        content_public_key: encoded.into(),
        ..FleetSettings::default()
    })
}

/// Reads the bundle: its manifest and signature (checked), and its archive into `archive`
/// (checked against the manifest).
fn open_bundle(path: &Path, key: &[u8], archive: &Path) -> Result<Manifest> {
    let mut tar = tar::Archive::new(File::open(path)?);
    let mut entries = tar
        .entries()
        .map_err(|_| bad("not a content bundle: not a tar file"))?;
    let mut json = Vec::new();
    member(&mut entries, MANIFEST)?
        .take(MANIFEST_BYTES)
        .read_to_end(&mut json)?;
    let mut sig = Vec::new();
    member(&mut entries, SIGNATURE)?
        .take(128)
        .read_to_end(&mut sig)?;
    UnparsedPublicKey::new(&signature::ED25519, key)
        .verify(&json, &sig)
        .map_err(|_| Error::Forbidden("the bundle is not signed with the fleet's key".into()))?;
    let manifest: Manifest = serde_json::from_slice(&json)
        .map_err(|e| bad(format!("the bundle's manifest is unreadable: {e}")))?;
    if manifest.format != FORMAT || manifest.version != FORMAT_VERSION {
        return Err(bad(format!(
            "unknown content bundle format {:?} version {}",
            manifest.format, manifest.version
        )));
    }
    check_version(&manifest.content_version)?;
    let mut entry = member(&mut entries, ARCHIVE)?;
    let mut out = HashingWriter::new(File::create(archive)?);
    io::copy(&mut (&mut entry).take(manifest.archive_bytes + 1), &mut out)?;
    let (bytes, sha) = out.finish()?;
    if bytes != manifest.archive_bytes || sha != manifest.archive_sha256 {
        return Err(bad("the bundle's archive differs from its signed manifest"));
    }
    Ok(manifest)
}

/// The next member of a bundle, which must be `want`.
fn member<'a>(entries: &mut tar::Entries<'a, File>, want: &str) -> Result<tar::Entry<'a, File>> {
    let entry = entries
        .next()
        .ok_or_else(|| bad(format!("not a content bundle: {want} is missing")))?
        .map_err(|_| bad("not a content bundle: damaged"))?;
    if *entry.path_bytes() != *want.as_bytes() || !entry.header().entry_type().is_file() {
        return Err(bad(format!("not a content bundle: {want} expected")));
    }
    Ok(entry)
}

/// A file written while its SHA-256 is computed.
struct HashingWriter {
    file: File,
    hasher: Sha256,
    bytes: u64,
}

impl HashingWriter {
    fn new(file: File) -> HashingWriter {
        HashingWriter {
            file,
            hasher: Sha256::new(),
            bytes: 0,
        }
    }

    fn finish(self) -> io::Result<(u64, String)> {
        self.file.sync_all()?;
        Ok((
            self.bytes,
            crate::store::blobs::hex(&self.hasher.finalize()),
        ))
    }
}

impl Write for HashingWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_settings_carry_no_secret_and_merging_keeps_ours() {
        let mut mine = Settings::default();
        mine.llm.base_url = "http://10.0.0.2/v1".into();
        mine.llm.api_key = "sk-mine-1234567890".into();
        mine.tts.base_url = "http://10.0.0.3/v1".into();
        mine.tts.api_key = "sk-tts-1234567890".into();
        mine.fleet.target_token = "token-of-this-kiosk".into();
        mine.kiosk.volume = 35;
        let shared = shared_settings(&serde_json::to_vec(&mine).unwrap());
        let text = String::from_utf8(shared.clone()).unwrap();
        for secret in ["sk-mine", "sk-tts", "token-of-this-kiosk"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        // The other kiosk: same language model address, another speech address.
        let mut theirs: Settings = serde_json::from_slice(&shared).unwrap();
        theirs.tts.base_url = "http://10.9.9.9/v1".into();
        let merged: Settings = serde_json::from_slice(
            &merged_settings(
                Some(&serde_json::to_vec(&theirs).unwrap()),
                Some(&serde_json::to_vec(&mine).unwrap()),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(merged.llm.api_key, mine.llm.api_key);
        assert_eq!(merged.tts.api_key, "", "a key never follows a new address");
        assert_eq!(merged.fleet, mine.fleet);
        assert_eq!(merged.kiosk.volume, 35);
    }

    #[test]
    fn content_versions_are_plain_names() {
        assert!(check_version("2026-11.3+hall-b").is_ok());
        for bad in ["", "a/b", "a b", "..\n"] {
            assert!(check_version(bad).is_err(), "{bad:?}");
        }
    }
}
