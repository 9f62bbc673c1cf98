//! Cutting a reply into what is synthesised at once: sentences as the text streams, so speech
//! starts before the reply is complete, and the clauses of a long sentence for a synthesiser
//! that answers only whole texts, so its first piece sounds soon.

/// Cuts a long sentence into pieces synthesised one after the other, at clause boundaries (a
/// comma, semicolon or colon followed by a space, a dash followed by one (a hyphen only between
/// spaces); before " and " or " but " only where there is none): the first piece short, so
/// that it sounds soon, the later ones longer, as they are synthesised while the earlier ones
/// play. A sentence of up to
/// `SPLIT_ABOVE` characters is one piece; numbers ("12,000", "3.5") are never cut. The pieces,
/// joined with spaces, are the sentence.
pub(super) fn clauses(sentence: &str) -> Vec<&str> {
    /// Sentences up to this many characters are spoken whole.
    const SPLIT_ABOVE: usize = 70;
    /// Bounds of the first piece and of the later ones, in characters.
    const FIRST: (usize, usize) = (20, 60);
    const LATER: (usize, usize) = (40, 160);
    /// The last piece is never shorter than this.
    const MIN_TAIL: usize = 20;

    let text = sentence.trim();
    let chars = |s: &str| s.chars().count();
    if chars(text) <= SPLIT_ABOVE {
        return if text.is_empty() { vec![] } else { vec![text] };
    }
    // Where a piece may start (byte offsets), and whether the cut is at punctuation.
    let mut cuts: Vec<(usize, bool)> = Vec::new();
    let mut it = text.char_indices().peekable();
    let mut prev_space = false;
    while let Some((i, c)) = it.next() {
        let space_after = it.peek().is_some_and(|&(_, n)| n.is_whitespace());
        let strong = matches!(c, '，' | '；' | '：')
            || (space_after
                && (matches!(c, ',' | ';' | ':' | '—' | '–') || (c == '-' && prev_space)));
        if strong {
            let rest = text[i + c.len_utf8()..].trim_start();
            if !rest.is_empty() {
                cuts.push((text.len() - rest.len(), true));
            }
        } else if prev_space && c.is_alphabetic() {
            let word = text[i..]
                .split(|ch: char| !ch.is_alphabetic())
                .next()
                .unwrap_or("");
            if (word.eq_ignore_ascii_case("and") || word.eq_ignore_ascii_case("but"))
                && text[i + word.len()..].starts_with(char::is_whitespace)
                && cuts.last().is_none_or(|&(at, _)| at != i)
            {
                cuts.push((i, false));
            }
        }
        prev_space = c.is_whitespace();
    }
    let mut pieces = Vec::new();
    let mut start = 0;
    loop {
        let rest = &text[start..];
        let first = pieces.is_empty();
        let (min, max) = if first { FIRST } else { LATER };
        if !first && chars(rest) <= max {
            pieces.push(rest);
            break;
        }
        let len = |at: usize| chars(text[start..at].trim_end());
        let candidates = || {
            cuts.iter()
                .copied()
                .filter(|&(at, _)| at > start && len(at) >= min && chars(&text[at..]) >= MIN_TAIL)
        };
        let within = |strong: bool| {
            let mut c = candidates().filter(|&(at, s)| s == strong && len(at) <= max);
            // The first piece as short as it may be, the later ones as long.
            if first { c.next() } else { c.next_back() }
        };
        let beyond = |strong: bool| candidates().find(|&(_, s)| s == strong);
        let Some((at, _)) = within(true)
            .or_else(|| within(false))
            .or_else(|| beyond(true))
            .or_else(|| beyond(false))
        else {
            pieces.push(rest);
            break;
        };
        pieces.push(text[start..at].trim_end());
        start = at;
    }
    pieces
}

/// Cuts streamed text into sentences, so speech can start before the reply is complete.
#[derive(Default)]
pub(super) struct Sentences {
    buf: String,
}

impl Sentences {
    /// Shortest piece worth synthesising on its own, in characters.
    const MIN_CHARS: usize = 12;

    pub(super) fn push(&mut self, delta: &str) -> Vec<String> {
        self.buf.push_str(delta);
        let mut out = Vec::new();
        loop {
            let cut = self.buf.char_indices().find_map(|(i, c)| {
                let end = i + c.len_utf8();
                let boundary = matches!(c, '。' | '！' | '？' | '\n')
                    || (matches!(c, '.' | '!' | '?' | ';' | ':')
                        && self.buf[end..].starts_with(char::is_whitespace));
                (boundary && self.buf[..end].trim().chars().count() >= Self::MIN_CHARS)
                    .then_some(end)
            });
            let Some(end) = cut else { break };
            let sentence: String = self.buf.drain(..end).collect();
            out.push(sentence.trim().to_string());
        }
        out
    }

    /// Whether text of a sentence not yet complete is held.
    pub(super) fn pending(&self) -> bool {
        !self.buf.trim().is_empty()
    }

    pub(super) fn finish(&mut self) -> Vec<String> {
        let rest = std::mem::take(&mut self.buf);
        let rest = rest.trim();
        if rest.is_empty() {
            Vec::new()
        } else {
            vec![rest.to_string()]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Sentences, clauses};

    const TICKETS: &str = "Tickets cost 12 euros for adults, 8 euros for students and 6 euros for \
        seniors, and children under twelve enter free of charge on every day of the week.";

    /// The pieces, put back together, are the sentence (up to whitespace).
    fn rejoin(pieces: &[&str]) -> String {
        pieces
            .join(" ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn words(s: &str) -> String {
        s.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn long_sentences_are_spoken_clause_by_clause() {
        assert_eq!(
            clauses(TICKETS),
            [
                "Tickets cost 12 euros for adults,",
                "8 euros for students and 6 euros for seniors, and children under twelve enter \
                 free of charge on every day of the week."
            ]
        );
        // Later pieces are longer than the first; each ends at a clause.
        let long = "The harbour museum, which opened in 1901, shows ship models, maps and \
            instruments in the old customs house; its lighthouse lens, made in Paris in 1872, \
            stands in the main hall, where visitors can walk around it, look through it and \
            read how it turned, night after night, for almost a hundred years, guiding ships \
            past the rocks at the mouth of the harbour.";
        let pieces = clauses(long);
        assert_eq!(rejoin(&pieces), words(long));
        assert!(pieces.len() >= 3, "{pieces:?}");
        assert_eq!(pieces[0], "The harbour museum, which opened in 1901,");
        for p in &pieces[1..pieces.len() - 1] {
            assert!(
                (41..=160).contains(&p.chars().count()),
                "later pieces are longer: {pieces:?}"
            );
        }
        for p in &pieces[..pieces.len() - 1] {
            assert!(p.ends_with([',', ';']), "cut at a clause: {pieces:?}");
        }
    }

    #[test]
    fn a_clause_without_punctuation_is_cut_before_and_or_but() {
        let s = "The keeper counted every ship that passed the harbour every night for forty \
            years and wrote each of them down in a thick leather book.";
        let pieces = clauses(s);
        assert_eq!(pieces.len(), 2, "{pieces:?}");
        assert!(pieces[1].starts_with("and wrote"), "{pieces:?}");
        assert_eq!(rejoin(&pieces), words(s));
        // A comma wins over a conjunction.
        let s = "The cafe on the first floor serves soup and sandwiches, cakes and coffee, \
            and it is open whenever the museum is.";
        assert_eq!(
            clauses(s)[0],
            "The cafe on the first floor serves soup and sandwiches,"
        );
        // "and" inside a word is no cut ("Andrew", "band", "butter").
        let s = "Andrew's brass band plays every Sunday morning on the butter market square \
            in front of the old town hall";
        assert_eq!(clauses(s), [s]);
    }

    #[test]
    fn short_sentences_and_numbers_stay_whole() {
        for s in [
            "We close at 6 pm.",
            "The museum closes at 6 pm on weekdays, and at 8 pm on weekends.",
            "",
        ] {
            let expected: Vec<&str> = if s.is_empty() { vec![] } else { vec![s] };
            assert_eq!(clauses(s), expected);
        }
        let s = "The archive holds 12,000 letters and 1,250 maps on 3.5 kilometres of \
            shelves: opening hours are 9:30 to 17:00, and entry costs 4,50 euros for everyone.";
        let pieces = clauses(s);
        assert!(pieces.len() > 1, "{pieces:?}");
        assert_eq!(rejoin(&pieces), words(s));
        for number in ["12,000", "1,250", "3.5", "9:30", "17:00", "4,50"] {
            assert!(
                pieces.iter().any(|p| p.contains(number)),
                "{number} is cut: {pieces:?}"
            );
        }
        // No last piece too short to sound natural.
        let s =
            "Tickets cost twelve euros for adults and eight euros for students on weekdays, too.";
        assert!(
            clauses(s).iter().all(|p| p.chars().count() >= 20),
            "{:?}",
            clauses(s)
        );
    }

    #[test]
    fn pieces_always_make_up_the_sentence() {
        let samples = [
            TICKETS,
            "  Spaces   around,   and   between  words  are  fine,  and  trailing  ones  too,  \
               even  with  many  clauses  in  a  row,  like  this  one.  ",
            "A dash — like this one — is a pause, and so is a hyphen - between spaces - but a \
             well-known compound is not, nor are long, long, long, long, long, long lists.",
            "博物馆早上九点开门，晚上六点关门，周五开放到晚上八点，儿童免费入场，成人门票十二欧元，学生八欧元，老人六欧元，欢迎大家来参观我们的灯塔展览。",
            "Supercalifragilisticexpialidociousandmore words that go on and on without any \
             punctuation whatsoever until the very end",
        ];
        for s in samples {
            let pieces = clauses(s);
            assert!(!pieces.is_empty());
            assert!(
                pieces.iter().all(|p| !p.is_empty() && *p == p.trim()),
                "{pieces:?}"
            );
            assert_eq!(
                rejoin(&pieces).replace(' ', ""),
                words(s).replace(' ', ""),
                "{pieces:?}"
            );
        }
    }

    #[test]
    fn sentences_are_cut_as_the_text_streams() {
        let mut s = Sentences::default();
        assert!(s.push("The museum closes").is_empty());
        assert!(
            s.push(" at 6 pm.").is_empty(),
            "no boundary until the next char proves it"
        );
        assert_eq!(
            s.push(" On Fridays it stays"),
            ["The museum closes at 6 pm."]
        );
        assert_eq!(
            s.push(" open until 8. Ok."),
            ["On Fridays it stays open until 8."]
        );
        assert_eq!(s.finish(), ["Ok."]);
        assert!(s.finish().is_empty());
    }

    #[test]
    fn numbers_and_short_pieces_do_not_split() {
        let mut s = Sentences::default();
        assert!(s.push("It costs 3.50 euros. ").len() == 1);
        let mut s = Sentences::default();
        assert_eq!(
            s.push("博物馆六点关门。明天见。"),
            ["博物馆六点关门。明天见。"]
        );
    }
}
