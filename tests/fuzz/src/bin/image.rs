//! Images: the content sniffing of every upload (avatars, site images) and the decoding of an
//! avatar for the screen (PNG, JPEG).

use docent::device::display::still;
use docent::engine::media::{mime_for_name, sniff_image};

fn main() {
    // A decoder panic is caught by the product (`still::decode`); AFL's hook would abort first.
    afl::fuzz_nohook!(|data: &[u8]| {
        let _ = sniff_image(data);
        if let Ok(name) = std::str::from_utf8(data) {
            let _ = mime_for_name(name);
        }
        let _ = still::decode(data, (320, 240));
    });
}
