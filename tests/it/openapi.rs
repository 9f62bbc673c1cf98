//! The OpenAPI document (`GET /api/openapi.json`): every route of `src/api` is in it, every
//! operation in it exists with exactly its methods, and schemathesis finds no server error and
//! no answer that the document does not describe when it throws generated requests at a real
//! `docent` process.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::support::{Process, Running};

/// Routes of `src/api` that are no part of the JSON API, each with the reason.
const NOT_DOCUMENTED: &[(&str, &str)] = &[
    ("/", "redirect to the console"),
    ("/console", "redirect to the console"),
    ("/console/", "console page (HTML)"),
    ("/console/login", "console page (HTML)"),
    ("/console/characters", "console page (HTML)"),
    ("/console/settings", "console page (HTML)"),
    ("/console/try", "console page (HTML)"),
    ("/console/{file}", "console asset (CSS, JS)"),
    (
        "/api/v1/internal/debug/stall",
        "test hook, routed only with test_hooks = true",
    ),
];

const METHODS: [&str; 4] = ["get", "put", "post", "delete"];

fn api_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/api")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The path of every `.route("...", ...)` in `code` (the literal may follow on the next line).
fn routes_in(code: &str) -> Vec<String> {
    code.match_indices(".route(")
        .filter_map(|(at, call)| {
            let rest = code[at + call.len()..].trim_start();
            let rest = rest.strip_prefix('"')?;
            Some(rest[..rest.find('"')?].to_string())
        })
        .collect()
}

/// Every route path written in `src/api`.
fn source_routes() -> BTreeSet<String> {
    let mut files = Vec::new();
    rust_files(&api_dir(), &mut files);
    files
        .iter()
        .flat_map(|f| routes_in(&std::fs::read_to_string(f).unwrap()))
        .collect()
}

#[test]
fn the_route_reader_finds_routes_written_over_two_lines() {
    let code = ".route(\"/a\", get(x))\n        .route(\n            \"/b/{id}\",\n get(y))";
    assert_eq!(routes_in(code), ["/a", "/b/{id}"]);
}

/// An HTTP client that works before any in-process server has started (reqwest is built
/// without a TLS crypto provider; the engine installs one when it opens).
fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

async fn start() -> Running {
    Process::new()
        .env("ADMIN_PASSWORD", "openapi-test-password")
        .start()
        .await
}

async fn document(base: &str) -> Value {
    let res = client()
        .get(format!("{base}/api/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "the document is public");
    assert!(
        res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    res.json().await.unwrap()
}

/// The documented operations: path -> methods.
fn operations(doc: &Value) -> BTreeMap<String, BTreeSet<String>> {
    doc["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .map(|(path, item)| {
            let methods = METHODS
                .iter()
                .filter(|m| item.get(**m).is_some())
                .map(|m| m.to_string())
                .collect();
            (path.clone(), methods)
        })
        .collect()
}

#[tokio::test]
async fn every_route_is_documented_with_exactly_its_methods() {
    let server = start().await;
    let base = server.base();
    let doc = document(&base).await;
    assert_eq!(doc["openapi"], "3.1.0");
    let ops = operations(&doc);

    let excluded: BTreeSet<&str> = NOT_DOCUMENTED.iter().map(|(p, _)| *p).collect();
    let routes = source_routes();
    assert!(routes.len() > 40, "the route reader found {routes:?}");
    let missing: Vec<&String> = routes
        .iter()
        .filter(|r| !ops.contains_key(*r) && !excluded.contains(r.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "routes without an OpenAPI description (add #[utoipa::path] to the handler and list it \
         in src/api/openapi.rs): {missing:?}"
    );
    let stale: Vec<&&str> = excluded.iter().filter(|p| !routes.contains(**p)).collect();
    assert!(
        stale.is_empty(),
        "exclusions of routes that no longer exist: {stale:?}"
    );

    // Operation ids are unique, and every operation says who may call it when it is not public.
    let mut ids = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for m in METHODS {
            if let Some(op) = item.get(m) {
                let id = op["operationId"].as_str().expect("operationId");
                assert!(ids.insert(id.to_string()), "operationId {id} repeats");
                assert!(
                    op["responses"].as_object().is_some_and(|r| !r.is_empty()),
                    "{m} {path} documents no response"
                );
            }
        }
    }

    // Against the live router (LAN-like: no credentials, so admin routes stop at 401): a
    // documented method is routed, an undocumented one is 405.
    let http = client();
    for (path, methods) in &ops {
        let concrete = concrete_path(path);
        for m in METHODS {
            let res = http
                .request(
                    m.to_uppercase().parse().unwrap(),
                    format!("{base}{concrete}"),
                )
                .send()
                .await
                .unwrap();
            let status = res.status().as_u16();
            let body = res.text().await.unwrap();
            if methods.contains(m) {
                assert!(
                    !body.contains("method not allowed on this route")
                        && !body.contains("no such route"),
                    "documented {m} {path} is not routed: {status} {body}"
                );
            } else {
                assert!(
                    status == 405 && body.contains("method not allowed on this route"),
                    "{m} {path} is routed but not documented: {status} {body}"
                );
            }
        }
    }
    assert!(server.errors().is_empty(), "{}", server.stderr());
}

/// A path with each `{parameter}` filled in.
fn concrete_path(path: &str) -> String {
    let mut out = String::new();
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        out.push('x');
        rest = &rest[rest[open..].find('}').unwrap() + open + 1..];
    }
    out + rest
}

/// Generated requests per operation (schemathesis' fuzzing phase; the coverage phase adds its
/// own boundary cases).
const MAX_EXAMPLES: &str = "20";

/// Operations schemathesis leaves out, each with the reason; a test below covers each.
const NOT_FUZZED: &[(&str, &str)] = &[
    (
        "--exclude-operation-id=logout",
        "DELETE /api/auth would end the run's own admin session (site_admin.rs tests it)",
    ),
    (
        "--exclude-path=/api/v1/kiosk/events",
        "an event stream never ends, so no answer is complete (console.rs tests it)",
    ),
];

fn schemathesis() -> PathBuf {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/support/schemathesis-venv.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .output()
        .expect("run schemathesis-venv.sh");
    assert!(
        out.status.success(),
        "installing schemathesis failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

#[tokio::test]
async fn schemathesis_finds_no_server_error_and_no_undocumented_answer() {
    let st = schemathesis();
    // The session capacity (`max_sessions`, 503 when full, limits.rs tests it) is raised so
    // that the generated sessions do not fill it: every 5xx left is a failure.
    let server = Process::new()
        .env("ADMIN_PASSWORD", "openapi-test-password")
        .config("max_sessions = 100000\n")
        .start()
        .await;
    let base = server.base();
    let res = client()
        .post(format!("{base}/api/auth"))
        .json(&serde_json::json!({ "password": "openapi-test-password" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let cookie = res.headers()["set-cookie"].to_str().unwrap().to_string();
    let cookie = cookie.split(';').next().unwrap().to_string();

    let reports = tempfile::tempdir().unwrap();
    let mut command = tokio::process::Command::new(&st);
    command
        .arg("run")
        .arg(format!("{base}/api/openapi.json"))
        .arg("--checks=not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance")
        .arg("--phases=examples,coverage,fuzzing")
        .arg(format!("--max-examples={MAX_EXAMPLES}"))
        .arg("--seed=1")
        .arg("--workers=1")
        .arg("--request-timeout=20")
        .arg("--no-color")
        .arg(format!("--header=Cookie: {cookie}"))
        // A cookie-authenticated write must come from the kiosk's own origin.
        .arg(format!("--header=Origin: {base}"))
        .args(NOT_FUZZED.iter().map(|(arg, _)| *arg))
        .current_dir(reports.path())
        .kill_on_drop(true);
    let run = tokio::time::timeout(Duration::from_secs(540), command.output())
        .await
        .expect("schemathesis finishes within 9 minutes")
        .unwrap();
    let out = String::from_utf8_lossy(&run.stdout);
    println!("{out}\n{}", String::from_utf8_lossy(&run.stderr));
    for (arg, why) in NOT_FUZZED {
        println!("not fuzzed: {arg}: {why}");
    }
    assert!(
        run.status.success(),
        "schemathesis found failures (see above); docent's log:\n{}",
        server.stderr()
    );
    assert!(
        out.contains("generated"),
        "schemathesis ran no case:\n{out}"
    );
    assert!(
        server.errors().is_empty(),
        "docent logged errors:\n{}",
        server.stderr()
    );
}
