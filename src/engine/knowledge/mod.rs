//! Knowledge: files a character knows, turned into searchable passages.
//!
//! `extract` pulls plain text out of documents, `chunk` cuts it into overlapping passages,
//! `tokenize` turns text into terms and `index` keeps the BM25 index in redb. Indexing runs on a
//! background thread that picks up every source whose status is `indexing`, so work interrupted
//! by a crash resumes at the next start. A source's `generation` is bumped by every upload or
//! reindex, and a run commits only if the generation it started from is still current: the
//! newest request always wins.

pub mod chunk;
pub mod extract;
pub mod faq;
pub mod index;
pub mod recordings;
pub mod screen;
pub mod tokenize;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;

use redb::{ReadableTable, WriteTransaction};
use serde::Serialize;

use super::error::{Result, bad, not_found};
use super::language::Language;
use super::{CharacterId, Engine, is_id, new_id};
use crate::store::records::{Source, source_fields};
use crate::store::tables::{CHARACTERS, CHUNKS, SOURCES};
use crate::store::{self, BlobRef, StoreError, blobs};

/// A file received for a character, already stored as an unowned blob.
pub struct Upload {
    pub filename: String,
    pub relative_path: Option<String>,
    pub blob: BlobRef,
    /// The language it is written in, if the uploader said (else its name may say, see
    /// `Engine::source_language`).
    pub language: Option<crate::engine::language::Language>,
}

#[derive(Debug, Serialize)]
pub struct Skipped {
    pub filename: String,
    pub reason: String,
}

source_fields! {
    /// A source as the API shows it.
    #[derive(Debug, Serialize)]
    pub struct SourceView {}
}

impl From<Source> for SourceView {
    fn from(s: Source) -> Self {
        SourceView {
            id: s.id,
            title: s.title,
            filename: s.filename,
            mime_type: s.mime_type,
            relative_path: s.relative_path,
            size: s.size,
            indexable: s.indexable,
            status: s.status,
            chunk_count: s.chunk_count,
            error: s.error,
            created_at: s.created_at,
            updated_at: s.updated_at,
            indexed_at: s.indexed_at,
            language: s.language,
        }
    }
}

/// A passage found by a knowledge search.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SearchResult {
    pub source_id: String,
    pub title: String,
    pub filename: String,
    pub content: String,
    pub score: f32,
}

/// The language a source is written in: as its uploader said, else as its name says
/// (`faq.de.md` when `de` is one of the museum's `languages`), else the museum's default.
pub fn source_language(s: &Source, languages: &[Language]) -> Language {
    if let Some(l) = Language::parse(&s.language) {
        return l;
    }
    let named = s
        .filename
        .rsplit('.')
        .nth(1)
        .and_then(Language::parse)
        .and_then(|tag| languages.iter().find(|l| **l == tag));
    named
        .or(languages.first())
        .cloned()
        .unwrap_or_else(Language::english)
}

/// The background indexer: a thread woken whenever a source needs indexing.
#[derive(Default)]
pub struct Indexer {
    wake: Mutex<Option<SyncSender<()>>>,
    /// Bumped whenever any character's searchable knowledge changes.
    epoch: AtomicU64,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Set by `stop`: runs in progress are abandoned, not committed.
    stopping: AtomicBool,
}

impl Indexer {
    /// Starts the indexing thread; it stops when the engine is dropped.
    pub fn start(engine: &Arc<Engine>) -> Result<()> {
        let (tx, rx) = sync_channel(1);
        *engine.knowledge.wake.lock().expect("indexer lock") = Some(tx);
        let weak = Arc::downgrade(engine);
        let thread = std::thread::Builder::new()
            .name("knowledge-indexer".into())
            .spawn(move || run(weak, rx))?;
        *engine.knowledge.thread.lock().expect("indexer lock") = Some(thread);
        engine.knowledge.wake();
        Ok(())
    }

    /// Stops the indexing thread and waits until it has let go of the engine (and so of the
    /// store). A run in progress is abandoned before it commits; its source stays `indexing`
    /// and is indexed again at the next start. Blocks for at most the rest of one extraction.
    pub fn stop(&self) {
        self.abandon();
        self.wake.lock().expect("indexer lock").take();
        if let Some(thread) = self.thread.lock().expect("indexer lock").take() {
            let _ = thread.join();
        }
    }

    /// Marks the run in progress as abandoned without waiting for the thread: asked as soon as
    /// the kiosk is told to stop, so that no indexing commits while the front doors drain.
    pub fn abandon(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    fn changed(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }

    fn wake(&self) {
        if let Some(tx) = &*self.wake.lock().expect("indexer lock") {
            // A full channel means a wake-up is already pending, which is enough.
            let _ = tx.try_send(());
        }
    }
}

fn run(engine: Weak<Engine>, wake: Receiver<()>) {
    while wake.recv().is_ok() {
        loop {
            let Some(engine) = engine.upgrade() else {
                return;
            };
            if engine.knowledge.stopping() {
                return;
            }
            match engine.index_next() {
                Ok(true) => continue,
                Ok(false) => break,
                Err(e) => {
                    tracing::error!("knowledge indexing stopped: {e}");
                    break;
                }
            }
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Why a relative path cannot name a stored file, if it cannot.
fn unsafe_path(p: &str) -> Option<&'static str> {
    if p.is_empty() || p.len() > 512 {
        Some("path must be 1 to 512 bytes")
    } else if p.starts_with('/') || p.contains('\\') || p.contains(':') {
        Some("path must be relative, with '/' separators")
    } else if p.chars().any(char::is_control) {
        Some("path contains control characters")
    } else if p
        .split('/')
        .any(|seg| seg.is_empty() || seg == "." || seg == "..")
    {
        Some("path has an empty, '.' or '..' segment")
    } else {
        None
    }
}

fn title_of(filename: &str) -> String {
    filename
        .rsplit_once('.')
        .map_or(filename, |(t, _)| t)
        .to_string()
}

impl Engine {
    /// A number that changes whenever searchable knowledge changes (for caches built from it).
    pub fn knowledge_epoch(&self) -> u64 {
        self.knowledge.epoch.load(Ordering::SeqCst)
    }

    /// Everything a character knows as text: its own description, the questions about itself
    /// that the offline engine answers, and every indexed passage.
    pub fn knowledge_texts(&self, character_id: &CharacterId) -> Result<Vec<String>> {
        let c = self.character_record(character_id)?;
        let mut out = vec![
            c.name,
            c.description,
            c.personality,
            c.welcome_message,
            crate::engine::providers::local::answer::WHO_QUESTIONS.to_string(),
        ];
        out.extend(
            self.knowledge_sources_text(character_id)?
                .into_iter()
                .flatten(),
        );
        Ok(out)
    }

    /// The passages of each of a character's knowledge sources, in order.
    pub fn knowledge_sources_text(&self, character_id: &CharacterId) -> Result<Vec<Vec<String>>> {
        Ok(self
            .knowledge_by_language(character_id)?
            .into_iter()
            .map(|(_, passages)| passages)
            .collect())
    }

    /// Each source's passages in order, with the language it is written in.
    pub fn knowledge_by_language(
        &self,
        character_id: &CharacterId,
    ) -> Result<Vec<(Language, Vec<String>)>> {
        let settings = self.settings();
        let tx = self.store.read()?;
        self.character_exists(&tx, character_id)?;
        let chunks = tx.open_table(CHUNKS)?;
        let mut out = Vec::new();
        for s in store::scan::<Source>(&tx.open_table(SOURCES)?, character_id)? {
            let mut passages = Vec::new();
            for item in chunks.range((s.id.as_str(), 0)..=(s.id.as_str(), u32::MAX))? {
                passages.push(item?.1.value().to_string());
            }
            out.push((source_language(&s, settings.languages()), passages));
        }
        Ok(out)
    }

    fn character_exists(&self, tx: &redb::ReadTransaction, id: &CharacterId) -> Result<()> {
        if tx.open_table(CHARACTERS)?.get(id.as_str())?.is_some() {
            Ok(())
        } else {
            Err(not_found("no such character"))
        }
    }

    /// A character's knowledge sources, newest first.
    pub fn sources(&self, character_id: &CharacterId) -> Result<Vec<SourceView>> {
        let tx = self.store.read()?;
        self.character_exists(&tx, character_id)?;
        let mut all: Vec<Source> = store::scan(&tx.open_table(SOURCES)?, character_id)?;
        all.sort_by(|a, b| (&b.created_at, &b.id).cmp(&(&a.created_at, &a.id)));
        Ok(all.into_iter().map(Into::into).collect())
    }

    /// Adds uploaded files as sources (a relative path seen before replaces that source, under
    /// the same id) and queues the indexable ones. Files with unsafe paths are skipped.
    pub fn add_sources(
        &self,
        character_id: &CharacterId,
        uploads: Vec<Upload>,
    ) -> Result<(Vec<SourceView>, Vec<Skipped>)> {
        let mut skipped = Vec::new();
        let mut accepted = Vec::new();
        let mut discard = Vec::new();
        for u in uploads {
            let path = u
                .relative_path
                .clone()
                .unwrap_or_else(|| u.filename.clone());
            match unsafe_path(&path) {
                Some(reason) => {
                    skipped.push(Skipped {
                        filename: path,
                        reason: reason.into(),
                    });
                    discard.push(u.blob);
                }
                None => accepted.push((path, u)),
            }
        }
        let result = self.store_sources(character_id, accepted, &mut discard);
        self.store.blobs().remove_all(&discard);
        self.knowledge.changed();
        let sources = result?;
        if sources.is_empty() {
            return Err(bad(format!(
                "no file was accepted: {}",
                skipped
                    .iter()
                    .map(|s| format!("{} ({})", s.filename, s.reason))
                    .collect::<Vec<_>>()
                    .join("; ")
            )));
        }
        self.knowledge.wake();
        Ok((sources, skipped))
    }

    fn store_sources(
        &self,
        character_id: &CharacterId,
        accepted: Vec<(String, Upload)>,
        discard: &mut Vec<BlobRef>,
    ) -> Result<Vec<SourceView>> {
        let tx = self.store.write()?;
        {
            let chars = tx.open_table(CHARACTERS)?;
            if chars.get(character_id.as_str())?.is_none() {
                discard.extend(accepted.into_iter().map(|(_, u)| u.blob));
                return Err(not_found("no such character"));
            }
        }
        let mut existing: Vec<Source> = store::scan(&tx.open_table(SOURCES)?, character_id)?;
        let mut out = Vec::new();
        let mut replaced = Vec::new();
        for (path, u) in accepted {
            let now = store::now();
            let filename = path.rsplit('/').next().unwrap_or(&path).to_string();
            let indexable = extract::is_indexable(&filename);
            // A path given twice in one request is replaced too: the last file wins.
            let previous = match out.iter().position(|s: &Source| s.relative_path == path) {
                Some(i) => Some(out.remove(i)),
                None => existing
                    .iter()
                    .position(|s| s.relative_path == path)
                    .map(|i| existing.swap_remove(i)),
            };
            let source = Source {
                id: previous.as_ref().map_or_else(new_id, |p| p.id.clone()),
                character_id: character_id.to_string(),
                title: title_of(&filename),
                mime_type: extract::mime_for(&filename).into(),
                filename,
                relative_path: path,
                size: u.blob.size,
                indexable,
                status: if indexable { "indexing" } else { "ready" }.into(),
                chunk_count: 0,
                token_count: 0,
                error: String::new(),
                created_at: previous
                    .as_ref()
                    .map_or_else(|| now.clone(), |p| p.created_at.clone()),
                updated_at: now,
                indexed_at: None,
                generation: previous.as_ref().map_or(1, |p| p.generation + 1),
                language: u.language.map(|l| l.tag().to_string()).unwrap_or_default(),
                blob: u.blob,
            };
            if let Some(p) = previous {
                index::remove(&tx, &p.id)?;
                blobs::unregister(&tx, &p.blob)?;
                replaced.push(p.blob);
            }
            blobs::register(&tx, &source.blob)?;
            tx.open_table(SOURCES)?.insert(
                store::key(&[character_id, &source.id]).as_str(),
                store::to_json(&source).as_slice(),
            )?;
            out.push(source);
        }
        match tx.commit() {
            Ok(()) => {
                discard.extend(replaced);
                Ok(out.into_iter().map(Into::into).collect())
            }
            Err(e) => {
                discard.extend(out.into_iter().map(|s| s.blob));
                Err(StoreError::from(e).into())
            }
        }
    }

    pub fn delete_source(&self, character_id: &CharacterId, source_id: &str) -> Result<()> {
        let tx = self.store.write()?;
        let key = store::key(&[character_id, source_id]);
        let source: Source = store::get(&tx.open_table(SOURCES)?, &key)?
            .filter(|_| is_id(source_id))
            .ok_or_else(|| not_found("no such knowledge source"))?;
        tx.open_table(SOURCES)?.remove(key.as_str())?;
        index::remove(&tx, source_id)?;
        blobs::unregister(&tx, &source.blob)?;
        tx.commit()?;
        self.store.blobs().remove_all(&[source.blob]);
        self.knowledge.changed();
        Ok(())
    }

    /// Queues a source for indexing again; a run already going for it will not commit.
    pub fn reindex_source(
        &self,
        character_id: &CharacterId,
        source_id: &str,
    ) -> Result<SourceView> {
        let tx = self.store.write()?;
        let key = store::key(&[character_id, source_id]);
        let mut source: Source = store::get(&tx.open_table(SOURCES)?, &key)?
            .filter(|_| is_id(source_id))
            .ok_or_else(|| not_found("no such knowledge source"))?;
        if !source.indexable {
            return Err(bad("this file type is stored but cannot be indexed"));
        }
        source.generation += 1;
        source.status = "indexing".into();
        source.error.clear();
        source.updated_at = store::now();
        tx.open_table(SOURCES)?
            .insert(key.as_str(), store::to_json(&source).as_slice())?;
        tx.commit()?;
        self.knowledge.wake();
        Ok(source.into())
    }

    /// Removes all knowledge of a character inside the caller's transaction; returns the blobs
    /// to delete after it commits.
    pub(super) fn remove_knowledge_of(
        &self,
        tx: &WriteTransaction,
        character_id: &str,
    ) -> Result<Vec<BlobRef>> {
        let sources: Vec<Source> = store::scan(&tx.open_table(SOURCES)?, character_id)?;
        tx.open_table(crate::store::tables::FAQS)?
            .remove(character_id)?;
        let (lo, hi) = store::prefix_bounds(character_id);
        tx.open_table(SOURCES)?
            .retain_in(lo.as_str()..hi.as_str(), |_, _| false)?;
        let mut out = Vec::new();
        for s in sources {
            index::remove(tx, &s.id)?;
            blobs::unregister(tx, &s.blob)?;
            out.push(s.blob);
        }
        Ok(out)
    }

    /// The best passages of a character's knowledge for `query`.
    /// The passages best matching `query`; with a `language`, those of the knowledge in that
    /// language, unless none of it matches (then any language's: a language model translates).
    pub fn search_knowledge(
        &self,
        character_id: &str,
        query: &str,
        top_k: Option<usize>,
        language: Option<&Language>,
    ) -> Result<Vec<SearchResult>> {
        if query.trim().is_empty() {
            return Err(bad("query must not be blank"));
        }
        let top_k = top_k.unwrap_or(5).clamp(1, 50);
        let settings = self.settings();
        let tx = self.store.read()?;
        self.character_exists(&tx, &CharacterId::parse(character_id)?)?;
        let mut sources: Vec<Source> =
            store::scan::<Source>(&tx.open_table(SOURCES)?, character_id)?
                .into_iter()
                .filter(|s| s.chunk_count > 0)
                .collect();
        let mut hits = Vec::new();
        if let Some(language) = language {
            let all = sources.clone();
            sources.retain(|s| source_language(s, settings.languages()).same_as(language));
            hits = index::search(&tx, &sources, query, top_k)?;
            if hits.is_empty() {
                sources = all;
            }
        }
        if hits.is_empty() {
            hits = index::search(&tx, &sources, query, top_k)?;
        }
        Ok(hits
            .into_iter()
            .map(|h| {
                let s = &sources[h.source];
                SearchResult {
                    source_id: s.id.clone(),
                    title: s.title.clone(),
                    filename: s.filename.clone(),
                    content: h.content,
                    score: h.score,
                }
            })
            .collect())
    }

    /// Indexes one source waiting for it; false when none is waiting.
    fn index_next(&self) -> Result<bool> {
        let pending = {
            let tx = self.store.read()?;
            let table = tx.open_table(SOURCES)?;
            let mut found = None;
            for item in table.iter()? {
                let (_, value) = item?;
                // Most sources are settled; only decode the ones that may be waiting.
                if !contains(value.value(), br#""status":"indexing""#) {
                    continue;
                }
                let s: Source = store::from_json(value.value())?;
                if s.status == "indexing" {
                    found = Some(s);
                    break;
                }
            }
            found
        };
        let Some(source) = pending else {
            return Ok(false);
        };
        let outcome = self
            .store
            .blobs()
            .read(&source.blob)
            .map_err(|e| format!("cannot read the stored file: {e}"))
            .and_then(|bytes| {
                extract::extract_text(&source.filename, &bytes).map_err(|e| e.to_string())
            })
            .map(|text| index::build(chunk::chunk_text(&text)));
        if self.knowledge.stopping() {
            return Ok(false);
        }
        let tx = self.store.write()?;
        let key = store::key(&[&source.character_id, &source.id]);
        let Some(mut current) = store::get::<Source>(&tx.open_table(SOURCES)?, &key)? else {
            return Ok(true);
        };
        if current.generation != source.generation {
            return Ok(true);
        }
        let now = store::now();
        match outcome {
            Ok(segment) => {
                index::write(&tx, &source.id, &segment)?;
                current.status = "ready".into();
                current.chunk_count = segment.chunks.len() as u32;
                current.token_count = segment.token_count;
                current.error.clear();
                current.indexed_at = Some(now.clone());
            }
            Err(reason) => {
                index::remove(&tx, &source.id)?;
                current.status = "failed".into();
                current.chunk_count = 0;
                current.token_count = 0;
                current.error = reason;
            }
        }
        current.updated_at = now;
        tx.open_table(SOURCES)?
            .insert(key.as_str(), store::to_json(&current).as_slice())?;
        tx.commit()?;
        tracing::info!(source = %source.id, status = %current.status, chunks = current.chunk_count, "indexed knowledge");
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_paths_are_named() {
        for p in [
            "",
            "/etc/passwd",
            "a/../b",
            "..",
            "a\\b",
            "C:x",
            "a//b",
            "./a",
            "a\0b",
        ] {
            assert!(unsafe_path(p).is_some(), "{p:?}");
        }
        for p in ["a.txt", "docs/guide/faq.md", "日本語/メモ.txt"] {
            assert!(unsafe_path(p).is_none(), "{p:?}");
        }
    }
}
