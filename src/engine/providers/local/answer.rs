//! The offline engine's answers: which part of a character's knowledge a question is about, and
//! the one or two sentences of it that answer.
//!
//! The recogniser mishears (a domain language model makes it hear words of the domain, not
//! always the right ones), so a question is not matched as a search engine would, on any
//! shared word: the knowledge is split into topics (a section under a heading, a paragraph, a
//! question/answer pair of an FAQ); every heard word counts by how rare it is in the knowledge
//! (a word every topic has tells nothing), by how often the topic says it (its heading or FAQ
//! question and each sentence, up to three), less when only its stem matches ("founded" is not
//! "found") and less when the recogniser was unsure of it; a topic is chosen only when it wins
//! clearly: below `MIN_SCORE`, or within `MARGIN` of the second best, the kiosk asks to hear
//! the question again, or, when two named topics are close, which one is meant
//! (`Understood::Either`); a topic that one unsure word alone chose is asked about first
//! (`Understood::Confirm`). A wrong answer costs a visitor more than being asked to repeat.
//! The weights were tuned on the understanding benchmark's recordings (see
//! `benches/understanding/experiment.rs`).

use std::collections::{BTreeSet, HashMap};

use crate::engine::knowledge::tokenize::{is_stopword, tokenize};

/// The least score (sum of the weighted rarity of the words heard in a topic) that answers,
/// in units of the rarity of a word only one topic has (so that it means the same for a
/// knowledge of three topics and of three hundred).
const MIN_SCORE: f64 = 0.9;
/// How many times the second best topic's score the best one needs.
const MARGIN: f64 = 1.3;
/// The least score (as `MIN_SCORE`) of each of two close topics for the visitor to be asked
/// which one is meant: lower than an answer needs, since a wrong guess costs one question.
const EITHER_MIN: f64 = 0.5;
/// The least posterior of the one heard word an answer rests on (no other word of the
/// question is in its topic): below it the topic is asked about, not answered. A single word
/// misheard is the open pass's usual wrong answer ("suit" in "to suit the", "wheelchair" for
/// "pushchair"); chosen between the understanding set's wrong (0.43, 0.54) and right (0.78 and
/// up) answers of one word (see docs/understanding.md).
const SURE_ALONE: f64 = 0.6;
/// Words that quantify or qualify ("all", "only", "every"): they name nothing a question can be
/// about, so the answer ignores them as it does filler words ("all" alone chose the painting's
/// "All nine fishermen were saved" for "what is the only are the a all").
const QUALIFIERS: &[&str] = &[
    "all", "also", "both", "each", "every", "few", "just", "more", "most", "no", "not", "only",
    "other", "same", "such", "too", "very",
];
/// Most times a word counts in one topic.
const MAX_OCCURRENCES: usize = 3;
/// Weight of a word the topic has only in another form with the same stem.
const STEM_ONLY: f64 = 0.6;
/// What a question word asks for, as a sentence shows it: "when" a time or date, "how much" a
/// price... A sentence with it is preferred within the chosen topic.
const CUES: &[(&str, Cue)] = &[
    ("when", Cue::Date),
    ("time", Cue::Number),
    ("much", Cue::Price),
    ("long", Cue::Number),
    ("far", Cue::Number),
    ("deep", Cue::Number),
    ("heavy", Cue::Number),
    ("old", Cue::Number),
    ("many", Cue::Number),
    ("who", Cue::Name),
];
/// Weight of a sentence's cue, against the rarity of the words it shares with the question.
const CUE_WEIGHT: f64 = 1.0;
/// Longest answer read out, in characters.
const ANSWER_MAX_CHARS: usize = 400;

#[derive(Clone, Copy)]
enum Cue {
    /// A number, a weekday, a month or a year.
    Date,
    Number,
    /// A currency sign or "free".
    Price,
    /// A capitalised word after the first: a person's or a place's name.
    Name,
}

impl Cue {
    fn shown_by(self, sentence: &str) -> bool {
        let has_digit = sentence.chars().any(|c| c.is_ascii_digit());
        let lower = sentence.to_lowercase();
        match self {
            Cue::Number => has_digit,
            Cue::Date => {
                has_digit
                    || ["day", "month", "year", "o'clock", "morning", "evening"]
                        .iter()
                        .any(|w| lower.contains(w))
            }
            Cue::Price => {
                sentence.contains(['€', '$', '£'])
                    || lower.contains("free")
                    || lower.contains("euro")
            }
            Cue::Name => sentence
                .split_whitespace()
                .skip(1)
                .any(|w| w.starts_with(|c: char| c.is_uppercase())),
        }
    }
}

/// A part of the knowledge a question can be about.
#[derive(Default)]
struct Topic {
    /// Its heading or FAQ question as written, which a clarifying question names it by.
    label: Option<String>,
    /// Terms of its heading or FAQ question.
    keys: BTreeSet<String>,
    /// What may be said of it: its sentences, or an FAQ entry's written answer.
    sentences: Vec<String>,
    /// The terms of each sentence.
    terms: Vec<BTreeSet<String>>,
    /// Its words as written (lowercase).
    words: BTreeSet<String>,
}

impl Topic {
    fn heading(text: &str) -> Topic {
        let label = text.trim().trim_end_matches(['?', '.', '!']).trim();
        Topic {
            label: (!label.is_empty()).then(|| label.to_string()),
            keys: terms(text),
            words: words(text),
            ..Topic::default()
        }
    }

    fn say(&mut self, sentence: &str) {
        let sentence = sentence.trim();
        self.terms.push(terms(sentence));
        self.words.extend(words(sentence));
        self.sentences.push(sentence.to_string());
    }

    /// How many times it says `term`: in its heading or question, and in each sentence.
    fn occurrences(&self, term: &str) -> usize {
        usize::from(self.keys.contains(term))
            + self.terms.iter().filter(|t| t.contains(term)).count()
    }
}

/// A character's knowledge as topics, with how rare each term is among them.
pub struct Topics {
    topics: Vec<Topic>,
    idf: HashMap<String, f64>,
    /// The rarity of a word only one topic has.
    rarest: f64,
}

impl Topics {
    /// Topics of knowledge sources, each given as its passages in order (passages may overlap:
    /// a sentence already seen in a source is skipped).
    pub fn new(sources: &[Vec<String>]) -> Topics {
        let mut topics = Vec::new();
        for passages in sources {
            let mut seen = BTreeSet::new();
            let mut current: Option<Topic> = None;
            let mut question: Option<String> = None;
            // Lines, each as the sentences not seen before; `None` for a blank line.
            let mut lines: Vec<Option<Vec<&str>>> = Vec::new();
            for passage in passages {
                for line in passage.lines() {
                    let line = line.trim();
                    if line.is_empty() {
                        lines.push(None);
                        continue;
                    }
                    let fresh: Vec<&str> = sentences(line)
                        .filter(|s| seen.insert(s.to_string()))
                        .collect();
                    if !fresh.is_empty() {
                        lines.push(Some(fresh));
                    }
                }
            }
            for line in lines {
                // A blank line ends a paragraph, and so a topic.
                let Some(line) = line else {
                    close(&mut topics, &mut current);
                    continue;
                };
                let whole = line.join(" ");
                match faq_line(&whole) {
                    Some((Side::Question, q)) => {
                        close(&mut topics, &mut current);
                        question = Some(q.to_string());
                    }
                    Some((Side::Answer, a)) => {
                        close(&mut topics, &mut current);
                        let mut t = Topic::heading(&question.take().unwrap_or_default());
                        t.say(a);
                        topics.push(t);
                    }
                    None if is_heading(&whole) => {
                        close(&mut topics, &mut current);
                        current = Some(Topic::heading(&whole));
                    }
                    None => {
                        let t = current.get_or_insert_with(Topic::default);
                        for s in line {
                            t.say(s);
                        }
                    }
                }
            }
            close(&mut topics, &mut current);
        }
        let mut df: HashMap<&str, usize> = HashMap::new();
        for t in &topics {
            let all: BTreeSet<&String> = t.keys.iter().chain(t.terms.iter().flatten()).collect();
            for term in all {
                *df.entry(term).or_default() += 1;
            }
        }
        let n = topics.len() as f64;
        let idf = df
            .into_iter()
            .map(|(term, count)| (term.to_string(), (1.0 + n / count as f64).ln()))
            .collect();
        Topics {
            topics,
            idf,
            rarest: (1.0 + n).ln(),
        }
    }

    /// The answer to the words heard, or `None` when no topic wins clearly. `sure` gives how
    /// sure the recogniser was of each word it heard (0 to 1); a typed question has none.
    pub fn answer(&self, heard: &str, sure: &[(String, f64)]) -> Option<String> {
        match self.understand(heard, sure) {
            Understood::Answer(a) => Some(a),
            Understood::Either(..) | Understood::Confirm(_) | Understood::Nothing => None,
        }
    }

    /// What the words heard ask: a topic's answer, two named topics too close to choose
    /// between (each scores enough to answer, but neither wins clearly), a named topic that
    /// one unsure word alone chose (`SURE_ALONE`), or nothing clear.
    pub fn understand(&self, heard: &str, sure: &[(String, f64)]) -> Understood {
        let wanted = self.wanted(heard, sure);
        let scores = self.ranked(&wanted);
        let Some(&(best, at)) = scores.first() else {
            return Understood::Nothing;
        };
        let (second, next) = scores.get(1).copied().unwrap_or((0.0, at));
        let enough = MIN_SCORE * self.rarest;
        let topic = &self.topics[at];
        if best >= enough && best >= MARGIN * second {
            if self.rests_on_unsure_word(&wanted, topic) {
                return topic
                    .label
                    .clone()
                    .map_or(Understood::Nothing, Understood::Confirm);
            }
            let terms: BTreeSet<String> = wanted.into_iter().map(|w| w.term).collect();
            return Understood::Answer(self.pick(heard, &terms, topic));
        }
        match (&self.topics[at].label, &self.topics[next].label) {
            (Some(a), Some(b)) if second >= EITHER_MIN * self.rarest && a != b => {
                Understood::Either(a.clone(), b.clone())
            }
            _ => Understood::Nothing,
        }
    }

    /// Whether only one of the words wanted is in `topic`, and the recogniser was unsure of it.
    fn rests_on_unsure_word(&self, wanted: &[Wanted], topic: &Topic) -> bool {
        let mut found = wanted
            .iter()
            .filter(|w| self.score(std::slice::from_ref(*w), topic) > 0.0);
        match (found.next(), found.next()) {
            (Some(only), None) => only.sure < SURE_ALONE,
            _ => false,
        }
    }

    /// Every topic's score for the terms wanted, best first.
    fn ranked(&self, wanted: &[Wanted]) -> Vec<(f64, usize)> {
        let mut scores: Vec<(f64, usize)> = self
            .topics
            .iter()
            .enumerate()
            .map(|(i, t)| (self.score(wanted, t), i))
            .collect();
        scores.sort_by(|a, b| b.0.total_cmp(&a.0));
        scores
    }

    /// The topic that answers `heard`, as `understand` chooses it (`None` when none does).
    fn chosen(&self, heard: &str, sure: &[(String, f64)]) -> Option<usize> {
        let wanted = self.wanted(heard, sure);
        let scores = self.ranked(&wanted);
        let &(best, at) = scores.first()?;
        let second = scores.get(1).map_or(0.0, |s| s.0);
        (best >= MIN_SCORE * self.rarest
            && best >= MARGIN * second
            && !self.rests_on_unsure_word(&wanted, &self.topics[at]))
        .then_some(at)
    }

    /// How far other words heard of the same speech (`heard`, with `sure`) point at the topic
    /// that answers `said`: that topic's score for them, in units of the least score that
    /// answers (1 would answer on its own), and the share of the rarity of `said`'s content
    /// terms that `heard` has too (0 to 1). `None` when no topic answers `said`.
    pub fn support(&self, said: &str, heard: &str, sure: &[(String, f64)]) -> Option<Support> {
        let at = self.chosen(said, &[])?;
        let wanted = self.wanted(heard, sure);
        let score = self.score(&wanted, &self.topics[at]) / (MIN_SCORE * self.rarest);
        let heard_terms: BTreeSet<&str> = wanted.iter().map(|w| w.term.as_str()).collect();
        let rarity = |t: &String| self.idf.get(t).copied().unwrap_or(0.0);
        let said_terms = terms(said);
        let all: f64 = said_terms.iter().map(rarity).sum();
        let shared: f64 = said_terms
            .iter()
            .filter(|t| heard_terms.contains(t.as_str()))
            .map(rarity)
            .sum();
        Some(Support {
            score,
            shared: if all > 0.0 { shared / all } else { 0.0 },
        })
    }

    /// Whether the topic that answers `said` is the one named `label`.
    pub fn is_about(&self, said: &str, label: &str) -> bool {
        self.chosen(said, &[])
            .is_some_and(|at| self.topics[at].label.as_deref() == Some(label))
    }

    /// The answer to `heard` from the topic named `label` (one `understand` offered).
    pub fn answer_about(&self, label: &str, heard: &str) -> Option<String> {
        let topic = self
            .topics
            .iter()
            .find(|t| t.label.as_deref() == Some(label))?;
        let terms: BTreeSet<String> = self
            .wanted(heard, &[])
            .into_iter()
            .map(|w| w.term)
            .collect();
        Some(self.pick(heard, &terms, topic))
    }

    /// The content terms of the words heard, each with its forms as heard and how sure the
    /// recogniser was of it.
    fn wanted(&self, heard: &str, sure: &[(String, f64)]) -> Vec<Wanted> {
        let mut out: Vec<Wanted> = Vec::new();
        for word in words(heard) {
            let p = sure
                .iter()
                .filter(|(w, _)| *w == word)
                .map(|(_, p)| *p)
                .reduce(f64::max)
                .unwrap_or(1.0);
            for term in terms(&word) {
                match out.iter_mut().find(|w| w.term == term) {
                    Some(w) => {
                        w.forms.insert(word.clone());
                        w.sure = w.sure.max(p);
                    }
                    None => out.push(Wanted {
                        term,
                        forms: BTreeSet::from([word.clone()]),
                        sure: p,
                    }),
                }
            }
        }
        out
    }

    fn score(&self, wanted: &[Wanted], topic: &Topic) -> f64 {
        wanted
            .iter()
            .map(|w| {
                let said = topic.occurrences(&w.term).min(MAX_OCCURRENCES) as f64;
                let form = if w.forms.iter().any(|f| topic.words.contains(f)) {
                    1.0
                } else {
                    STEM_ONLY
                };
                let rarity = self.idf.get(&w.term).copied().unwrap_or(0.0);
                rarity * said * form * w.sure.clamp(0.0, 1.0).sqrt()
            })
            .sum()
    }

    /// The topic's two sentences that answer best (all of it when it is that short), in their
    /// order: those sharing the rarest words with the question, and showing what its question
    /// word asks for.
    fn pick(&self, heard: &str, wanted: &BTreeSet<String>, topic: &Topic) -> String {
        if topic.sentences.len() <= 2 {
            return topic.sentences.join(" ");
        }
        let asked: Vec<Cue> = heard
            .split_whitespace()
            .filter_map(|w| {
                let w = w.to_lowercase();
                CUES.iter().find(|(q, _)| *q == w).map(|(_, c)| *c)
            })
            .collect();
        let mut scored: Vec<(f64, usize)> = topic
            .sentences
            .iter()
            .enumerate()
            .zip(&topic.terms)
            .map(|((i, s), t)| {
                let shared: f64 = t
                    .intersection(wanted)
                    .map(|w| self.idf.get(w).copied().unwrap_or(0.0))
                    .sum();
                let cued = asked.iter().filter(|c| c.shown_by(s)).count() as f64;
                (shared + cued * CUE_WEIGHT, i)
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut chosen: Vec<usize> = Vec::new();
        let mut len = 0;
        for &(_, i) in scored.iter().take(2) {
            let s = &topic.sentences[i];
            if len + s.len() > ANSWER_MAX_CHARS && !chosen.is_empty() {
                break;
            }
            len += s.len();
            chosen.push(i);
        }
        chosen.sort();
        chosen
            .iter()
            .map(|&i| topic.sentences[i].as_str())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// How far one hearing of a question supports another's (see `Topics::support`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Support {
    /// The other hearing's score for the topic, in units of the least score that answers.
    pub score: f64,
    /// The share of the topic terms' rarity that the other hearing has too (0 to 1).
    pub shared: f64,
}

/// What a question asks, as far as the knowledge tells.
#[derive(Debug, PartialEq)]
pub enum Understood {
    Answer(String),
    /// The names of two topics it may be about, the likelier first.
    Either(String, String),
    /// The name of the one topic it seems about, chosen by one word heard unsure.
    Confirm(String),
    Nothing,
}

/// Which of the topics offered (two by `Understood::Either`, or one by `Understood::Confirm`)
/// a visitor's reply chooses: "yes" the first, "no" the other (none when only one was
/// offered), or the one whose name's words it says (and not the other's).
pub fn choose<'a>(reply: &str, (a, b): (&'a str, Option<&'a str>)) -> Option<&'a str> {
    let said = words(reply);
    let names = |label: &str| -> BTreeSet<String> { terms(label) };
    let said_terms = terms(reply);
    let (in_a, in_b) = (
        !names(a).is_disjoint(&said_terms),
        b.is_some_and(|b| !names(b).is_disjoint(&said_terms)),
    );
    match (in_a, in_b) {
        (true, false) => return Some(a),
        (false, true) => return b,
        _ => {}
    }
    let has = |w: &[&str]| w.iter().any(|w| said.contains(*w));
    if has(&["yes", "yeah", "first", "right", "correct"]) {
        Some(a)
    } else if has(&["no", "second", "other", "nope"]) {
        b
    } else {
        None
    }
}

/// The clarifying question offered for two topics ("Do you mean opening hours, or can I bring
/// my dog?"): each name as written but for its first letter.
pub fn either_question(a: &str, b: &str) -> String {
    format!("Do you mean {}, or {}?", inside(a), inside(b))
}

/// The clarifying question offered for one topic ("Do you mean toilets?").
pub fn confirm_question(label: &str) -> String {
    format!("Do you mean {}?", inside(label))
}

/// A topic's name as said inside a sentence: as written but for its first letter.
fn inside(name: &str) -> String {
    let mut chars = name.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_lowercase().chain(chars).collect::<String>()
    })
}

/// A term of the question.
struct Wanted {
    term: String,
    /// The words heard that give it ("closes", "closed").
    forms: BTreeSet<String>,
    /// How sure the recogniser was of it: the recogniser's posterior, 1 for typed text.
    sure: f64,
}

/// How visitors ask who the character is. The offline engine answers these from the
/// character's name and description (its knowledge says nothing about itself); the recogniser's
/// language model learns their words from this text too.
pub const WHO_QUESTIONS: &str = "Who are you? What is your name? What's your name? \
Tell me about yourself. Introduce yourself. Who am I talking to?";

/// Whether `question` asks who the character is (one of `WHO_QUESTIONS`, within a sentence).
pub fn asks_who(question: &str) -> bool {
    let said = format!(" {} ", in_order(question).join(" "));
    WHO_QUESTIONS
        .split(['?', '.'])
        .map(|q| in_order(q).join(" "))
        .filter(|q| !q.is_empty())
        .any(|q| said.contains(&format!(" {q} ")))
}

/// The offline engine's answer to "who are you": the character's name and description.
pub fn introduction(name: &str, description: &str) -> String {
    let description = description.trim();
    if description.is_empty() {
        format!("I'm {}.", name.trim())
    } else {
        format!("I'm {}. {description}", name.trim())
    }
}

/// Lowercase words in the order said, apostrophes kept inside words ("what's").
fn in_order(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .map(|w| w.trim_matches('\'').to_lowercase())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Lowercase words as written.
fn words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .map(|w| w.trim_matches('\'').to_lowercase())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Ends the topic being read, keeping it if it has something to say.
fn close(topics: &mut Vec<Topic>, current: &mut Option<Topic>) {
    if let Some(t) = current.take()
        && !t.sentences.is_empty()
    {
        topics.push(t);
    }
}

/// Content terms (stemmed, no filler words, no `QUALIFIERS`).
fn terms(text: &str) -> BTreeSet<String> {
    tokenize(text)
        .into_iter()
        .filter(|t| !is_stopword(t) && !qualifier_terms().contains(t))
        .collect()
}

/// `QUALIFIERS` as `tokenize` gives them (stemmed: "only" is "onli").
fn qualifier_terms() -> &'static BTreeSet<String> {
    static TERMS: std::sync::LazyLock<BTreeSet<String>> =
        std::sync::LazyLock::new(|| QUALIFIERS.iter().flat_map(|q| tokenize(q)).collect());
    &TERMS
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum Side {
    Question,
    Answer,
}

/// Which side of a knowledge file's question/answer pair a line is, and its text: FAQ files
/// write each pair as a line `Q: question` followed by a line `A: answer`.
pub(crate) fn faq_line(line: &str) -> Option<(Side, &str)> {
    for (marker, side) in [('Q', Side::Question), ('A', Side::Answer)] {
        if let Some(rest) = line
            .strip_prefix(marker)
            .or_else(|| line.strip_prefix(marker.to_ascii_lowercase()))
            .and_then(|r| r.strip_prefix(':'))
        {
            return Some((side, rest.trim()));
        }
    }
    None
}

/// A line that ends without punctuation and is short is a heading (extraction keeps a markdown
/// heading's text as a line of its own): it names a topic but answers nothing.
fn is_heading(line: &str) -> bool {
    let line = line.trim();
    !line.ends_with(['.', '!', '?', '。', '！', '？', ':', ';'])
        && line.split_whitespace().count() <= 6
}

/// Splits a line into sentences (kept with their end punctuation).
fn sentences(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text.trim();
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest
            .char_indices()
            .find(|&(i, c)| {
                matches!(c, '。' | '！' | '？')
                    || (matches!(c, '.' | '!' | '?')
                        && rest[i + c.len_utf8()..].starts_with(char::is_whitespace))
            })
            .map_or(rest.len(), |(i, c)| i + c.len_utf8());
        let (s, tail) = rest.split_at(end);
        rest = tail.trim_start();
        Some(s)
    })
    .filter(|s| !s.trim().is_empty())
}

#[cfg(test)]
mod tests {
    #[test]
    fn who_questions_are_told_from_others() {
        use super::asks_who;
        for q in [
            "Who are you?",
            "what's your name",
            "Hello, what is your name please?",
            "WHO ARE YOU",
        ] {
            assert!(asks_who(q), "{q}");
        }
        for q in [
            "Who are the artists?",
            "What is the name of this painting?",
            "you",
            "",
        ] {
            assert!(!asks_who(q), "{q}");
        }
    }

    use super::*;

    fn museum() -> Topics {
        let guide = "Opening hours\nThe museum opens at 9:00 and closes at 17:00. The museum is closed on Mondays.\n\n\
            Tickets\nA ticket costs 12 € for adults. Children under twelve enter free.\n\n\
            Cafe\nThe cafe is on the ground floor. The cafe serves coffee and cake.";
        let faq = "Q: Can I bring my dog?\nA: Only guide dogs are allowed inside.\n\n\
            Q: Is there free wifi?\nA: Yes, the network is called Harbour Guest.";
        let history = "The whale was found on the beach in 1897. The skeleton of the whale is \
            twenty four metres long. It hangs in the great hall.\n\n\
            The lighthouse lens was made in Paris in 1860.";
        Topics::new(&[
            vec![guide.to_string()],
            vec![faq.to_string()],
            vec![history.to_string()],
        ])
    }

    #[test]
    fn a_question_gets_its_topics_sentences() {
        let t = museum();
        assert_eq!(
            t.answer("where is the cafe", &[]).as_deref(),
            Some("The cafe is on the ground floor. The cafe serves coffee and cake.")
        );
        assert_eq!(
            t.answer("can i bring my dog", &[]).as_deref(),
            Some("Only guide dogs are allowed inside.")
        );
        assert_eq!(
            t.answer("is there free wifi", &[]).as_deref(),
            Some("Yes, the network is called Harbour Guest.")
        );
    }

    #[test]
    fn the_question_word_chooses_the_sentences() {
        let t = museum();
        let long = t.answer("how long is the whale skeleton", &[]).unwrap();
        assert!(long.contains("twenty four metres long"), "{long}");
        let when = t.answer("when was the whale found", &[]).unwrap();
        assert!(when.contains("1897"), "{when}");
        assert!(
            !when.contains("great hall"),
            "two sentences at most: {when}"
        );
    }

    #[test]
    fn unclear_or_unrelated_questions_are_not_answered() {
        let t = museum();
        assert_eq!(t.answer("dinosaurs", &[]), None, "nothing known");
        assert_eq!(t.answer("what is the", &[]), None, "no content word");
        // "free" is said once in two topics: neither wins.
        assert_eq!(t.answer("is it free", &[]), None);
        assert_eq!(Topics::new(&[]).answer("cafe", &[]), None);
    }

    #[test]
    fn unsure_or_other_forms_of_words_count_less() {
        let t = museum();
        let dog = "can i bring my dog";
        assert!(t.answer(dog, &[("dog".into(), 0.9)]).is_some());
        assert_eq!(
            t.answer(dog, &[("dog".into(), 0.05), ("bring".into(), 0.05)]),
            None,
            "heard, but too unsure of it"
        );
        let w = t.wanted("the cafe closes closed", &[]);
        let close = w.iter().find(|w| w.term == "close").unwrap();
        assert_eq!(close.forms.len(), 2);
        let lens = &t.topics.iter().find(|t| t.words.contains("lens")).unwrap();
        let exact = t.score(&t.wanted("lens made", &[]), lens);
        let stem_only = t.score(&t.wanted("lenses making", &[]), lens);
        assert!(stem_only < exact, "{stem_only} < {exact}");
    }

    #[test]
    fn two_close_topics_are_offered_and_a_reply_chooses() {
        let t = Topics::new(&[vec![
            "Shop\nThe shop sells books and maps.\n\nLibrary\nThe library lends books and maps."
                .to_string(),
        ]]);
        assert_eq!(
            t.understand("books and maps", &[]),
            Understood::Either("Shop".into(), "Library".into())
        );
        assert_eq!(t.answer("books and maps", &[]), None);
        assert!(matches!(
            t.understand("where is the shop", &[]),
            Understood::Answer(_)
        ));
        assert_eq!(t.understand("dinosaurs", &[]), Understood::Nothing);
        let pair = ("Shop", Some("Library"));
        assert_eq!(choose("yes", pair), Some("Shop"));
        assert_eq!(choose("no", pair), Some("Library"));
        assert_eq!(choose("the library please", pair), Some("Library"));
        assert_eq!(choose("no the shop", pair), Some("Shop"));
        assert_eq!(choose("what", pair), None);
        assert_eq!(
            t.answer_about("Library", "books and maps").as_deref(),
            Some("The library lends books and maps.")
        );
        assert_eq!(
            either_question("Opening hours", "Can I bring my dog"),
            "Do you mean opening hours, or can I bring my dog?"
        );
    }

    #[test]
    fn a_topic_one_unsure_word_chose_is_asked_about() {
        let t = museum();
        let cafe = "where is the cafe";
        assert_eq!(
            t.understand(cafe, &[("cafe".into(), 0.3)]),
            Understood::Confirm("Cafe".into())
        );
        assert_eq!(t.answer(cafe, &[("cafe".into(), 0.3)]), None);
        assert!(matches!(
            t.understand(cafe, &[("cafe".into(), 0.9)]),
            Understood::Answer(_)
        ));
        assert!(
            matches!(
                t.understand("cafe coffee", &[("cafe".into(), 0.3)]),
                Understood::Answer(_)
            ),
            "two words of the topic heard"
        );
        // A topic without a name cannot be asked about.
        assert_eq!(
            t.understand("where is the whale", &[("whale".into(), 0.3)]),
            Understood::Nothing
        );
        assert_eq!(choose("yes", ("Cafe", None)), Some("Cafe"));
        assert_eq!(choose("the cafe", ("Cafe", None)), Some("Cafe"));
        assert_eq!(choose("no", ("Cafe", None)), None);
        assert_eq!(confirm_question("Cafe"), "Do you mean cafe?");
    }

    #[test]
    fn qualifiers_choose_no_topic() {
        let t = Topics::new(&[vec![
            "All nine fishermen were saved.\n\nOnly guide dogs are allowed.".to_string(),
        ]]);
        assert_eq!(
            t.understand("what is the only are the a all", &[]),
            Understood::Nothing
        );
        assert!(t.answer("were the fishermen saved", &[]).is_some());
    }

    #[test]
    fn overlapping_passages_give_each_sentence_once() {
        let t = Topics::new(&[vec![
            "Shop\nThe shop sells books. The shop sells postcards.".to_string(),
            "The shop sells postcards.\nThe shop sells model ships.".to_string(),
        ]]);
        assert_eq!(t.topics.len(), 1);
        assert_eq!(t.topics[0].sentences.len(), 3);
    }
}
