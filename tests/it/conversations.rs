//! The console's admin routes over knowledge and history: "what would it answer", the history
//! of one visit, the questions the knowledge did not answer, and the CSV/JSON export.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Server, header, sign_in};

const HOURS: &str =
    "# Opening hours\n\nThe museum opens at nine o'clock every day and closes at six.\n";

/// Uploads the hours file to `cid` and waits until it is indexed.
async fn hours_ready(s: &Server, cid: &str) {
    s.knowledge_ready(cid, "hours.md", HOURS).await;
}

/// The history of `cid` (200 messages at most), `query` appended to the request's.
pub(crate) async fn history(s: &Server, cid: &str, query: &str) -> Vec<Value> {
    let page = s
        .get_json(
            &format!("/api/v1/characters/{cid}/conversations/messages?limit=200{query}"),
            200,
        )
        .await;
    page["messages"].as_array().unwrap().clone()
}

/// Asks `text` in session `sid` and waits for the reply to be stored.
pub(crate) async fn chat(s: &Server, cid: &str, sid: &str, text: &str) {
    let before = history(s, cid, "").await.len();
    s.post_json(
        &format!("/api/v1/sessions/{sid}/message"),
        json!({ "text": text }),
        202,
    )
    .await;
    let start = Instant::now();
    while history(s, cid, "").await.len() < before + 2 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no reply to {text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn session(s: &Server, cid: &str) -> String {
    let v = s
        .post_json("/api/v1/sessions", json!({ "character_id": cid }), 201)
        .await;
    v["session_id"].as_str().unwrap().to_string()
}

/// A CSV document as rows of fields (RFC 4180 quoting).
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = vec![];
    let mut row = vec![];
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\r') => {}
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    rows
}

/// The offline engine keeps what it derives from the knowledge between turns; a change of
/// knowledge must still reach the very next answer.
#[tokio::test]
async fn the_offline_answer_follows_each_change_of_knowledge() {
    let s = Server::start().await;
    let cid = s.default_character().await;
    let ask = format!("/api/v1/characters/{cid}/knowledge/ask");
    let question = json!({ "question": "When does the museum open?" });
    let before = s.post_json(&ask, question.clone(), 200).await;
    assert_eq!(before["matched"], false, "{before}");
    hours_ready(&s, &cid).await;
    let taught = s.post_json(&ask, question.clone(), 200).await;
    assert_eq!(taught["matched"], true, "{taught}");
    assert!(
        taught["answer"].as_str().unwrap().contains("nine o'clock"),
        "{taught}"
    );
    let k = s
        .get_json(&format!("/api/v1/characters/{cid}/knowledge"), 200)
        .await;
    let source = k["sources"][0]["id"].as_str().unwrap();
    let res = s
        .delete(&format!("/api/v1/characters/{cid}/knowledge/{source}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    let forgotten = s.post_json(&ask, question, 200).await;
    assert_eq!(forgotten["matched"], false, "{forgotten}");
}

#[tokio::test]
async fn the_ask_box_shows_passages_and_the_answer_and_stores_nothing() {
    let s = Server::start().await;
    let cid = s.default_character().await;
    hours_ready(&s, &cid).await;
    let ask = format!("/api/v1/characters/{cid}/knowledge/ask");
    let a = s
        .post_json(
            &ask,
            json!({ "question": "When does the museum open?" }),
            200,
        )
        .await;
    assert_eq!(a["passages"][0]["filename"], "hours.md", "{a}");
    assert!(a["passages"][0]["score"].as_f64().unwrap() > 0.0, "{a}");
    assert!(
        a["answer"].as_str().unwrap().contains("nine o'clock"),
        "{a}"
    );
    assert_eq!(a["matched"], true);
    assert_eq!(a["provider"], "local");
    let none = s
        .post_json(&ask, json!({ "question": "Is there a bicycle rack?" }), 200)
        .await;
    assert_eq!(none["passages"], json!([]));
    assert_eq!(none["matched"], false);
    assert!(
        none["answer"].as_str().unwrap().contains("I don't know"),
        "{none}"
    );
    // Nothing reached the history, so nothing is listed as unmatched either.
    assert!(history(&s, &cid, "").await.is_empty());
    let u = s
        .get_json(
            &format!("/api/v1/characters/{cid}/conversations/unmatched"),
            200,
        )
        .await;
    assert_eq!(u["questions"], json!([]));
    s.post_json(&ask, json!({ "question": "  " }), 400).await;
    s.post_json(&ask, json!({ "q": "open?" }), 400).await;
    s.post_json(
        "/api/v1/characters/00000000-0000-4000-8000-000000000000/knowledge/ask",
        json!({ "question": "open?" }),
        404,
    )
    .await;
}

#[tokio::test]
async fn history_per_visit_unmatched_questions_and_exports() {
    // One visit's question is listed (the rule of three visits: privacy.rs).
    let s = Server::start_with(|c| c.history.questions_min_visits = 1).await;
    let cid = s.default_character().await;
    hours_ready(&s, &cid).await;
    let a = session(&s, &cid).await;
    let b = session(&s, &cid).await;
    chat(&s, &cid, &a, "When does the museum open?").await;
    chat(&s, &cid, &a, "Is there a bicycle rack?").await;
    chat(&s, &cid, &b, "is there a BICYCLE rack").await;
    chat(&s, &cid, &b, "Say \"=1+2\", please").await;

    // One visit's messages only, paged.
    let visit = history(&s, &cid, &format!("&session_id={a}")).await;
    assert_eq!(visit.len(), 4);
    assert!(visit.iter().all(|m| m["session_id"] == a.as_str()));
    let page = s
        .get_json(
            &format!("/api/v1/characters/{cid}/conversations/messages?limit=1&session_id={b}"),
            200,
        )
        .await;
    assert_eq!(page["messages"].as_array().unwrap().len(), 1);
    assert_eq!(page["has_more"], true);
    let older = s
        .get_json(
            &format!(
                "/api/v1/characters/{cid}/conversations/messages?limit=200&session_id={b}&before={}",
                page["next_cursor"].as_str().unwrap()
            ),
            200,
        )
        .await;
    assert_eq!(older["messages"].as_array().unwrap().len(), 3);
    assert!(visit[1]["unmatched"].is_null(), "the answered reply");
    assert_eq!(visit[3]["unmatched"], true);

    // Unmatched questions: newest first, repeats counted under the latest wording.
    let u = s
        .get_json(
            &format!("/api/v1/characters/{cid}/conversations/unmatched"),
            200,
        )
        .await;
    let q = u["questions"].as_array().unwrap();
    assert_eq!(q.len(), 2, "{u}");
    assert_eq!(q[0]["question"], "Say \"=1+2\", please");
    assert_eq!(q[0]["count"], 1);
    assert_eq!(q[1]["question"], "is there a BICYCLE rack");
    assert_eq!(q[1]["count"], 2);
    assert_eq!(q[1]["session_id"], b.as_str());

    // The CSV export: a download, every message oldest first, quoted, formulas defused.
    let res = s
        .get(&format!("/api/v1/characters/{cid}/conversations/export"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "text/csv; charset=utf-8");
    // Named after the character and the day, as staff find it among their downloads.
    let name = s.get_json(&format!("/api/v1/characters/{cid}"), 200).await["name"]
        .as_str()
        .unwrap()
        .to_lowercase()
        .replace(' ', "-");
    assert_eq!(
        res.headers()["content-disposition"],
        format!(
            "attachment; filename=\"conversations-{name}-{}.csv\"",
            &docent::store::now()[..10]
        )
        .as_str()
    );
    let rows = parse_csv(&res.text().await.unwrap());
    assert_eq!(
        rows[0],
        [
            "timestamp",
            "session_id",
            "turn_seq",
            "role",
            "content",
            "unmatched",
            "staff"
        ]
    );
    assert_eq!(rows.len(), 9);
    assert_eq!(rows[1][1], a);
    assert_eq!(rows[1][3], "user");
    assert_eq!(rows[1][4], "When does the museum open?");
    assert_eq!(rows[2][5], "false");
    assert_eq!(rows[7][4], "Say \"=1+2\", please");
    assert_eq!(rows[8][5], "true");

    // The JSON export of one visit.
    let res = s
        .get(&format!(
            "/api/v1/characters/{cid}/conversations/export?format=json&session_id={b}"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(header(&res, "content-disposition").ends_with(".json\""));
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["character_id"], cid.as_str());
    let msgs = v["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 4);
    assert!(msgs.iter().all(|m| m["session_id"] == b.as_str()));
    assert_eq!(msgs[0]["content"], "is there a BICYCLE rack");
    let bad = s
        .get(&format!(
            "/api/v1/characters/{cid}/conversations/export?format=xml"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
}

#[tokio::test]
async fn the_new_routes_need_an_administrator() {
    let s = Server::start_with(|c| c.access.admin_password = Some("conversations-password".into()))
        .await;
    let cid = s.default_character().await;
    let base = format!("/api/v1/characters/{cid}");
    for req in [
        s.post(&format!("{base}/knowledge/ask"))
            .json(&json!({ "question": "open?" })),
        s.get(&format!("{base}/conversations/export")),
        s.get(&format!("{base}/conversations/export?format=json")),
        s.get(&format!("{base}/conversations/unmatched")),
        s.get(&format!("{base}/conversations/messages?session_id=x")),
    ] {
        let res = req.send().await.unwrap();
        assert_eq!(res.status(), 401);
        let v: Value = res.json().await.unwrap();
        assert!(v["error"].is_string());
    }
    // The same with the administrator's cookie.
    let cookie = sign_in(&s, "conversations-password").await;
    let res = s
        .get_as(&format!("{base}/conversations/export"), &cookie)
        .await;
    assert_eq!(res.status(), 200);
    let res = s
        .post(&format!("{base}/knowledge/ask"))
        .header("cookie", &cookie)
        .header("origin", s.url(""))
        .json(&json!({ "question": "open?" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
}
