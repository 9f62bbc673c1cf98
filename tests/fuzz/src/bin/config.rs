//! The configuration file, through the real loader (TOML, then every check of the values).

use docent::config::Config;

fn main() {
    afl::fuzz!(|data: &[u8]| {
        if let Ok(text) = std::str::from_utf8(data) {
            let _ = Config::from_toml(text);
        }
    });
}
