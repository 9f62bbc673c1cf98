//! The structured FAQ: a character's questions and answers with their translations side by
//! side, as staff edit them in the console or a translation agency fills them in a CSV file.
//! Every save regenerates one managed knowledge source per language (`faq/<lang>.txt`, `Q:`/`A:`
//! line pairs, uploaded with that language), so the kiosk, the screen questions and the recorded
//! answers read it like any uploaded FAQ file (docs/languages.md).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::Upload;
use crate::engine::error::{Result, bad, not_found};
use crate::engine::language::Language;
use crate::engine::{CharacterId, Engine, is_id, new_id};
use crate::store;
use crate::store::records::Source;
use crate::store::tables::{CHARACTERS, FAQS, SOURCES};

/// Entries per character at most: a kiosk's FAQ, not an encyclopedia.
pub const FAQ_MAX_ENTRIES: usize = 500;
/// Characters of a question at most.
pub const FAQ_MAX_QUESTION: usize = 300;
/// Characters of an answer at most (a couple of minutes spoken).
pub const FAQ_MAX_ANSWER: usize = 4000;
/// The largest FAQ body (JSON or CSV): the largest FAQ in a few languages, with room.
pub const FAQ_MAX_BYTES: usize = 8 << 20;
/// Where the managed source of a language lives among the knowledge files.
const MANAGED_DIR: &str = "faq";

/// Saves run one at a time: a save writes the record and then the sources, and two saves
/// interleaved could leave the sources of the older one.
static SAVING: Mutex<()> = Mutex::new(());

/// One language's side of an entry.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FaqText {
    pub question: String,
    pub answer: String,
}

/// An entry as stored and shown: its translations by language tag.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct FaqEntry {
    pub id: String,
    pub texts: BTreeMap<String, FaqText>,
}

/// An entry as sent: without an id (or with an unknown one) it is a new entry.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FaqEntryInput {
    #[serde(default)]
    pub id: Option<String>,
    /// Language tag -> question and answer; a language with both blank is absent.
    pub texts: BTreeMap<String, FaqText>,
}

/// The whole FAQ as sent: it replaces the entries.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FaqInput {
    pub entries: Vec<FaqEntryInput>,
}

/// The stored FAQ of a character (table `faqs`).
#[derive(Debug, Default, Serialize, Deserialize)]
struct Faq {
    entries: Vec<FaqEntry>,
    /// Languages whose managed source exists, so a language emptied loses its source.
    written: BTreeSet<String>,
}

/// An entry as the console shows it: with the museum's languages it lacks.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FaqEntryView {
    pub id: String,
    pub texts: BTreeMap<String, FaqText>,
    pub missing: Vec<String>,
}

/// The FAQ as the console shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FaqView {
    /// The museum's languages, the default first (the table's columns).
    pub languages: Vec<String>,
    pub entries: Vec<FaqEntryView>,
}

/// A question or answer on one line: the knowledge file pairs a `Q:` line with the next `A:`.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Checks and normalises entries; `what(i)` names entry `i` in an error (an index or a line).
fn checked(input: Vec<FaqEntryInput>, what: impl Fn(usize) -> String) -> Result<Vec<FaqEntry>> {
    if input.len() > FAQ_MAX_ENTRIES {
        return Err(bad(format!(
            "at most {FAQ_MAX_ENTRIES} FAQ entries per character"
        )));
    }
    let mut out: Vec<FaqEntry> = Vec::with_capacity(input.len());
    let mut languages = BTreeSet::new();
    for (i, e) in input.into_iter().enumerate() {
        let mut texts = BTreeMap::new();
        for (tag, t) in e.texts {
            let language = Language::parse(&tag)
                .ok_or_else(|| bad(format!("{}: {tag:?} is not a language tag", what(i))))?;
            let (question, answer) = (one_line(&t.question), one_line(&t.answer));
            if question.is_empty() && answer.is_empty() {
                continue;
            }
            if question.is_empty() || answer.is_empty() {
                return Err(bad(format!(
                    "{}: {language} has a {} but no {}",
                    what(i),
                    if question.is_empty() {
                        "answer"
                    } else {
                        "question"
                    },
                    if question.is_empty() {
                        "question"
                    } else {
                        "answer"
                    },
                )));
            }
            if question.chars().count() > FAQ_MAX_QUESTION {
                return Err(bad(format!(
                    "{}: the {language} question is longer than {FAQ_MAX_QUESTION} characters",
                    what(i)
                )));
            }
            if answer.chars().count() > FAQ_MAX_ANSWER {
                return Err(bad(format!(
                    "{}: the {language} answer is longer than {FAQ_MAX_ANSWER} characters",
                    what(i)
                )));
            }
            let dup = out.iter().any(|o| {
                o.texts
                    .get(language.tag())
                    .is_some_and(|t| t.question.eq_ignore_ascii_case(&question))
            });
            if dup {
                return Err(bad(format!(
                    "{}: the {language} question {question:?} is asked twice",
                    what(i)
                )));
            }
            languages.insert(language.tag().to_string());
            texts.insert(language.tag().to_string(), FaqText { question, answer });
        }
        if texts.is_empty() {
            return Err(bad(format!("{}: no question in any language", what(i))));
        }
        let id =
            e.id.filter(|id| is_id(id) && !out.iter().any(|o| &o.id == id))
                .unwrap_or_else(new_id);
        out.push(FaqEntry { id, texts });
    }
    if languages.len() > crate::engine::settings::MAX_LANGUAGES {
        return Err(bad(format!(
            "the FAQ has more than {} languages",
            crate::engine::settings::MAX_LANGUAGES
        )));
    }
    Ok(out)
}

/// The managed knowledge file of one language: its entries as `Q:`/`A:` pairs.
fn managed_text(entries: &[FaqEntry], tag: &str) -> String {
    let mut out = String::new();
    for t in entries.iter().filter_map(|e| e.texts.get(tag)) {
        out.push_str(&format!("Q: {}\nA: {}\n\n", t.question, t.answer));
    }
    out
}

impl Engine {
    fn faq_record(&self, character_id: &CharacterId) -> Result<Faq> {
        let tx = self.store.read()?;
        if tx
            .open_table(CHARACTERS)?
            .get(character_id.as_str())?
            .is_none()
        {
            return Err(not_found("no such character"));
        }
        Ok(store::get(&tx.open_table(FAQS)?, character_id)?.unwrap_or_default())
    }

    /// A character's FAQ with the museum's languages each entry lacks.
    pub fn faq(&self, character_id: &CharacterId) -> Result<FaqView> {
        let faq = self.faq_record(character_id)?;
        let languages: Vec<String> = self
            .settings()
            .languages()
            .iter()
            .map(|l| l.tag().to_string())
            .collect();
        Ok(FaqView {
            entries: faq
                .entries
                .into_iter()
                .map(|e| FaqEntryView {
                    missing: languages
                        .iter()
                        .filter(|l| !e.texts.contains_key(*l))
                        .cloned()
                        .collect(),
                    id: e.id,
                    texts: e.texts,
                })
                .collect(),
            languages,
        })
    }

    /// Replaces a character's FAQ and regenerates its managed knowledge sources.
    pub fn set_faq(&self, character_id: &str, input: FaqInput) -> Result<FaqView> {
        let entries = checked(input.entries, |i| format!("entry {}", i + 1))?;
        // Parsed after the entries, which are refused first as they always were.
        let character_id = &CharacterId::parse(character_id)?;
        self.save_faq(character_id, entries)?;
        self.faq(character_id)
    }

    fn save_faq(&self, character_id: &CharacterId, entries: Vec<FaqEntry>) -> Result<()> {
        let _saving = SAVING.lock().unwrap_or_else(|e| e.into_inner());
        let old = self.faq_record(character_id)?;
        let languages: BTreeSet<String> = entries
            .iter()
            .flat_map(|e| e.texts.keys().cloned())
            .collect();
        let mut uploads = Vec::new();
        for tag in &languages {
            let blob = self
                .store
                .blobs()
                .put(managed_text(&entries, tag).as_bytes(), "text/plain")?;
            uploads.push(Upload {
                filename: format!("{tag}.txt"),
                relative_path: Some(format!("{MANAGED_DIR}/{tag}.txt")),
                blob,
                language: Language::parse(tag),
            });
        }
        {
            let tx = self.store.write()?;
            let record = Faq {
                entries,
                written: languages.clone(),
            };
            tx.open_table(FAQS)?
                .insert(character_id.as_str(), store::to_json(&record).as_slice())?;
            tx.commit()?;
        }
        if !uploads.is_empty() {
            self.add_sources(character_id, uploads)?;
        }
        let gone: Vec<String> = old.written.difference(&languages).cloned().collect();
        if !gone.is_empty() {
            let sources: Vec<Source> = {
                let tx = self.store.read()?;
                store::scan(&tx.open_table(SOURCES)?, character_id)?
            };
            for tag in gone {
                let path = format!("{MANAGED_DIR}/{tag}.txt");
                if let Some(s) = sources.iter().find(|s| s.relative_path == path) {
                    self.delete_source(character_id, &s.id)?;
                }
            }
        }
        Ok(())
    }

    /// The FAQ as CSV: an `id` column and a `question:<lang>`, `answer:<lang>` pair per
    /// language (the museum's, then any other an entry has), with a byte order mark so that
    /// spreadsheet programs read it as UTF-8.
    pub fn faq_csv(&self, character_id: &CharacterId) -> Result<String> {
        let view = self.faq(character_id)?;
        let mut languages = view.languages.clone();
        for e in &view.entries {
            for tag in e.texts.keys() {
                if !languages.contains(tag) {
                    languages.push(tag.clone());
                }
            }
        }
        let mut header = vec!["id".to_string()];
        for l in &languages {
            header.push(format!("question:{l}"));
            header.push(format!("answer:{l}"));
        }
        let mut rows = vec![header];
        for e in &view.entries {
            let mut row = vec![e.id.clone()];
            for l in &languages {
                let t = e.texts.get(l).cloned().unwrap_or_default();
                row.push(t.question);
                row.push(t.answer);
            }
            rows.push(row);
        }
        Ok(format!("\u{feff}{}", csv::write(&rows)))
    }

    /// Replaces a character's FAQ with the entries of a CSV file (as `faq_csv` writes it); a
    /// bad file is refused naming its line, and nothing changes.
    pub fn set_faq_csv(&self, character_id: &CharacterId, text: &str) -> Result<FaqView> {
        self.faq_record(character_id)?;
        let records = csv::parse(text.strip_prefix('\u{feff}').unwrap_or(text))
            .map_err(|(line, e)| bad(format!("line {line}: {e}")))?;
        let Some(((_, header), rows)) = records.split_first() else {
            return Err(bad("line 1: the file is empty; it needs a header row"));
        };
        enum Column {
            Id,
            Question(String),
            Answer(String),
        }
        let mut columns = Vec::with_capacity(header.len());
        for name in header {
            let name = name.trim();
            let column = if name.eq_ignore_ascii_case("id") {
                Column::Id
            } else if let Some((side, tag)) = name.split_once(':')
                && let Some(l) = Language::parse(tag)
            {
                match side.trim().to_ascii_lowercase().as_str() {
                    "question" => Column::Question(l.tag().to_string()),
                    "answer" => Column::Answer(l.tag().to_string()),
                    _ => return Err(bad(format!("line 1: unknown column {name:?}"))),
                }
            } else {
                return Err(bad(format!(
                    "line 1: unknown column {name:?} (id, question:<lang>, answer:<lang>)"
                )));
            };
            columns.push(column);
        }
        let mut input = Vec::with_capacity(rows.len());
        let mut lines = Vec::with_capacity(rows.len());
        for (line, row) in rows {
            if row.iter().all(|f| f.trim().is_empty()) {
                continue;
            }
            if row.len() != columns.len() {
                return Err(bad(format!(
                    "line {line}: {} fields where the header has {}",
                    row.len(),
                    columns.len()
                )));
            }
            let mut entry = FaqEntryInput {
                id: None,
                texts: BTreeMap::new(),
            };
            for (column, field) in columns.iter().zip(row) {
                match column {
                    Column::Id => entry.id = Some(field.trim().to_string()),
                    Column::Question(l) => {
                        entry.texts.entry(l.clone()).or_default().question = field.clone()
                    }
                    Column::Answer(l) => {
                        entry.texts.entry(l.clone()).or_default().answer = field.clone()
                    }
                }
            }
            input.push(entry);
            lines.push(*line);
        }
        let entries = checked(input, |i| format!("line {}", lines[i]))?;
        self.save_faq(character_id, entries)?;
        self.faq(character_id)
    }
}

/// RFC 4180 CSV: fields separated by commas, records by CRLF (LF read too), a field quoted
/// when it holds a comma, a quote or a line break, a quote doubled inside quotes.
mod csv {
    /// The records with the line each starts on.
    pub type Records = Vec<(usize, Vec<String>)>;

    pub fn write(rows: &[Vec<String>]) -> String {
        let mut out = String::new();
        for row in rows {
            let fields: Vec<String> = row
                .iter()
                .map(|f| {
                    if f.contains([',', '"', '\n', '\r']) {
                        format!("\"{}\"", f.replace('"', "\"\""))
                    } else {
                        f.clone()
                    }
                })
                .collect();
            out.push_str(&fields.join(","));
            out.push_str("\r\n");
        }
        out
    }

    /// Parses `text`; an error names the line it is on.
    pub fn parse(text: &str) -> Result<Records, (usize, String)> {
        let mut records = Vec::new();
        let mut chars = text.chars().peekable();
        let mut line = 1;
        while chars.peek().is_some() {
            let start = line;
            let mut record = Vec::new();
            let mut field = String::new();
            let mut quoted = false;
            loop {
                match chars.next() {
                    None => {
                        if quoted {
                            return Err((start, "a quoted field is not closed".into()));
                        }
                        record.push(std::mem::take(&mut field));
                        break;
                    }
                    Some('"') if quoted => {
                        if chars.peek() == Some(&'"') {
                            chars.next();
                            field.push('"');
                        } else {
                            quoted = false;
                            if !matches!(chars.peek(), None | Some(',' | '\r' | '\n')) {
                                return Err((line, "text after a closing quote".into()));
                            }
                        }
                    }
                    Some('"') if field.is_empty() => quoted = true,
                    Some('"') => {
                        return Err((line, "a quote inside an unquoted field".into()));
                    }
                    Some('\n') if quoted => {
                        line += 1;
                        field.push('\n');
                    }
                    Some(c) if quoted => field.push(c),
                    Some(',') => record.push(std::mem::take(&mut field)),
                    Some('\r') if chars.peek() == Some(&'\n') => {}
                    Some('\n') => {
                        line += 1;
                        record.push(std::mem::take(&mut field));
                        break;
                    }
                    Some(c) => field.push(c),
                }
            }
            records.push((start, record));
        }
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use super::csv;

    #[test]
    fn csv_round_trips_quotes_commas_and_line_breaks() {
        let rows = vec![
            vec!["id".to_string(), "question:en".into()],
            vec!["a".into(), "Say \"hi\", twice\nplease".into()],
            vec![String::new(), "ü".into()],
        ];
        let text = csv::write(&rows);
        let back = csv::parse(&text).unwrap();
        assert_eq!(
            back.iter().map(|(_, r)| r.clone()).collect::<Vec<_>>(),
            rows
        );
        assert_eq!(back.iter().map(|(l, _)| *l).collect::<Vec<_>>(), [1, 2, 4]);
    }

    #[test]
    fn csv_errors_name_their_line() {
        assert_eq!(csv::parse("a,b\n\"x\ny").unwrap_err().0, 2);
        assert_eq!(csv::parse("a,b\nc,d\ne,f\"g\"").unwrap_err().0, 3);
        assert_eq!(csv::parse("a\n\"x\"y").unwrap_err().0, 2);
    }
}
