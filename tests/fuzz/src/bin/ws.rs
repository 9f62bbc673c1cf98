//! See `docent_fuzz_targets::ws`.

fn main() {
    afl::fuzz!(|data: &[u8]| docent_fuzz_targets::ws(data));
}
