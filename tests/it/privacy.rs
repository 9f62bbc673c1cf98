//! Visitors' privacy (issue 36, docs/privacy.md) through a real server: transcripts go on time
//! without any write (the retention's clock moved by the test hook), a visit is forgotten at
//! once, short visits keep no transcript, and every time the counts stay in the statistics.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::conversations::{self, chat};
use crate::support::Server;

const DAY: u64 = 86_400;

/// The history of `cid`, whole.
async fn history(s: &Server, cid: &str) -> Vec<Value> {
    conversations::history(s, cid, "").await
}

/// Waits until the history of `cid` holds `n` messages (the sweep runs in the background).
async fn history_becomes(s: &Server, cid: &str, n: usize) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let h = history(s, cid).await;
        if h.len() == n {
            return h;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the history kept {} messages, not {n}: {h:?}",
            h.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The statistics' total of `field` over every day.
async fn total(s: &Server, cid: &str, field: &str) -> u64 {
    let stats = s
        .get_json(&format!("/api/v1/characters/{cid}/statistics"), 200)
        .await;
    stats["days"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d[field].as_u64().unwrap())
        .sum()
}

async fn advance(s: &Server, secs: u64) {
    s.post_json(
        "/api/v1/internal/debug/clock",
        json!({ "advance_secs": secs }),
        202,
    )
    .await;
}

#[tokio::test]
async fn a_visit_31_days_old_is_gone_without_any_write_and_still_counted() {
    let s = Server::start_with(|c| c.test.hooks = true).await;
    let cid = s.character("Ada").await;
    let sid = s.session(&cid).await;
    chat(&s, &cid, &sid, "Where is the cafe?").await;
    chat(&s, &cid, &sid, "Is there a cloakroom?").await;
    assert_eq!(total(&s, &cid, "questions").await, 2);

    advance(&s, 29 * DAY).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(history(&s, &cid).await.len(), 4, "29 days: still kept");

    // Two more days, and nobody writes: the sweep alone removes the visit.
    advance(&s, 2 * DAY).await;
    history_becomes(&s, &cid, 0).await;
    assert_eq!(total(&s, &cid, "questions").await, 2, "the counts stay");
    assert_eq!(total(&s, &cid, "visits").await, 1);
    assert_eq!(total(&s, &cid, "unanswered").await, 2);
    let stats = s
        .get_json(&format!("/api/v1/characters/{cid}/statistics"), 200)
        .await;
    assert!(
        !stats.to_string().contains("cafe"),
        "the kept counts carry no text: {stats}"
    );
}

#[tokio::test]
async fn a_forgotten_visit_leaves_history_unanswered_list_and_exports_but_not_the_counts() {
    let s = Server::start().await;
    let cid = s.character("Ada").await;
    let forget = s.session(&cid).await;
    let keep = s.session(&cid).await;
    chat(
        &s,
        &cid,
        &forget,
        "I came with Jane, where are the toilets?",
    )
    .await;
    chat(&s, &cid, &keep, "Where are the toilets?").await;
    assert_eq!(history(&s, &cid).await.len(), 4);

    let res = s
        .delete(&format!(
            "/api/v1/characters/{cid}/conversations/visits/{forget}"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.json::<Value>().await.unwrap()["deleted"], 2);

    let left = history(&s, &cid).await;
    assert_eq!(left.len(), 2);
    assert!(left.iter().all(|m| m["session_id"] == keep.as_str()));
    let unmatched = s
        .get_json(
            &format!("/api/v1/characters/{cid}/conversations/unmatched"),
            200,
        )
        .await;
    assert!(!unmatched.to_string().contains("Jane"), "{unmatched}");
    assert!(!unmatched.to_string().contains(&forget), "{unmatched}");
    for format in ["csv", "json"] {
        let export = s
            .get(&format!(
                "/api/v1/characters/{cid}/conversations/export?format={format}"
            ))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(export.contains(&keep), "{export}");
        assert!(
            !export.contains("Jane") && !export.contains(&forget),
            "{export}"
        );
    }
    assert_eq!(total(&s, &cid, "questions").await, 2, "both still counted");
    assert_eq!(total(&s, &cid, "visits").await, 2);

    // The visit was open: it ended, so nothing more is written under it.
    let res = s
        .post(&format!("/api/v1/sessions/{forget}/message"))
        .json(&json!({ "text": "hello" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    let again = s
        .delete(&format!(
            "/api/v1/characters/{cid}/conversations/visits/{forget}"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 404, "nothing is left of it");
}

#[tokio::test]
async fn a_visit_shorter_than_the_setting_keeps_no_transcript_once_it_ends() {
    let s = Server::start_with(|c| c.history.min_visit_secs = 3600).await;
    let cid = s.character("Ada").await;
    let sid = s.session(&cid).await;
    chat(&s, &cid, &sid, "What is this painting?").await;
    assert_eq!(
        history(&s, &cid).await.len(),
        2,
        "kept while the visit lasts"
    );
    let res = s
        .delete(&format!("/api/v1/sessions/{sid}"))
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{}", res.status());
    history_becomes(&s, &cid, 0).await;
    assert_eq!(total(&s, &cid, "questions").await, 1);
}

#[tokio::test]
async fn with_no_days_of_retention_only_the_statistics_outlive_a_visit() {
    let s = Server::start_with(|c| {
        c.history.max_days = docent::config::RetentionDays::try_from(0).unwrap();
    })
    .await;
    let cid = s.character("Ada").await;
    let sid = s.session(&cid).await;
    chat(&s, &cid, &sid, "Who painted this?").await;
    chat(&s, &cid, &sid, "And when?").await;
    assert_eq!(history(&s, &cid).await.len(), 4);
    s.delete(&format!("/api/v1/sessions/{sid}"))
        .send()
        .await
        .unwrap();
    history_becomes(&s, &cid, 0).await;
    assert_eq!(total(&s, &cid, "questions").await, 2);
    assert_eq!(total(&s, &cid, "visits").await, 1);
}

#[tokio::test]
async fn the_console_forgets_a_visit_after_asking() {
    const PASSWORD: &str = "privacy-test-password";
    let s = Server::start_with(|c| c.access.admin_password = Some(PASSWORD.into())).await;
    let cookie = crate::support::sign_in(&s, PASSWORD).await;
    let cid = s.default_character().await;
    // Two visitors' visits (clients on the kiosk itself, without credentials).
    let mut visits = Vec::new();
    for text in ["Where is the cafe?", "Is there a cloakroom?"] {
        let sid = s.session(&cid).await;
        s.post_json(
            &format!("/api/v1/sessions/{sid}/message"),
            json!({ "text": text }),
            202,
        )
        .await;
        visits.push(sid);
    }
    let messages = || async {
        let page: Value = s
            .get_as(
                &format!("/api/v1/characters/{cid}/conversations/messages?limit=200"),
                &cookie,
            )
            .await
            .json()
            .await
            .unwrap();
        page["messages"].as_array().unwrap().clone()
    };
    let start = Instant::now();
    while messages().await.len() < 4 {
        assert!(start.elapsed() < Duration::from_secs(20), "no replies");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let mut b = crate::support::browser::Browser::launch().await;
    b.sign_in_page(&s.base, PASSWORD).await;
    b.goto(&s.url("/console/conversations")).await;
    let shown = "document.querySelectorAll('#messages li.visit').length";
    b.wait_for(shown, json!(2)).await;
    // The newest visit is on top: forget it.
    let top = b
        .eval("document.querySelector('#messages li.visit').dataset.session")
        .await;
    assert_eq!(top, visits[1].as_str());
    b.click("#messages li.visit button.forget").await;
    b.wait_for(shown, json!(1)).await;
    assert_eq!(
        b.dialogs,
        ["Forget this visit? What was said is deleted now; the statistics keep only its counts."]
    );
    let said =
        "[...document.querySelectorAll('#messages li.user')].map((e) => e.textContent).join('|')";
    b.wait_for(said, json!("Where is the cafe?")).await;
    let left = messages().await;
    assert_eq!(left.len(), 2);
    assert!(left.iter().all(|m| m["session_id"] == visits[0].as_str()));
}

#[tokio::test]
async fn personal_details_are_stored_as_placeholders_and_the_model_hears_them_said() {
    let fake = fake_openai::FakeOpenAi::start().await;
    fake.set_chat(fake_openai::Chat::reply("Nice to meet you, Jane."));
    let s = Server::start().await;
    s.put_json(
        "/api/v1/settings",
        json!({"llm": {"provider": "openai", "base_url": fake.base_url(), "api_key": "sk-test", "model": "m"}}),
        200,
    )
    .await;
    let cid = s.character("Ada").await;
    let sid = s.session(&cid).await;
    let said = "My name is Jane, I am 9 years old, mail jane@example.com or call 07700 900123";
    chat(&s, &cid, &sid, said).await;
    let chats = fake.wait_chats(1, Duration::from_secs(10)).await;
    assert!(
        chats[0].messages().iter().any(|(_, c)| c == said),
        "the live turn has the words as said: {:?}",
        chats[0].messages()
    );
    let h = history(&s, &cid).await;
    assert_eq!(
        h[0]["content"],
        "My name is [name], I am [age] years old, mail [email] or call [phone]"
    );
    assert_eq!(
        h[1]["content"], "Nice to meet you, Jane.",
        "a name alone is kept"
    );
}

#[tokio::test]
async fn a_question_is_listed_once_three_visits_asked_it() {
    let s = Server::start().await;
    let cid = s.character("Ada").await;
    let listed = |v: &Value, key: &str| -> Vec<(String, u64)> {
        v[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|q| {
                (
                    q["question"].as_str().unwrap().to_string(),
                    q["count"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let unmatched = || async {
        s.get_json(
            &format!("/api/v1/characters/{cid}/conversations/unmatched"),
            200,
        )
        .await
    };
    let most_asked = || async {
        s.get_json(&format!("/api/v1/characters/{cid}/statistics"), 200)
            .await
    };
    // One visitor asks the same three times: still one visit.
    let alone = s.session(&cid).await;
    for _ in 0..3 {
        chat(&s, &cid, &alone, "Is there a shop?").await;
    }
    for n in 1..=3 {
        let sid = s.session(&cid).await;
        chat(&s, &cid, &sid, "Is there a lift? I am 8 years old").await;
        let want: Vec<(String, u64)> = if n < 3 {
            vec![]
        } else {
            vec![("Is there a lift? I am [age] years old".into(), 3)]
        };
        assert_eq!(listed(&unmatched().await, "questions"), want, "{n} visits");
        assert_eq!(
            listed(&most_asked().await, "most_asked"),
            want,
            "{n} visits"
        );
    }
}

#[tokio::test]
async fn settings_say_what_leaves_the_building_and_the_dashboard_marks_voices_that_do() {
    const PASSWORD: &str = "privacy-test-password";
    let mut s = Server::start_with(|c| c.access.admin_password = Some(PASSWORD.into())).await;
    let cookie = crate::support::sign_in(&s, PASSWORD).await;
    s.as_admin(&cookie);
    let flows = "[...document.querySelectorAll('#flows li')].map((li) => li.textContent).join('|')";
    let mut b = crate::support::browser::Browser::launch().await;
    b.sign_in_page(&s.base, PASSWORD).await;

    // The offline engine, the default: nothing leaves, no mark.
    b.goto(&s.url("/console/settings")).await;
    b.wait_for(
        flows,
        json!("Nothing leaves the kiosk: the offline engine hears, answers and speaks on the kiosk itself."),
    )
    .await;
    b.goto(&s.url("/console/")).await;
    b.wait_for(
        "document.getElementById('voices-leave').hidden",
        json!(true),
    )
    .await;

    // Hearing in a cloud, the voice on a server of the museum's network.
    s.put_json(
        "/api/v1/settings",
        json!({
            "asr": {"provider": "openai", "base_url": "https://speech.example.com/v1", "api_key": "sk-test"},
            "tts": {"provider": "wyoming", "base_url": "tcp://192.168.1.10:10200"},
        }),
        200,
    )
    .await;
    let v = s.get_json("/api/v1/settings/privacy", 200).await;
    assert_eq!(v["voices_leave"], true, "{v}");
    b.goto(&s.url("/console/settings")).await;
    b.wait_for(
        flows,
        json!(
            "Hearing (openai): visitors' voices go to speech.example.com leaves the building|\
             Voice (wyoming): the conversation as text go to 192.168.1.10 (in the building)"
        ),
    )
    .await;
    b.goto(&s.url("/console/")).await;
    b.wait_for(
        "document.getElementById('voices-leave').hidden",
        json!(false),
    )
    .await;
    b.wait_text("voices-to", "speech.example.com").await;
    b.screenshot("privacy-dashboard").await;
    assert!(b.errors.is_empty(), "{:?}", b.errors);
}
