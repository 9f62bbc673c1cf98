//! The structured FAQ (issue 32): entries with their translations side by side, saved through
//! `PUT /api/v1/characters/{id}/faq` or a translation agency's CSV, become one managed knowledge
//! file per language that the kiosk reads like any other (its screen questions, its recorded
//! answers); the CSV round trip keeps quotes, commas and line breaks; a bad file is refused
//! naming its line, and nothing changes.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Server, assert_admin_only, expect, sign_in};

const PASSWORD: &str = "faq-password";

/// A signed-in kiosk offering English and German, and a character; the FAQ routes checked to
/// be the administrator's alone first.
async fn kiosk() -> (Server, String) {
    let mut s = Server::start_with(|c| c.access.admin_password = Some(PASSWORD.into())).await;
    let cookie = sign_in(&s, PASSWORD).await;
    let path = "/api/v1/characters/00000000-0000-4000-8000-000000000000/faq";
    let csv = format!("{path}.csv");
    assert_admin_only(
        &s,
        &cookie,
        &[
            (reqwest::Method::GET, path),
            (reqwest::Method::PUT, path),
            (reqwest::Method::GET, &csv),
            (reqwest::Method::PUT, &csv),
        ],
    )
    .await;
    s.as_admin(&cookie);
    let cid = s.character("Harbour Guide").await;
    s.put_json(
        "/api/v1/settings",
        json!({"kiosk": {"languages": ["en", "de"]}}),
        200,
    )
    .await;
    (s, cid)
}

/// The managed knowledge files (`faq/…`) by relative path and language, once no file is
/// indexing.
async fn managed(s: &Server, cid: &str) -> Vec<(String, String)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let all = s
            .get_json(&format!("/api/v1/characters/{cid}/knowledge"), 200)
            .await;
        let faq: Vec<&Value> = all["sources"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|x| x["relative_path"].as_str().unwrap().starts_with("faq/"))
            .collect();
        let sources = all["sources"].as_array().unwrap();
        if sources.iter().all(|x| x["status"] != "indexing") {
            let mut out: Vec<(String, String)> = faq
                .iter()
                .map(|x| {
                    (
                        x["relative_path"].as_str().unwrap().to_string(),
                        x["language"].as_str().unwrap().to_string(),
                    )
                })
                .collect();
            out.sort();
            return out;
        }
        assert!(Instant::now() < deadline, "still indexing: {all}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The FAQ questions the kiosk's knowledge holds (what the screen offers), sorted, once the
/// managed files are indexed.
async fn screen_faq(s: &Server, cid: &str) -> Value {
    managed(s, cid).await;
    let choice = s
        .get_json(&format!("/api/v1/characters/{cid}/screen-questions"), 200)
        .await;
    let mut faq: Vec<String> = serde_json::from_value(choice["faq"].clone()).unwrap();
    faq.sort();
    json!(faq)
}

#[tokio::test]
async fn faq_translations_become_knowledge_in_each_language() {
    let (s, cid) = kiosk().await;
    let path = format!("/api/v1/characters/{cid}/faq");
    let saved = s
        .put_json(
            &path,
            json!({"entries": [
                {"texts": {
                    "en": {"question": "Where is the cafe?", "answer": "On the ground floor."},
                    "de": {"question": "Wo ist das Café?", "answer": "Im Erdgeschoss."},
                }},
                {"texts": {
                    "en": {"question": "May I take photos?", "answer": "Yes,\nwithout flash."},
                }},
            ]}),
            200,
        )
        .await;
    assert_eq!(saved["languages"], json!(["en", "de"]));
    assert_eq!(saved["entries"][0]["missing"], json!([]));
    assert_eq!(saved["entries"][1]["missing"], json!(["de"]), "{saved}");
    assert_eq!(
        saved["entries"][1]["texts"]["en"]["answer"], "Yes, without flash.",
        "an answer is one line of its file"
    );
    assert_eq!(
        managed(&s, &cid).await,
        [
            ("faq/de.txt".to_string(), "de".to_string()),
            ("faq/en.txt".to_string(), "en".to_string())
        ]
    );
    assert_eq!(
        screen_faq(&s, &cid).await,
        json!([
            "May I take photos?",
            "Where is the cafe?",
            "Wo ist das Café?"
        ])
    );

    // The German question takes a recorded answer like any FAQ question of the knowledge.
    let dir = tempfile::tempdir().unwrap();
    let wav = dir.path().join("cafe.wav");
    let ok = std::process::Command::new("sox")
        .args(["-n", "-r", "24000", "-c", "1", "-b", "16"])
        .arg(&wav)
        .args(["synth", "1", "sine", "300"])
        .status()
        .unwrap();
    assert!(ok.success());
    let form = reqwest::multipart::Form::new()
        .text("question", "Wo ist das Café?")
        .part(
            "file",
            reqwest::multipart::Part::bytes(std::fs::read(&wav).unwrap()).file_name("cafe.wav"),
        );
    let res = s
        .post(&format!("/api/v1/characters/{cid}/recordings"))
        .multipart(form);
    let recording = expect(res, 201).await;
    assert_eq!(recording["language"], "de");

    // Translations kept by id; the German side removed: its knowledge file goes.
    let id0 = saved["entries"][0]["id"].as_str().unwrap();
    let again = s
        .put_json(
            &path,
            json!({"entries": [{"id": id0, "texts": {
                "en": {"question": "Where is the café?", "answer": "On the ground floor."},
                "de": {"question": "", "answer": ""},
            }}]}),
            200,
        )
        .await;
    assert_eq!(again["entries"][0]["id"], id0);
    assert_eq!(again["entries"][0]["missing"], json!(["de"]));
    assert_eq!(
        managed(&s, &cid).await,
        [("faq/en.txt".to_string(), "en".to_string())]
    );
    assert_eq!(screen_faq(&s, &cid).await, json!(["Where is the café?"]));

    for (body, want) in [
        (
            json!({"entries": [{"texts": {"en": {"question": "Why?", "answer": ""}}}]}),
            "entry 1: en has a question but no answer",
        ),
        (
            json!({"entries": [{"texts": {"xx-!": {"question": "a", "answer": "b"}}}]}),
            "not a language tag",
        ),
        (
            json!({"entries": [{"texts": {"en": {"question": "q".repeat(301), "answer": "b"}}}]}),
            "longer than 300 characters",
        ),
    ] {
        let err = s.put_json(&path, body, 400).await;
        assert!(err["error"].as_str().unwrap().contains(want), "{err}");
    }
    // An uploaded file may say its language (else its name or the default decides).
    let form = reqwest::multipart::Form::new().text("language", "de").part(
        "file",
        reqwest::multipart::Part::bytes(b"Q: Gibt es Schliessfaecher?\nA: Ja.\n".to_vec())
            .file_name("lockers.txt"),
    );
    let res = s
        .post(&format!("/api/v1/characters/{cid}/knowledge/files"))
        .multipart(form);
    let uploaded = expect(res, 201).await;
    assert_eq!(uploaded["sources"][0]["language"], "de", "{uploaded}");
    let form = reqwest::multipart::Form::new()
        .text("language", "not a tag")
        .part(
            "file",
            reqwest::multipart::Part::bytes(b"x".to_vec()).file_name("x.txt"),
        );
    let res = s
        .post(&format!("/api/v1/characters/{cid}/knowledge/files"))
        .multipart(form);
    expect(res, 400).await;

    let many: Vec<Value> = (0..501)
        .map(|i| json!({"texts": {"en": {"question": format!("Q{i}?"), "answer": "A."}}}))
        .collect();
    s.put_json(&path, json!({ "entries": many }), 400).await;
    assert_eq!(
        screen_faq(&s, &cid).await,
        json!(["Gibt es Schliessfaecher?", "Where is the café?"])
    );
}

#[tokio::test]
async fn faq_csv_round_trip_for_a_translation_agency() {
    let (s, cid) = kiosk().await;
    let path = format!("/api/v1/characters/{cid}/faq");
    s.put_json(
        &path,
        json!({"entries": [
            {"texts": {"en": {"question": "Where is the cafe?", "answer": "Downstairs, by the \"big\" door."}}},
            {"texts": {"en": {"question": "Is there a lift?", "answer": "Yes."}}},
        ]}),
        200,
    )
    .await;
    let res = s.get(&format!("{path}.csv")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "text/csv; charset=utf-8");
    let csv = res.text().await.unwrap();
    let csv = csv
        .strip_prefix('\u{feff}')
        .expect("a byte order mark for spreadsheets");
    let lines: Vec<&str> = csv.split("\r\n").collect();
    assert_eq!(lines[0], "id,question:en,answer:en,question:de,answer:de");
    assert!(
        lines[1].ends_with(",Where is the cafe?,\"Downstairs, by the \"\"big\"\" door.\",,"),
        "{csv}"
    );

    // The agency fills the German columns (one answer over two lines, a comma, quotes).
    let filled = csv
        .replacen(
            "door.\",,",
            "door.\",Wo ist das Café?,\"Unten, an der \"\"großen\"\"\nTür.\"",
            1,
        )
        .replacen("Yes.,,", "Yes.,Gibt es einen Aufzug?,Ja.", 1);
    let res = s
        .put(&format!("{path}.csv"))
        .header("content-type", "text/csv")
        .body(filled.clone());
    let stored = expect(res, 200).await;
    assert_eq!(
        stored["entries"][0]["texts"]["de"],
        json!({"question": "Wo ist das Café?", "answer": "Unten, an der \"großen\" Tür."})
    );
    assert_eq!(stored["entries"][1]["missing"], json!([]));
    let read_back = s.get_json(&path, 200).await;
    assert_eq!(read_back, stored);
    let again = s.get(&format!("{path}.csv")).send().await.unwrap();
    let again = again.text().await.unwrap();
    assert!(
        again.contains("Wo ist das Café?,\"Unten, an der \"\"großen\"\" Tür.\""),
        "{again}"
    );
    assert!(
        screen_faq(&s, &cid)
            .await
            .as_array()
            .unwrap()
            .contains(&json!("Gibt es einen Aufzug?"))
    );

    // A bad file names its line (a quoted answer over two lines counts both) and changes nothing.
    let three_fields = format!("{filled}x,Why?\r\n");
    for (body, want) in [
        (
            three_fields.as_str(),
            "line 5: 2 fields where the header has 5",
        ),
        (
            "id,question:en,colour\r\n",
            "line 1: unknown column \"colour\"",
        ),
        (
            "id,question:en,answer:en\r\n,\"Open?,Yes\r\n",
            "line 2: a quoted field is not closed",
        ),
        (
            "id,question:en,answer:en\r\n,Open?,\r\n",
            "line 2: en has a question but no answer",
        ),
    ] {
        let res = s
            .put(&format!("{path}.csv"))
            .header("content-type", "text/csv")
            .body(body.to_string());
        let err = expect(res, 400).await;
        assert!(err["error"].as_str().unwrap().contains(want), "{err}");
    }
    let res = s
        .put(&format!("{path}.csv"))
        .header("content-type", "text/plain")
        .body(filled);
    expect(res, 415).await;
    assert_eq!(s.get_json(&path, 200).await, stored);
}
