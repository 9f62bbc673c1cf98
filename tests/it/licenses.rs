//! The README says docent is MIT OR Apache-2.0 and links nothing copyleft: every crate in
//! `Cargo.lock` that a build for the kiosk's targets uses must offer a licence from the
//! permissive list below.
//!
//! The metadata is read for the two platforms the project builds (this machine and the
//! board), offline: `cargo build` and `cargo fetch` of those platforms have downloaded every
//! package they need. Packages only another platform pulls in (the Windows console crates of
//! clap's colours, say) are never downloaded, never built and never shipped, so they are not
//! read; `cargo metadata` without `--filter-platform` would need them on disk.

use std::process::Command;

/// Licences compatible with shipping docent under MIT OR Apache-2.0 in one static binary.
const ALLOWED: &[&str] = &[
    "MIT",
    "Apache-2.0",
    "Apache-2.0 WITH LLVM-exception",
    "BSD-2-Clause",
    "BSD-3-Clause",
    "ISC",
    "Zlib",
    "0BSD",
    "Unlicense",
    "BSL-1.0",
    "Unicode-3.0",
    "CDLA-Permissive-2.0",
];

/// Whether an SPDX expression (`A OR (B AND C)`, `A WITH E`, and the old `A/B` form) can be
/// satisfied with allowed licences only.
fn satisfiable(expr: &str) -> bool {
    let spaced = expr
        .replace('/', " OR ")
        .replace('(', " ( ")
        .replace(')', " ) ");
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    let mut at = 0;
    let ok = or_expr(&tokens, &mut at);
    ok && at == tokens.len()
}

fn or_expr(t: &[&str], at: &mut usize) -> bool {
    let mut ok = and_expr(t, at);
    while t.get(*at) == Some(&"OR") {
        *at += 1;
        ok |= and_expr(t, at);
    }
    ok
}

fn and_expr(t: &[&str], at: &mut usize) -> bool {
    let mut ok = term(t, at);
    while t.get(*at) == Some(&"AND") {
        *at += 1;
        ok &= term(t, at);
    }
    ok
}

fn term(t: &[&str], at: &mut usize) -> bool {
    match t.get(*at) {
        Some(&"(") => {
            *at += 1;
            let ok = or_expr(t, at);
            *at += 1; // ")"
            ok
        }
        Some(id) => {
            *at += 1;
            let mut licence = id.to_string();
            if t.get(*at) == Some(&"WITH") {
                licence = format!("{licence} WITH {}", t.get(*at + 1).unwrap_or(&""));
                *at += 2;
            }
            ALLOWED.contains(&licence.as_str())
        }
        None => false,
    }
}

#[test]
fn the_expression_reader_refuses_what_it_must() {
    assert!(satisfiable("MIT OR Apache-2.0"));
    assert!(satisfiable("(MIT OR Apache-2.0) AND Unicode-3.0"));
    assert!(satisfiable("MIT/Apache-2.0"));
    assert!(satisfiable("MIT OR Apache-2.0 OR LGPL-2.1-or-later"));
    assert!(!satisfiable("GPL-3.0-only"));
    assert!(!satisfiable("MIT AND GPL-2.0-or-later"));
    assert!(!satisfiable("(GPL-2.0 OR LGPL-2.1) AND MIT"));
    assert!(!satisfiable(""));
}

/// The platforms the project builds for: the build machine (tests, the x86_64 simulated board)
/// and the kiosk's board.
const PLATFORMS: &[&str] = &["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu"];

#[test]
fn every_dependency_is_permissively_licensed() {
    // The board's packages are fetched (not built) first: on a fresh machine the test runs
    // before the aarch64 build, and only a few crates differ between the two platforms.
    fetch(env!("CARGO_MANIFEST_DIR"));
    check_crate(env!("CARGO_MANIFEST_DIR"), &["--offline"]);
}

/// The fuzz crate (its own lock file) ships nothing, but its tools stay permissive too. It
/// has not been fetched on a machine that never fuzzed, so its packages are fetched here.
#[test]
fn every_fuzzing_dependency_is_permissively_licensed() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fuzz");
    fetch(dir);
    check_crate(dir, &["--offline"]);
}

/// `cargo fetch` of the given crate for every platform in `PLATFORMS` (quick when present).
fn fetch(dir: &str) {
    let mut fetch = Command::new(env!("CARGO"));
    fetch.args(["fetch", "--locked"]).current_dir(dir);
    for p in PLATFORMS {
        fetch.args(["--target", p]);
    }
    let out = fetch.output().expect("cargo fetch");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn check_crate(dir: &str, extra: &[&str]) {
    let mut metadata = Command::new(env!("CARGO"));
    metadata.args(["metadata", "--locked", "--format-version", "1"]);
    for p in PLATFORMS {
        metadata.args(["--filter-platform", p]);
    }
    let out = metadata
        .args(extra)
        .current_dir(dir)
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    assert!(packages.len() > 100, "the whole dependency graph is read");
    let refused: Vec<String> = packages
        .iter()
        .filter(|p| !satisfiable(p["license"].as_str().unwrap_or("")))
        .map(|p| format!("{} {}: {}", p["name"], p["version"], p["license"]))
        .collect();
    assert!(
        refused.is_empty(),
        "not permissive (or no licence field): {refused:?}"
    );
}
