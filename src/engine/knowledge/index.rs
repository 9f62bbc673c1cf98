//! The BM25 index of a character's knowledge, kept in redb.
//!
//! Each source is a segment of its own: its passages in `CHUNKS` and, per term, a packed
//! postings list in `POSTINGS` keyed by (source, term). Replacing or deleting a source touches
//! only its own keys, and a search reads just the postings of the query's terms. Corpus
//! statistics (passage count, total length) are kept on the source records.

use std::collections::HashMap;

use redb::{ReadTransaction, WriteTransaction};

use super::tokenize::{is_stopword, tokenize};
use crate::store::records::Source;
use crate::store::tables::{CHUNKS, POSTINGS};
use crate::store::{Result, StoreError};

const K1: f32 = 1.2;
const B: f32 = 0.75;
/// One posting: chunk number (u32), term frequency (u16), chunk length in terms (u16), LE.
const POSTING_BYTES: usize = 8;
/// Upper bound of every term (terms are alphanumeric, so none starts with U+10FFFF).
const TERM_MAX: &str = "\u{10FFFF}";

/// What indexing a text produced, ready to be written.
pub struct Segment {
    pub chunks: Vec<String>,
    pub postings: HashMap<String, Vec<u8>>,
    pub token_count: u64,
}

/// Tokenises passages and builds their postings (CPU only; no store access).
pub fn build(chunks: Vec<String>) -> Segment {
    let mut postings: HashMap<String, Vec<u8>> = HashMap::new();
    let mut token_count = 0u64;
    let mut tf: HashMap<String, u16> = HashMap::new();
    for (n, chunk) in chunks.iter().enumerate() {
        let terms = tokenize(chunk);
        let len = terms.len().min(u16::MAX as usize) as u16;
        token_count += len as u64;
        tf.clear();
        for t in terms {
            let c = tf.entry(t).or_default();
            *c = c.saturating_add(1);
        }
        for (term, f) in tf.drain() {
            let list = postings.entry(term).or_default();
            list.extend_from_slice(&(n as u32).to_le_bytes());
            list.extend_from_slice(&f.to_le_bytes());
            list.extend_from_slice(&len.to_le_bytes());
        }
    }
    Segment {
        chunks,
        postings,
        token_count,
    }
}

/// Writes a source's segment, replacing whatever it had.
pub fn write(tx: &WriteTransaction, source_id: &str, segment: &Segment) -> Result<()> {
    remove(tx, source_id)?;
    let mut chunks = tx.open_table(CHUNKS)?;
    for (n, text) in segment.chunks.iter().enumerate() {
        chunks.insert((source_id, n as u32), text.as_str())?;
    }
    let mut postings = tx.open_table(POSTINGS)?;
    for (term, list) in &segment.postings {
        postings.insert((source_id, term.as_str()), list.as_slice())?;
    }
    Ok(())
}

/// Removes a source's passages and postings.
pub fn remove(tx: &WriteTransaction, source_id: &str) -> Result<()> {
    tx.open_table(CHUNKS)?
        .retain_in((source_id, 0)..=(source_id, u32::MAX), |_, _| false)?;
    tx.open_table(POSTINGS)?
        .retain_in((source_id, "")..=(source_id, TERM_MAX), |_, _| false)?;
    Ok(())
}

/// One passage found by `search`.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// Index into the `sources` slice given to `search`.
    pub source: usize,
    pub chunk: u32,
    pub score: f32,
    pub content: String,
}

/// Ranks the passages of `sources` against `query` with BM25 and returns the best `top_k`.
/// Filler words are ignored unless the query has nothing else.
pub fn search(
    tx: &ReadTransaction,
    sources: &[Source],
    query: &str,
    top_k: usize,
) -> Result<Vec<Hit>> {
    let mut terms = tokenize(query);
    terms.sort();
    terms.dedup();
    if terms.iter().any(|t| !is_stopword(t)) {
        terms.retain(|t| !is_stopword(t));
    }
    let n_docs: u64 = sources.iter().map(|s| s.chunk_count as u64).sum();
    if terms.is_empty() || n_docs == 0 || top_k == 0 {
        return Ok(Vec::new());
    }
    let total_len: u64 = sources.iter().map(|s| s.token_count).sum();
    let avgdl = (total_len as f32 / n_docs as f32).max(1.0);
    let postings = tx.open_table(POSTINGS)?;
    let mut scores: HashMap<(usize, u32), f32> = HashMap::new();
    for term in &terms {
        let mut lists = Vec::new();
        let mut df = 0usize;
        for (i, s) in sources.iter().enumerate() {
            if let Some(v) = postings.get((s.id.as_str(), term.as_str()))? {
                let bytes = v.value().to_vec();
                df += bytes.len() / POSTING_BYTES;
                lists.push((i, bytes));
            }
        }
        if df == 0 {
            continue;
        }
        let idf = (1.0 + (n_docs as f32 - df as f32 + 0.5) / (df as f32 + 0.5)).ln();
        for (i, bytes) in lists {
            for p in bytes.chunks_exact(POSTING_BYTES) {
                let chunk = u32::from_le_bytes([p[0], p[1], p[2], p[3]]);
                let tf = u16::from_le_bytes([p[4], p[5]]) as f32;
                let dl = u16::from_le_bytes([p[6], p[7]]) as f32;
                let s = idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * dl / avgdl));
                *scores.entry((i, chunk)).or_default() += s;
            }
        }
    }
    let mut ranked: Vec<((usize, u32), f32)> = scores.into_iter().collect();
    let by_score =
        |a: &((usize, u32), f32), b: &((usize, u32), f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if ranked.len() > top_k {
        ranked.select_nth_unstable_by(top_k - 1, by_score);
        ranked.truncate(top_k);
    }
    ranked.sort_by(by_score);
    let chunks = tx.open_table(CHUNKS)?;
    ranked
        .into_iter()
        .map(|((source, chunk), score)| {
            let content = chunks
                .get((sources[source].id.as_str(), chunk))?
                .map(|v| v.value().to_string())
                .ok_or_else(|| StoreError::Corrupt("postings name a missing passage".into()))?;
            Ok(Hit {
                source,
                chunk,
                score,
                content,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{BlobRef, Store};

    fn source(id: &str, seg: &Segment) -> Source {
        Source {
            id: id.into(),
            character_id: String::new(),
            title: id.into(),
            filename: String::new(),
            mime_type: String::new(),
            relative_path: String::new(),
            size: 0,
            indexable: true,
            status: "ready".into(),
            chunk_count: seg.chunks.len() as u32,
            token_count: seg.token_count,
            error: String::new(),
            created_at: String::new(),
            updated_at: String::new(),
            indexed_at: None,
            generation: 0,
            language: String::new(),
            blob: BlobRef {
                id: String::new(),
                sha256: String::new(),
                size: 0,
                content_type: String::new(),
            },
        }
    }

    #[test]
    fn ranks_the_passage_that_answers_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), 1 << 20).unwrap();
        let a = build(vec![
            "The museum opens at 9 am.".into(),
            "The museum closes at 6 pm on weekdays and 8 pm on Fridays.".into(),
            "Tickets cost 12 euros.".into(),
        ]);
        let b = build(vec![
            "The cafe closes at 5 pm.".into(),
            "Dinosaurs lived long ago.".into(),
        ]);
        let tx = store.write().unwrap();
        write(&tx, "a", &a).unwrap();
        write(&tx, "b", &b).unwrap();
        tx.commit().unwrap();
        let sources = [source("a", &a), source("b", &b)];
        let tx = store.read().unwrap();
        let hits = search(&tx, &sources, "When does the museum close?", 2).unwrap();
        assert!(hits[0].content.contains("closes at 6 pm"), "{hits:?}");
        assert_eq!(hits.len(), 2);
        assert!(hits[0].score >= hits[1].score);
        assert!(search(&tx, &sources, "zebra", 3).unwrap().is_empty());
        drop(tx);

        let tx = store.write().unwrap();
        remove(&tx, "a").unwrap();
        tx.commit().unwrap();
        let tx = store.read().unwrap();
        let left = search(&tx, &sources[1..], "closes", 5).unwrap();
        assert_eq!(left.len(), 1);
        assert!(left[0].content.contains("cafe"));
    }
}
