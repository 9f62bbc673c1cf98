//! See `docent_fuzz_targets::image`. Without AFL's panic hook: a decoder panic caught by the product is
//! its "could not read it", while a panic of the target itself still aborts (afl's own
//! `catch_unwind`).

fn main() {
    afl::fuzz_nohook!(|data: &[u8]| docent_fuzz_targets::image(data));
}
