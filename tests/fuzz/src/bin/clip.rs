//! See `docent_fuzz::clip`.

fn main() {
    afl::fuzz!(|data: &[u8]| docent_fuzz::clip(data));
}
