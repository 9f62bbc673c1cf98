//! Plain text out of uploaded documents.
//!
//! Everything the knowledge base indexes goes through [`extract_text`], so every format ends in
//! the same shape: readable lines, single spaces, at most one blank line between paragraphs.
//! Parsing is deliberately forgiving (a kiosk operator uploads whatever they have), but anything
//! that yields no text is an error, because an empty document can never answer a question.

use std::fmt;
use std::io::{self, BufReader, Cursor, Read};

use quick_xml::Reader;
use quick_xml::escape::resolve_xml_entity;
use quick_xml::events::Event;
use serde_json::Value;

/// Largest uncompressed `word/document.xml` we accept; a real document is a few MiB at most,
/// anything bigger is far more likely a zip bomb than a manual.
const MAX_DOCX_XML_BYTES: u64 = 64 * 1024 * 1024;

/// Most a PDF's compressed streams may inflate to, all together: the PDF parser inflates every
/// stream in memory, and a deflate stream can grow a thousandfold.
const MAX_PDF_INFLATED_BYTES: u64 = 256 * 1024 * 1024;

/// Most entries a DOCX may list: a real one has a few dozen, and the zip reader keeps every
/// entry of the central directory in memory.
const MAX_DOCX_ENTRIES: u64 = 10_000;

/// Longest the PDF parser may take; a file that takes longer is refused (the parser's thread
/// finishes on its own, within the size bound above).
const PDF_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Why a file could not be turned into text; `Display` is meant to be shown to the operator.
#[derive(Debug)]
pub enum ExtractError {
    /// The file name has no extension we know how to read.
    UnsupportedType,
    /// A text file that contains NUL bytes, i.e. something binary renamed to `.txt`.
    Binary,
    /// The file is damaged or not what its extension claims.
    Invalid {
        /// Format name as shown to the operator, e.g. "PDF".
        format: &'static str,
        /// What the parser complained about.
        reason: String,
    },
    /// The file parsed but contains no text (e.g. a scanned PDF without a text layer).
    NoText {
        /// Format name as shown to the operator, e.g. "PDF".
        format: &'static str,
    },
    /// The DOCX body inflates beyond 64 MiB.
    TooLarge,
    /// The PDF's streams inflate beyond `MAX_PDF_INFLATED_BYTES`, or the DOCX lists too many
    /// entries: a decompression bomb.
    Bomb { format: &'static str },
    /// The PDF parser took longer than `PDF_TIMEOUT`.
    TooSlow,
}

impl fmt::Display for ExtractError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnsupportedType => f.write_str("not an indexable file type"),
            Self::Binary => f.write_str("file looks binary, not text"),
            Self::Invalid { format, reason } => write!(f, "not a valid {format} file: {reason}"),
            Self::NoText { format } => write!(f, "{format} has no extractable text"),
            Self::TooLarge => write!(
                f,
                "DOCX document text is larger than {} MiB uncompressed",
                MAX_DOCX_XML_BYTES / (1024 * 1024)
            ),
            Self::Bomb { format } => write!(f, "{format} decompresses to far more than it holds"),
            Self::TooSlow => write!(
                f,
                "PDF took longer than {} s to read",
                PDF_TIMEOUT.as_secs()
            ),
        }
    }
}

impl std::error::Error for ExtractError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Text,
    Markdown,
    Json,
    Pdf,
    Docx,
    Html,
}

impl Format {
    fn of(filename: &str) -> Option<Self> {
        let (_, ext) = filename.rsplit_once('.')?;
        Some(match ext.to_ascii_lowercase().as_str() {
            "txt" => Self::Text,
            "md" | "markdown" => Self::Markdown,
            "json" => Self::Json,
            "pdf" => Self::Pdf,
            "docx" => Self::Docx,
            "html" | "htm" => Self::Html,
            _ => return None,
        })
    }

    /// Name used in error messages.
    fn label(self) -> &'static str {
        match self {
            Self::Text => "text file",
            Self::Markdown => "Markdown",
            Self::Json => "JSON",
            Self::Pdf => "PDF",
            Self::Docx => "DOCX",
            Self::Html => "HTML",
        }
    }

    fn mime(self) -> &'static str {
        match self {
            Self::Text => "text/plain; charset=utf-8",
            Self::Markdown => "text/markdown; charset=utf-8",
            Self::Json => "application/json",
            Self::Pdf => "application/pdf",
            Self::Docx => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            Self::Html => "text/html; charset=utf-8",
        }
    }
}

/// Whether [`extract_text`] understands this file, judged by its extension (case-insensitive).
pub fn is_indexable(filename: &str) -> bool {
    Format::of(filename).is_some()
}

/// MIME type to serve an uploaded file back with, judged by its extension.
pub fn mime_for(filename: &str) -> &'static str {
    Format::of(filename).map_or("application/octet-stream", Format::mime)
}

/// Extracts normalised plain text from a document, choosing the parser by file extension.
///
/// # Errors
///
/// Fails for an unknown extension, a file that does not parse as its format, a DOCX that
/// inflates beyond 64 MiB, and any file that yields no text at all.
pub fn extract_text(filename: &str, bytes: &[u8]) -> Result<String, ExtractError> {
    let format = Format::of(filename).ok_or(ExtractError::UnsupportedType)?;
    let raw = match format {
        Format::Text => decode_text(bytes)?,
        Format::Markdown => strip_markdown(&decode_text(bytes)?),
        Format::Json => json_text(bytes)?,
        Format::Pdf => pdf_text(bytes)?,
        Format::Docx => docx_text(bytes)?,
        Format::Html => strip_html(&decode_text(bytes)?),
    };
    let text = normalize_whitespace(&raw);
    if text.is_empty() {
        return Err(ExtractError::NoText {
            format: format.label(),
        });
    }
    Ok(text)
}

/// Decodes a text file: UTF-8 (BOM stripped, invalid sequences replaced rather than rejected,
/// since a stray Latin-1 byte should not cost the whole file), or UTF-16 when it starts with a
/// UTF-16 BOM, which is what Windows editors produce for "Unicode" text.
fn decode_text(bytes: &[u8]) -> Result<String, ExtractError> {
    let utf16 = |data: &[u8], unit: fn([u8; 2]) -> u16| {
        let units: Vec<u16> = data
            .chunks_exact(2)
            .map(|pair| unit([pair[0], pair[1]]))
            .collect();
        String::from_utf16_lossy(&units)
    };
    if let Some(rest) = bytes.strip_prefix(&[0xFF, 0xFE]) {
        return Ok(utf16(rest, u16::from_le_bytes));
    }
    if let Some(rest) = bytes.strip_prefix(&[0xFE, 0xFF]) {
        return Ok(utf16(rest, u16::from_be_bytes));
    }
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if bytes.contains(&0) {
        return Err(ExtractError::Binary);
    }
    Ok(String::from_utf8_lossy(bytes).into_owned())
}

/// Drops the Markdown syntax that would otherwise end up as noise in passages and search
/// terms. Line-based and approximate on purpose: headings, quotes, bullets, rules, emphasis and
/// link syntax go; fenced code is kept verbatim because it is often the answer (a command, a
/// Wi-Fi name).
fn strip_markdown(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut in_fence = false;
    for line in source.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            out.push_str(line);
        } else if !is_rule_line(trimmed) {
            strip_inline_markdown(strip_block_markers(trimmed), &mut out);
        }
        out.push('\n');
    }
    out
}

/// Horizontal rules, setext underlines and table separator rows carry no text.
fn is_rule_line(line: &str) -> bool {
    let line = line.trim_end();
    line.len() >= 3
        && line
            .chars()
            .all(|c| matches!(c, '-' | '=' | '*' | '_' | '|' | ':' | ' ' | '\t'))
}

/// Removes leading heading hashes, quote markers and bullet markers.
fn strip_block_markers(mut line: &str) -> &str {
    loop {
        let before = line;
        if let Some(rest) = line.strip_prefix('>') {
            line = rest.trim_start();
        }
        let hashes = line.len() - line.trim_start_matches('#').len();
        if (1..=6).contains(&hashes) {
            let rest = &line[hashes..];
            if rest.is_empty() || rest.starts_with([' ', '\t']) {
                line = rest.trim_start();
            }
        }
        for bullet in ["- ", "* ", "+ "] {
            if let Some(rest) = line.strip_prefix(bullet) {
                line = rest.trim_start();
            }
        }
        if line == before {
            return line;
        }
    }
}

/// Turns `[text](url)` and `![alt](src)` into their text and drops emphasis, code and
/// strikethrough markers. `_` inside a word (`file_name`) is kept, since it is not markup there.
fn strip_inline_markdown(line: &str, out: &mut String) {
    let chars: Vec<char> = line.chars().collect();
    // Once a `](` finds no closing `)`, later ones on the line are left as text too: remembering
    // that keeps the scan linear on hostile input.
    let mut unclosed = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let prev = i.checked_sub(1).map(|p| chars[p]);
        let next = chars.get(i + 1).copied();
        match c {
            '*' | '`' | '[' => {}
            '!' if next == Some('[') => {}
            '~' if next == Some('~') || prev == Some('~') => {}
            '_' if !(prev.is_some_and(char::is_alphanumeric)
                && next.is_some_and(char::is_alphanumeric)) => {}
            ']' if next == Some('(') && !unclosed => match closing_paren(&chars[i + 1..]) {
                Some(offset) => i += offset + 1,
                None => unclosed = true,
            },
            ']' => {}
            _ => out.push(c),
        }
        i += 1;
    }
}

/// Offset of the `)` that balances the `(` at `chars[0]`, so URLs like `Foo_(bar)` stay whole.
fn closing_paren(chars: &[char]) -> Option<usize> {
    let mut depth = 0usize;
    for (offset, &c) in chars.iter().enumerate() {
        match c {
            '(' => depth += 1,
            ')' if depth == 1 => return Some(offset),
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// Renders JSON as `key: value` lines so that, say, a FAQ file reads like sentences.
/// Objects become paragraphs (blank line after each), arrays of scalars one comma-separated
/// line. Keys come out sorted, as `serde_json` stores them.
fn json_text(bytes: &[u8]) -> Result<String, ExtractError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let value: Value = serde_json::from_slice(bytes).map_err(|e| ExtractError::Invalid {
        format: "JSON",
        reason: e.to_string(),
    })?;
    let mut out = String::new();
    write_json(&value, None, &mut out);
    Ok(out)
}

fn write_json(value: &Value, key: Option<&str>, out: &mut String) {
    let mut line = |text: &str| {
        if let Some(key) = key {
            out.push_str(key);
            out.push_str(": ");
        }
        out.push_str(text);
        out.push('\n');
    };
    match value {
        Value::Object(map) => {
            if let Some(key) = key {
                out.push_str(key);
                out.push_str(":\n");
            }
            for (k, v) in map {
                write_json(v, Some(k), out);
            }
            out.push('\n');
        }
        Value::Array(items) if items.iter().all(|v| !v.is_object() && !v.is_array()) => {
            let parts: Vec<String> = items.iter().filter_map(json_scalar).collect();
            if !parts.is_empty() {
                line(&parts.join(", "));
            }
        }
        Value::Array(items) => {
            if let Some(key) = key {
                out.push_str(key);
                out.push_str(":\n");
            }
            for item in items {
                write_json(item, None, out);
            }
        }
        scalar => {
            if let Some(text) = json_scalar(scalar) {
                line(&text);
            }
        }
    }
}

/// Text of a JSON scalar; `null` has none.
fn json_scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// `pdf-extract` panics on some malformed or exotic PDFs instead of returning an error; an
/// upload must never take the server down, so panics are turned into an ordinary error.
fn pdf_text(bytes: &[u8]) -> Result<String, ExtractError> {
    let invalid = |reason: String| ExtractError::Invalid {
        format: "PDF",
        reason,
    };
    check_pdf_streams(bytes, MAX_PDF_INFLATED_BYTES)?;
    let owned = bytes.to_vec();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("pdf-extract".into())
        .spawn(move || {
            let parsed = std::panic::catch_unwind(|| {
                if !pages_have_ancestry(&owned) {
                    return Ok(Err(invalid(
                        "a page of its page tree is its own ancestor".into(),
                    )));
                }
                Ok(pdf_extract::extract_text_from_mem(&owned).map_err(|e| invalid(e.to_string())))
            });
            let _ = tx.send(parsed.unwrap_or_else(Err));
        })
        .map_err(|e| invalid(format!("cannot start the PDF parser: {e}")))?;
    match rx.recv_timeout(PDF_TIMEOUT) {
        Ok(Ok(extracted)) => extracted,
        Ok(Err(_)) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            Err(invalid("the PDF parser could not read it".to_owned()))
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(ExtractError::TooSlow),
    }
}

/// Whether every page's `/Parent` chain ends: pdf-extract follows it for inherited attributes
/// without noticing a cycle, and a page that is its own ancestor overflows the parser's stack,
/// which aborts the whole process (no `catch_unwind` can help). A file lopdf cannot load passes
/// here: pdf-extract then reports why.
fn pages_have_ancestry(bytes: &[u8]) -> bool {
    /// Deeper page trees than this are not made by any real writer.
    const MAX_DEPTH: usize = 256;
    let Ok(doc) = lopdf::Document::load_mem(bytes) else {
        return true;
    };
    doc.get_pages().into_values().all(|page| {
        let mut seen = std::collections::BTreeSet::new();
        let mut at = page;
        loop {
            if !seen.insert(at) || seen.len() > MAX_DEPTH {
                return false;
            }
            let parent = doc
                .get_dictionary(at)
                .ok()
                .and_then(|d| d.get(b"Parent").ok())
                .and_then(|p| p.as_reference().ok());
            match parent {
                Some(next) => at = next,
                None => return true,
            }
        }
    })
}

/// Inflates every deflate stream of a PDF (`stream` ... `endstream`) into nothing, counting
/// the bytes, and refuses the file when they add up to more than `cap`;
/// a stream whose output is itself deflate data (filters applied twice) is counted again.
/// Streams that are not deflate data inflate to nothing here and are left to the parser.
fn check_pdf_streams(bytes: &[u8], cap: u64) -> Result<(), ExtractError> {
    let mut budget = cap;
    let mut rest = bytes;
    while let Some(at) = find(rest, 0, b"stream") {
        let after = &rest[at + 6..];
        let body = after
            .strip_prefix(b"\r\n")
            .or_else(|| after.strip_prefix(b"\n"));
        let Some(body) = body else {
            rest = after;
            continue;
        };
        let end = find(body, 0, b"endstream").unwrap_or(body.len());
        inflate_within(&body[..end], &mut budget, 0)?;
        rest = &body[end..];
    }
    Ok(())
}

/// Counts what `data` inflates to against `budget`; keeps the output (up to 16 MiB) only to
/// look for a second layer of deflate inside it.
fn inflate_within(data: &[u8], budget: &mut u64, depth: u8) -> Result<(), ExtractError> {
    const KEEP: u64 = 16 * 1024 * 1024;
    let bomb = || ExtractError::Bomb { format: "PDF" };
    if data.first() != Some(&0x78) {
        return Ok(());
    }
    let mut decoder = flate2::read::ZlibDecoder::new(data);
    let mut kept = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        match decoder.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                *budget = budget.checked_sub(n as u64).ok_or_else(bomb)?;
                if (kept.len() as u64) < KEEP {
                    kept.extend_from_slice(&chunk[..n]);
                }
            }
        }
    }
    if depth < 3 {
        inflate_within(&kept, budget, depth + 1)?;
    }
    Ok(())
}

/// The number of entries a zip's end-of-central-directory record declares; `u64::MAX` for a
/// ZIP64 archive (a DOCX never needs one), `None` when there is no such record.
fn zip_entries(bytes: &[u8]) -> Option<u64> {
    const EOCD: &[u8] = b"PK\x05\x06";
    let tail_start = bytes.len().saturating_sub(22 + 65_535);
    let tail = &bytes[tail_start..];
    let at = tail.windows(4).rposition(|w| w == EOCD)?;
    let record = tail.get(at..at + 22)?;
    let total = u16::from_le_bytes([record[10], record[11]]);
    Some(if total == u16::MAX {
        u64::MAX
    } else {
        u64::from(total)
    })
}

/// Reads the body of a Word document: text runs (`w:t`), tabs, line breaks and paragraph ends.
/// Headers, footers, footnotes and deleted revisions (`w:delText`) are left out.
fn docx_text(bytes: &[u8]) -> Result<String, ExtractError> {
    let invalid = |reason: String| ExtractError::Invalid {
        format: "DOCX",
        reason,
    };
    if zip_entries(bytes).is_some_and(|n| n > MAX_DOCX_ENTRIES) {
        return Err(ExtractError::Bomb { format: "DOCX" });
    }
    let mut archive =
        zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| invalid(e.to_string()))?;
    let entry = archive
        .by_name("word/document.xml")
        .map_err(|e| invalid(format!("word/document.xml: {e}")))?;
    // The declared size can lie, so the reader also enforces the cap on what it really inflates.
    if entry.size() > MAX_DOCX_XML_BYTES {
        return Err(ExtractError::TooLarge);
    }
    let capped = Capped {
        inner: entry,
        remaining: MAX_DOCX_XML_BYTES,
    };
    let mut reader = Reader::from_reader(BufReader::new(capped));
    let mut buf = Vec::new();
    let mut out = String::new();
    let mut in_text = false;
    loop {
        let event = reader.read_event_into(&mut buf).map_err(|e| match e {
            quick_xml::Error::Io(io) if io.kind() == io::ErrorKind::FileTooLarge => {
                ExtractError::TooLarge
            }
            e => invalid(format!("word/document.xml: {e}")),
        })?;
        match event {
            Event::Start(e) => match e.local_name().as_ref() {
                "t" => in_text = true,
                "tab" => out.push('\t'),
                "br" | "cr" => out.push('\n'),
                _ => {}
            },
            Event::Empty(e) => match e.local_name().as_ref() {
                "tab" => out.push('\t'),
                "br" | "cr" | "p" => out.push('\n'),
                _ => {}
            },
            Event::End(e) => match e.local_name().as_ref() {
                "t" => in_text = false,
                "p" => out.push('\n'),
                _ => {}
            },
            Event::Text(t) if in_text => out.push_str(&t.xml10_content()),
            Event::CData(t) if in_text => out.push_str(&t.xml10_content()),
            Event::GeneralRef(r) if in_text => {
                if let Ok(Some(c)) = r.resolve_char_ref() {
                    out.push(c);
                } else if let Some(s) = resolve_xml_entity(&r) {
                    out.push_str(s);
                }
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    Ok(out)
}

/// A reader that fails with `FileTooLarge` instead of yielding more than `remaining` bytes.
struct Capped<R> {
    inner: R,
    remaining: u64,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.remaining == 0 {
            // Only an error if there really is more data behind the cap.
            return match self.inner.read(&mut [0u8])? {
                0 => Ok(0),
                _ => Err(io::ErrorKind::FileTooLarge.into()),
            };
        }
        let want = buf
            .len()
            .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        self.remaining -= n as u64;
        Ok(n)
    }
}

/// Elements whose content is never visible text.
const HTML_HIDDEN: &[&str] = &["script", "style", "noscript", "template"];

/// Elements that start a new line in rendered HTML; keeping those breaks keeps sentences from
/// different blocks from running into each other.
const HTML_BLOCKS: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "body",
    "br",
    "caption",
    "dd",
    "details",
    "dialog",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "head",
    "header",
    "hr",
    "html",
    "li",
    "main",
    "nav",
    "ol",
    "option",
    "p",
    "pre",
    "section",
    "summary",
    "table",
    "tbody",
    "title",
    "tr",
    "ul",
    "tfoot",
];

/// Table cells: a space keeps `<td>a</td><td>b</td>` from becoming `ab`.
const HTML_CELLS: &[&str] = &["td", "th"];

/// Visible text of an HTML page. A single forward pass over the source (so linear time), which
/// tolerates the broken markup real pages have: a `<` that does not start a tag is text, an
/// unterminated tag or comment swallows the rest, as it would in a browser. As in a browser,
/// line breaks in the source are mere spaces; lines come from block-level tags only.
fn strip_html(html: &str) -> String {
    let bytes = html.as_bytes();
    let mut out = String::with_capacity(html.len() / 2);
    let mut i = 0;
    while let Some(offset) = html[i..].find(['<', '&']) {
        let at = i + offset;
        push_html_text(&html[i..at], &mut out);
        if bytes[at] == b'&' {
            i = match decode_entity(&html[at..]) {
                Some((decoded, len)) => {
                    out.push(decoded);
                    at + len
                }
                None => {
                    out.push('&');
                    at + 1
                }
            };
            continue;
        }
        let rest = &bytes[at..];
        if rest.starts_with(b"<!--") {
            i = find(bytes, at + 4, b"-->").map_or(bytes.len(), |end| end + 3);
            continue;
        }
        if rest.starts_with(b"<!") || rest.starts_with(b"<?") {
            // Doctype, CDATA or processing instruction.
            i = find(bytes, at, b">").map_or(bytes.len(), |end| end + 1);
            continue;
        }
        let closing = rest.get(1) == Some(&b'/');
        let name_start = at + 1 + usize::from(closing);
        let name_len = bytes[name_start..]
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'-')
            .count();
        if name_len == 0 || !bytes[name_start].is_ascii_alphabetic() {
            out.push('<');
            i = at + 1;
            continue;
        }
        let name = html[name_start..name_start + name_len].to_ascii_lowercase();
        i = tag_end(bytes, name_start + name_len);
        if !closing && HTML_HIDDEN.contains(&name.as_str()) {
            let close = format!("</{name}");
            i = find_ignore_case(bytes, i, close.as_bytes())
                .map_or(bytes.len(), |end| tag_end(bytes, end + close.len()));
        } else if HTML_BLOCKS.contains(&name.as_str()) {
            // Nested blocks (`<div><p>`) make one line break, not a blank line each.
            if !out.trim_end_matches(' ').ends_with('\n') {
                out.push('\n');
            }
        } else if HTML_CELLS.contains(&name.as_str()) {
            out.push(' ');
        }
    }
    push_html_text(&html[i..], &mut out);
    out
}

fn push_html_text(text: &str, out: &mut String) {
    out.extend(
        text.chars()
            .map(|c| if c.is_whitespace() { ' ' } else { c }),
    );
}

/// Position just past the `>` that closes a tag, skipping over quoted attribute values.
fn tag_end(bytes: &[u8], from: usize) -> usize {
    let mut quote = None;
    for (offset, &b) in bytes[from..].iter().enumerate() {
        match (quote, b) {
            (None, b'"' | b'\'') => quote = Some(b),
            (Some(q), _) if b == q => quote = None,
            (None, b'>') => return from + offset + 1,
            _ => {}
        }
    }
    bytes.len()
}

fn find(haystack: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    haystack[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| from + p)
}

fn find_ignore_case(haystack: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    haystack[from..]
        .windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
        .map(|p| from + p)
}

/// Decodes the entity at the start of `s` (which begins with `&`), returning the character and
/// the entity's length in bytes; `None` leaves the `&` as literal text.
fn decode_entity(s: &str) -> Option<(char, usize)> {
    // The longest entity handled here, `&#x10FFFF;`, is 10 bytes; bounding the search keeps a
    // page full of bare `&` linear.
    let end = s.as_bytes().iter().take(12).position(|&b| b == b';')?;
    let body = &s[1..end];
    let decoded = if let Some(hex) = body.strip_prefix("#x").or_else(|| body.strip_prefix("#X")) {
        u32::from_str_radix(hex, 16).ok().and_then(char::from_u32)
    } else if let Some(dec) = body.strip_prefix('#') {
        dec.parse().ok().and_then(char::from_u32)
    } else {
        named_entity(body)
    }
    .filter(|&c| c != '\0')?;
    Some((decoded, end + 1))
}

fn named_entity(name: &str) -> Option<char> {
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "ndash" => '–',
        "mdash" => '—',
        "hellip" => '…',
        "lsquo" => '‘',
        "rsquo" => '’',
        "ldquo" => '“',
        "rdquo" => '”',
        "laquo" => '«',
        "raquo" => '»',
        "middot" => '·',
        "bull" => '•',
        "copy" => '©',
        "reg" => '®',
        "trade" => '™',
        "deg" => '°',
        "euro" => '€',
        "times" => '×',
        _ => return None,
    })
}

/// Collapses horizontal whitespace to single spaces, trims every line, keeps at most one blank
/// line in a row and drops control characters (PDFs in particular are full of them).
fn normalize_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank_pending = false;
    // A lone `\r` is just whitespace here, which keeps `\r\n` from reading as two breaks.
    for line in text.split(['\n', '\u{c}', '\u{2028}', '\u{2029}']) {
        let start = out.len();
        if !out.is_empty() {
            out.push('\n');
            if blank_pending {
                out.push('\n');
            }
        }
        let content_start = out.len();
        let mut space = false;
        for c in line.chars() {
            if c.is_whitespace() {
                space = true;
            } else if !c.is_control() {
                if space && out.len() > content_start {
                    out.push(' ');
                }
                space = false;
                out.push(c);
            }
        }
        if out.len() == content_start {
            out.truncate(start);
            blank_pending = !out.is_empty();
        } else {
            blank_pending = false;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn indexable_extensions_ignore_case() {
        for name in [
            "a.txt",
            "B.MD",
            "c.markdown",
            "faq.Json",
            "x.PDF",
            "y.docx",
            "z.html",
            "w.HtM",
        ] {
            assert!(is_indexable(name), "{name}");
        }
        for name in ["a.doc", "b.png", "txt", "archive.txt.zip", ""] {
            assert!(!is_indexable(name), "{name}");
        }
    }

    #[test]
    fn mime_types() {
        assert_eq!(mime_for("a.TXT"), "text/plain; charset=utf-8");
        assert_eq!(mime_for("a.md"), "text/markdown; charset=utf-8");
        assert_eq!(mime_for("a.json"), "application/json");
        assert_eq!(mime_for("a.pdf"), "application/pdf");
        assert_eq!(
            mime_for("a.docx"),
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
        );
        assert_eq!(mime_for("a.htm"), "text/html; charset=utf-8");
        assert_eq!(mime_for("a.exe"), "application/octet-stream");
    }

    #[test]
    fn unknown_type_is_rejected() {
        let err = extract_text("photo.jpg", b"text").unwrap_err();
        assert_eq!(err.to_string(), "not an indexable file type");
    }

    #[test]
    fn plain_text_is_normalised() {
        let text = extract_text(
            "a.txt",
            b"\xEF\xBB\xBF  Opening   hours:\t9 am\r\n\r\n\r\n\r\nClosed\x07 Mondays  \n",
        )
        .unwrap();
        assert_eq!(text, "Opening hours: 9 am\n\nClosed Mondays");
    }

    #[test]
    fn invalid_utf8_is_replaced_not_rejected() {
        let text = extract_text("a.txt", b"caf\xE9 open").unwrap();
        assert_eq!(text, "caf\u{FFFD} open");
    }

    #[test]
    fn utf16_with_bom_is_decoded() {
        let mut bytes = vec![0xFF, 0xFE];
        bytes.extend("Hall B 展厅".encode_utf16().flat_map(u16::to_le_bytes));
        assert_eq!(extract_text("a.txt", &bytes).unwrap(), "Hall B 展厅");
    }

    #[test]
    fn binary_and_empty_text_are_errors() {
        let err = extract_text("a.txt", b"MZ\x00\x01\x02").unwrap_err();
        assert_eq!(err.to_string(), "file looks binary, not text");
        let err = extract_text("a.txt", b" \n\t\n").unwrap_err();
        assert_eq!(err.to_string(), "text file has no extractable text");
    }

    #[test]
    fn markdown_markup_is_dropped() {
        let md = "\
# Visiting **the** museum

> Tickets are *free* on `Sundays`.

- See the [floor plan](https://example.com/plan_(v2).pdf) and ![map](map.png)
- Use the file_name __exactly__ ~~not~~

---

Header | Value
--- | ---

```
ssid: Museum_Guest
```
";
        let text = extract_text("guide.md", md.as_bytes()).unwrap();
        assert_eq!(
            text,
            "Visiting the museum\n\nTickets are free on Sundays.\n\n\
             See the floor plan and map\nUse the file_name exactly not\n\n\
             Header | Value\n\nssid: Museum_Guest"
        );
    }

    #[test]
    fn markdown_unclosed_link_keeps_text() {
        let text = extract_text("a.md", b"see [docs](http://x and [more](y").unwrap();
        assert_eq!(text, "see docs(http://x and more(y");
    }

    #[test]
    fn json_becomes_key_value_lines() {
        let json = br#"{
            "museum": "City Museum",
            "faq": [
                {"question": "When does it open?", "answer": "At 9 am."},
                {"question": "Is there parking?", "answer": "Yes", "free": true}
            ],
            "tags": ["art", "history", null, 3],
            "note": null
        }"#;
        let text = extract_text("faq.json", json).unwrap();
        assert_eq!(
            text,
            "faq:\n\
             answer: At 9 am.\nquestion: When does it open?\n\n\
             answer: Yes\nfree: true\nquestion: Is there parking?\n\n\
             museum: City Museum\ntags: art, history, 3"
        );
    }

    #[test]
    fn invalid_json_is_an_error() {
        let err = extract_text("faq.json", b"{\"a\": ").unwrap_err();
        assert!(
            err.to_string().starts_with("not a valid JSON file: "),
            "{err}"
        );
        let err = extract_text("faq.json", b"{\"a\": null, \"b\": []}").unwrap_err();
        assert_eq!(err.to_string(), "JSON has no extractable text");
    }

    #[test]
    fn html_keeps_only_visible_text() {
        let html = r#"<!DOCTYPE html>
<html><head><title>Opening &amp; hours</title>
<style>body { color: red; }</style>
<script type="text/javascript">if (a < b && c > d) { alert("</p>"); }</script>
</head><body>
<!-- <p>hidden comment</p> -->
<noscript>Enable JavaScript</noscript><TEMPLATE><p>template</p></TEMPLATE>
<div class="x" data-info='a > b'><h1>Welcome</h1><p>Open 9&nbsp;am&ndash;6 pm, 1 &lt; 2 &gt; 0.</p>
<p>Caf&#233; &#x1F600; &quot;quoted&quot; &#39;single&#39; &apos;apos&apos; &bogus; AT&T</p>
<table><tr><td>Mon</td><td>Closed</td></tr></table>
<ul><li>One</li><li>Two<br>Three</li></ul></div>
</body></html>"#;
        let text = extract_text("index.html", html.as_bytes()).unwrap();
        assert_eq!(
            text,
            "Opening & hours\nWelcome\nOpen 9 am–6 pm, 1 < 2 > 0.\n\
             Café 😀 \"quoted\" 'single' 'apos' &bogus; AT&T\n\
             Mon Closed\nOne\nTwo\nThree"
        );
    }

    #[test]
    fn html_tolerates_broken_markup() {
        assert_eq!(strip_html("a < b and <3"), "a < b and <3");
        assert_eq!(strip_html("x <p unterminated"), "x \n");
        assert_eq!(strip_html("x <!-- open comment"), "x ");
        assert_eq!(strip_html("x <script>never closed"), "x ");
        assert_eq!(
            strip_html("&#0; &#xZZ; &#99999999; &"),
            "&#0; &#xZZ; &#99999999; &"
        );
    }

    /// Builds a one-page PDF, with a correct xref table, whose page draws `content` and has
    /// Helvetica as font `/F1`.
    #[test]
    fn a_pdf_page_that_is_its_own_parent_is_refused_not_a_crash() {
        // Found by fuzzing: without a MediaBox of its own, pdf-extract looked for the page's
        // inherited one up a `/Parent` chain that never ended, until the stack overflowed and
        // the process aborted. The same length keeps the cross-reference offsets right.
        let pdf = minimal_pdf("BT /F1 24 Tf 72 720 Td (Hello) Tj ET");
        let cyclic = String::from_utf8(pdf)
            .unwrap()
            .replace("/Parent 2 0 R /MediaBox", "/Parent 3 0 R /mediaBox");
        let err = extract_text("loop.pdf", cyclic.as_bytes()).unwrap_err();
        assert!(err.to_string().contains("its own ancestor"), "{err}");
    }

    fn minimal_pdf(content: &str) -> Vec<u8> {
        let objects = [
            "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_owned(),
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] \
             /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>"
                .to_owned(),
            "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_owned(),
            format!(
                "<< /Length {} >>\nstream\n{content}\nendstream",
                content.len()
            ),
        ];
        let mut pdf = b"%PDF-1.4\n".to_vec();
        let mut offsets = Vec::new();
        for (n, body) in objects.iter().enumerate() {
            offsets.push(pdf.len());
            write!(pdf, "{} 0 obj\n{body}\nendobj\n", n + 1).unwrap();
        }
        let xref = pdf.len();
        write!(pdf, "xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).unwrap();
        for offset in offsets {
            writeln!(pdf, "{offset:010} 00000 n ").unwrap();
        }
        write!(
            pdf,
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .unwrap();
        pdf
    }

    fn deflated(data: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(data).unwrap();
        z.finish().unwrap()
    }

    #[test]
    fn pdf_streams_that_inflate_beyond_the_cap_are_refused() {
        let bomb = deflated(&vec![0u8; 2 << 20]);
        let pdf = [
            b"%PDF-1.4\n1 0 obj\n<< /Filter /FlateDecode >>\nstream\n",
            &bomb[..],
            b"\nendstream\nendobj\n",
        ]
        .concat();
        assert!(matches!(
            check_pdf_streams(&pdf, 1 << 20),
            Err(ExtractError::Bomb { .. })
        ));
        assert!(check_pdf_streams(&pdf, 4 << 20).is_ok());
        // Deflate inside deflate counts both layers.
        let twice = deflated(&bomb);
        let pdf = [b"stream\r\n", &twice[..], b"endstream"].concat();
        assert!(matches!(
            check_pdf_streams(&pdf, (2 << 20) + bomb.len() as u64 - 1),
            Err(ExtractError::Bomb { .. })
        ));
    }

    #[test]
    fn a_docx_listing_too_many_entries_is_refused_before_it_is_read() {
        let mut eocd = b"PK\x05\x06".to_vec();
        eocd.extend_from_slice(&[
            0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ]);
        let file = [&b"garbage"[..], &eocd].concat();
        assert_eq!(zip_entries(&file), Some(u64::MAX));
        assert!(matches!(
            extract_text("bomb.docx", &file),
            Err(ExtractError::Bomb { format: "DOCX" })
        ));
    }

    #[test]
    fn pdf_text_is_extracted() {
        let pdf = minimal_pdf("BT /F1 24 Tf 72 720 Td (The museum closes at 6 pm) Tj ET");
        let text = extract_text("hours.pdf", &pdf).unwrap();
        assert!(text.contains("The museum closes at 6 pm"), "{text:?}");
    }

    #[test]
    fn pdf_without_text_is_an_error() {
        let pdf = minimal_pdf("BT /F1 24 Tf 72 720 Td () Tj ET");
        let err = extract_text("scan.pdf", &pdf).unwrap_err();
        assert_eq!(err.to_string(), "PDF has no extractable text");
    }

    #[test]
    fn broken_pdf_is_an_error_not_a_panic() {
        let mut truncated = minimal_pdf("BT /F1 24 Tf (Hello) Tj ET");
        truncated.truncate(truncated.len() / 2);
        // pdf-extract 0.12 panics on a font name missing from the page resources.
        let panics = minimal_pdf("BT /F9 24 Tf (Hello) Tj ET");
        for bytes in [
            &b"not a pdf at all"[..],
            b"%PDF-1.4\n%%EOF",
            &truncated,
            &panics,
        ] {
            let err = extract_text("broken.pdf", bytes).unwrap_err();
            assert!(
                matches!(err, ExtractError::Invalid { format: "PDF", .. }),
                "{err}"
            );
        }
    }

    fn docx_with(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (name, data) in entries {
            writer.start_file(*name, options).unwrap();
            writer.write_all(data).unwrap();
        }
        writer.finish().unwrap().into_inner()
    }

    #[test]
    fn docx_paragraphs_tabs_and_breaks() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">
  <w:body>
    <w:p><w:pPr><w:pStyle w:val="Title"/></w:pPr><w:r><w:t>Museum guide</w:t></w:r></w:p>
    <w:p><w:r><w:t xml:space="preserve">Open </w:t></w:r><w:r><w:rPr><w:b/></w:rPr><w:t>daily</w:t></w:r><w:r><w:tab/><w:t>9&amp;6 &#8211; &lt;ok&gt;</w:t></w:r></w:p>
    <w:p><w:r><w:t>Line one</w:t><w:br/><w:t>Line two</w:t><w:delText>deleted</w:delText></w:r></w:p>
    <w:p/>
    <w:p><w:r><w:instrText>PAGE</w:instrText><w:t><![CDATA[Café]]></w:t></w:r></w:p>
  </w:body>
</w:document>"#;
        let docx = docx_with(&[
            ("[Content_Types].xml", b"<Types/>"),
            ("word/document.xml", xml.as_bytes()),
        ]);
        let text = extract_text("guide.docx", &docx).unwrap();
        assert_eq!(
            text,
            "Museum guide\nOpen daily 9&6 – <ok>\nLine one\nLine two\n\nCafé"
        );
    }

    #[test]
    fn invalid_docx_is_an_error() {
        let err = extract_text("a.docx", b"PK not really").unwrap_err();
        assert!(
            err.to_string().starts_with("not a valid DOCX file: "),
            "{err}"
        );
        let no_body = docx_with(&[("word/styles.xml", b"<w:styles/>")]);
        let err = extract_text("a.docx", &no_body).unwrap_err();
        assert!(err.to_string().contains("word/document.xml"), "{err}");
        let bad_xml = docx_with(&[("word/document.xml", b"<w:p><w:t>a</w:x></w:p>")]);
        let err = extract_text("a.docx", &bad_xml).unwrap_err();
        assert!(
            matches!(err, ExtractError::Invalid { format: "DOCX", .. }),
            "{err}"
        );
    }

    #[test]
    fn oversized_docx_is_refused() {
        // 65 MiB of zeros deflates to ~65 KiB: exactly the shape of a zip bomb.
        let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        writer.start_file("word/document.xml", options).unwrap();
        let block = vec![b' '; 1024 * 1024];
        for _ in 0..65 {
            writer.write_all(&block).unwrap();
        }
        let docx = writer.finish().unwrap().into_inner();
        assert!(docx.len() < 1024 * 1024);
        let err = extract_text("bomb.docx", &docx).unwrap_err();
        assert!(matches!(err, ExtractError::TooLarge), "{err}");
        assert_eq!(
            err.to_string(),
            "DOCX document text is larger than 64 MiB uncompressed"
        );
    }

    #[test]
    fn capped_reader_enforces_the_real_size() {
        let mut capped = Capped {
            inner: &b"abcdef"[..],
            remaining: 4,
        };
        let mut out = Vec::new();
        let err = capped.read_to_end(&mut out).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(out, b"abcd");

        let mut exact = Capped {
            inner: &b"abcd"[..],
            remaining: 4,
        };
        let mut out = Vec::new();
        exact.read_to_end(&mut out).unwrap();
        assert_eq!(out, b"abcd");
    }

    #[test]
    fn whitespace_normalisation() {
        assert_eq!(
            normalize_whitespace("  a \t b  \n\n\n\n c\u{a0}\u{a0}d \r\n\r\ne\n \n"),
            "a b\n\nc d\n\ne"
        );
        assert_eq!(normalize_whitespace(" \n \n"), "");
    }
}
