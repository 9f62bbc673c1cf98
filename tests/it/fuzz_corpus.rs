//! Every input of every fuzz target's corpus (`tests/fuzz/corpus/TARGET/`), the crash
//! regressions among them, through the same entry points AFL++ drives (the crate
//! `tests/fuzz/targets`), on every `cargo test`. The coverage-guided runs themselves are `./x fuzz`.

use docent_fuzz_targets as targets;

use std::path::PathBuf;
use std::time::{Duration, Instant};

/// An input that takes longer than this is a hang (the fuzzer's own limit is 5 s per input on
/// an instrumented build; a debug build under a loaded test run gets more room).
const SLOW: Duration = Duration::from_secs(30);

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/corpus")
        .join(target);
    let mut inputs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .map(|p| {
            let bytes = std::fs::read(&p).expect("input");
            (p, bytes)
        })
        .collect();
    inputs.sort();
    assert!(
        !inputs.is_empty(),
        "{target}: an empty corpus replays nothing"
    );
    inputs
}

/// Runs `one` on every input of `target`'s corpus, naming the input that panics or hangs.
fn replay(target: &str, one: impl Fn(&[u8])) {
    for (path, bytes) in corpus(target) {
        let started = Instant::now();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| one(&bytes)));
        assert!(result.is_ok(), "{target} failed on {}", path.display());
        let took = started.elapsed();
        assert!(took < SLOW, "{target} took {took:?} on {}", path.display());
    }
}

#[test]
fn every_target_has_a_corpus_and_a_replay() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/corpus");
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    let mut known: Vec<String> = targets::TARGETS.iter().map(|t| t.to_string()).collect();
    known.sort();
    assert_eq!(
        found, known,
        "a corpus folder per target, and a replay below per target"
    );
}

#[test]
fn extract_corpus() {
    replay("extract", targets::extract);
}

#[test]
fn clip_corpus() {
    replay("clip", targets::clip);
}

#[test]
fn image_corpus() {
    replay("image", targets::image);
}

#[test]
fn config_corpus() {
    replay("config", targets::config);
}

#[test]
fn site_corpus() {
    replay("site", targets::site);
}

#[test]
fn ws_corpus() {
    replay("ws", targets::ws);
}

#[test]
fn grpc_corpus() {
    let kiosk = targets::Kiosk::start();
    replay("grpc", |data| targets::grpc(&kiosk, data));
}

#[test]
fn http_corpus() {
    let http = targets::Http::start();
    replay("http", |data| http.run(data));
}
