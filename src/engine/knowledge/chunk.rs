//! Cutting extracted text into overlapping passages for the search index.
//!
//! Passages are what retrieval returns and what the character quotes from, so they should be
//! whole sentences where possible; the overlap keeps a fact that straddles a boundary findable
//! from either side. Sizes are counted in chars, never bytes, so a cut can never fall inside a
//! UTF-8 sequence and CJK passages hold as much text as Latin ones.

/// Longest passage, in chars.
pub const CHUNK_CHARS: usize = 900;

/// How far, in chars, a passage reaches back into the previous one.
pub const OVERLAP_CHARS: usize = 120;

/// A cut is only looked for past this point of the window. Besides avoiding stubby passages,
/// this makes every step advance at least `MIN_CUT_CHARS - OVERLAP_CHARS` chars, which is what
/// keeps the whole pass linear.
const MIN_CUT_CHARS: usize = CHUNK_CHARS * 6 / 10;

/// A sentence start is only taken as the next passage's start if it still leaves this much
/// overlap; otherwise a word start gives a more useful overlap.
const MIN_SENTENCE_OVERLAP: usize = OVERLAP_CHARS / 3;

/// Splits `text` into trimmed, non-empty passages of at most [`CHUNK_CHARS`] chars, each
/// starting about [`OVERLAP_CHARS`] before the end of the previous one.
///
/// A passage ends, in order of preference, at the last sentence end (`.` `!` `?` followed by
/// whitespace, `。` `！` `？` `；`, or a line break) in the last 40 % of the window, at the last
/// whitespace there, or hard at [`CHUNK_CHARS`] (CJK text without punctuation). The next one
/// starts at a sentence start inside the overlap, else at a word start, else exactly
/// [`OVERLAP_CHARS`] back.
pub fn chunk_text(text: &str) -> Vec<String> {
    // Trimming up front guarantees that whatever follows a cut still has content, so no passage
    // is ever just a repeat of the previous one's tail.
    let text = text.trim();
    let mut chunks = Vec::new();
    let mut window = Window::default();
    let mut start = 0;
    while !text[start..].is_empty() {
        let rest = &text[start..];
        if !window.scan(rest) {
            push_trimmed(&mut chunks, rest);
            break;
        }
        let cut = window.cut();
        push_trimmed(&mut chunks, &rest[..window.offsets[cut]]);
        start += window.offsets[window.next_start(cut)];
    }
    chunks
}

fn push_trimmed(chunks: &mut Vec<String>, passage: &str) {
    let passage = passage.trim();
    if !passage.is_empty() {
        chunks.push(passage.to_owned());
    }
}

/// Break candidates of one window, in char positions; reused across windows to avoid
/// reallocating per passage. A position `k` stands for the boundary before char `k`.
#[derive(Default)]
struct Window {
    /// Byte offset of each char of the window, plus the one char past it.
    offsets: Vec<usize>,
    /// Boundaries right after a sentence (or line) ends, ascending.
    sentence_cuts: Vec<usize>,
    /// Boundaries before a whitespace char, ascending.
    word_cuts: Vec<usize>,
}

impl Window {
    /// Scans the first `CHUNK_CHARS + 1` chars of `rest`; returns whether there is more text
    /// than fits in one passage.
    fn scan(&mut self, rest: &str) -> bool {
        self.offsets.clear();
        self.sentence_cuts.clear();
        self.word_cuts.clear();
        // The sentence-final punctuation just seen (possibly followed by closing quotes):
        // `Some(true)` for full-width CJK marks, which need no space after them.
        let mut terminal: Option<bool> = None;
        for (k, (offset, c)) in rest.char_indices().take(CHUNK_CHARS + 1).enumerate() {
            self.offsets.push(offset);
            if k > 0 {
                let ends_sentence = c == '\n'
                    || match terminal {
                        Some(cjk) => c.is_whitespace() || (cjk && !is_closer(c)),
                        None => false,
                    };
                if ends_sentence {
                    self.sentence_cuts.push(k);
                }
                if c.is_whitespace() {
                    self.word_cuts.push(k);
                }
            }
            terminal = match c {
                '.' | '!' | '?' => Some(false),
                '。' | '！' | '？' | '；' => Some(true),
                c if is_closer(c) => terminal,
                _ => None,
            };
        }
        self.offsets.len() > CHUNK_CHARS
    }

    /// Where this passage ends.
    fn cut(&self) -> usize {
        let in_tail = |cuts: &[usize]| cuts.last().copied().filter(|&k| k >= MIN_CUT_CHARS);
        in_tail(&self.sentence_cuts)
            .or_else(|| in_tail(&self.word_cuts))
            .unwrap_or(CHUNK_CHARS)
    }

    /// Where the passage after one ending at `cut` starts.
    fn next_start(&self, cut: usize) -> usize {
        let from = cut - OVERLAP_CHARS;
        let first_between = |cuts: &[usize], last: usize| {
            let i = cuts.partition_point(|&k| k < from);
            cuts.get(i).copied().filter(|&k| k <= last)
        };
        first_between(&self.sentence_cuts, cut - MIN_SENTENCE_OVERLAP)
            .or_else(|| first_between(&self.word_cuts, cut - 1))
            .unwrap_or(from)
    }
}

/// Closing quotes and brackets that may follow a sentence's final punctuation.
fn is_closer(c: char) -> bool {
    matches!(
        c,
        '"' | '\'' | ')' | ']' | '”' | '’' | '」' | '』' | '）' | '】' | '》' | '〉'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chars(s: &str) -> usize {
        s.chars().count()
    }

    /// Byte ranges of the chunks in `text`, checking each is a verbatim slice found in order.
    fn locate(text: &str, chunks: &[String]) -> Vec<(usize, usize)> {
        let mut ranges = Vec::new();
        let mut from = 0;
        for chunk in chunks {
            let start = from
                + text[from..]
                    .find(chunk.as_str())
                    .expect("chunk not in text");
            ranges.push((start, start + chunk.len()));
            from = start + 1;
            while !text.is_char_boundary(from) {
                from += 1;
            }
        }
        ranges
    }

    /// Every chunk bounded, trimmed and non-empty; consecutive chunks overlap; together they
    /// cover the text from its first to its last non-whitespace char.
    fn assert_covering(text: &str, chunks: &[String]) -> Vec<(usize, usize)> {
        let ranges = locate(text, chunks);
        for chunk in chunks {
            assert!(!chunk.is_empty());
            assert_eq!(chunk.trim(), chunk);
            assert!(chars(chunk) <= CHUNK_CHARS, "{} chars", chars(chunk));
        }
        let trimmed_start = text.len() - text.trim_start().len();
        assert_eq!(ranges.first().unwrap().0, trimmed_start);
        assert_eq!(ranges.last().unwrap().1, text.trim_end().len());
        for pair in ranges.windows(2) {
            let ((a_start, a_end), (b_start, _)) = (pair[0], pair[1]);
            assert!(a_start < b_start && b_start < a_end, "no overlap: {pair:?}");
            let overlap = chars(&text[b_start..a_end]);
            assert!(overlap <= OVERLAP_CHARS, "overlap {overlap}");
        }
        ranges
    }

    fn english(sentences: usize) -> String {
        (0..sentences)
            .map(|i| {
                let topic = [
                    "the west wing",
                    "the Roman coins",
                    "a very old map of the harbour",
                ];
                format!(
                    "Sentence {i} is about {} and lasts {} minutes!",
                    topic[i % 3],
                    i % 50
                )
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn empty_and_blank_text_give_no_chunks() {
        assert!(chunk_text("").is_empty());
        assert!(chunk_text(" \n\t \n").is_empty());
    }

    #[test]
    fn short_text_is_one_trimmed_chunk() {
        assert_eq!(chunk_text("  Open daily.\n"), vec!["Open daily."]);
        let exactly = "x".repeat(CHUNK_CHARS);
        assert_eq!(chunk_text(&exactly), vec![exactly.clone()]);
    }

    #[test]
    fn long_english_text_ends_and_starts_at_sentences() {
        let text = english(200);
        let chunks = chunk_text(&text);
        assert!(chunks.len() > 10);
        let ranges = assert_covering(&text, &chunks);
        for chunk in &chunks {
            assert!(chunk.starts_with("Sentence "), "{chunk:?}");
            assert!(chunk.ends_with('!'), "{chunk:?}");
            // Only the leading space of the overlap can be trimmed off.
            assert!(chars(chunk) >= MIN_CUT_CHARS - 1 || chunk == chunks.last().unwrap());
        }
        for pair in ranges.windows(2) {
            let overlap = chars(&text[pair[1].0..pair[0].1]);
            assert!(overlap >= MIN_SENTENCE_OVERLAP, "overlap {overlap}");
        }
    }

    #[test]
    fn long_sentences_fall_back_to_word_boundaries() {
        // One endless sentence: cuts and starts must land on spaces, never inside a word.
        let text = (0..500)
            .map(|i| format!("word{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        let chunks = chunk_text(&text);
        let ranges = assert_covering(&text, &chunks);
        for &(start, end) in &ranges {
            assert!(start == 0 || text.as_bytes()[start - 1] == b' ');
            assert!(end == text.len() || text.as_bytes()[end] == b' ');
        }
        for pair in ranges.windows(2) {
            assert!(chars(&text[pair[1].0..pair[0].1]) > OVERLAP_CHARS - 10);
        }
    }

    #[test]
    fn paragraph_breaks_are_sentence_ends() {
        let text = (0..40)
            .map(|i| format!("Locker {i} is next to the cloakroom and costs nothing to use"))
            .collect::<Vec<_>>()
            .join("\n\n");
        let chunks = chunk_text(&text);
        assert_covering(&text, &chunks);
        for chunk in &chunks {
            assert!(
                chunk.starts_with("Locker ") && chunk.ends_with("use"),
                "{chunk:?}"
            );
        }
    }

    #[test]
    fn ascii_sentence_ends_need_whitespace_after_them() {
        // Decimals and dotted names do not end sentences; closing brackets and quotes may
        // follow the punctuation. (Abbreviations like "e.g. " are indistinguishable.)
        let text = "Pi is 3.14 (approx.) see www.museum.org now. \"Really?\" Yes";
        let mut window = Window::default();
        assert!(!window.scan(text));
        let ends: Vec<&str> = window
            .sentence_cuts
            .iter()
            .map(|&k| &text[..window.offsets[k]])
            .collect();
        assert_eq!(
            ends,
            [
                "Pi is 3.14 (approx.)",
                "Pi is 3.14 (approx.) see www.museum.org now.",
                "Pi is 3.14 (approx.) see www.museum.org now. \"Really?\"",
            ]
        );
    }

    #[test]
    fn cjk_without_punctuation_is_hard_cut_by_chars() {
        // Pseudo-random ideographs, so every passage occurs only once in the text.
        let text: String = (0..4000u32)
            .map(|i| char::from_u32(0x4E00 + i * 7919 % 20000).unwrap())
            .collect();
        let chunks = chunk_text(&text);
        assert_covering(&text, &chunks);
        for chunk in &chunks[..chunks.len() - 1] {
            assert_eq!(chars(chunk), CHUNK_CHARS);
        }
        let ranges = locate(&text, &chunks);
        assert_eq!(chars(&text[ranges[1].0..ranges[0].1]), OVERLAP_CHARS);
    }

    #[test]
    fn cjk_punctuation_ends_chunks() {
        let text: String = (0..60)
            .map(|i| format!("展厅{i}号开放时间为上午九点至下午六点，周一闭馆。「请勿拍照。」"))
            .collect();
        let chunks = chunk_text(&text);
        assert_covering(&text, &chunks);
        for chunk in &chunks {
            assert!(chunk.ends_with(['」', '。']), "{chunk:?}");
            assert!(chunk.starts_with(['展', '「']), "{chunk:?}");
        }
    }

    #[test]
    fn text_without_spaces_or_punctuation_is_hard_cut() {
        // Pseudo-random letters, so every passage occurs only once in the text.
        let mut seed = 1u32;
        let text: String = (0..5000)
            .map(|_| {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                char::from(b'a' + (seed >> 16) as u8 % 26)
            })
            .collect();
        let chunks = chunk_text(&text);
        assert_covering(&text, &chunks);
        assert_eq!(chars(&chunks[0]), CHUNK_CHARS);
        assert_eq!(
            chunks.len(),
            (5000 - OVERLAP_CHARS).div_ceil(CHUNK_CHARS - OVERLAP_CHARS)
        );
    }

    #[test]
    fn mixed_scripts_and_emoji() {
        let text: String = (0..80)
            .map(|i| {
                format!("Welcome 🎨 to room {i}. 欢迎光临{i}号！Café crème: {i} € ☕. Ωμέγα? ")
            })
            .collect();
        let chunks = chunk_text(&text);
        assert!(chunks.len() > 3);
        assert_covering(&text, &chunks);
    }

    #[test]
    fn whitespace_runs_never_make_empty_chunks() {
        let text = format!("Start.{}End.", " ".repeat(5000));
        assert_eq!(chunk_text(&text), vec!["Start.", "End."]);
    }

    #[test]
    fn large_input_is_linear() {
        let text = english(60_000); // about 3 MiB
        assert!(text.len() > 3 << 20);
        let started = std::time::Instant::now();
        let chunks = chunk_text(&text);
        let elapsed = started.elapsed();
        let total: usize = chunks.iter().map(|c| c.len()).sum();
        // Overlap makes the passages add up to a bit more than the text, never much more.
        assert!(total > text.len() && total < text.len() * 3 / 2, "{total}");
        // Generous even for an unoptimised build; quadratic behaviour would take minutes.
        assert!(elapsed.as_secs() < 10, "{elapsed:?}");
    }
}
