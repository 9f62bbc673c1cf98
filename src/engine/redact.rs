//! Personal details out of stored transcripts (docs/privacy.md): e-mail addresses, phone
//! numbers, card numbers (Luhn), postal codes, and what follows "my name is" or comes before
//! "years old" are replaced by a placeholder before a message is stored. The live turn keeps
//! the words as said; only the history sees this. Hand-written rules over characters and words
//! (no regex engine in the firmware); measured on `tests/data/redaction.tsv`.

use super::spoken;

/// What a personal detail is replaced by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    Email,
    Phone,
    Card,
    Postcode,
    Name,
    Age,
}

impl Detail {
    pub const ALL: [Detail; 6] = [
        Detail::Email,
        Detail::Phone,
        Detail::Card,
        Detail::Postcode,
        Detail::Name,
        Detail::Age,
    ];

    pub fn placeholder(self) -> &'static str {
        match self {
            Detail::Email => "[email]",
            Detail::Phone => "[phone]",
            Detail::Card => "[card]",
            Detail::Postcode => "[postcode]",
            Detail::Name => "[name]",
            Detail::Age => "[age]",
        }
    }
}

/// `text` with its personal details replaced by placeholders.
pub fn redact(text: &str) -> String {
    replace(text, find(text))
}

/// A character's reply with the personal details it repeats replaced, but no name: "I'm",
/// "I am" and "my name is" in a reply introduce the character itself, no visitor.
pub fn redact_reply(text: &str) -> String {
    let mut spans = find(text);
    spans.retain(|s| s.2 != Detail::Name);
    replace(text, spans)
}

fn replace(text: &str, spans: Vec<(usize, usize, Detail)>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end, detail) in spans {
        out.push_str(&text[at..start]);
        out.push_str(detail.placeholder());
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

/// The personal details of `text`: byte spans, in order, not overlapping.
fn find(text: &str) -> Vec<(usize, usize, Detail)> {
    let mut spans = Vec::new();
    emails(text, &mut spans);
    numbers(text, &mut spans);
    postcodes(text, &mut spans);
    phrases(text, &mut spans);
    spans.sort_by_key(|s| (s.0, std::cmp::Reverse(s.1)));
    let mut kept: Vec<(usize, usize, Detail)> = Vec::new();
    for s in spans {
        if kept.last().is_none_or(|k| s.0 >= k.1) {
            kept.push(s);
        }
    }
    kept
}

/// Words of `text` with their byte spans (runs of letters, digits, `'` and `-`).
fn words(text: &str) -> Vec<(usize, usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text
        .char_indices()
        .chain(std::iter::once((text.len(), ' ')))
    {
        let part = c.is_alphanumeric() || c == '\'' || c == '’' || c == '-';
        match (part, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                let w = text[s..i].trim_end_matches(['\'', '’', '-']);
                out.push((s, s + w.len(), w));
                start = None;
            }
            _ => {}
        }
    }
    out
}

fn emails(text: &str, spans: &mut Vec<(usize, usize, Detail)>) {
    let local = |c: char| c.is_alphanumeric() || "._%+-".contains(c);
    let domain = |c: char| c.is_alphanumeric() || ".-".contains(c);
    for (at, _) in text.match_indices('@') {
        let start = text[..at]
            .char_indices()
            .rev()
            .take_while(|(_, c)| local(*c))
            .last()
            .map_or(at, |(i, _)| i);
        let rest = &text[at + 1..];
        let len = rest.find(|c: char| !domain(c)).unwrap_or(rest.len());
        let host = rest[..len].trim_end_matches(['.', '-']);
        let tld_ok = host.rsplit_once('.').is_some_and(|(name, tld)| {
            !name.is_empty() && tld.len() >= 2 && tld.chars().all(char::is_alphabetic)
        });
        if start < at && tld_ok {
            spans.push((start, at + 1 + host.len(), Detail::Email));
        }
    }
}

/// Runs of digits joined by single separators (space, `-`, `.`, `/`, brackets), with a leading
/// `+`: card numbers (13 to 19 digits passing Luhn's check) and phone numbers.
fn numbers(text: &str, spans: &mut Vec<(usize, usize, Detail)>) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let plus = bytes[i] == b'+' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit);
        let open = bytes[i] == b'(' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit);
        let starts = bytes[i].is_ascii_digit() || plus || open;
        let after_word = i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'.');
        if !starts || after_word {
            i += 1;
            continue;
        }
        let start = i;
        let mut end = i + usize::from(plus || open);
        let mut digits = String::new();
        let mut separators = Vec::new();
        let mut j = end;
        while j < bytes.len() {
            let b = bytes[j];
            if b.is_ascii_digit() {
                digits.push(b as char);
                j += 1;
                end = j;
            } else if b" -./()".contains(&b)
                && !digits.is_empty()
                && bytes
                    .get(j + 1)
                    .is_some_and(|n| n.is_ascii_digit() || (b == b')' && *n == b' '))
            {
                separators.push(b);
                j += 1;
                if b == b')' && bytes.get(j) == Some(&b' ') {
                    separators.push(b' ');
                    j += 1;
                }
            } else {
                break;
            }
        }
        let n = digits.len();
        let followed_by_letter = bytes.get(end).is_some_and(u8::is_ascii_alphabetic);
        let dated = looks_like_date(&digits, &separators)
            || text[..start].trim_end().to_lowercase().ends_with("isbn");
        // International (+), long with a trunk 0 or grouped, or a local 7-8 digits grouped.
        let phone = (plus && (8..=15).contains(&n))
            || ((9..=15).contains(&n) && (digits.starts_with('0') || !separators.is_empty()))
            || ((7..=8).contains(&n)
                && separators.iter().any(|s| b" -".contains(s))
                && !separators.contains(&b'.'));
        let detail = if (13..=19).contains(&n) && luhn(&digits) {
            Some(Detail::Card)
        } else if phone && !followed_by_letter && !dated {
            Some(Detail::Phone)
        } else {
            None
        };
        if let Some(d) = detail {
            spans.push((start, end, d));
        }
        i = end.max(i + 1);
    }
}

/// Digits that read as a date or a year range (31.12.2024, 2024-12-31, 12/31/2024, 1914-1918).
fn looks_like_date(digits: &str, separators: &[u8]) -> bool {
    let n = digits.len();
    let sep = separators.first().copied();
    let same = separators.iter().all(|s| Some(*s) == sep);
    (n == 8 && same && separators.len() == 2 && matches!(sep, Some(b'.' | b'-' | b'/')))
        || (n == 8 && separators == [b'-'] && digits.starts_with(['1', '2']))
}

/// Luhn's check, which every payment card number passes.
fn luhn(digits: &str) -> bool {
    let mut sum = 0;
    for (i, d) in digits.bytes().rev().enumerate() {
        let mut v = u32::from(d - b'0');
        if i % 2 == 1 {
            v *= 2;
            if v > 9 {
                v -= 9;
            }
        }
        sum += v;
    }
    sum % 10 == 0
}

/// Words that say a postal code follows.
const POSTCODE_CUES: [&str; 6] = ["zip", "postcode", "postal", "plz", "postleitzahl", "cp"];

/// Postal codes: the British and Canadian forms by their shape (SW1A 1AA, K1A 0B1), the Dutch
/// one (1012 AB), and four or five digits after a word that says so ("zip code 94110").
fn postcodes(text: &str, spans: &mut Vec<(usize, usize, Detail)>) {
    let w = words(text);
    for (k, &(start, _, word)) in w.iter().enumerate() {
        let next = w.get(k + 1);
        let shape = shape_of(word);
        let next_shape = next.map(|n| shape_of(n.2));
        let gap_is_space = next.is_some_and(|n| text[w[k].1..n.0] == *" ");
        let outward = ["A9", "A99", "AA9", "AA99", "A9A", "AA9A"].contains(&shape.as_str());
        let uk = outward && gap_is_space && next_shape.as_deref() == Some("9AA");
        let canada = shape == "A9A" && gap_is_space && next_shape.as_deref() == Some("9A9");
        let dutch = shape == "9999"
            && gap_is_space
            && next_shape.as_deref() == Some("AA")
            && next.is_some_and(|n| !["AM", "PM", "AD", "BC"].contains(&n.2));
        if let (true, Some(n)) = (uk || canada || dutch, next) {
            spans.push((start, n.1, Detail::Postcode));
            continue;
        }
        let cued = w[k.saturating_sub(3)..k]
            .iter()
            .any(|(_, _, c)| POSTCODE_CUES.contains(&c.to_lowercase().as_str()));
        let digits = word.len() >= 4
            && word.len() <= 10
            && word.chars().all(|c| c.is_ascii_digit() || c == '-')
            && word.chars().filter(char::is_ascii_digit).count() >= 4;
        if cued && digits {
            spans.push((start, w[k].1, Detail::Postcode));
        }
    }
}

/// Phrases before a name ("my name is", "call me"), lower case, as words.
const NAME_CUES: [&[&str]; 12] = [
    &["my", "name", "is"],
    &["my", "name's"],
    &["name", "is"],
    &["call", "me"],
    &["i'm", "called"],
    &["i", "am", "called"],
    &["mein", "name", "ist"],
    &["ich", "heiße"],
    &["ich", "heisse"],
    &["je", "m'appelle"],
    &["me", "llamo"],
    &["mi", "chiamo"],
];

/// Words that follow "I am" / "I'm" and are no name.
const NOT_NAMES: [&str; 16] = [
    "I",
    "English",
    "German",
    "French",
    "Spanish",
    "Italian",
    "Dutch",
    "American",
    "British",
    "Canadian",
    "Australian",
    "Irish",
    "Scottish",
    "Welsh",
    "Catholic",
    "Christian",
];

/// Words after an age ("7 years old", "sieben Jahre alt").
const AGE_AFTER: [&[&str]; 8] = [
    &["years", "old"],
    &["year", "old"],
    &["yrs", "old"],
    &["jahre", "alt"],
    &["jahre"],
    &["ans"],
    &["años"],
    &["anni"],
];

/// Words that make an age a person's ("I am 7 years old", "my brother is 12 years old").
const PERSONAL: [&str; 17] = [
    "i", "i'm", "am", "my", "me", "brother", "sister", "son", "daughter", "he's", "she's", "ich",
    "bin", "j'ai", "tengo", "ho", "mein",
];

fn phrases(text: &str, spans: &mut Vec<(usize, usize, Detail)>) {
    let w = words(text);
    let lower: Vec<String> = w
        .iter()
        .map(|(_, _, x)| x.to_lowercase().replace('’', "'"))
        .collect();
    let capital = |k: usize| {
        w.get(k)
            .is_some_and(|x| x.2.chars().next().is_some_and(char::is_uppercase))
    };
    // Only words joined by spaces continue a phrase (not across a full stop or a comma).
    let joined = |a: usize, b: usize| {
        w.get(b)
            .is_some_and(|x| text[w[a].1..x.0].trim().is_empty())
    };
    for k in 0..w.len() {
        // A name after its cue: the next word, and a second one that starts with a capital.
        for cue in NAME_CUES {
            let fits = cue
                .iter()
                .enumerate()
                .all(|(i, c)| lower.get(k + i).is_some_and(|x| x == c))
                && (1..cue.len()).all(|i| joined(k + i - 1, k + i));
            let first = k + cue.len();
            // "Call me on ...", "call me back": only a name said with a capital follows it.
            let named = cue != ["call", "me"] || capital(first);
            if fits && named && joined(first - 1, first) {
                let last = if capital(first + 1) && joined(first, first + 1) {
                    first + 1
                } else {
                    first
                };
                spans.push((w[first].0, w[last].1, Detail::Name));
            }
        }
        // "I am Jane" / "I'm Jane": a capitalised word that is no language or nationality.
        let (cue_len, is_cue) = match lower[k].as_str() {
            "i'm" => (1, true),
            "i" if lower.get(k + 1).is_some_and(|x| x == "am") && joined(k, k + 1) => (2, true),
            _ => (0, false),
        };
        let first = k + cue_len;
        if is_cue
            && capital(first)
            && joined(first - 1, first)
            && !NOT_NAMES.contains(&w[first].2)
            && !AGE_AFTER
                .iter()
                .any(|a| lower.get(first + 1).is_some_and(|x| x == a[0]))
        {
            let last = if capital(first + 1) && joined(first, first + 1) {
                first + 1
            } else {
                first
            };
            spans.push((w[first].0, w[last].1, Detail::Name));
        }
        // An age before "years old", "Jahre alt", "ans".
        let number = w[k].2.chars().all(|c| c.is_ascii_digit()) && w[k].2.len() <= 3
            || spoken::is_number_word(&lower[k]);
        if number {
            let after = AGE_AFTER.iter().any(|a| {
                a.iter()
                    .enumerate()
                    .all(|(i, x)| lower.get(k + 1 + i).is_some_and(|y| y == x))
                    && joined(k, k + 1)
            });
            let before = k >= 2 && ["age", "aged"].contains(&lower[k - 1].as_str())
                || k >= 1 && lower[k - 1] == "aged";
            let my_age =
                k >= 3 && lower[k - 3] == "my" && lower[k - 2] == "age" && lower[k - 1] == "is";
            // Someone's own age, not an exhibit's: a person is named just before it.
            let personal = lower[k.saturating_sub(4)..k]
                .iter()
                .any(|x| PERSONAL.contains(&x.as_str()));
            let plausible = w[k].2.parse::<u32>().map_or(true, |n| n <= 120);
            if (after && personal && plausible) || before || my_age {
                spans.push((w[k].0, w[k].1, Detail::Age));
            }
        }
    }
}

/// A word's shape, as postcodes are told apart: a digit is `9`, a capital `A`, anything else `x`.
fn shape_of(word: &str) -> String {
    word.chars()
        .map(|c| match c {
            '0'..='9' => '9',
            'A'..='Z' => 'A',
            _ => 'x',
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_keeps_the_characters_own_name_but_not_a_visitors_details() {
        assert_eq!(
            redact_reply("I'm Docent. Your card 4111 1111 1111 1111 is at the desk."),
            "I'm Docent. Your card [card] is at the desk."
        );
        assert_eq!(redact("I'm Maria."), "I'm [name].");
    }

    #[test]
    fn each_kind_is_replaced() {
        for (said, stored) in [
            (
                "mail me at jane.doe+x@example.co.uk please",
                "mail me at [email] please",
            ),
            ("call +44 20 7946 0958 now", "call [phone] now"),
            ("my card is 4111 1111 1111 1111.", "my card is [card]."),
            ("I live in SW1A 1AA", "I live in [postcode]"),
            (
                "My name is Jane Smith and I like ships",
                "My name is [name] and I like ships",
            ),
            ("I am 7 years old", "I am [age] years old"),
        ] {
            assert_eq!(redact(said), stored);
        }
    }

    /// The measurement over `tests/data/redaction.tsv`: recall (placeholders expected and put),
    /// false positives (placeholders put where none was expected), sentences stored exactly.
    #[test]
    fn measured_on_the_sentence_set() {
        let set = include_str!("../../tests/data/redaction.tsv");
        let (mut expected, mut found, mut false_positives, mut exact, mut n) = (0, 0, 0, 0, 0);
        let mut wrong = Vec::new();
        for line in set.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
            let (said, want) = line.split_once('\t').expect("said<TAB>stored");
            let got = redact(said);
            n += 1;
            for d in Detail::ALL {
                let w = want.matches(d.placeholder()).count();
                let g = got.matches(d.placeholder()).count();
                expected += w;
                found += w.min(g);
                false_positives += g.saturating_sub(w);
            }
            if got == want {
                exact += 1;
            } else {
                wrong.push(format!("{said:?}\n   -> {got:?}\n want {want:?}"));
            }
        }
        let recall = found as f64 / expected as f64;
        println!(
            "redaction over {n} sentences: recall {found}/{expected} ({:.1} %), {false_positives} \
             false positives, {exact} stored exactly as expected",
            recall * 100.0
        );
        for w in &wrong {
            println!("{w}");
        }
        assert!(n >= 100, "at least 100 sentences, not {n}");
        assert!(recall >= 0.95, "recall {recall:.3}");
        assert!(false_positives <= 1, "{false_positives} false positives");
    }

    #[test]
    fn the_luhn_check_tells_a_card_from_a_long_number() {
        assert!(luhn("4111111111111111"));
        assert!(!luhn("4111111111111112"));
        assert_eq!(redact("ticket 4111111111111112"), "ticket 4111111111111112");
    }
}
