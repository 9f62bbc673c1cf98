//! See `docent_fuzz_targets::grpc`.

fn main() {
    // A panic aborts the process (AFL++ records the input), so nothing is observed after one.
    let kiosk = std::panic::AssertUnwindSafe(docent_fuzz_targets::Kiosk::start());
    afl::fuzz!(|data: &[u8]| docent_fuzz_targets::grpc(&kiosk, data));
}
