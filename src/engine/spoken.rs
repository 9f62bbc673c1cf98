//! Text as a listener expects to hear it.
//!
//! Knowledge files and language models write for the eye: headings, bullets, emphasis, links,
//! "12 €", "9:00", "1851". A speech engine reads those literally ("hash Tickets", "twelve euro
//! sign") or as plain numbers ("one thousand eight hundred fifty-one"). [`for_speech`] turns
//! them into the words a person would say before synthesis; transcripts and history keep the
//! text as written.
//!
//! Rules, in order: markdown headings, code fences and table rules are dropped; list markers and
//! quote markers are removed and each item ends as a sentence; emphasis, inline code, links
//! (their text is kept) and bare URLs go; then prices (`12 €`, `€12.50`, `$5`, `£3`), times
//! (`9:00` "nine o'clock", `17:30` "five thirty p m", `9am`), ranges between numbers
//! (`9:00–17:00` "… to …"), ordinals (`21st`), percentages, years (`1851` "eighteen fifty-one",
//! `2005` "two thousand and five") and other numbers (`1,500`, `3.5`) become words.

/// `text` as it should be spoken.
pub fn for_speech(text: &str) -> String {
    let plain = strip_markdown(text);
    let words = speak_numbers(&plain);
    collapse_spaces(&words)
}

fn collapse_spaces(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        let joins = matches!(word.chars().next(), Some('.' | ',' | '!' | '?' | ';' | ':'));
        if !out.is_empty() && !joins {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// Markdown to plain sentences.
fn strip_markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_fence = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence || trimmed.starts_with('#') || is_rule(trimmed) {
            continue;
        }
        let mut item = trimmed;
        while let Some(rest) = item.strip_prefix('>') {
            item = rest.trim_start();
        }
        let was_item = item != trimmed || list_marker(item).is_some();
        if let Some(rest) = list_marker(item) {
            item = rest;
        }
        let mut inline = strip_inline(item);
        if inline.contains('|') {
            inline = inline
                .split('|')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect::<Vec<_>>()
                .join(", ");
        }
        let inline = inline.trim();
        if inline.is_empty() {
            continue;
        }
        out.push_str(inline);
        // A list item, quote or table row is a sentence of its own when spoken.
        if (was_item || inline.contains(", ")) && !inline.ends_with(['.', '!', '?', ':', ';']) {
            out.push('.');
        }
        out.push(' ');
    }
    out
}

/// `---`, `***`, `|---|---|` and the like.
fn is_rule(line: &str) -> bool {
    line.len() >= 3
        && line
            .chars()
            .all(|c| matches!(c, '-' | '*' | '_' | '=' | '|' | ':' | ' '))
        && line.chars().any(|c| matches!(c, '-' | '*' | '_' | '='))
}

/// The rest of a list item after its marker (`- `, `* `, `+ `, `1. `, `2) `).
fn list_marker(line: &str) -> Option<&str> {
    for m in ["- ", "* ", "+ ", "• "] {
        if let Some(rest) = line.strip_prefix(m) {
            return Some(rest.trim_start());
        }
    }
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    if (1..=3).contains(&digits) {
        let rest = &line[digits..];
        if let Some(r) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
            return Some(r.trim_start());
        }
    }
    None
}

/// Emphasis, inline code, links and URLs out of one line.
fn strip_inline(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        // [text](url) and ![alt](url): keep the text.
        if c == '[' || (c == '!' && chars.get(i + 1) == Some(&'[')) {
            let open = if c == '!' { i + 1 } else { i };
            if let Some(close) = (open + 1..chars.len()).find(|&j| chars[j] == ']')
                && chars.get(close + 1) == Some(&'(')
                && let Some(end) = (close + 2..chars.len()).find(|&j| chars[j] == ')')
            {
                out.extend(&chars[open + 1..close]);
                i = end + 1;
                continue;
            }
        }
        if matches!(c, '*' | '`') || (c == '_' && is_emphasis_underscore(&chars, i)) {
            i += 1;
            continue;
        }
        let rest: String = chars[i..chars.len().min(i + 8)].iter().collect();
        let starts_word = i == 0 || !chars[i - 1].is_alphanumeric();
        if starts_word
            && (rest.starts_with("http://")
                || rest.starts_with("https://")
                || rest.starts_with("www."))
        {
            while i < chars.len() && !chars[i].is_whitespace() {
                i += 1;
            }
            // Keep the sentence's own end.
            if matches!(out.trim_end().chars().last(), Some(c) if c.is_alphanumeric()) {
                let ended = chars[..i]
                    .last()
                    .is_some_and(|c| matches!(c, '.' | '!' | '?' | ',' | ';'));
                if ended {
                    out.push(chars[i - 1]);
                }
            }
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

/// `_word_` emphasis, not an underscore inside a word (`snake_case`).
fn is_emphasis_underscore(chars: &[char], i: usize) -> bool {
    let before = i.checked_sub(1).map(|j| chars[j]);
    let after = chars.get(i + 1).copied();
    !(before.is_some_and(char::is_alphanumeric) && after.is_some_and(char::is_alphanumeric))
}

/// A number as the text wrote it.
#[derive(Debug, Clone, PartialEq)]
struct Number {
    /// Digits of the whole part, grouping commas removed.
    whole: u64,
    /// Digits after the decimal point, as written.
    fraction: Option<String>,
    /// Written with a thousands separator (`1,500`): never a year.
    grouped: bool,
    digits: usize,
}

/// Reads a number at the start of `s`: returns it and the bytes it took.
fn read_number(s: &str) -> Option<(Number, usize)> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut whole: u64 = 0;
    let mut digits = 0;
    let mut grouped = false;
    while i < b.len() {
        if b[i].is_ascii_digit() {
            whole = whole.checked_mul(10)?.checked_add((b[i] - b'0') as u64)?;
            digits += 1;
            i += 1;
        } else if b[i] == b','
            && digits > 0
            && b.len() >= i + 4
            && b[i + 1..i + 4].iter().all(u8::is_ascii_digit)
            && !b.get(i + 4).is_some_and(u8::is_ascii_digit)
        {
            grouped = true;
            i += 1;
        } else {
            break;
        }
    }
    if digits == 0 {
        return None;
    }
    let mut fraction = None;
    if b.get(i) == Some(&b'.') && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
        let start = i + 1;
        let mut end = start;
        while end < b.len() && b[end].is_ascii_digit() {
            end += 1;
        }
        fraction = Some(s[start..end].to_string());
        i = end;
    }
    Some((
        Number {
            whole,
            fraction,
            grouped,
            digits,
        },
        i,
    ))
}

const CURRENCIES: &[(&str, &str, &str)] = &[
    ("€", "euro", "euros"),
    ("$", "dollar", "dollars"),
    ("£", "pound", "pounds"),
    ("EUR", "euro", "euros"),
    ("USD", "dollar", "dollars"),
    ("GBP", "pound", "pounds"),
];

fn money(n: &Number, unit: (&str, &str)) -> String {
    let name = if n.whole == 1 { unit.0 } else { unit.1 };
    let mut out = format!("{} {name}", cardinal(n.whole));
    if let Some(f) = &n.fraction {
        let cents: u64 = format!("{f:0<2}")[..2].parse().unwrap_or(0);
        if cents > 0 {
            out.push(' ');
            out.push_str(&cardinal(cents));
        }
    }
    out
}

/// Words for every number in `text`.
fn speak_numbers(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 2);
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        let prev = text[..i].chars().next_back();
        let at_word_start = !prev.is_some_and(|c| c.is_alphanumeric());
        // A currency sign before the amount: "€12", "$ 5".
        if at_word_start
            && let Some(&(sign, one, many)) = CURRENCIES.iter().find(|(sign, _, _)| {
                sign.chars().all(|c| !c.is_ascii_alphabetic()) && rest.starts_with(sign)
            })
        {
            let after = rest[sign.len()..].trim_start();
            if let Some((n, used)) = read_number(after) {
                out.push_str(&money(&n, (one, many)));
                i += rest.len() - after.len() + used;
                continue;
            }
        }
        let Some(c) = rest.chars().next() else { break };
        if !c.is_ascii_digit() || !at_word_start {
            // Dashes between numbers are spoken as "to".
            if matches!(c, '–' | '—' | '-')
                && prev.is_some_and(|p| p.is_ascii_digit())
                && rest[c.len_utf8()..].starts_with(|d: char| d.is_ascii_digit())
            {
                out.push_str(" to ");
                i += c.len_utf8();
                continue;
            }
            out.push(c);
            i += c.len_utf8();
            continue;
        }
        // Times: 9:00, 17:30, with an optional am/pm.
        if let Some((words, used)) = time_at(rest) {
            out.push_str(&words);
            i += used;
            continue;
        }
        let Some((n, used)) = read_number(rest) else {
            out.push(c);
            i += 1;
            continue;
        };
        let after = &rest[used..];
        let after_trim = after.trim_start();
        // Amount then currency: "12 €", "12€", "12 EUR".
        if let Some(&(sign, one, many)) = CURRENCIES.iter().find(|(sign, _, _)| {
            after_trim.starts_with(sign)
                && !after_trim[sign.len()..].starts_with(|c: char| c.is_alphanumeric())
        }) {
            out.push_str(&money(&n, (one, many)));
            i += used + (after.len() - after_trim.len()) + sign.len();
            continue;
        }
        if let Some(hour) = am_pm(&n, after) {
            out.push_str(&hour.0);
            i += used + hour.1;
            continue;
        }
        if n.fraction.is_none()
            && let Some(suffix) = ["st", "nd", "rd", "th"]
                .into_iter()
                .find(|s| after.starts_with(s) && !after[2..].starts_with(char::is_alphanumeric))
        {
            out.push_str(&ordinal(n.whole));
            i += used + suffix.len();
            continue;
        }
        if let Some(p) = after
            .strip_prefix('%')
            .map(|_| 1)
            .or_else(|| after.strip_prefix(" %").map(|_| 2))
        {
            out.push_str(&decimal(&n));
            out.push_str(" percent");
            i += used + p;
            continue;
        }
        let year_like = !n.grouped && n.fraction.is_none() && n.digits == 4;
        if year_like && (1100..=2099).contains(&n.whole) {
            out.push_str(&year(n.whole));
        } else {
            out.push_str(&decimal(&n));
        }
        i += used;
    }
    out
}

/// `9:00` "nine o'clock", `9:30` "nine thirty", `9:05` "nine oh five", `17:00` "five p m",
/// `12:00` "twelve noon", `0:00` "midnight"; a following am/pm is taken along.
fn time_at(s: &str) -> Option<(String, usize)> {
    let b = s.as_bytes();
    let hd = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if !(1..=2).contains(&hd) || b.get(hd) != Some(&b':') {
        return None;
    }
    let md = b[hd + 1..]
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .count();
    if md != 2 {
        return None;
    }
    let hour: u64 = s[..hd].parse().ok()?;
    let minute: u64 = s[hd + 1..hd + 3].parse().ok()?;
    if hour > 24 || minute > 59 {
        return None;
    }
    let mut used = hd + 3;
    let (suffix, suffix_len) = am_pm_suffix(&s[used..]);
    used += suffix_len;
    let (h12, period) = match (hour, suffix) {
        (0 | 24, None) if minute == 0 => return Some(("midnight".into(), used)),
        (12, None) if minute == 0 => return Some(("twelve noon".into(), used)),
        (h, Some(p)) => (h, Some(p)),
        (h @ 13..=23, None) => (h - 12, Some("p m")),
        (0, None) => (12, Some("a m")),
        (h, None) => (h, None),
    };
    let mut words = cardinal(h12);
    match minute {
        0 if period.is_none() => words.push_str(" o'clock"),
        0 => {}
        1..=9 => {
            words.push_str(" oh ");
            words.push_str(&cardinal(minute));
        }
        m => {
            words.push(' ');
            words.push_str(&cardinal(m));
        }
    }
    if let Some(p) = period {
        words.push(' ');
        words.push_str(p);
    }
    Some((words, used))
}

/// A following ` am`, `pm`, ` a.m.`, `p.m.`: what to say and the bytes it took.
fn am_pm_suffix(s: &str) -> (Option<&'static str>, usize) {
    let trimmed = s.trim_start();
    let space = s.len() - trimmed.len();
    for (written, said) in [
        ("a.m.", "a m"),
        ("p.m.", "p m"),
        ("am", "a m"),
        ("pm", "p m"),
        ("AM", "a m"),
        ("PM", "p m"),
    ] {
        if let Some(after) = trimmed.strip_prefix(written)
            && !after.starts_with(char::is_alphanumeric)
        {
            return (Some(said), space + written.len());
        }
    }
    (None, 0)
}

/// `9am`, `5 p.m.`: the hour with its period.
fn am_pm(n: &Number, after: &str) -> Option<(String, usize)> {
    if n.fraction.is_some() || !(1..=12).contains(&n.whole) {
        return None;
    }
    match am_pm_suffix(after) {
        (Some(said), used) => Some((format!("{} {said}", cardinal(n.whole)), used)),
        (None, _) => None,
    }
}

fn decimal(n: &Number) -> String {
    let mut words = cardinal(n.whole);
    if let Some(f) = &n.fraction {
        words.push_str(" point");
        for d in f.chars() {
            words.push(' ');
            words.push_str(ONES[d.to_digit(10).unwrap_or(0) as usize]);
        }
    }
    words
}

/// `1851` "eighteen fifty-one", `1900` "nineteen hundred", `1805` "eighteen oh five",
/// `2000` "two thousand", `2005` "two thousand and five", `2024` "twenty twenty-four".
fn year(y: u64) -> String {
    let (hi, lo) = (y / 100, y % 100);
    match (hi, lo) {
        (20, 0..=9) => {
            if lo == 0 {
                "two thousand".into()
            } else {
                format!("two thousand and {}", ONES[lo as usize])
            }
        }
        (_, 0) => format!("{} hundred", cardinal(hi)),
        (_, 1..=9) => format!("{} oh {}", cardinal(hi), ONES[lo as usize]),
        _ => format!("{} {}", cardinal(hi), cardinal(lo)),
    }
}

const ONES: [&str; 20] = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
];
/// Whether a word is a number from one to twenty in words (an age may be said so).
pub(super) fn is_number_word(word: &str) -> bool {
    ONES[1..].contains(&word) || word == TENS[2]
}

const TENS: [&str; 10] = [
    "", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
];

/// A whole number in words ("one thousand two hundred and five").
pub fn cardinal(n: u64) -> String {
    if n < 20 {
        return ONES[n as usize].into();
    }
    if n < 100 {
        let (t, o) = ((n / 10) as usize, n % 10);
        return if o == 0 {
            TENS[t].into()
        } else {
            format!("{}-{}", TENS[t], ONES[o as usize])
        };
    }
    if n < 1000 {
        let (h, rest) = (n / 100, n % 100);
        let mut s = format!("{} hundred", ONES[h as usize]);
        if rest > 0 {
            s.push_str(" and ");
            s.push_str(&cardinal(rest));
        }
        return s;
    }
    for (scale, name) in [
        (1_000_000_000_000u64, "trillion"),
        (1_000_000_000, "billion"),
        (1_000_000, "million"),
        (1_000, "thousand"),
    ] {
        if n >= scale {
            let (high, rest) = (n / scale, n % scale);
            let mut s = format!("{} {name}", cardinal(high));
            if rest > 0 {
                s.push_str(if rest < 100 { " and " } else { " " });
                s.push_str(&cardinal(rest));
            }
            return s;
        }
    }
    unreachable!("every number is below some scale or above a thousand")
}

fn ordinal(n: u64) -> String {
    let words = cardinal(n);
    let (head, last) = match words.rfind([' ', '-']) {
        Some(i) => words.split_at(i + 1),
        None => ("", words.as_str()),
    };
    let last = match last {
        "one" => "first".to_string(),
        "two" => "second".to_string(),
        "three" => "third".to_string(),
        "five" => "fifth".to_string(),
        "eight" => "eighth".to_string(),
        "nine" => "ninth".to_string(),
        "twelve" => "twelfth".to_string(),
        w if w.ends_with('y') => format!("{}ieth", &w[..w.len() - 1]),
        w => format!("{w}th"),
    };
    format!("{head}{last}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_bullets_and_emphasis_are_not_read() {
        assert_eq!(
            for_speech("## Tickets\nTickets cost **12 €** for adults."),
            "Tickets cost twelve euros for adults."
        );
        assert_eq!(
            for_speech("Opening hours:\n- Monday closed\n- Tuesday to Sunday 9:00–17:00\n"),
            "Opening hours: Monday closed. Tuesday to Sunday nine o'clock to five p m."
        );
        assert_eq!(
            for_speech("> See the _Water Lilies_ and `room 3`."),
            "See the Water Lilies and room three."
        );
        assert_eq!(
            for_speech(
                "```\ncode\n```\n---\nSee [our map](https://example.org/map) at www.example.org."
            ),
            "See our map at."
        );
        assert_eq!(for_speech("snake_case stays"), "snake_case stays");
    }

    #[test]
    fn urls_are_not_spoken() {
        assert_eq!(
            for_speech("Book online at https://museum.example/tickets. It is cheaper."),
            "Book online at. It is cheaper."
        );
    }

    #[test]
    fn prices_times_and_years_are_spoken_as_people_say_them() {
        for (written, said) in [
            ("12 €", "twelve euros"),
            ("€12.50", "twelve euros fifty"),
            ("1 €", "one euro"),
            ("$5", "five dollars"),
            ("£3.05", "three pounds five"),
            ("20 EUR", "twenty euros"),
            ("9:00", "nine o'clock"),
            ("9:30", "nine thirty"),
            ("9:05", "nine oh five"),
            ("17:00", "five p m"),
            ("12:00", "twelve noon"),
            ("0:00", "midnight"),
            ("9am", "nine a m"),
            ("5 p.m.", "five p m"),
            ("10:15 pm", "ten fifteen p m"),
            ("1851", "eighteen fifty-one"),
            ("1900", "nineteen hundred"),
            ("1805", "eighteen oh five"),
            ("2000", "two thousand"),
            ("2005", "two thousand and five"),
            ("2024", "twenty twenty-four"),
            ("1,500", "one thousand five hundred"),
            ("3.5", "three point five"),
            ("50%", "fifty percent"),
            ("21st", "twenty-first"),
            ("3rd", "third"),
            ("12th", "twelfth"),
            ("40th", "fortieth"),
            ("250", "two hundred and fifty"),
            ("1000000", "one million"),
            ("1,000,005", "one million and five"),
            ("10-12", "ten to twelve"),
        ] {
            assert_eq!(for_speech(written), said, "{written}");
        }
    }

    #[test]
    fn numbers_inside_words_and_plain_text_stay() {
        assert_eq!(
            for_speech("Room B12 and MP4 files"),
            "Room B12 and MP4 files"
        );
        assert_eq!(
            for_speech("The museum opened in 1851, with 300 works."),
            "The museum opened in eighteen fifty-one, with three hundred works."
        );
        assert_eq!(for_speech("well-known"), "well-known");
        assert_eq!(for_speech(""), "");
    }
}
