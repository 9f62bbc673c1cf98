//! Terms for the BM25 index.
//!
//! Documents and queries go through the same [`tokenize`], so the only requirement is that it is
//! deterministic and matches what people type. It is deliberately simple and predictable: no
//! language detection, no dictionary.
//!
//! - Text is lowercased (Unicode) and split into runs of alphanumeric chars; everything else
//!   (punctuation, symbols, emoji) separates terms. An apostrophe splits too: "don't" gives
//!   "don" and "t", "museum's" gives "museum" and "s" (both single letters are stopwords).
//! - Words of plain ASCII letters that are not stopwords are reduced to their English stem
//!   (Snowball), so "closes", "closed" and "closing" all match a question about "close".
//! - Digits stay with adjacent letters: "6pm" is one term, "6 pm" two.
//! - Full-width ASCII (`６ｐｍ`, common from CJK input methods) is folded to ASCII first.
//! - Han, Kana and Hangul have no reliable word boundaries without a segmenter, so every such
//!   char is a term and so is every adjacent pair ("博物馆" gives 博, 博物, 物, 物馆, 馆):
//!   unigrams make any query match, bigrams rank the right phrase higher.
//! - Terms over 64 chars (hashes, base64, glued URLs) are dropped. Scripts other than CJK that
//!   are written without spaces (e.g. Thai) are not segmented, so long runs of them are dropped
//!   too.

/// Longest term kept, in chars.
const MAX_TOKEN_CHARS: usize = 64;

/// English filler words, sorted for binary search. Negations ("no", "not") are missing on
/// purpose: they change what a question means.
const STOPWORDS: &[&str] = &[
    "a", "about", "am", "an", "and", "any", "are", "as", "at", "be", "been", "being", "but", "by",
    "can", "could", "did", "do", "does", "doing", "for", "from", "had", "has", "have", "he", "her",
    "here", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "of",
    "on", "or", "our", "please", "s", "she", "should", "so", "some", "t", "than", "that", "the",
    "their", "them", "then", "there", "these", "they", "this", "those", "to", "us", "was", "we",
    "were", "what", "when", "where", "which", "who", "whom", "whose", "why", "will", "with",
    "would", "you", "your",
];

/// Splits text into lowercase search terms; see the module docs for the rules.
pub fn tokenize(text: &str) -> Vec<String> {
    let mut terms = Terms::default();
    let mut prev_cjk: Option<char> = None;
    for c in text.chars().map(fold_full_width) {
        if !c.is_alphanumeric() {
            terms.end_word();
            prev_cjk = None;
        } else if is_cjk(c) {
            terms.end_word();
            if let Some(prev) = prev_cjk {
                terms.out.push(String::from_iter([prev, c]));
            }
            terms.out.push(c.to_string());
            prev_cjk = Some(c);
        } else {
            terms.word_char(c);
            prev_cjk = None;
        }
    }
    terms.end_word();
    terms.out
}

/// Whether `term` (as produced by [`tokenize`]) is an English filler word that a query can
/// ignore, as in "what time does the museum close".
pub fn is_stopword(term: &str) -> bool {
    STOPWORDS.binary_search(&term).is_ok()
}

#[derive(Default)]
struct Terms {
    out: Vec<String>,
    /// The word being read, lowercased; only its first `MAX_TOKEN_CHARS` chars are kept, so a
    /// megabyte of base64 never gets buffered.
    word: String,
    /// Chars of the word being read, counted in the source text.
    word_chars: usize,
}

impl Terms {
    fn word_char(&mut self, c: char) {
        self.word_chars += 1;
        if self.word_chars <= MAX_TOKEN_CHARS {
            self.word.extend(c.to_lowercase());
        }
    }

    fn end_word(&mut self) {
        if self.word_chars > MAX_TOKEN_CHARS {
            self.word.clear();
        } else if !self.word.is_empty() {
            let word = std::mem::take(&mut self.word);
            if word.bytes().all(|b| b.is_ascii_lowercase()) && !is_stopword(&word) {
                self.out.push(stem(word));
            } else {
                self.out.push(word);
            }
        }
        self.word_chars = 0;
    }
}

/// Stems an English word, remembering recent answers: documents repeat their words, and
/// stemming is most of the cost of indexing.
fn stem(word: String) -> String {
    use std::cell::RefCell;
    use std::collections::HashMap;
    const REMEMBERED: usize = 50_000;
    thread_local! {
        static STEMS: RefCell<HashMap<String, String>> = RefCell::new(HashMap::new());
    }
    STEMS.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some(stem) = cache.get(&word) {
            return stem.clone();
        }
        if cache.len() >= REMEMBERED {
            cache.clear();
        }
        let stemmer = rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English);
        let stem = stemmer.stem(&word).into_owned();
        cache.insert(word, stem.clone());
        stem
    })
}

/// Maps full-width ASCII variants (U+FF01..U+FF5E) to ASCII.
fn fold_full_width(c: char) -> char {
    match c {
        '\u{FF01}'..='\u{FF5E}' => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
        _ => c,
    }
}

/// Han, Hiragana, Katakana and Hangul: the scripts indexed as unigrams plus bigrams.
fn is_cjk(c: char) -> bool {
    matches!(c,
        '\u{1100}'..='\u{11FF}'     // Hangul Jamo
        | '\u{3005}'..='\u{3007}'   // 々 〆 〇
        | '\u{3040}'..='\u{30FF}'   // Hiragana, Katakana
        | '\u{3130}'..='\u{318F}'   // Hangul compatibility Jamo
        | '\u{31F0}'..='\u{31FF}'   // Katakana phonetic extensions
        | '\u{3400}'..='\u{4DBF}'   // Han extension A
        | '\u{4E00}'..='\u{9FFF}'   // Han
        | '\u{AC00}'..='\u{D7AF}'   // Hangul syllables
        | '\u{F900}'..='\u{FAFF}'   // Han compatibility
        | '\u{FF66}'..='\u{FF9F}'   // half-width Katakana
        | '\u{20000}'..='\u{323AF}' // Han extensions B to H
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_is_lowercased_and_split_on_punctuation() {
        assert_eq!(
            tokenize("When does the Museum CLOSE? (Today, e-mail us!)"),
            [
                "when", "does", "the", "museum", "close", "today", "e", "mail", "us"
            ]
        );
    }

    #[test]
    fn apostrophes_split_words() {
        assert_eq!(
            tokenize("Don't miss the museum's café"),
            ["don", "t", "miss", "the", "museum", "s", "café"]
        );
        assert_eq!(tokenize("It’s open"), ["it", "s", "open"]);
    }

    #[test]
    fn numbers_stay_with_letters() {
        assert_eq!(tokenize("Closes at 6pm"), ["close", "at", "6pm"]);
        assert_eq!(tokenize("closes at 6 pm"), ["close", "at", "6", "pm"]);
        assert_eq!(tokenize("Tickets: €12.50"), ["ticket", "12", "50"]);
        assert_eq!(tokenize("Room B12"), ["room", "b12"]);
    }

    #[test]
    fn unicode_case_and_full_width_are_folded() {
        assert_eq!(
            tokenize("ÉCOLE Straße ΜΟΥΣΕΊΟ"),
            ["école", "straße", "μουσείο"]
        );
        assert_eq!(tokenize("６ＰＭ"), ["6pm"]);
    }

    #[test]
    fn cjk_gives_unigrams_and_bigrams() {
        assert_eq!(tokenize("博物馆"), ["博", "博物", "物", "物馆", "馆"]);
        // Punctuation and spaces break bigrams, and so does switching to Latin or digits.
        assert_eq!(
            tokenize("开放，时间 3号馆"),
            [
                "开", "开放", "放", "时", "时间", "间", "3", "号", "号馆", "馆"
            ]
        );
        assert_eq!(tokenize("トイレ"), ["ト", "トイ", "イ", "イレ", "レ"]);
        assert_eq!(tokenize("화장실"), ["화", "화장", "장", "장실", "실"]);
        // The katakana middle dot is punctuation, the prolonged sound mark part of the word.
        assert_eq!(tokenize("ア・ー"), ["ア", "ー"]);
    }

    #[test]
    fn emoji_and_symbols_are_ignored() {
        assert_eq!(
            tokenize("🎨 Art 🏛️ & history ✨ — «tours»"),
            ["art", "histori", "tour"]
        );
        assert!(tokenize("🙂 !!! ... ---").is_empty());
        assert!(tokenize("").is_empty());
    }

    #[test]
    fn overlong_tokens_are_dropped() {
        let long = "a".repeat(MAX_TOKEN_CHARS + 1);
        let max = "b".repeat(MAX_TOKEN_CHARS);
        assert_eq!(
            tokenize(&format!("x {long} y {max}")),
            ["x", "y", max.as_str()]
        );
    }

    #[test]
    fn stopwords() {
        assert!(
            STOPWORDS.windows(2).all(|w| w[0] < w[1]),
            "STOPWORDS must stay sorted"
        );
        for word in [
            "the", "a", "an", "is", "are", "of", "to", "in", "what", "when", "where",
        ] {
            assert!(is_stopword(word), "{word}");
        }
        for word in ["how", "does", "do", "s", "t"] {
            assert!(is_stopword(word), "{word}");
        }
        for word in ["museum", "not", "no", "open", "The", ""] {
            assert!(!is_stopword(word), "{word}");
        }
        let query: Vec<String> = tokenize("What time does the museum close?")
            .into_iter()
            .filter(|t| !is_stopword(t))
            .collect();
        assert_eq!(query, ["time", "museum", "close"]);
    }
}
