//! See `docent_fuzz_targets::clip`.

fn main() {
    afl::fuzz!(|data: &[u8]| docent_fuzz_targets::clip(data));
}
