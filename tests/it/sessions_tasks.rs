//! Sessions, messages, tasks, task events and artifacts over real HTTP (http-api.md).

use std::time::Duration;

use crate::support::{Server, assert_error, expect, keys};
use futures_util::StreamExt;
use serde_json::{Value, json};

const SESSIONS: &str = "/api/v1/sessions";

fn new_uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn str_of(v: &Value, key: &str) -> String {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} is not a string in {v}"))
        .to_string()
}

/// The ids of the objects of an array, in order.
fn ids(list: &Value, key: &str) -> Vec<String> {
    list.as_array()
        .unwrap_or_else(|| panic!("expected an array, got {list}"))
        .iter()
        .map(|v| str_of(v, key))
        .collect()
}

/// Opens a session with `body` and checks the created shape; returns the answer.
async fn open_session(s: &Server, body: Value) -> Value {
    let created = s.post_json(SESSIONS, body, 201).await;
    assert_created(&created);
    created
}

fn assert_created(v: &Value) {
    assert!(
        uuid::Uuid::try_parse(&str_of(v, "session_id")).is_ok(),
        "{v}"
    );
    assert!(
        uuid::Uuid::try_parse(&str_of(v, "character_id")).is_ok(),
        "{v}"
    );
    assert!(
        ["omni", "standard"].contains(&v["mode"].as_str().unwrap()),
        "{v}"
    );
    assert_eq!(v["streaming_mode"], "websocket");
    assert_eq!(v["avatar_enabled"], false);
    assert_eq!(v["idle_strategy"], "cached_video");
}

async fn session_of(s: &Server, character_id: &str) -> String {
    str_of(
        &open_session(s, json!({ "character_id": character_id })).await,
        "session_id",
    )
}

/// The character of a session opened without naming one.
async fn kiosk_character(s: &Server) -> String {
    str_of(&open_session(s, json!({})).await, "character_id")
}

async fn list_sessions(s: &Server) -> Value {
    s.get_json(SESSIONS, 200).await
}

fn message_path(session: &str) -> String {
    format!("{SESSIONS}/{session}/message")
}

/// Posts `text` to a session, expecting it queued; returns its turn number.
async fn say(s: &Server, session: &str, text: &str) -> u64 {
    let v = s
        .post_json(&message_path(session), json!({ "text": text }), 202)
        .await;
    assert_eq!(v["status"], "queued", "{v}");
    v["turn_seq"].as_u64().unwrap()
}

async fn history(s: &Server, character: &str) -> Vec<Value> {
    let page = s.history(character).await;
    page["messages"].as_array().unwrap().clone()
}

fn event_path(task: &str) -> String {
    format!("/api/v1/internal/tasks/{task}/events")
}

fn artifact_path(task: &str) -> String {
    format!("/api/v1/internal/tasks/{task}/artifacts")
}

async fn post_event(s: &Server, task: &str, body: Value, status: u16) -> Value {
    s.post_json(&event_path(task), body, status).await
}

/// Creates a task of `session` through its first event; returns the task id.
async fn start_task(s: &Server, session: &str) -> String {
    let task = new_uuid();
    let body = json!({ "session_id": session, "user_request": "find the opening hours" });
    post_event(s, &task, body, 200).await;
    task
}

/// Posts an event to a task; returns the task's progress after it.
async fn progress_after(s: &Server, task: &str, body: Value) -> Value {
    post_event(s, task, body, 200).await["task"]["progress"].clone()
}

/// A task's events for the given query string (`""` or `"?after_seq=..&limit=.."`).
async fn task_events(s: &Server, task: &str, query: &str) -> Vec<Value> {
    let v = s
        .get_json(&format!("/api/v1/tasks/{task}/events{query}"), 200)
        .await;
    v["events"].as_array().unwrap().clone()
}

/// The seqs of a task's events for the given query string.
async fn event_seqs(s: &Server, task: &str, query: &str) -> Vec<u64> {
    let events = task_events(s, task, query).await;
    events.iter().map(|e| e["seq"].as_u64().unwrap()).collect()
}

async fn session_tasks(s: &Server, session: &str, query: &str) -> Vec<String> {
    let v = s
        .get_json(&format!("{SESSIONS}/{session}/tasks{query}"), 200)
        .await;
    ids(&v["tasks"], "id")
}

async fn post_artifact(s: &Server, task: &str, body: Value, status: u16) -> Value {
    s.post_json(&artifact_path(task), body, status).await
}

// ---------------------------------------------------------------- sessions

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_accepts_no_body_empty_object_character_and_mode() {
    let s = Server::start().await;
    let default = s.default_character().await;
    let default_mode = s
        .get_json(&format!("/api/v1/characters/{default}"), 200)
        .await["mode"]
        .clone();
    let other = s.character("Other").await;

    for created in [
        expect(s.post(SESSIONS), 201).await,
        open_session(&s, json!({})).await,
    ] {
        assert_created(&created);
        assert_eq!(created["character_id"], default.as_str());
        assert_eq!(
            created["mode"], default_mode,
            "no mode: the character's mode"
        );
    }
    let created = open_session(&s, json!({ "character_id": other })).await;
    assert_eq!(created["character_id"], other.as_str());
    for (asked, got) in [
        ("standard", "standard"),
        ("omni", "omni"),
        ("voice_llm", "omni"),
    ] {
        let created = open_session(&s, json!({ "mode": asked })).await;
        assert_eq!(created["mode"], got, "mode {asked}");
        assert_eq!(created["character_id"], default.as_str());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_refuses_unknown_character_bad_mode_and_bad_json() {
    let s = Server::start().await;
    for character in [new_uuid(), "not-an-id".to_string()] {
        assert_error(
            &s.post_json(SESSIONS, json!({ "character_id": character }), 404)
                .await,
        );
    }
    for mode in ["chat", "OMNI"] {
        assert_error(&s.post_json(SESSIONS, json!({ "mode": mode }), 400).await);
    }
    assert_error(
        &expect(
            s.post(SESSIONS)
                .header("content-type", "application/json")
                .body("{\"mode\":"),
            400,
        )
        .await,
    );
    assert_eq!(
        list_sessions(&s).await,
        json!([]),
        "refused creates hold no place"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_character_id_means_the_kiosk_character() {
    let s = Server::start().await;
    let oldest = s.default_character().await;
    let newer = s.character("Newer").await;
    assert_eq!(
        kiosk_character(&s).await,
        oldest,
        "without a setting: the oldest character"
    );
    s.put_json(
        "/api/v1/settings",
        json!({ "kiosk": { "character_id": newer } }),
        200,
    )
    .await;
    assert_eq!(
        kiosk_character(&s).await,
        newer,
        "the kiosk.character_id setting"
    );
    let explicit = open_session(&s, json!({ "character_id": oldest })).await;
    assert_eq!(
        explicit["character_id"],
        oldest.as_str(),
        "an explicit character wins"
    );
    s.put_json(
        "/api/v1/settings",
        json!({ "kiosk": { "character_id": null } }),
        200,
    )
    .await;
    assert_eq!(
        kiosk_character(&s).await,
        oldest,
        "setting cleared: the oldest again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_cap_is_503_until_a_place_is_freed() {
    let s = Server::start_with(|c| c.sessions.max = 2).await;
    let first = str_of(&open_session(&s, json!({})).await, "session_id");
    open_session(&s, json!({})).await;
    assert_error(&s.post_json(SESSIONS, json!({}), 503).await);
    assert_eq!(list_sessions(&s).await.as_array().unwrap().len(), 2);

    expect(s.delete(&format!("{SESSIONS}/{first}")), 204).await;
    open_session(&s, json!({})).await;
    assert_error(&s.post_json(SESSIONS, json!({}), 503).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_stop_holding_places() {
    let s = Server::start_with(|c| {
        c.sessions.max = 1;
        c.sessions.idle_secs = 1;
    })
    .await;
    let old = str_of(&open_session(&s, json!({})).await, "session_id");
    assert_error(&s.post_json(SESSIONS, json!({}), 503).await);

    tokio::time::sleep(Duration::from_millis(1100)).await;
    let new = str_of(&open_session(&s, json!({})).await, "session_id");
    assert_eq!(
        ids(&list_sessions(&s).await, "id"),
        [new],
        "the idle session is closed"
    );
    expect(s.delete(&format!("{SESSIONS}/{old}")), 404).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_is_newest_first_and_delete_is_204_then_404() {
    let s = Server::start().await;
    let character = s.character("Listed").await;
    let mut created = Vec::new();
    for body in [
        json!({}),
        json!({ "character_id": character }),
        json!({ "mode": "standard" }),
    ] {
        created.push(open_session(&s, body).await);
    }

    let list = list_sessions(&s).await;
    let newest_first: Vec<String> = created
        .iter()
        .rev()
        .map(|c| str_of(c, "session_id"))
        .collect();
    assert_eq!(ids(&list, "id"), newest_first);
    for (item, made) in list.as_array().unwrap().iter().zip(created.iter().rev()) {
        assert_eq!(
            keys(item),
            ["character_id", "created_at", "id", "mode", "state"]
        );
        assert_eq!(item["character_id"], made["character_id"]);
        assert_eq!(item["mode"], made["mode"]);
        assert_eq!(item["state"], "idle");
        assert!(
            humantime::parse_rfc3339(item["created_at"].as_str().unwrap()).is_ok(),
            "{item}"
        );
    }

    let gone = &newest_first[1];
    let path = format!("{SESSIONS}/{gone}");
    assert_eq!(expect(s.delete(&path), 204).await, Value::Null);
    assert_error(&expect(s.delete(&path), 404).await);
    assert_eq!(
        ids(&list_sessions(&s).await, "id"),
        [newest_first[0].clone(), newest_first[2].clone()]
    );
    for unknown in [new_uuid(), "nope".to_string()] {
        assert_error(&expect(s.delete(&format!("{SESSIONS}/{unknown}")), 404).await);
    }
}

// ---------------------------------------------------------------- messages

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_are_queued_numbered_and_kept_in_history() {
    let s = Server::start().await;
    let character = s.default_character().await;
    let session = session_of(&s, &character).await;
    assert_eq!(say(&s, &session, "hello").await, 1);
    assert_eq!(say(&s, &session, "where is the exit?").await, 2);

    let path = message_path(&session);
    for body in [
        json!({ "text": "" }),
        json!({ "text": "  \n\t " }),
        json!({}),
        json!({ "text": 5 }),
        json!({ "text": "x".repeat(8001) }),
    ] {
        assert_error(&s.post_json(&path, body, 400).await);
    }
    for raw in ["{\"text\": \"unterminated", "", "not json"] {
        assert_error(
            &expect(
                s.post(&path)
                    .header("content-type", "application/json")
                    .body(raw),
                400,
            )
            .await,
        );
    }
    for unknown in [new_uuid(), "nope".to_string()] {
        assert_error(
            &s.post_json(&message_path(&unknown), json!({ "text": "hi" }), 404)
                .await,
        );
    }
    assert_eq!(
        say(&s, &session, "thanks").await,
        3,
        "refused messages take no turn"
    );

    // The kiosk's replies are stored too (asynchronously); only the user's side is checked here.
    let said: Vec<(String, String, u64, String)> = history(&s, &character)
        .await
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| {
            (
                str_of(m, "session_id"),
                str_of(m, "role"),
                m["turn_seq"].as_u64().unwrap(),
                str_of(m, "content"),
            )
        })
        .collect();
    let expected: Vec<(String, String, u64, String)> =
        [(1, "hello"), (2, "where is the exit?"), (3, "thanks")]
            .into_iter()
            .map(|(turn, text)| (session.clone(), "user".to_string(), turn, text.to_string()))
            .collect();
    assert_eq!(said, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_body_over_the_bound_is_413_and_not_stored() {
    let s = Server::start_with(|c| c.limits.json_bytes = 2000).await;
    let character = s.default_character().await;
    let session = session_of(&s, &character).await;

    let body = json!({ "text": "x".repeat(2989) }).to_string();
    assert_eq!(body.len(), 3000);
    let res = expect(
        s.post(&message_path(&session))
            .header("content-type", "application/json")
            .body(body),
        413,
    )
    .await;
    assert_error(&res);
    assert!(history(&s, &character).await.is_empty(), "nothing stored");
    assert_eq!(
        say(&s, &session, &"y".repeat(1500)).await,
        1,
        "a body under the bound is accepted; no turn was used"
    );
}

// ---------------------------------------------------------------- tasks

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_event_with_session_and_request_creates_the_task() {
    let s = Server::start().await;
    let character = s.default_character().await;
    let session = session_of(&s, &character).await;
    let task = new_uuid();

    let body = json!({ "session_id": session, "user_request": "find the opening hours", "message": "on it" });
    let posted = post_event(&s, &task, body, 200).await;
    assert_eq!(keys(&posted), ["event", "task"]);
    let (event, created) = (&posted["event"], &posted["task"]);
    assert_eq!(event["seq"], 1);
    assert_eq!(event["task_id"], task.as_str());
    assert_eq!(event["event_type"], "task.updated");
    assert_eq!(event["message"], "on it");
    assert_eq!(event["payload"], json!({}));
    assert_eq!(created["id"], task.as_str());
    assert_eq!(created["session_id"], session.as_str());
    assert_eq!(created["character_id"], character.as_str());
    assert_eq!(created["status"], "queued");
    assert_eq!(created["kind"], "research");
    assert_eq!(created["progress"], 0);
    assert_eq!(created["user_request"], "find the opening hours");
    assert_eq!(created["finished_at"], Value::Null);
    assert_eq!(
        &s.get_json(&format!("/api/v1/tasks/{task}"), 200).await,
        created
    );

    let event = post_event(
        &s,
        &task,
        json!({ "event_type": "task.step", "payload": { "k": 1 } }),
        200,
    )
    .await["event"]
        .clone();
    assert_eq!(
        (
            event["seq"].as_u64(),
            &event["event_type"],
            &event["payload"]
        ),
        (Some(2), &json!("task.step"), &json!({ "k": 1 }))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_events_are_refused() {
    let s = Server::start().await;
    let session = session_of(&s, &s.default_character().await).await;
    let unknown = new_uuid();
    for body in [
        json!({}),
        json!({ "session_id": session }),
        json!({ "user_request": "x" }),
    ] {
        assert_error(&post_event(&s, &unknown, body, 404).await);
    }
    let for_unknown_session = json!({ "session_id": new_uuid(), "user_request": "x" });
    assert_error(&post_event(&s, &unknown, for_unknown_session, 404).await);
    expect(s.get(&format!("/api/v1/tasks/{unknown}")), 404).await; // no task was made
    assert_error(
        &post_event(
            &s,
            "not-a-uuid",
            json!({ "session_id": session, "user_request": "x" }),
            400,
        )
        .await,
    );

    let task = start_task(&s, &session).await;
    for body in [
        json!({ "status": "done" }),
        json!({ "progress": 101 }),
        json!({ "progress": -1 }),
        json!({ "payload": [1] }),
    ] {
        assert_error(&post_event(&s, &task, body, 400).await);
    }
    assert_error(
        &expect(
            s.post(&event_path(&task))
                .header("content-type", "application/json")
                .body("{"),
            400,
        )
        .await,
    );
    assert_eq!(
        event_seqs(&s, &task, "").await,
        [1],
        "refused events are not recorded"
    );
    for unknown in [new_uuid(), "nope".to_string()] {
        assert_error(&expect(s.get(&format!("/api/v1/tasks/{unknown}")), 404).await);
        assert_error(&expect(s.get(&format!("/api/v1/tasks/{unknown}/events")), 404).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_never_decreases() {
    let s = Server::start().await;
    let session = session_of(&s, &s.default_character().await).await;
    let task = start_task(&s, &session).await;
    assert_eq!(
        progress_after(&s, &task, json!({ "status": "running", "progress": 50 })).await,
        50
    );
    assert_eq!(
        progress_after(&s, &task, json!({ "progress": 20 })).await,
        50
    );
    assert_eq!(
        progress_after(&s, &task, json!({ "message": "still going" })).await,
        50
    );
    assert_eq!(
        progress_after(&s, &task, json!({ "progress": 70 })).await,
        70
    );
    assert_eq!(
        s.get_json(&format!("/api/v1/tasks/{task}"), 200).await["progress"],
        70
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn final_statuses_are_final() {
    let s = Server::start().await;
    let session = session_of(&s, &s.default_character().await).await;
    for status in ["completed", "failed", "cancelled"] {
        let task = start_task(&s, &session).await;
        let done = post_event(
            &s,
            &task,
            json!({ "status": status, "message": "over" }),
            200,
        )
        .await["task"]
            .clone();
        assert_eq!(done["status"], status);
        let finished = str_of(&done, "finished_at");
        assert!(humantime::parse_rfc3339(&finished).is_ok(), "{done}");

        for body in [
            json!({ "status": "running" }),
            json!({ "message": "more" }),
            json!({ "status": status }),
        ] {
            assert_error(&post_event(&s, &task, body, 409).await);
        }
        assert_error(&post_artifact(&s, &task, json!({ "content": "# late" }), 409).await);
        let after = s.get_json(&format!("/api/v1/tasks/{task}"), 200).await;
        assert_eq!(
            (&after["status"], &after["finished_at"]),
            (&json!(status), &json!(finished))
        );
        assert_eq!(
            event_seqs(&s, &task, "").await,
            [1, 2],
            "{status}: nothing appended after the end"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_ascending_with_after_seq_and_limit() {
    let s = Server::start().await;
    let session = session_of(&s, &s.default_character().await).await;
    let task = start_task(&s, &session).await;
    for n in 2..=5 {
        assert_eq!(
            post_event(&s, &task, json!({ "message": format!("step {n}") }), 200).await["event"]["seq"],
            n
        );
    }

    for (query, want) in [
        ("", vec![1, 2, 3, 4, 5]),
        ("?after_seq=0", vec![1, 2, 3, 4, 5]),
        ("?after_seq=2", vec![3, 4, 5]),
        ("?after_seq=5", vec![]),
        ("?limit=2", vec![1, 2]),
        ("?after_seq=1&limit=2", vec![2, 3]),
        ("?limit=0", vec![1]),
        ("?limit=100000", vec![1, 2, 3, 4, 5]),
    ] {
        assert_eq!(event_seqs(&s, &task, query).await, want, "{query}");
    }
    for query in ["?after_seq=x", "?limit=-1"] {
        assert_error(&expect(s.get(&format!("/api/v1/tasks/{task}/events{query}")), 400).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_limit_is_clamped_to_500() {
    let s = Server::start().await;
    let session = session_of(&s, &s.default_character().await).await;
    let task = start_task(&s, &session).await;
    futures_util::stream::iter(0..500)
        .for_each_concurrent(8, |_| async {
            post_event(&s, &task, json!({}), 200).await;
        })
        .await;
    assert_eq!(event_seqs(&s, &task, "").await.len(), 200, "default limit");
    let all = event_seqs(&s, &task, "?limit=1000").await;
    assert_eq!(all, (1..=500).collect::<Vec<u64>>());
    assert_eq!(
        event_seqs(&s, &task, "?after_seq=500&limit=1000").await,
        [501]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_tasks_are_newest_first_and_outlive_the_session() {
    let s = Server::start().await;
    let character = s.default_character().await;
    let session = session_of(&s, &character).await;
    let other = session_of(&s, &character).await;
    let mut tasks = Vec::new();
    for _ in 0..3 {
        tasks.push(start_task(&s, &session).await);
    }
    let other_task = start_task(&s, &other).await;
    tasks.reverse();

    assert_eq!(session_tasks(&s, &session, "").await, tasks);
    assert_eq!(session_tasks(&s, &session, "?limit=2").await, tasks[..2]);
    assert_eq!(
        session_tasks(&s, &session, "?limit=0").await,
        tasks[..1],
        "limit clamped to 1"
    );
    assert_eq!(session_tasks(&s, &other, "").await, [other_task]);
    let listed = s
        .get_json(&format!("{SESSIONS}/{session}/tasks"), 200)
        .await;
    assert_eq!(
        listed["tasks"][0],
        s.get_json(&format!("/api/v1/tasks/{}", tasks[0]), 200)
            .await
    );

    expect(s.delete(&format!("{SESSIONS}/{session}")), 204).await;
    assert_eq!(
        session_tasks(&s, &session, "").await,
        tasks,
        "still listed after the session ended"
    );
    assert_eq!(
        post_event(&s, &tasks[0], json!({ "progress": 10 }), 200).await["task"]["progress"],
        10
    );
}

// ---------------------------------------------------------------- artifacts

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifacts_are_stored_served_and_announced() {
    let s = Server::start().await;
    let session = session_of(&s, &s.default_character().await).await;
    let task = start_task(&s, &session).await;

    let cases = [
        (
            "markdown",
            "# Hours\n\nOpen 9 to 5.",
            "text/markdown",
            false,
        ),
        (
            "html",
            "<h1>Hours</h1><script>alert(1)</script>",
            "text/html",
            true,
        ),
        ("text", "plain words", "text/plain", false),
        ("json", "{\"open\": \"09:00\"}", "application/json", false),
    ];
    for (kind, content, mime, sandboxed) in cases {
        let body = json!({ "type": kind, "title": format!("A {kind}"), "content": content, "metadata": { "src": "web" } });
        let a = post_artifact(&s, &task, body, 201).await;
        assert_eq!(
            keys(&a),
            [
                "created_at",
                "id",
                "metadata",
                "mime_type",
                "task_id",
                "title",
                "type"
            ]
        );
        assert_eq!(
            (&a["task_id"], &a["type"], &a["title"]),
            (&json!(task), &json!(kind), &json!(format!("A {kind}")))
        );
        assert_eq!(a["metadata"], json!({ "src": "web" }));
        let mime_type = str_of(&a, "mime_type");
        assert!(mime_type.starts_with(mime), "{mime_type}");

        let artifact = str_of(&a, "id");
        let res = s
            .get(&format!("/api/v1/tasks/{task}/artifacts/{artifact}"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let header = |name: &str| {
            res.headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_string())
        };
        assert_eq!(header("content-type"), Some(mime_type), "{kind}");
        assert_eq!(header("x-content-type-options").as_deref(), Some("nosniff"));
        assert_eq!(
            header("content-security-policy").as_deref(),
            sandboxed.then_some("sandbox"),
            "{kind}"
        );
        assert_eq!(res.text().await.unwrap(), content);

        let last = task_events(&s, &task, "").await.pop().unwrap();
        assert_eq!(last["event_type"], "artifact.created");
        assert_eq!(last["payload"]["artifact_id"], artifact.as_str());
    }
    let default_kind = post_artifact(&s, &task, json!({ "content": "# no type" }), 201).await;
    assert_eq!(default_kind["type"], "markdown");
    assert_eq!(event_seqs(&s, &task, "").await.len(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_artifacts_are_refused() {
    let s = Server::start().await;
    let session = session_of(&s, &s.default_character().await).await;
    let task = start_task(&s, &session).await;
    for body in [
        json!({ "content": "" }),
        json!({ "content": " \n " }),
        json!({ "title": "no content" }),
        json!({ "type": "pdf", "content": "x" }),
        json!({ "type": "json", "content": "{not json" }),
        json!({ "content": "x", "metadata": "not an object" }),
    ] {
        assert_error(&post_artifact(&s, &task, body, 400).await);
    }
    assert_error(&post_artifact(&s, &new_uuid(), json!({ "content": "x" }), 404).await);
    assert_eq!(
        event_seqs(&s, &task, "").await,
        [1],
        "refused artifacts announce nothing"
    );

    let a = post_artifact(&s, &task, json!({ "content": "kept" }), 201).await;
    let artifact = str_of(&a, "id");
    let other_task = start_task(&s, &session).await;
    for path in [
        format!("/api/v1/tasks/{task}/artifacts/{}", new_uuid()),
        format!("/api/v1/tasks/{task}/artifacts/nope"),
        format!("/api/v1/tasks/{other_task}/artifacts/{artifact}"),
        format!("/api/v1/tasks/{}/artifacts/{artifact}", new_uuid()),
    ] {
        assert_error(&expect(s.get(&path), 404).await);
    }
}
