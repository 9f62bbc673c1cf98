//! Images: the content sniffing of every upload (avatars, site images) and the decoding of an
//! avatar for the screen (PNG, JPEG).

use docent::device::display::still;
use docent::engine::media::{mime_for_name, sniff_image};

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = sniff_image(data);
        if let Ok(name) = std::str::from_utf8(data) {
            let _ = mime_for_name(name);
        }
        let _ = still::decode(data, (320, 240));
    });
}
