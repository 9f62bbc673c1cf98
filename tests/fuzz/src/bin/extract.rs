//! Knowledge extraction: the first byte picks the file type (PDF, DOCX, HTML, JSON, Markdown,
//! plain text), the rest is the file as uploaded.

use docent::engine::knowledge::extract::extract_text;

const NAMES: &[&str] = &["a.pdf", "a.docx", "a.html", "a.json", "a.md", "a.txt"];

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let Some((&kind, file)) = data.split_first() else {
            return;
        };
        let _ = extract_text(NAMES[kind as usize % NAMES.len()], file);
    });
}
