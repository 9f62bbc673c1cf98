//! The site content document (hero, bio, exhibitions, contact, works) and the site image store,
//! with the validation order of the site administration seed.

use redb::ReadableTable;
use serde_json::Value;

use super::Engine;
use super::error::{Error, Result, bad};
use crate::store::tables::{SITE, SITE_IMAGES};
use crate::store::{self, BlobRef, blobs};

/// The document stored at first start and by `POST /api/data?seed=1`.
/// The stored document as `GET /api/data` answers it, read again after a write (the generation
/// tells a read that a write overtook, which is not kept): the site's every page load reads it.
#[derive(Default)]
pub struct DocumentCache(std::sync::Mutex<(u64, Option<bytes::Bytes>)>);

impl DocumentCache {
    fn invalidate(&self) {
        let mut cache = self.0.lock().expect("cache lock");
        cache.0 += 1;
        cache.1 = None;
    }
}

pub const DEFAULT_DOCUMENT: &str = include_str!("../../assets/site-default.json");

/// Keys every stored document has, checked in this order.
const REQUIRED_KEYS: &[&str] = &["hero", "bio", "exhibitions", "contact", "works"];

/// Array lengths of a stored document.
#[derive(Debug, PartialEq, serde::Serialize)]
pub struct Counts {
    pub works: usize,
    pub exhibitions: usize,
}

/// Checks an image key: one non-empty segment without `/` or `..`, so a key can never name a
/// path.
pub fn check_image_key(key: &str) -> Result<()> {
    if key.is_empty() || key.contains('/') || key.contains("..") {
        Err(bad(
            "image key must be non-empty and contain no '/' or '..'",
        ))
    } else {
        Ok(())
    }
}

/// Checks a site document (seed PUT steps 2 to 5, in order): JSON, every required key, `works`
/// and `exhibitions` arrays; the counts of both.
pub fn validate_document(body: &[u8]) -> Result<Counts> {
    let doc: Value = serde_json::from_slice(body).map_err(|e| bad(format!("invalid JSON: {e}")))?;
    for key in REQUIRED_KEYS {
        if doc.get(key).is_none() {
            return Err(bad(format!("missing key: {key}")));
        }
    }
    let works = doc["works"]
        .as_array()
        .ok_or_else(|| bad("works must be an array"))?
        .len();
    let exhibitions = doc["exhibitions"]
        .as_array()
        .ok_or_else(|| bad("exhibitions must be an array"))?
        .len();
    Ok(Counts { works, exhibitions })
}

impl Engine {
    pub(super) fn ensure_site_document(&self) -> Result<()> {
        let tx = self.store.write()?;
        if tx.open_table(SITE)?.get("document")?.is_none() {
            tx.open_table(SITE)?
                .insert("document", DEFAULT_DOCUMENT.as_bytes())?;
        }
        tx.commit()?;
        Ok(())
    }

    /// The stored document, exactly as it was given.
    pub fn site_document(&self) -> Result<bytes::Bytes> {
        let generation = {
            let cache = self.site_document.0.lock().expect("cache lock");
            if let Some(doc) = &cache.1 {
                return Ok(doc.clone());
            }
            cache.0
        };
        let tx = self.store.read()?;
        let table = tx.open_table(SITE)?;
        let doc = table.get("document")?;
        let doc = doc.map_or_else(
            || bytes::Bytes::from_static(DEFAULT_DOCUMENT.as_bytes()),
            |v| bytes::Bytes::copy_from_slice(v.value()),
        );
        let mut cache = self.site_document.0.lock().expect("cache lock");
        if cache.0 == generation {
            cache.1 = Some(doc.clone());
        }
        Ok(doc)
    }

    /// Validates (`validate_document`) and stores a document as given.
    pub fn put_site_document(&self, body: &[u8]) -> Result<Counts> {
        let counts = validate_document(body)?;
        let tx = self.store.write()?;
        tx.open_table(SITE)?.insert("document", body)?;
        tx.commit()?;
        self.site_document.invalidate();
        Ok(counts)
    }

    /// Overwrites the document with the default one.
    pub fn seed_site_document(&self) -> Result<()> {
        self.put_site_document(DEFAULT_DOCUMENT.as_bytes())
            .map(|_| ())
    }

    fn image_store_on(&self) -> Result<()> {
        if self.config.storage.image_store {
            Ok(())
        } else {
            Err(Error::Internal("the image store is not configured".into()))
        }
    }

    /// The stored object for `key`, if any.
    pub fn site_image(&self, key: &str) -> Result<Option<BlobRef>> {
        self.image_store_on()?;
        check_image_key(key)?;
        let tx = self.store.read()?;
        Ok(store::get(&tx.open_table(SITE_IMAGES)?, key)?)
    }

    /// Stores (or replaces) the object for `key`. Only an image type recognised by content is
    /// accepted (as for avatars), and the type stored is the recognised one, not the client's:
    /// the images are served from the admin's origin, where an HTML or SVG file would run as a
    /// script of the site.
    pub fn put_site_image(&self, key: &str, bytes: &[u8]) -> Result<BlobRef> {
        self.image_store_on()?;
        check_image_key(key)?;
        let (content_type, _) = super::media::sniff_image(bytes).ok_or_else(|| {
            Error::UnsupportedMedia("an image must be PNG, JPEG, GIF or WebP".into())
        })?;
        let blob = self.store.blobs().put(bytes, content_type)?;
        let stored = (|| {
            let tx = self.store.write()?;
            let old = tx
                .open_table(SITE_IMAGES)?
                .insert(key, store::to_json(&blob).as_slice())?
                .map(|v| store::from_json::<BlobRef>(v.value()))
                .transpose()?;
            if let Some(old) = &old {
                blobs::unregister(&tx, old)?;
            }
            blobs::register(&tx, &blob)?;
            tx.commit()?;
            Ok(old)
        })();
        match stored {
            Ok(old) => {
                self.store.blobs().remove_all(old.as_slice());
                Ok(blob)
            }
            Err(e) => {
                self.store.blobs().remove_all(&[blob]);
                Err(e)
            }
        }
    }

    /// Deletes the object for `key`; a missing key is not an error (seed DELETE step 4).
    pub fn delete_site_image(&self, key: &str) -> Result<()> {
        self.image_store_on()?;
        check_image_key(key)?;
        let tx = self.store.write()?;
        let old = tx
            .open_table(SITE_IMAGES)?
            .remove(key)?
            .map(|v| store::from_json::<BlobRef>(v.value()))
            .transpose()?;
        if let Some(old) = &old {
            blobs::unregister(&tx, old)?;
        }
        tx.commit()?;
        self.store.blobs().remove_all(old.as_slice());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_document_is_complete() {
        let doc: Value = serde_json::from_str(DEFAULT_DOCUMENT).unwrap();
        for key in REQUIRED_KEYS {
            assert!(doc.get(key).is_some(), "{key}");
        }
        assert_eq!(doc["works"].as_array().unwrap().len(), 3);
        assert_eq!(doc["exhibitions"].as_array().unwrap().len(), 2);
        for item in doc["works"]
            .as_array()
            .unwrap()
            .iter()
            .chain(doc["exhibitions"].as_array().unwrap())
        {
            assert!(item["id"].is_string() && item["title"].is_string());
        }
    }

    #[test]
    fn image_keys() {
        for bad in ["", "a/b", "..", "a..b"] {
            assert!(check_image_key(bad).is_err(), "{bad:?}");
        }
        assert!(check_image_key("hero.jpg").is_ok());
    }
}
