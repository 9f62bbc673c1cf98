//! See `docent_fuzz::site`.

fn main() {
    afl::fuzz!(|data: &[u8]| docent_fuzz::site(data));
}
