//! See `docent_fuzz_targets::Http`.

fn main() {
    // A panic aborts the process (AFL++ records the input), so nothing is observed after one.
    let http = std::panic::AssertUnwindSafe(docent_fuzz_targets::Http::start());
    afl::fuzz!(|data: &[u8]| http.run(data));
}
