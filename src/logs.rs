//! The recent log: the last lines the process logged, formatted as on stderr (without colours),
//! kept in a bounded ring in memory for the console's System page. Nothing is written to disk
//! and the ring holds what the log holds: no code logs a secret (passwords, tokens and keys are
//! never formatted into a log line).

use std::collections::VecDeque;
use std::io;
use std::sync::Mutex;

use tracing_subscriber::Layer;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Lines kept.
pub const LINES: usize = 1000;
/// Longest line kept, in bytes (a longer one is cut at a character boundary).
pub const LINE_BYTES: usize = 2000;

/// The access log's target (one line per answered request, see `docs/system.md`):
/// `DOCENT_LOG=info,docent::access=debug` turns it on.
pub const ACCESS: &str = "docent::access";

static RING: Mutex<VecDeque<String>> = Mutex::new(VecDeque::new());

/// Installs the process's logger: stderr (coloured at a terminal) and the ring, filtered by
/// `DOCENT_LOG` (default `info`). The access log (`docent::access`, off by default) goes to
/// stderr only: in the ring its lines would push out the ones an administrator looks for, and
/// the System page's own polling would add more. A second call does nothing (tests start many
/// servers).
pub fn init() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("DOCENT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(io::stderr)
        // Colours for a person at a terminal; plain lines for the journal and log files.
        .with_ansi(io::IsTerminal::is_terminal(&io::stderr()));
    let ring = tracing_subscriber::fmt::layer()
        .with_writer(Ring)
        .with_ansi(false)
        .with_filter(tracing_subscriber::filter::filter_fn(|meta| {
            meta.target() != ACCESS
        }));
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(stderr)
        .with(ring)
        .try_init();
}

/// The last `n` lines logged, oldest first.
pub fn recent(n: usize) -> Vec<String> {
    let ring = RING.lock().unwrap_or_else(|e| e.into_inner());
    ring.iter()
        .skip(ring.len().saturating_sub(n))
        .cloned()
        .collect()
}

fn push(text: &str) {
    let mut ring = RING.lock().unwrap_or_else(|e| e.into_inner());
    for line in text.lines().filter(|l| !l.is_empty()) {
        let mut end = line.len().min(LINE_BYTES);
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        if ring.len() == LINES {
            ring.pop_front();
        }
        ring.push_back(line[..end].to_string());
    }
}

/// The ring as a `tracing_subscriber` writer: one event's text is collected, then kept at drop.
struct Ring;

impl<'a> MakeWriter<'a> for Ring {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line(Vec::new())
    }
}

struct Line(Vec<u8>);

impl io::Write for Line {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // One event is one line or a few: bounded well above `LINE_BYTES`, the rest dropped.
        let room = (4 * LINE_BYTES).saturating_sub(self.0.len());
        self.0.extend_from_slice(&buf[..buf.len().min(room)]);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        push(&String::from_utf8_lossy(&self.0));
    }
}

/// A value from outside (the server's text, an error quoting it) as it may appear in a log
/// line: control characters and line separators escaped (`\n`, `\u{1b}`), so that no server
/// can start a line of its own in the journal or the console's log view. Every value a fleet
/// log line formats goes through it.
pub struct Escaped<T>(pub T);

impl<T: std::fmt::Display> std::fmt::Display for Escaped<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use std::fmt::Write as _;
        for c in self.0.to_string().chars() {
            if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
                write!(f, "{}", c.escape_default())?;
            } else {
                f.write_char(c)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_the_last_lines_cut_to_size() {
        push(&format!("{}\n", "é".repeat(LINE_BYTES)));
        let last = recent(1).pop().unwrap();
        assert!(last.len() <= LINE_BYTES && last.len() > LINE_BYTES - 2);
        for i in 0..LINES + 5 {
            push(&format!("line {i}\n"));
        }
        let all = recent(usize::MAX);
        assert_eq!(all.len(), LINES);
        assert_eq!(all.last().unwrap(), &format!("line {}", LINES + 4));
        assert_eq!(recent(2).len(), 2);
    }

    #[test]
    fn escaped_text_stays_on_its_line() {
        let forged = "x\n2026-01-01T00:00:00Z  INFO docent: slot marked good\r\u{1b}[2K\u{2028}é";
        let shown = super::Escaped(forged).to_string();
        assert_eq!(
            shown,
            "x\\n2026-01-01T00:00:00Z  INFO docent: slot marked good\\r\\u{1b}[2K\\u{2028}é"
        );
        assert!(!shown.chars().any(char::is_control));
    }
}
