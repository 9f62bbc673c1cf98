//! Questions on the screen (issue 31, point 3): staff mark FAQ questions of a character's
//! knowledge for the kiosk's screen and order them on the console's Knowledge page (headless
//! Chromium), within the bounds; a question chosen there is asked as a spoken one would be
//! (history, answer from the knowledge, statistics) and counted as asked by touch.

use std::sync::Arc;
use std::time::{Duration, Instant};

use docent::config::Config;
use docent::engine::Engine;
use docent::engine::sessions::NewSession;
use docent::store::records::Owner;
use serde_json::{Value, json};

use crate::support::browser::Browser;
use crate::support::{Server, assert_error, sign_in};

const PASSWORD: &str = "screen-questions-password";

const FAQ: &str = "Visiting\n\n\
    Q: Can I bring my dog?\nA: Only guide dogs are allowed inside.\n\n\
    Q: Is there free wifi?\nA: Yes, the network is called Harbour Guest.\n\n\
    Q: Where is the cloakroom?\nA: The cloakroom is left of the main entrance.\n\n\
    The whale skeleton hangs in the great hall. It is twenty four metres long.\n";

/// The three FAQ questions of `FAQ`, in its order.
const QUESTIONS: [&str; 3] = [
    "Can I bring my dog?",
    "Is there free wifi?",
    "Where is the cloakroom?",
];

/// A password-guarded kiosk whose `http` client is its administrator, with a character that
/// knows `FAQ`; returns the character's id too.
async fn kiosk() -> (Server, String) {
    let mut s = Server::start_with(|c| c.access.admin_password = Some(PASSWORD.into())).await;
    let cookie = sign_in(&s, PASSWORD).await;
    s.as_admin(&cookie);
    let cid = s.character("Harbour Guide").await;
    s.knowledge_ready(&cid, "faq.txt", FAQ).await;
    (s, cid)
}

fn path(cid: &str) -> String {
    format!("/api/v1/characters/{cid}/screen-questions")
}

async fn put(s: &Server, cid: &str, questions: &[&str], status: u16) -> Value {
    let res = s
        .put(&path(cid))
        .json(&json!({ "questions": questions }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), status, "PUT {questions:?}");
    res.json().await.unwrap()
}

fn texts(choice: &Value) -> Vec<&str> {
    choice["on_screen"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["text"].as_str().unwrap())
        .collect()
}

/// The questions the page shows on the screen, as drawn (number and text).
const SHOWN: &str = "[...document.querySelectorAll('#on-screen li[data-question]')].map((li) => li.querySelector('label').textContent.trim())";
/// The other FAQ questions the page offers.
const OFFERED: &str =
    "[...document.querySelectorAll('#faq li[data-question]')].map((li) => li.dataset.question)";

fn click_box(text: &str) -> String {
    format!(
        "[...document.querySelectorAll('li[data-question]')].find((li) => li.dataset.question === {}).querySelector('input').click()",
        json!(text)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staff_mark_and_order_questions_on_the_screen_and_they_survive_a_reload() {
    let (s, cid) = kiosk().await;
    let choice = s.get_json(&path(&cid), 200).await;
    assert_eq!(choice, json!({"on_screen": [], "faq": QUESTIONS}));

    let mut b = Browser::launch().await;
    b.sign_in_page(&s.base, PASSWORD).await;
    b.goto(&s.url(&format!("/console/knowledge?character={cid}")))
        .await;
    b.wait_for(OFFERED, json!(QUESTIONS)).await;
    assert_eq!(
        b.eval(SHOWN).await,
        json!([]),
        "nothing on the screen at first"
    );

    // Mark the cloakroom, then the dog: they go on the screen in that order.
    b.eval(&click_box(QUESTIONS[2])).await;
    b.wait_for(SHOWN, json!(["1. Where is the cloakroom?"]))
        .await;
    b.eval(&click_box(QUESTIONS[0])).await;
    b.wait_for(
        SHOWN,
        json!(["1. Where is the cloakroom?", "2. Can I bring my dog?"]),
    )
    .await;
    b.wait_for(OFFERED, json!([QUESTIONS[1]])).await;
    // The dog moves up; the first's "up" and the last's "down" cannot be pressed.
    b.click("button[aria-label=\"Move up: Can I bring my dog?\"]")
        .await;
    b.wait_for(
        SHOWN,
        json!(["1. Can I bring my dog?", "2. Where is the cloakroom?"]),
    )
    .await;
    b.wait_text("screen-result", "Saved.").await;
    let disabled =
        |label: &str| format!("document.querySelector('button[aria-label=\"{label}\"]').disabled");
    assert_eq!(
        b.eval(&disabled("Move up: Can I bring my dog?")).await,
        json!(true)
    );
    assert_eq!(
        b.eval(&disabled("Move down: Where is the cloakroom?"))
            .await,
        json!(true)
    );
    let saved = s.get_json(&path(&cid), 200).await;
    assert_eq!(texts(&saved), [QUESTIONS[0], QUESTIONS[2]]);
    let ids: Vec<Value> = saved["on_screen"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["id"].clone())
        .collect();

    // A reload shows what was saved.
    b.goto(&s.url(&format!("/console/knowledge?character={cid}")))
        .await;
    b.wait_for(
        SHOWN,
        json!(["1. Can I bring my dog?", "2. Where is the cloakroom?"]),
    )
    .await;
    b.wait_for(OFFERED, json!([QUESTIONS[1]])).await;
    assert_eq!(
        b.eval("[...document.querySelectorAll('#on-screen input')].every((i) => i.checked)")
            .await,
        json!(true)
    );

    // Unmarking one takes it off; the one left keeps its id (the kiosk's choice still names it).
    b.eval(&click_box(QUESTIONS[0])).await;
    b.wait_for(SHOWN, json!(["1. Where is the cloakroom?"]))
        .await;
    let saved = s.get_json(&path(&cid), 200).await;
    assert_eq!(texts(&saved), [QUESTIONS[2]]);
    assert_eq!(saved["on_screen"][0]["id"], ids[1]);
    assert!(b.errors.is_empty(), "{:?}", b.errors);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_screen_takes_only_the_knowledge_s_questions_within_bounds() {
    let (s, cid) = kiosk().await;
    let cases: [(&[&str], &str); 3] = [
        (&["Is there a staff canteen?"], "not an FAQ question"),
        (&[QUESTIONS[0], QUESTIONS[0]], "twice"),
        (&["x"; 31], "at most 30"),
    ];
    for (questions, why) in cases {
        let body = put(&s, &cid, questions, 400).await;
        assert_error(&body);
        assert!(body["error"].as_str().unwrap().contains(why), "{body}");
    }
    // A question longer than 120 characters is refused, even from the knowledge.
    let long = format!("Q: {}?\nA: Yes.\n", "Is it ".repeat(25));
    s.knowledge_ready(&cid, "long.txt", &long).await;
    let long_q = long[3..long.find('\n').unwrap()].to_string();
    assert!(long_q.chars().count() > 120);
    let body = put(&s, &cid, &[&long_q], 400).await;
    assert!(
        body["error"].as_str().unwrap().contains("at most 120"),
        "{body}"
    );
    assert_eq!(
        texts(&s.get_json(&path(&cid), 200).await),
        Vec::<&str>::new()
    );

    // Without the administrator: 401, and nothing changes.
    let res = reqwest::Client::new()
        .put(s.url(&path(&cid)))
        .json(&json!({"questions": [QUESTIONS[0]]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    let res = reqwest::get(s.url(&path(&cid))).await.unwrap();
    assert_eq!(res.status(), 401);
    assert_eq!(
        texts(&s.get_json(&path(&cid), 200).await),
        Vec::<&str>::new()
    );
}

/// Waits until `character` has `n` messages in its history.
async fn history(engine: &Engine, character: &str, n: usize) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let page = engine.history(character, Some(50), None, None).unwrap();
        let messages = serde_json::to_value(&page.messages).unwrap();
        let messages = messages.as_array().unwrap().clone();
        if messages.len() >= n {
            return messages;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{} of {n} messages: {messages:?}",
            messages.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_chosen_on_the_screen_is_answered_stored_and_counted_as_by_touch() {
    let (s, cid) = kiosk().await;
    let choice = put(&s, &cid, &[QUESTIONS[1], QUESTIONS[0]], 200).await;
    assert_eq!(texts(&choice), [QUESTIONS[1], QUESTIONS[0]]);
    let dog = choice["on_screen"][1]["id"].as_str().unwrap().to_string();
    let dir = s.stop().await;

    // The kiosk's side, as the device layer will call it: the engine on the same data.
    let engine: Arc<Engine> = Engine::open(Config {
        data_dir: dir.path().to_path_buf(),
        ..Config::default()
    })
    .unwrap();
    let shown = engine
        .on_screen_questions(&docent::engine::CharacterId::parse(&cid).unwrap())
        .unwrap();
    let shown: Vec<&str> = shown.iter().map(|q| q.text.as_str()).collect();
    assert_eq!(shown, [QUESTIONS[1], QUESTIONS[0]]);
    let visit = engine
        .create_session(
            NewSession {
                mode: None,
                character_id: Some(cid.clone()),
            },
            Owner::Kiosk,
        )
        .unwrap();
    let sid = docent::engine::SessionId::parse(&visit.session_id).unwrap();
    let live = engine.live(&sid).unwrap();
    let err = engine.ask_on_screen(&live, "not-a-question").unwrap_err();
    assert!(err.to_string().contains("no such question"), "{err}");

    let seq = engine.ask_on_screen(&live, &dog).unwrap();
    let messages = history(&engine, &cid, 2).await;
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[0]["content"], QUESTIONS[0]);
    assert_eq!(messages[0]["turn_seq"], seq);
    assert_eq!(messages[0]["touch"], true, "{messages:?}");
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(
        messages[1]["content"], "Only guide dogs are allowed inside.",
        "answered from the FAQ as a spoken question would be"
    );
    assert_eq!(messages[1]["turn_seq"], seq);

    // The same question said, not chosen: a question, not by touch.
    let said = engine
        .post_message(&sid, QUESTIONS[0], &Owner::Kiosk)
        .unwrap();
    assert!(said > seq);
    let messages = history(&engine, &cid, 4).await;
    assert_eq!(messages[2].get("touch"), None, "{messages:?}");

    let stats = serde_json::to_value(
        engine
            .statistics(&docent::engine::CharacterId::parse(&cid).unwrap())
            .unwrap(),
    )
    .unwrap();
    let today = &docent::store::now()[..10];
    assert_eq!(
        stats["days"],
        json!([{"day": today, "visits": 1, "questions": 2, "answered": 2, "unanswered": 0,
            "asked_again": 1, "by_touch": 1, "by_language": {"en": 2}}]),
        "{stats}"
    );
}
