//! See `docent_fuzz::config`.

fn main() {
    afl::fuzz!(|data: &[u8]| docent_fuzz::config(data));
}
