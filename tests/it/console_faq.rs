//! The FAQ on the console's Knowledge page (issue 32), in a real browser (headless Chromium):
//! staff fill a missing translation side by side and save it; the CSV is downloaded, changed
//! as a translation agency would and uploaded again; a recorded answer is uploaded beside its
//! question, loads in its <audio> element at its length, is replaced and deleted; the page
//! reads well on a desktop and a phone.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use crate::console_staff::{audit, kiosk, signed_in, window};
use crate::support::Server;
use crate::support::browser::Browser;

/// A WAV of `seconds` of a tone (sox), and the name it is uploaded under.
fn tone(dir: &Path, name: &str, seconds: f64) -> PathBuf {
    let path = dir.join(name);
    let ok = std::process::Command::new("sox")
        .args(["-n", "-r", "24000", "-c", "1", "-b", "16"])
        .arg(&path)
        .args(["synth", &seconds.to_string(), "sine", "300"])
        .status()
        .unwrap();
    assert!(ok.success());
    path
}

/// espeak-ng's German of `text` as a WAV, and its length in seconds.
fn spoken(dir: &Path, text: &str) -> (PathBuf, f64) {
    let path = dir.join("antwort.wav");
    let ok = std::process::Command::new("espeak-ng")
        .args(["-v", "de", "-w"])
        .arg(&path)
        .arg(text)
        .status()
        .unwrap();
    assert!(ok.success());
    let samples = (std::fs::metadata(&path).unwrap().len() - 44) / 2;
    (path, samples as f64 / 22_050.0)
}

/// The duration of the German column's recorded answer as its <audio> element loaded it (0
/// while there is none or it has not loaded).
const GERMAN_AUDIO: &str = "(() => { const a = document.querySelector('#faq-table td[data-language$=\"(de)\"] audio'); \
    return a && a.readyState >= 1 && Number.isFinite(a.duration) ? a.duration : 0; })()";

async fn wait_duration(b: &mut Browser, near: f64) {
    let check = format!("Math.abs({GERMAN_AUDIO} - {near}) < {}", near * 0.05);
    b.wait_until(&check).await;
}

/// Waits until the kiosk has indexed every knowledge file (a recording needs its question there).
async fn indexed(s: &Server, cid: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while s.sources(cid).await.iter().any(|x| x[1] == "indexing") {
        assert!(std::time::Instant::now() < deadline, "still indexing");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn staff_translate_the_faq_side_by_side_exchange_csv_and_record_answers() {
    let s = kiosk().await;
    let cid = s.character("Harbour Guide").await;
    s.put_json(
        "/api/v1/settings",
        json!({"kiosk": {"character_id": cid, "languages": ["en", "de"]}}),
        200,
    )
    .await;
    let faq = format!("/api/v1/characters/{cid}/faq");
    s.put_json(
        &faq,
        json!({"entries": [{"texts": {"en": {
            "question": "Where is the cafe?", "answer": "On the ground floor."
        }}}]}),
        200,
    )
    .await;
    let mut b = signed_in(&s, 1280).await;
    b.goto(&format!("{}/console/knowledge?character={cid}", s.base))
        .await;

    // The German translation is marked missing beside the English; staff write it and save.
    b.wait_until("document.getElementById('faq-q-0-en')?.value === 'Where is the cafe?'")
        .await;
    let headers = b
        .eval("[...document.querySelectorAll('#faq-table th')].map((t) => t.textContent)")
        .await;
    assert_eq!(headers, json!(["English (en)", "Deutsch (de)", "Entry"]));
    let german = "#faq-table td[data-language$=\"(de)\"]";
    let marked = format!(
        "[...document.querySelectorAll('{german}')].map((td) => td.classList.contains('missing') && td.querySelector('.tag')?.checkVisibility() === true)"
    );
    assert_eq!(b.eval(&marked).await, json!([true]));
    b.type_into("faq-q-0-de", "Wo ist das Café?").await;
    b.type_into("faq-a-0-de", "Im Erdgeschoss.").await;
    b.click("#faq-save").await;
    b.wait_text("faq-result", "Saved.").await;
    let stored = s.get_json(&faq, 200).await;
    assert_eq!(
        stored["entries"][0]["texts"]["de"],
        json!({"question": "Wo ist das Café?", "answer": "Im Erdgeschoss."})
    );
    assert_eq!(stored["entries"][0]["missing"], json!([]));
    assert_eq!(b.eval(&marked).await, json!([false]));

    // A recorded answer beside the German question, once the kiosk has indexed it: uploaded,
    // loaded by its <audio> element at its length, replaced, deleted.
    b.wait_until(&format!(
        "!!document.querySelector('{german} input[type=file]')"
    ))
    .await;
    indexed(&s, &cid).await;
    let dir = tempfile::tempdir().unwrap();
    let (first, seconds) = spoken(dir.path(), "Das Café ist im Erdgeschoss, gleich links.");
    assert!(
        (seconds - 5.0).abs() > 0.5,
        "the replacement is told apart by its length"
    );
    b.choose_files("#faq-rec-0-de", &[&first]).await;
    wait_duration(&mut b, seconds).await;
    let recordings = s
        .get_json(&format!("/api/v1/characters/{cid}/recordings"), 200)
        .await;
    assert_eq!(recordings[0]["question"], "Wo ist das Café?");
    assert_eq!(recordings[0]["orig_name"], "antwort.wav");
    let second = tone(dir.path(), "ersatz.wav", 5.0);
    b.choose_files("#faq-rec-0-de", &[&second]).await;
    wait_duration(&mut b, 5.0).await;
    let recordings = s
        .get_json(&format!("/api/v1/characters/{cid}/recordings"), 200)
        .await;
    assert_eq!(recordings.as_array().unwrap().len(), 1, "{recordings}");
    assert_eq!(recordings[0]["orig_name"], "ersatz.wav");
    let problems = audit(&mut b, "knowledge-faq-desktop").await;
    b.eval("window.confirm = () => true").await;
    b.click(&format!("{german} button.danger")).await;
    b.wait_until(&format!("!document.querySelector('{german} audio')"))
        .await;
    let recordings = s
        .get_json(&format!("/api/v1/characters/{cid}/recordings"), 200)
        .await;
    assert_eq!(recordings, json!([]));

    // The CSV round trip: downloaded, the German answer changed, uploaded, read back.
    let downloads = tempfile::tempdir().unwrap();
    b.allow_downloads(downloads.path()).await;
    b.click("#faq-download").await;
    let csv = b
        .downloaded(downloads.path(), Duration::from_secs(15))
        .await;
    assert_eq!(
        csv.file_name().unwrap().to_str().unwrap(),
        format!("faq-{cid}.csv")
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.contains(",Wo ist das Café?,Im Erdgeschoss."), "{text}");
    let changed = dir.path().join("faq-de.csv");
    std::fs::write(
        &changed,
        text.replace("Im Erdgeschoss.", "\"Im Erdgeschoss, gleich links.\""),
    )
    .unwrap();
    b.choose_files("#faq-csv", &[&changed]).await;
    b.wait_text("faq-result", "faq-de.csv: 1 entries stored.")
        .await;
    b.wait_until(
        "document.getElementById('faq-a-0-de')?.value === 'Im Erdgeschoss, gleich links.'",
    )
    .await;
    let stored = s.get_json(&faq, 200).await;
    assert_eq!(
        stored["entries"][0]["texts"]["de"]["answer"],
        "Im Erdgeschoss, gleich links."
    );

    // A recorded question edited: its recording is listed apart, to delete.
    indexed(&s, &cid).await;
    b.wait_until(&format!(
        "!!document.querySelector('{german} input[type=file]')"
    ))
    .await;
    b.choose_files("#faq-rec-0-de", &[&second]).await;
    wait_duration(&mut b, 5.0).await;
    b.type_into("faq-q-0-de", "Wo finde ich das Café?").await;
    b.click("#faq-save").await;
    b.wait_text("faq-result", "Saved.").await;
    b.wait_until("document.querySelector('#orphans li span')?.textContent === 'Wo ist das Café? (de, 5.0 s)'")
        .await;
    b.click("#orphans button.danger").await;
    b.wait_until("document.getElementById('faq-orphans').hidden")
        .await;
    let recordings = s
        .get_json(&format!("/api/v1/characters/{cid}/recordings"), 200)
        .await;
    assert_eq!(recordings, json!([]));

    // A bad file is refused with its line, on the page.
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "id,question:en,answer:en\r\n,Open?\r\n").unwrap();
    b.choose_files("#faq-csv", &[&bad]).await;
    b.wait_text("faq-error", "Line 2: 2 fields where the header has 3.")
        .await;

    // As rendered, on a desktop above and on a phone.
    let mut problems = problems;
    window(&mut b, 390).await;
    b.goto(&format!("{}/console/knowledge?character={cid}", s.base))
        .await;
    b.wait_until("document.getElementById('faq-q-0-de')?.value === 'Wo finde ich das Café?'")
        .await;
    problems.extend(audit(&mut b, "knowledge-faq-phone").await);
    assert!(problems.is_empty(), "{problems:#?}");
}

#[tokio::test]
async fn the_museum_s_languages_and_a_voice_per_language_are_set_in_the_console() {
    let s = kiosk().await;
    let cid = s.character("Harbour Guide").await;
    let mut b = signed_in(&s, 1280).await;

    // Settings: the languages in order, each named in itself, the first the default.
    b.goto(&format!("{}/console/settings", s.base)).await;
    b.wait_until("document.getElementById('s-kiosk-languages')?.value === 'en'")
        .await;
    assert_eq!(
        b.eval("!!document.getElementById('s-kiosk-language')")
            .await,
        json!(false),
        "the single language is the first of the list"
    );
    b.type_into("s-kiosk-languages", "en, de, es").await;
    b.wait_text(
        "s-kiosk-languages-named",
        "English (default) · Deutsch · Español",
    )
    .await;
    b.click("#providers button[type=submit]").await;
    b.wait_until("document.getElementById('settings-result')?.textContent === 'Saved: kiosk.'")
        .await;
    let settings = s.get_json("/api/v1/settings", 200).await;
    assert_eq!(settings["kiosk"]["languages"], json!(["en", "de", "es"]));
    assert_eq!(settings["kiosk"]["language"], "en");

    // The character: a voice for each language beyond the default, with its sample.
    let voices = s
        .get_json("/api/v1/characters/voices?provider=local", 200)
        .await;
    let german = voices["voices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["id"].as_str().unwrap())
        .find(|id| *id == "de" || id.starts_with("de"))
        .expect("a German voice")
        .to_string();
    b.goto(&format!("{}/console/characters", s.base)).await;
    b.wait_until(
        "[...document.querySelectorAll('#list button')].some((x) => x.textContent === 'Edit')",
    )
    .await;
    let edit = "[...document.querySelectorAll('#list li')]\
        .find((li) => li.textContent.includes('Harbour Guide')).querySelector('button').click()";
    b.eval(edit).await;
    b.wait_until("document.getElementById('edit').open && !document.getElementById('voices-by-language').hidden")
        .await;
    let labels = b
        .eval("[...document.querySelectorAll('#voices label')].map((l) => l.textContent)")
        .await;
    assert_eq!(labels, json!(["Deutsch (de)", "Español (es)"]));
    b.type_into("f-voice-de", &german).await;
    b.click("#voices button").await;
    b.wait_until("(() => { const a = document.getElementById('sample'); return !a.hidden && a.readyState >= 1 && a.duration > 0; })()")
        .await;
    let problems = audit(&mut b, "characters-voices-desktop").await;
    b.click("#form button[type=submit]").await;
    b.wait_until("!document.getElementById('edit').open").await;
    let c = s.get_json(&format!("/api/v1/characters/{cid}"), 200).await;
    assert_eq!(c["voices"], json!({ "de": german }));
    assert!(problems.is_empty(), "{problems:#?}");
}
