//! The OpenAPI document (`GET /api/openapi.json`): every route of `src/api` is in it, every
//! operation in it exists with exactly its methods, and schemathesis finds no server error and
//! no answer that the document does not describe when it throws generated requests at a real
//! `docent` process.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::support::{Process, Running, rust_files};

mod kiosks;
mod statuses;

/// Routes of `src/api` that are no part of the JSON API, each with the reason.
const NOT_DOCUMENTED: &[(&str, &str)] = &[
    ("/", "redirect to the console"),
    ("/console", "redirect to the console"),
    ("/console/", "console page (HTML)"),
    ("/console/login", "console page (HTML)"),
    ("/console/characters", "console page (HTML)"),
    ("/console/settings", "console page (HTML)"),
    ("/console/try", "console page (HTML)"),
    ("/console/knowledge", "console page (HTML)"),
    ("/console/conversations", "console page (HTML)"),
    ("/console/statistics", "console page (HTML)"),
    ("/console/site", "console page (HTML)"),
    ("/console/system", "console page (HTML)"),
    ("/console/password", "console page (HTML)"),
    ("/console/{file}", "console asset (CSS, JS)"),
    (
        "/api/v1/internal/debug/stall",
        "test hook, routed only with [test] hooks = true",
    ),
    (
        "/api/v1/internal/debug/clock",
        "test hook, routed only with [test] hooks = true",
    ),
];

/// `DOCENT_LOG` for a `docent` whose answers are counted: its access log on.
pub const ACCESS_LOG: &str = "info,docent::access=debug";

const METHODS: [&str; 4] = ["get", "put", "post", "delete"];

fn api_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/api")
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
        "--exclude-operation-id=upload_update",
        "POST /api/v1/system/update answers 503 where RAUC is absent, as here (updates.rs and the \
         probes' kiosk with a real RAUC test it)",
    ),
    (
        "--exclude-operation-id=install_update",
        "POST /api/v1/system/update/install: the same",
    ),
    (
        "--exclude-operation-id=reboot",
        "POST /api/v1/system/reboot answers 503 on a machine with no reboot path, as here \
         (updates.rs tests it)",
    ),
    (
        "--exclude-operation-id=logout",
        "DELETE /api/auth would end the run's own admin session (site_admin.rs tests it)",
    ),
    (
        "--exclude-operation-id=restart",
        "POST /api/v1/system/restart stops the server under the run (maintenance.rs \
         restart_runs_the_program_again_and_the_log_is_kept tests it)",
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
    // The session capacity (`sessions.max`, 503 when full, limits.rs tests it) is raised so
    // that the generated sessions do not fill it: every 5xx left is a failure.
    let server = Process::new()
        .env("ADMIN_PASSWORD", "openapi-test-password")
        .env("DOCENT_LOG", ACCESS_LOG)
        .config("sessions.max = 100000\nsessions.max_per_client = 100000\n")
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
    let data = seed(&base, &cookie).await;
    std::fs::write(reports.path().join("schemathesis.toml"), data.config()).unwrap();
    // The access log from here on is schemathesis' own.
    let before = server.stderr().len();
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
        // The session as a bearer token: an `Authorization` header, when a request has one,
        // is its only credential, and schemathesis sends its own to operations that document
        // bearer security (a cookie beside it would count for nothing).
        .arg(format!(
            "--header=Authorization: Bearer {}",
            cookie.split_once('=').map_or("", |(_, t)| t)
        ))
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
    let doc = document(&base).await;
    let log = server.stderr();
    let by_schemathesis = answered(&log[before..]);
    check_seeded_success(&by_schemathesis);
    assert!(
        server.errors().is_empty(),
        "docent logged errors:\n{}",
        server.stderr()
    );
    drop(server);

    // What generated data cannot reach, provoked on a fresh `docent` of its own.
    let (probed, wrong) = statuses::provoke_all(&doc).await;
    assert!(
        wrong.is_empty(),
        "probes answered otherwise:\n  {}",
        wrong.join("\n  ")
    );
    let wanted = documented(&doc);
    let all: BTreeSet<Pair> = by_schemathesis.union(&probed).cloned().collect();
    let ops = operations(&doc).values().map(BTreeSet::len).sum::<usize>();
    println!(
        "{ops} operations, {} documented (operation, status) pairs; observed by schemathesis \
         alone: {}, in all (with the probes): {}",
        wanted.len(),
        wanted.intersection(&by_schemathesis).count(),
        wanted.intersection(&all).count()
    );
    let never: Vec<String> = wanted
        .difference(&all)
        .map(|(m, p, s)| format!("{} {p} {s}", m.to_uppercase()))
        .collect();
    assert!(
        never.is_empty(),
        "documented statuses that no request produced ({}): provoke them in \
         tests/it/openapi/statuses.rs or kiosks.rs, or take them out of the document if they \
         cannot happen (the full-disk statuses need root, to mount a tmpfs):\n  {}",
        never.len(),
        never.join("\n  ")
    );
}

/// The probes alone, quickly: each gets the status it asks for.
#[tokio::test]
async fn every_probe_gets_the_status_it_provokes() {
    let server = start().await;
    let doc = document(&server.base()).await;
    drop(server);
    let (probed, wrong) = statuses::provoke_all(&doc).await;
    assert!(
        wrong.is_empty(),
        "probes answered otherwise ({}):\n  {}",
        wrong.len(),
        wrong.join("\n  ")
    );
    println!(
        "the probes produced {} documented (operation, status) pairs",
        documented(&doc).intersection(&probed).count()
    );
}

/// What the run's requests name: data created before it, so that operations on a character,
/// an image, a clip, a knowledge source, a session and a task reach their success answers.
struct Seeded {
    character: String,
    image: String,
    source: String,
    session: String,
    task: String,
    artifact: String,
}

/// Creates a character with an image, an idle clip and a knowledge file, a conversation
/// session with a task and an artifact.
async fn seed(base: &str, cookie: &str) -> Seeded {
    let http = client();
    let call = |m: reqwest::Method, path: &str| {
        http.request(m, format!("{base}{path}"))
            .header("cookie", cookie)
            .header("origin", base)
    };
    async fn ok(req: reqwest::RequestBuilder, status: u16) -> Value {
        let res = req.send().await.unwrap();
        let got = res.status().as_u16();
        let text = res.text().await.unwrap();
        assert_eq!(got, status, "seeding: {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }
    use reqwest::Method;
    let character = ok(
        call(Method::POST, "/api/v1/characters").json(&serde_json::json!({ "name": "Ada" })),
        201,
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let ada = format!("/api/v1/characters/{character}");
    let avatar = reqwest::multipart::Form::new().part(
        "avatar",
        reqwest::multipart::Part::bytes(crate::support::PNG.to_vec()).file_name("face.png"),
    );
    ok(
        call(Method::POST, &format!("{ada}/avatar")).multipart(avatar),
        200,
    )
    .await;
    let images = ok(call(Method::GET, &format!("{ada}/images")), 200).await;
    let image = images[0]["filename"].as_str().unwrap().to_string();
    let imgbase = image.rsplit_once('.').map_or(image.as_str(), |(b, _)| b);
    ok(
        call(
            Method::PUT,
            &format!("{ada}/idle-videos/{imgbase}/idle/clip.mp4"),
        )
        .header("content-type", "application/octet-stream")
        .body(crate::support::mp4_h264()),
        201,
    )
    .await;
    let file = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(b"# Hours\n\nThe museum opens at nine.\n".to_vec())
            .file_name("hours.md"),
    );
    let uploaded = ok(
        call(Method::POST, &format!("{ada}/knowledge/files")).multipart(file),
        201,
    )
    .await;
    let source = find_id(&uploaded).expect("the upload names its source");
    let session = ok(
        call(Method::POST, "/api/v1/sessions")
            .json(&serde_json::json!({ "character_id": character })),
        201,
    )
    .await["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let task = "0f7c2a4e-8d1b-4c3a-9e5f-6a7b8c9d0e1f".to_string();
    let internal = format!("/api/v1/internal/tasks/{task}");
    ok(
        call(Method::POST, &format!("{internal}/events")).json(
            &serde_json::json!({ "session_id": session, "user_request": "find the opening hours" }),
        ),
        200,
    )
    .await;
    let artifact = ok(
        call(Method::POST, &format!("{internal}/artifacts"))
            .json(&serde_json::json!({ "content": "nine to five" })),
        201,
    )
    .await;
    Seeded {
        character,
        image,
        source,
        session,
        task,
        artifact: find_id(&artifact).expect("the artifact has an id"),
    }
}

/// The first `id` (or `source_id`, `artifact_id`) in a JSON answer.
fn find_id(v: &Value) -> Option<String> {
    match v {
        Value::Object(o) => ["id", "source_id", "artifact_id"]
            .iter()
            .find_map(|k| o.get(*k).and_then(Value::as_str).map(str::to_string))
            .or_else(|| o.values().find_map(find_id)),
        Value::Array(a) => a.iter().find_map(find_id),
        _ => None,
    }
}

impl Seeded {
    /// schemathesis' configuration: the seeded ids pinned as path parameters of the operations
    /// that read or change them (not of DELETE, which would remove them under the run; those
    /// keep generated ids). The first matching entry wins, so the clip paths come first.
    fn config(&self) -> String {
        let Seeded {
            character,
            image,
            source,
            session,
            task,
            artifact,
        } = self;
        let imgbase = image.rsplit_once('.').map_or(image.as_str(), |(b, _)| b);
        let pin = |regex: &str, params: &[(&str, &str)]| {
            let params: Vec<String> = params
                .iter()
                .map(|(k, v)| format!("\"path.{k}\" = \"{v}\""))
                .collect();
            format!(
                "[[operations]]\ninclude-path-regex = '{regex}'\nexclude-method = \"DELETE\"\n\
                 parameters = {{ {} }}\n\n",
                params.join(", ")
            )
        };
        [
            pin(
                "/idle-videos/",
                &[
                    ("id", character),
                    ("imgbase", imgbase),
                    ("variant", "idle"),
                    ("filename", "clip.mp4"),
                ],
            ),
            pin(
                "^/api/v1/(internal/)?characters/\\{id\\}",
                &[
                    ("id", character),
                    ("filename", image),
                    ("source_id", source),
                ],
            ),
            pin(
                "^/api/v1/avatars/",
                &[("filename", &format!("{character}_{image}"))],
            ),
            pin("^/api/v1/sessions/\\{id\\}", &[("id", session)]),
            pin(
                "^/api/v1/(internal/)?tasks/",
                &[("task_id", task), ("artifact_id", artifact)],
            ),
        ]
        .concat()
    }
}

/// One answered request of the access log: (method, route template, status), method in lower
/// case as the document writes it.
type Pair = (String, String, String);

/// The requests `docent` answered, from its access log (`docent::access` at debug): each line
/// ends `docent::access: METHOD TEMPLATE STATUS N ms`.
fn answered(log: &str) -> BTreeSet<Pair> {
    log.lines()
        .filter_map(|line| {
            let rest = &line[line.find("docent::access: ")? + "docent::access: ".len()..];
            let mut words = rest.split(' ');
            let (method, route, status) = (words.next()?, words.next()?, words.next()?);
            Some((method.to_lowercase(), route.to_string(), status.to_string()))
        })
        .collect()
}

#[test]
fn the_access_log_reader_takes_method_template_and_status() {
    let log = "2026-01-01T00:00:00Z  INFO docent: serving\n\
               2026-01-01T00:00:01Z DEBUG docent::access: GET /api/v1/characters/{id} 404 0 ms\n\
               2026-01-01T00:00:02Z DEBUG docent::access: POST - 404 3 ms";
    let got: Vec<Pair> = answered(log).into_iter().collect();
    let pair = |m: &str, r: &str, s: &str| (m.to_string(), r.to_string(), s.to_string());
    assert_eq!(
        got,
        [
            pair("get", "/api/v1/characters/{id}", "404"),
            pair("post", "-", "404")
        ]
    );
}

/// Every (operation, documented status) pair of the document.
fn documented(doc: &Value) -> BTreeSet<Pair> {
    let mut pairs = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for m in METHODS {
            let Some(op) = item.get(m) else { continue };
            for status in op["responses"].as_object().unwrap().keys() {
                pairs.insert((m.to_string(), path.clone(), status.clone()));
            }
        }
    }
    pairs
}

/// The operations that read the seeded data reached their success answers (before the data
/// was seeded they only ever got 404).
fn check_seeded_success(observed: &BTreeSet<Pair>) {
    let missed: Vec<&&str> = SEEDED_SUCCESS
        .iter()
        .filter(|op| {
            let (m, path) = op.split_once(' ').unwrap();
            !observed
                .iter()
                .any(|(om, op, s)| om == m && op == path && s.starts_with('2'))
        })
        .collect();
    assert!(
        missed.is_empty(),
        "operations on the seeded data that never answered with success: {missed:?}"
    );
}

/// Operations that reach a success answer only with the seeded ids.
const SEEDED_SUCCESS: &[&str] = &[
    "get /api/v1/tasks/{task_id}",
    "get /api/v1/tasks/{task_id}/events",
    "get /api/v1/tasks/{task_id}/artifacts/{artifact_id}",
    "get /api/v1/sessions/{id}/tasks",
    "get /api/v1/avatars/{filename}",
    "get /api/v1/characters/{id}/images/{filename}",
    "put /api/v1/characters/{id}/images/{filename}/activate",
    "get /api/v1/characters/{id}/idle-videos/{imgbase}/{variant}/{filename}",
    "post /api/v1/characters/{id}/knowledge/{source_id}/reindex",
    "get /api/v1/characters/{id}/conversations/messages",
    "get /api/v1/characters/{id}/conversations/export",
    "get /api/v1/characters/{id}/conversations/unmatched",
];
