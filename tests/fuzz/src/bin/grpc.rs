//! See `docent_fuzz::grpc`.

fn main() {
    // A panic aborts the process (AFL++ records the input), so nothing is observed after one.
    let kiosk = std::panic::AssertUnwindSafe(docent_fuzz::Kiosk::start());
    afl::fuzz!(|data: &[u8]| docent_fuzz::grpc(&kiosk, data));
}
