//! A WebSocket chat client's text frames.

use docent::api::parse_client_message;

fn main() {
    afl::fuzz!(|data: &[u8]| {
        if let Ok(text) = std::str::from_utf8(data) {
            let _ = parse_client_message(text);
        }
    });
}
