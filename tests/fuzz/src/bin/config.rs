//! See `docent_fuzz_targets::config`.

fn main() {
    afl::fuzz!(|data: &[u8]| docent_fuzz_targets::config(data));
}
