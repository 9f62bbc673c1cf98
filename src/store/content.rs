//! A kiosk's content as one database: what a content bundle carries (characters, their images,
//! clips and knowledge, the site, the settings) apart from what is this kiosk's own (its history,
//! tasks, sessions, client keys, logins, launch parameters, its availability, the meta table with
//! its password).
//!
//! `strip_to_content` empties the own tables of a database copy before it is exported;
//! `keep_own` puts this kiosk's own tables back into a staged restore of a bundle, so that
//! applying content changes nothing else.

use std::fs;
use std::path::Path;

use redb::{
    Database, ReadTransaction, ReadableDatabase, ReadableTable, TableDefinition, TableHandle,
    WriteTransaction,
};

use super::blobs::BlobRef;
use super::records::Artifact;
use super::tables::{
    self, ADMIN_SESSIONS, ARTIFACTS, AVAILABILITY, BLOBS, CLIENT_KEYS, DAILY, LAUNCH,
    LOGIN_FAILURES, MESSAGES, META, SESSION_TASKS, SESSIONS, SETTINGS, TASK_EVENTS, TASKS, Visit,
};
use super::{Result, SCHEMA_VERSION, Store, StoreError, decode_u64, from_json, to_json};

/// The tables that belong to one kiosk and never travel in a content bundle.
fn own(name: &str) -> bool {
    [
        META.name(),
        SESSIONS.name(),
        MESSAGES.name(),
        DAILY.name(),
        AVAILABILITY.name(),
        TASKS.name(),
        SESSION_TASKS.name(),
        TASK_EVENTS.name(),
        ARTIFACTS.name(),
        ADMIN_SESSIONS.name(),
        CLIENT_KEYS.name(),
        LOGIN_FAILURES.name(),
        LAUNCH.name(),
    ]
    .contains(&name)
}

/// The blobs the own tables hold (task artifacts' files).
fn own_blobs(read: &ReadTransaction) -> Result<Vec<BlobRef>> {
    let mut blobs = Vec::new();
    for item in read.open_table(ARTIFACTS)?.iter()? {
        let artifact: Artifact = from_json(item?.1.value())?;
        blobs.extend(artifact.blob);
    }
    Ok(blobs)
}

/// Empties the own tables of the database at `path` (the meta table keeps only its schema
/// version), drops their blobs from the blob index, and rewrites the settings document with
/// `settings` (which takes out the secrets and local settings).
pub fn strip_to_content(path: &Path, settings: impl FnOnce(&[u8]) -> Vec<u8>) -> Result<()> {
    let db = Database::builder().set_cache_size(4 << 20).open(path)?;
    let tx = db.begin_write()?;
    {
        let read = db.begin_read()?;
        let mut index = tx.open_table(BLOBS)?;
        for blob in own_blobs(&read)? {
            index.remove(blob.id.as_str())?;
        }
    }
    struct Clear<'a>(&'a WriteTransaction);
    impl Visit for Clear<'_> {
        fn visit<K: redb::Key + 'static, V: redb::Value + 'static>(
            &mut self,
            def: TableDefinition<K, V>,
        ) -> Result<()> {
            if own(def.name()) && def.name() != META.name() {
                self.0.open_table(def)?.retain(|_, _| false)?;
            }
            Ok(())
        }
    }
    tables::each(&mut Clear(&tx))?;
    tx.open_table(META)?.retain(|k, _| k == "schema_version")?;
    let current = tx
        .open_table(SETTINGS)?
        .get("settings")?
        .map(|v| v.value().to_vec());
    if let Some(current) = current {
        tx.open_table(SETTINGS)?
            .insert("settings", settings(&current).as_slice())?;
    }
    tx.commit()?;
    Ok(())
}

impl Store {
    /// Puts this kiosk's own tables into the staged restore in `staging` (its database and
    /// `blobs/`), with their blobs linked in, and the settings document `settings` makes of
    /// the bundle's and ours. The bundle must have this build's schema version.
    pub fn keep_own(
        &self,
        staging: &Path,
        settings: impl FnOnce(Option<&[u8]>, Option<&[u8]>) -> Option<Vec<u8>>,
    ) -> Result<()> {
        let db = Database::builder()
            .set_cache_size(4 << 20)
            .open(staging.join(super::backup::DATABASE))?;
        let tx = db.begin_write()?;
        let theirs = tx
            .open_table(META)?
            .get("schema_version")?
            .map(|v| decode_u64(v.value()));
        if theirs != Some(SCHEMA_VERSION) {
            return Err(StoreError::Corrupt(format!(
                "the bundle was made with schema version {}, this kiosk has {SCHEMA_VERSION}: bring both to the same firmware first",
                theirs.map_or("none".into(), |v| v.to_string())
            )));
        }
        let read = self.read()?;
        struct Own<'a> {
            from: &'a ReadTransaction,
            to: &'a WriteTransaction,
        }
        impl Visit for Own<'_> {
            fn visit<K: redb::Key + 'static, V: redb::Value + 'static>(
                &mut self,
                def: TableDefinition<K, V>,
            ) -> Result<()> {
                if !own(def.name()) {
                    return Ok(());
                }
                let mut to = self.to.open_table(def)?;
                to.retain(|_, _| false)?;
                for item in self.from.open_table(def)?.iter()? {
                    let (k, v) = item?;
                    to.insert(k.value(), v.value())?;
                }
                Ok(())
            }
        }
        tables::each(&mut Own {
            from: &read,
            to: &tx,
        })?;
        let blobs = own_blobs(&read)?;
        {
            let mut index = tx.open_table(BLOBS)?;
            for blob in &blobs {
                index.insert(blob.id.as_str(), to_json(blob).as_slice())?;
            }
        }
        for blob in &blobs {
            let dest = staging.join("blobs").join(&blob.id);
            if !dest.exists() {
                self.blobs().link_to(blob, &dest)?;
            }
        }
        let ours = read
            .open_table(SETTINGS)?
            .get("settings")?
            .map(|v| v.value().to_vec());
        let bundle = tx
            .open_table(SETTINGS)?
            .get("settings")?
            .map(|v| v.value().to_vec());
        match settings(bundle.as_deref(), ours.as_deref()) {
            Some(doc) => {
                tx.open_table(SETTINGS)?
                    .insert("settings", doc.as_slice())?;
            }
            None => {
                tx.open_table(SETTINGS)?.remove("settings")?;
            }
        }
        tx.commit()?;
        fs::File::open(staging.join("blobs"))?.sync_all()?;
        Ok(())
    }
}
