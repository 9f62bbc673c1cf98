//! The site document of `PUT /api/data` (the checks before it is stored).

use docent::engine::site::validate_document;

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = validate_document(data);
    });
}
