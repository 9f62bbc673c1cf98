//! See `docent_fuzz::ws`.

fn main() {
    afl::fuzz!(|data: &[u8]| docent_fuzz::ws(data));
}
