//! See `docent_fuzz_targets::site`.

fn main() {
    afl::fuzz!(|data: &[u8]| docent_fuzz_targets::site(data));
}
