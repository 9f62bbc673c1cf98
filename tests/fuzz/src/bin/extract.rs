//! Knowledge extraction: the first byte picks the file type (PDF, DOCX, HTML, JSON, Markdown,
//! plain text), the rest is the file as uploaded.

use docent::engine::knowledge::extract::extract_text;

const NAMES: &[&str] = &["a.pdf", "a.docx", "a.html", "a.json", "a.md", "a.txt"];

fn main() {
    // Without AFL's panic hook: the PDF parser runs on a thread of its own under
    // `catch_unwind` (a panic there is the product's "could not read it"), while a panic of
    // the target itself still aborts (afl's own `catch_unwind`).
    afl::fuzz_nohook!(|data: &[u8]| {
        let Some((&kind, file)) = data.split_first() else {
            return;
        };
        let _ = extract_text(NAMES[kind as usize % NAMES.len()], file);
    });
}
