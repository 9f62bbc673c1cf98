//! The offline recogniser's language model: what a visitor is likely to say to one character.
//!
//! A bag of words ("any sequence of the knowledge's words") lets PocketSphinx hear "when it was
//! on we are you open a" for "When does the museum open?". A trigram model knows word order: it
//! is trained on the character's knowledge (its sentences, as they are said aloud), its FAQ
//! questions, the knowledge's statements turned into questions ("you can borrow a wheelchair" ->
//! "can i borrow a wheelchair"), and question forms around every topic word and pair of words of
//! the knowledge ("where is the cafe", "how long is the whale skeleton"). It is written in the
//! ARPA text format that PocketSphinx reads (`-lm`), with absolute discounting and back-off
//! weights computed so that every history's probabilities sum to one. Built in Rust when the
//! knowledge changes, cached by content.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

use crate::engine::knowledge::tokenize::is_stopword;
use crate::engine::spoken::for_speech;

/// Questions visitors ask about a topic (`{}`).
const QUESTION_FORMS: &[&str] = &[
    "where is the {}",
    "where are the {}",
    "where can i find the {}",
    "what is the {}",
    "tell me about the {}",
    "when does the {} open",
    "when does the {} close",
    "when does the {} start",
    "when was the {} built",
    "when was the {} made",
    "when was the {} founded",
    "who made the {}",
    "who painted the {}",
    "who built the {}",
    "who founded the {}",
    "how much is the {}",
    "how much does the {} cost",
    "how old is the {}",
    "how long is the {}",
    "how big is the {}",
    "how heavy is the {}",
    "how many {} are there",
    "is there a {}",
    "are there {}",
    "do you have a {}",
    "can i see the {}",
    "what does the {} sell",
    "what does the {} serve",
];

/// Things visitors say whatever the character knows.
const GENERAL: &[&str] = &[
    "hello",
    "hi",
    "thank you",
    "thanks",
    "goodbye",
    "what time does the museum open",
    "what time does the museum close",
    "how much is a ticket",
    "what can i see here",
    "what is your name",
    "who are you",
    "can you say that again",
    "yes",
    "no",
];

/// Training sentences (lowercase words) for a character's model.
pub fn corpus(texts: &[String]) -> Vec<Vec<String>> {
    let mut sentences: Vec<Vec<String>> = Vec::new();
    let mut topics = BTreeSet::new();
    // Line by line: a heading or an FAQ marker must not run into the sentence after it.
    for line in texts.iter().flat_map(|t| t.lines()) {
        for sentence in split_sentences(&for_speech(line)) {
            let mut words = words_of(&sentence);
            // FAQ lines: "Q: Can I ...?" / "A: ..."
            if matches!(words.first().map(String::as_str), Some("q" | "a")) {
                words.remove(0);
            }
            if words.is_empty() {
                continue;
            }
            let content: Vec<&String> = words.iter().filter(|w| !is_stopword(w)).collect();
            for w in &content {
                topics.insert((*w).clone());
            }
            for pair in words.windows(2) {
                if !is_stopword(&pair[0]) && !is_stopword(&pair[1]) {
                    topics.insert(format!("{} {}", pair[0], pair[1]));
                }
            }
            if let Some(question) = as_question(&words) {
                sentences.push(question.clone());
                sentences.push(question);
            }
            sentences.push(words);
        }
    }
    for topic in &topics {
        for form in QUESTION_FORMS {
            sentences.push(words_of(&form.replace("{}", topic)));
        }
    }
    for line in GENERAL {
        sentences.push(words_of(line));
    }
    sentences
}

/// Forms of a question about a topic that the language model does not need (its trigrams of
/// the knowledge cover them) but the closed-set grammar does: it can say only what it lists.
const MORE_FORMS: &[&str] = &[
    "where was the {} found",
    "where was the {} made",
    "where is the {} from",
    "when was the {} painted",
    "when was the {} found",
    "when does the {} run",
    "what is the {} made of",
    "how far is the {}",
    "how deep is the {}",
    "how many {} were there",
    "can i take {}",
    "can i bring {}",
    "where can i leave my {}",
    "do i have to pay for the {}",
    "is the {} free",
    "is the {} open",
];

/// The sentences of the closed-set grammar (see `jsgf`): the questions the knowledge itself
/// asks (FAQ questions, statements that read as permissions turned into questions, how visitors
/// ask who the character is), and question forms around its topic words.
pub struct ClosedSet {
    /// Whole questions.
    pub questions: Vec<Vec<String>>,
    /// The knowledge's content words and pairs of them ("whale", "whale skeleton").
    pub terms: BTreeSet<String>,
}

/// The closed set of a character's texts.
pub fn closed_set(texts: &[String]) -> ClosedSet {
    let mut questions: Vec<Vec<String>> = GENERAL.iter().map(|l| words_of(l)).collect();
    let mut terms = BTreeSet::new();
    for line in texts.iter().flat_map(|t| t.lines()) {
        let line = line.trim();
        let faq = line.len() > 2 && line[..2].eq_ignore_ascii_case("q:");
        for (sentence, asks) in question_sentences(&for_speech(line)) {
            let mut words = words_of(&sentence);
            if matches!(words.first().map(String::as_str), Some("q" | "a")) {
                words.remove(0);
            }
            // Numbers are what visitors ask for, not what they ask about ("how heavy is the
            // nineteen" fits any mumble).
            let topical = |w: &String| !is_stopword(w) && !is_number(w);
            for w in words.iter().filter(|w| topical(w)) {
                terms.insert(w.clone());
            }
            for pair in words.windows(2) {
                if topical(&pair[0]) && topical(&pair[1]) {
                    terms.insert(format!("{} {}", pair[0], pair[1]));
                }
            }
            if let Some(question) = as_question(&words) {
                questions.push(question);
            }
            if (asks || faq) && !words.is_empty() {
                questions.push(words);
            }
        }
    }
    ClosedSet { questions, terms }
}

/// Whether `word` is a number as `for_speech` spells it ("nineteen", "hundred").
fn is_number(word: &str) -> bool {
    matches!(word, "hundred" | "thousand" | "million" | "oh")
        || (0..100).any(|n| crate::engine::spoken::cardinal(n) == word)
}

/// The sentences of a text, each with whether it ends with a question mark.
fn question_sentences(text: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let end = rest.find(['.', '!', '?', ';']).unwrap_or(rest.len());
        let asks = rest[end..].starts_with('?');
        let s = rest[..end].trim();
        if !s.is_empty() {
            out.push((s.to_string(), asks));
        }
        rest = rest.get(end + 1..).unwrap_or("");
    }
    out
}

/// A JSGF grammar of the closed set for PocketSphinx (`-jsgf`): one of its questions, or a
/// question form around one of its topic words. Only words `known` to the pronouncing
/// dictionary are used (an alternative with another word is left out), and those are lowercase
/// ASCII letters only, so nothing in the knowledge can write grammar syntax. Also gives the
/// whole questions it lists (as their words joined by spaces).
pub fn jsgf(set: &ClosedSet, known: &BTreeSet<String>) -> (String, BTreeSet<String>) {
    let usable = |words: &[String]| {
        words
            .iter()
            .all(|w| w.bytes().all(|b| b.is_ascii_lowercase()) && known.contains(w))
    };
    let alternatives = |items: &mut dyn Iterator<Item = Vec<String>>| -> Vec<String> {
        let set: BTreeSet<String> = items
            .filter(|w| !w.is_empty() && usable(w))
            .map(|w| w.join(" "))
            .collect();
        set.into_iter().collect()
    };
    let questions = alternatives(&mut set.questions.iter().cloned());
    let terms = alternatives(&mut set.terms.iter().map(|t| words_of(t)));
    // Each form whole, so that what comes after the topic is the form's own ending; forms
    // with the same ending share one copy of the topics (the grammar's size, and so the
    // recogniser's time, grows with the copies).
    let mut by_tail: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for form in QUESTION_FORMS.iter().chain(MORE_FORMS) {
        let Some((lead, tail)) = form.split_once("{}") else {
            continue;
        };
        let (lead, tail) = (words_of(lead), words_of(tail));
        if !lead.is_empty() && usable(&lead) && usable(&tail) {
            by_tail
                .entry(tail.join(" "))
                .or_default()
                .insert(lead.join(" "));
        }
    }
    let forms: Vec<String> = by_tail
        .iter()
        .map(|(tail, leads)| {
            let leads = leads.iter().map(String::as_str).collect::<Vec<_>>();
            format!("({}) <term> {tail}", leads.join(" | "))
        })
        .collect();
    let mut out = String::from("#JSGF V1.0;\ngrammar docent;\n");
    let mut public = Vec::new();
    if !questions.is_empty() {
        let _ = writeln!(out, "<said> = {};", questions.join(" | "));
        public.push("<said>");
    }
    if !terms.is_empty() && !forms.is_empty() {
        let _ = writeln!(out, "<term> = {};", terms.join(" | "));
        let _ = writeln!(out, "<asked> = {};", forms.join(" | "));
        public.push("<asked>");
    }
    let _ = writeln!(out, "public <question> = {};", public.join(" | "));
    (out, questions.into_iter().collect())
}

/// "you can borrow a wheelchair" -> "can i borrow a wheelchair"; statements that read as
/// permissions are what visitors ask about.
fn as_question(words: &[String]) -> Option<Vec<String>> {
    let at = words
        .windows(2)
        .position(|p| p[0] == "you" && matches!(p[1].as_str(), "can" | "may"))?;
    let mut q = vec![words[at + 1].clone(), "i".to_string()];
    q.extend(words[at + 2..].iter().cloned());
    Some(q)
}

fn split_sentences(text: &str) -> Vec<String> {
    text.split(['.', '!', '?', '\n', ';'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Lowercase words as the recogniser's dictionary spells them.
pub fn words_of(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_ascii_alphabetic() && c != '\'')
        .map(|w| w.trim_matches('\'').to_ascii_lowercase())
        .filter(|w| !w.is_empty())
        .collect()
}

/// How much of an n-gram's count is given to the histories' unseen continuations.
const DISCOUNT: f64 = 0.5;

/// A trigram model in ARPA format over the sentences, keeping only words `known` to the
/// pronouncing dictionary (a sentence is cut where an unknown word stood).
pub fn arpa(sentences: &[Vec<String>], known: &BTreeSet<String>) -> String {
    let mut uni: BTreeMap<String, u64> = BTreeMap::new();
    let mut bi: HashMap<(String, String), u64> = HashMap::new();
    let mut tri: HashMap<(String, String, String), u64> = HashMap::new();
    for sentence in sentences {
        for piece in sentence.split(|w| !known.contains(w)) {
            if piece.is_empty() {
                continue;
            }
            let mut s = vec!["<s>".to_string()];
            s.extend(piece.iter().cloned());
            s.push("</s>".to_string());
            for w in &s[1..] {
                *uni.entry(w.clone()).or_default() += 1;
            }
            for p in s.windows(2) {
                *bi.entry((p[0].clone(), p[1].clone())).or_default() += 1;
            }
            for t in s.windows(3) {
                *tri.entry((t[0].clone(), t[1].clone(), t[2].clone()))
                    .or_default() += 1;
            }
        }
    }
    uni.entry("<s>".into()).or_default();
    uni.entry("</s>".into()).or_default();

    // Unigrams: add-one over the words (never `<s>`, which is only a history).
    let vocab = uni.len() as f64 - 1.0;
    let total: f64 = uni.values().sum::<u64>() as f64;
    let p1 = |w: &str| -> f64 {
        if w == "<s>" {
            0.0
        } else {
            (uni[w] as f64 + 1.0) / (total + vocab)
        }
    };

    // Bigrams: (c - D) / c(h .); back-off weight from the mass left over.
    let mut bi_hist: HashMap<&str, (u64, u64, f64)> = HashMap::new(); // count, distinct, sum p1
    for ((h, w), c) in &bi {
        let e = bi_hist.entry(h.as_str()).or_default();
        e.0 += c;
        e.1 += 1;
        e.2 += p1(w);
    }
    let p2_seen = |h: &str, w: &str| -> Option<f64> {
        let c = *bi.get(&(h.to_string(), w.to_string()))?;
        Some((c as f64 - DISCOUNT) / bi_hist[h].0 as f64)
    };
    let bow2 = |h: &str| -> f64 {
        match bi_hist.get(h) {
            Some(&(count, distinct, sum)) => {
                (DISCOUNT * distinct as f64 / count as f64) / (1.0 - sum).max(1e-9)
            }
            None => 1.0,
        }
    };
    let p2 = |h: &str, w: &str| -> f64 { p2_seen(h, w).unwrap_or_else(|| bow2(h) * p1(w)) };

    let mut tri_hist: HashMap<(&str, &str), (u64, u64, f64)> = HashMap::new();
    for ((u, v, w), c) in &tri {
        let e = tri_hist.entry((u.as_str(), v.as_str())).or_default();
        e.0 += c;
        e.1 += 1;
        e.2 += p2(v, w);
    }

    let mut out = String::new();
    out.push_str("\\data\\\n");
    let _ = writeln!(out, "ngram 1={}", uni.len());
    let _ = writeln!(out, "ngram 2={}", bi.len());
    let _ = writeln!(out, "ngram 3={}", tri.len());
    out.push_str("\n\\1-grams:\n");
    for w in uni.keys() {
        let lp = if w == "<s>" { -99.0 } else { p1(w).log10() };
        let _ = writeln!(out, "{lp:.5} {w} {:.5}", bow2(w).log10());
    }
    out.push_str("\n\\2-grams:\n");
    let mut bigrams: Vec<_> = bi.keys().collect();
    bigrams.sort();
    for (h, w) in bigrams {
        let lp = p2_seen(h, w).expect("seen").log10();
        match tri_hist.get(&(h.as_str(), w.as_str())) {
            Some(&(count, distinct, sum)) => {
                let bow = (DISCOUNT * distinct as f64 / count as f64) / (1.0 - sum).max(1e-9);
                let _ = writeln!(out, "{lp:.5} {h} {w} {:.5}", bow.log10());
            }
            None => {
                let _ = writeln!(out, "{lp:.5} {h} {w}");
            }
        }
    }
    out.push_str("\n\\3-grams:\n");
    let mut trigrams: Vec<_> = tri.iter().collect();
    trigrams.sort();
    for ((u, v, w), c) in trigrams {
        let count = tri_hist[&(u.as_str(), v.as_str())].0;
        let lp = ((*c as f64 - DISCOUNT) / count as f64).log10();
        let _ = writeln!(out, "{lp:.5} {u} {v} {w}");
    }
    out.push_str("\n\\end\\\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(arpa: &str) -> HashMap<Vec<String>, (f64, f64)> {
        let mut m = HashMap::new();
        let mut order = 0;
        for line in arpa.lines() {
            if let Some(n) = line
                .strip_prefix('\\')
                .and_then(|l| l.strip_suffix("-grams:"))
            {
                order = n.parse().unwrap();
                continue;
            }
            let f: Vec<&str> = line.split_whitespace().collect();
            if order == 0 || f.len() < order + 1 {
                continue;
            }
            let lp: f64 = f[0].parse().unwrap();
            let words = f[1..=order].iter().map(|w| w.to_string()).collect();
            let bow = f.get(order + 1).map_or(0.0, |b| b.parse().unwrap());
            m.insert(words, (lp, bow));
        }
        m
    }

    /// p(w | u v) by the back-off rules PocketSphinx applies.
    fn prob(m: &HashMap<Vec<String>, (f64, f64)>, u: &str, v: &str, w: &str) -> f64 {
        let key = |ws: &[&str]| ws.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        if let Some((lp, _)) = m.get(&key(&[u, v, w])) {
            return 10f64.powf(*lp);
        }
        let bow_uv = m.get(&key(&[u, v])).map_or(0.0, |e| e.1);
        let p_bi = if let Some((lp, _)) = m.get(&key(&[v, w])) {
            10f64.powf(*lp)
        } else {
            10f64.powf(m[&key(&[v])].1 + m[&key(&[w])].0)
        };
        10f64.powf(bow_uv) * p_bi
    }

    #[test]
    fn words_are_lowercase_dictionary_spellings() {
        assert_eq!(
            words_of("The Museum's café closes at 6pm! I"),
            ["the", "museum's", "caf", "closes", "at", "pm", "i"]
        );
    }

    #[test]
    fn the_grammar_holds_questions_and_forms_and_no_syntax_from_the_knowledge() {
        let texts = vec![
            "## Cafe\nThe cafe serves soup.\nQ: Is there free wifi?\nA: Yes.\n\
             Q: Can I <x> = ; | /9/ {tag} \"quoted\" * + [opt] (group) go?\nA: No.\n\
             You can borrow a wheelchair. It weighs 19 kilos."
                .to_string(),
        ];
        let set = closed_set(&texts);
        let known: BTreeSet<String> = set
            .questions
            .iter()
            .flatten()
            .cloned()
            .chain(set.terms.iter().flat_map(|t| words_of(t)))
            .chain(
                QUESTION_FORMS
                    .iter()
                    .chain(MORE_FORMS)
                    .flat_map(|f| words_of(f)),
            )
            .collect();
        let (grammar, questions) = jsgf(&set, &known);
        assert!(questions.contains("is there free wifi"), "{questions:?}");
        assert!(questions.contains("can i borrow a wheelchair"));
        assert!(questions.contains("who are you"));
        assert!(grammar.contains("| cafe |") || grammar.contains("= cafe |"));
        assert!(grammar.contains("(where is the"), "{grammar}");
        assert!(!set.terms.contains("nineteen"), "numbers are no topic");
        // Only the grammar's own syntax: the rule lines, and words of lowercase letters.
        for line in grammar.lines().skip(2) {
            let (head, body) = line.split_once(" = ").expect("a rule");
            assert!(
                head.starts_with('<') || head.starts_with("public <"),
                "{line}"
            );
            let body = ["<term>", "<said>", "<asked>"]
                .iter()
                .fold(body.to_string(), |b, r| b.replace(r, " "))
                .replace(['(', ')', '|', ';'], " ");
            for token in body.split_whitespace() {
                assert!(
                    token.bytes().all(|b| b.is_ascii_lowercase()),
                    "{token:?} in {line}"
                );
            }
        }
        let unknown = jsgf(&set, &BTreeSet::new()).0;
        assert!(
            !unknown.contains("wifi") && !unknown.contains("cafe"),
            "words outside the dictionary are left out: {unknown}"
        );
    }

    #[test]
    fn every_history_sums_to_one() {
        let sentences: Vec<Vec<String>> = [
            "where is the cafe",
            "where is the shop",
            "the cafe serves coffee",
            "where are the toilets",
        ]
        .iter()
        .map(|s| words_of(s))
        .collect();
        let known = sentences.iter().flatten().cloned().collect();
        let m = parse(&arpa(&sentences, &known));
        let vocab: Vec<String> = m
            .keys()
            .filter(|k| k.len() == 1 && k[0] != "<s>")
            .map(|k| k[0].clone())
            .collect();
        for (u, v) in [
            ("<s>", "where"),
            ("where", "is"),
            ("is", "the"),
            ("the", "cafe"),
            ("cafe", "where"),
        ] {
            let sum: f64 = vocab.iter().map(|w| prob(&m, u, v, w)).sum();
            assert!((sum - 1.0).abs() < 1e-3, "p(. | {u} {v}) sums to {sum}");
        }
    }

    #[test]
    fn knowledge_becomes_questions_and_unknown_words_are_cut() {
        let texts = vec![
            "## Wheelchairs\nYou can borrow a wheelchair at the desk.\nQ: Can I bring my dog?\nA: Only guide dogs."
                .to_string(),
        ];
        let sentences = corpus(&texts);
        let has = |s: &str| sentences.contains(&words_of(s));
        assert!(has("can i borrow a wheelchair at the desk"));
        assert!(has("can i bring my dog"), "the FAQ marker goes");
        assert!(has("where is the wheelchair"));
        assert!(has("tell me about the guide dogs"));
        let known: BTreeSet<String> = ["can", "i", "borrow", "a", "wheelchair"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let lm = arpa(&sentences, &known);
        assert!(lm.contains(" borrow a wheelchair\n"));
        assert!(
            !lm.contains("dog"),
            "words outside the dictionary are not in the model"
        );
    }
}
