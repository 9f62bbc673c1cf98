//! The visitor's language (issue 32), through the kiosk loop on simulated devices: chosen on the
//! question screen, or heard by a network recogniser (the fake OpenAI-compatible server speaks
//! Whisper's `verbose_json`); answered from the knowledge in that language, in that language's
//! espeak-ng voice (told from the English voice by the length of its speech), captioned, and the
//! screen's own lines in it; a language model told to answer in it; the offline recogniser's
//! English-only limit said and written, not guessed around.

use std::time::{Duration, Instant};

use docent::device::display::questions;
use fake_openai::{Chat, FakeOpenAi, Transcription};
use serde_json::{Value, json};

use crate::choosing::{choose, device, guide_on_a_sim_kiosk, screen_writes, speaker_len, until};
use crate::console::press;
use crate::recordings::upload;
use crate::support::Server;

const PASSWORD: &str = "languages-password";

const FAQ_EN: &str = "Visiting\n\n\
    Q: Where is the cafe?\nA: The cafe is on the ground floor, next to the main entrance.\n\n\
    Q: Where is the cloakroom?\nA: The cloakroom is left of the main entrance.\n";
const FAQ_ES: &str = "Visita\n\n\
    Q: ¿Dónde está la cafetería?\nA: La cafetería está en la planta baja, junto a la entrada principal.\n\n\
    Q: ¿Dónde está el guardarropa?\nA: El guardarropa está a la izquierda de la entrada principal.\n";
const FAQ_DE: &str = "Besuch\n\n\
    Q: Wo ist die Garderobe?\nA: Die Garderobe ist links vom Haupteingang.\n\n\
    Q: Wo ist das Café?\nA: Das Café ist im Erdgeschoss, neben dem Haupteingang.\n";

/// A kiosk with simulated devices, signed in, its character knowing the FAQ in English,
/// Spanish and German (the files' names say which), offering `languages`.
async fn kiosk(languages: &[&str]) -> (Server, String) {
    let (s, cid) = guide_on_a_sim_kiosk(PASSWORD).await;
    s.put_json(
        "/api/v1/settings",
        json!({"kiosk": {"character_id": cid, "languages": languages}}),
        200,
    )
    .await;
    s.knowledge_ready(&cid, "faq.txt", FAQ_EN).await;
    s.knowledge_ready(&cid, "faq.es.txt", FAQ_ES).await;
    s.knowledge_ready(&cid, "faq.de.txt", FAQ_DE).await;
    until(&s, "the kiosk speaks as the character", |d| {
        d["character_id"] == cid.as_str()
    })
    .await;
    (s, cid)
}

/// Holds the button over a second of a tone in the simulated microphone (the fake recogniser
/// hears what its script says), then waits for the reply to be heard to its end; returns the
/// kiosk's state then and the bytes the speaker played.
async fn speak(s: &Server) -> (Value, u64) {
    let d = device(s).await;
    let mic = d["sim_audio"]["mic"].as_str().unwrap().to_string();
    let tone: Vec<u8> = (0..16_000)
        .flat_map(|i| {
            let v = ((i as f64 / 16_000.0 * 440.0 * std::f64::consts::TAU).sin() * 8_000.0) as i16;
            v.to_le_bytes()
        })
        .collect();
    std::fs::write(&mic, tone).unwrap();
    let before = speaker_len(&d);
    press(s, true).await;
    until(s, "listening", |d| d["status"] == "listening").await;
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    press(s, false).await;
    heard_to_the_end(s, before).await
}

/// Touches row `row` of the question screen and waits for the answer to end (see
/// [`heard_to_the_end`]).
async fn touch_row(s: &Server, row: usize, before: u64) -> (Value, u64) {
    choose(
        s,
        json!({"touch": {"x": 0.5, "y": questions::row_centre(row)}}),
    )
    .await;
    heard_to_the_end(s, before).await
}

/// Waits for the kiosk to speak and be idle again; its state then and the bytes played since
/// `before`.
async fn heard_to_the_end(s: &Server, before: u64) -> (Value, u64) {
    until(s, "speaking", |d| d["status"] == "speaking").await;
    let d = until(s, "idle again", |d| d["status"] == "idle").await;
    let played = speaker_len(&d) - before;
    (d, played)
}

/// The bytes of 24 kHz mono speech espeak-ng makes of `text` in `voice` (it writes 22 050 Hz).
fn espeak_bytes(text: &str, voice: &str) -> u64 {
    let out = std::process::Command::new("espeak-ng")
        .args(["-v", voice, "--stdout", text])
        .output()
        .expect("espeak-ng runs");
    assert!(out.status.success());
    let samples = (out.stdout.len() as u64 - 44) / 2;
    samples * 24_000 / 22_050 * 2
}

/// A recorded answer: espeak-ng's German of `text`, as Ogg Vorbis (sox); its path and the
/// bytes of 24 kHz mono speech it holds.
fn recording(dir: &std::path::Path, text: &str) -> (std::path::PathBuf, u64) {
    let wav = dir.join("recording.wav");
    let ogg = dir.join("recording.ogg");
    let ok = std::process::Command::new("espeak-ng")
        .args(["-v", "de", "-w"])
        .arg(&wav)
        .arg(text)
        .status()
        .unwrap();
    assert!(ok.success());
    let ok = std::process::Command::new("sox")
        .arg(&wav)
        .arg(&ogg)
        .status()
        .unwrap();
    assert!(ok.success());
    let samples = (std::fs::metadata(&wav).unwrap().len() - 44) / 2;
    (ogg, samples * 24_000 / 22_050 * 2)
}

/// Whether `played` bytes are `text` said in `voice` rather than in `other`: within 5 % of
/// the first's length and nearer to it.
fn said_in(played: u64, text: &str, voice: &str, other: &str) -> bool {
    let want = espeak_bytes(text, voice) as f64;
    let not = espeak_bytes(text, other) as f64;
    let played = played as f64;
    let off = (played - want).abs() / want;
    eprintln!(
        "{text:?}: played {played}, {voice} {want}, {other} {not} ({:.1} % off)",
        off * 100.0
    );
    off < 0.05 && (played - want).abs() < (played - not).abs()
}

pub(crate) fn last_user_message(history: &Value) -> Value {
    history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .cloned()
        .unwrap()
}

/// A family from Madrid asks in Spanish: the recogniser (asked to detect the language, as
/// nobody chose one) says `spanish`; the visit is in Spanish from then on (the next
/// recognition is asked for `es`), the answer is the Spanish FAQ's in espeak-ng's Spanish
/// voice, the captions and the screen's lines are Spanish, the question is stored with its
/// language; a language model is told to answer in Spanish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spanish_question_heard_by_whisper_is_answered_in_spanish() {
    let (s, cid) = kiosk(&["en", "es", "de"]).await;
    let fake = FakeOpenAi::start().await;
    fake.set_transcription(Transcription {
        language: Some("spanish".into()),
        ..Transcription::text("¿Dónde está la cafetería?")
    });
    s.put_json(
        "/api/v1/settings",
        json!({"asr": {"provider": "openai", "base_url": fake.base_url(), "api_key": "k", "model": "whisper-1"}}),
        200,
    )
    .await;

    let (d, played) = speak(&s).await;
    let answer = "La cafetería está en la planta baja, junto a la entrada principal.";
    assert_eq!(d["captions"]["heard"], "¿Dónde está la cafetería?", "{d}");
    assert_eq!(d["captions"]["said"], json!([answer]), "{d}");
    assert_eq!(d["language"], "es", "{d}");
    assert!(said_in(played, answer, "es", "en-us"), "the Spanish voice");
    screen_writes(
        &s,
        &["Mantén pulsado el botón o toca la pantalla para preguntar más"],
    )
    .await;
    let asked = fake.transcriptions();
    assert_eq!(asked[0].field("language"), None, "nobody chose: detect it");
    assert_eq!(asked[0].field("response_format"), Some("verbose_json"));
    let history = s.history(&cid).await;
    let stored = last_user_message(&history);
    assert_eq!(stored["language"], "es", "{stored}");

    // The visit stays Spanish: the recogniser is asked for it, the language model is told.
    fake.set_chat(Chat::reply("La cafetería abre a las nueve."));
    s.put_json(
        "/api/v1/settings",
        json!({"llm": {"provider": "openai", "base_url": fake.base_url(), "api_key": "k", "model": "fake-chat"}}),
        200,
    )
    .await;
    let (d, _) = speak(&s).await;
    assert_eq!(
        d["captions"]["said"],
        json!(["La cafetería abre a las nueve."]),
        "{d}"
    );
    let asked = fake.transcriptions();
    assert_eq!(asked[1].field("language"), Some("es"));
    let system = fake.chats()[0].messages()[0].1.clone();
    assert!(
        system.contains("Answer in Spanish (language tag es)"),
        "{system}"
    );
    assert!(
        system.contains("La cafetería está en la planta baja"),
        "{system}"
    );

    // The statistics count the questions per language.
    fake.set_chat(Chat::reply("No lo sé."));
    fake.set_transcription(Transcription {
        language: Some("spanish".into()),
        ..Transcription::text("¿Cuántos barcos hay en el puerto de Vigo?")
    });
    speak(&s).await;
    let stats = s
        .get_json(&format!("/api/v1/characters/{cid}/statistics"), 200)
        .await;
    assert_eq!(stats["days"][0]["by_language"], json!({"es": 3}), "{stats}");
    s.stop().await;
}

/// A visitor chooses German on the question screen: its title, bar and rows turn German, the
/// German question asked by touch is answered from the German FAQ in espeak-ng's German voice
/// and captioned; the button then has the offline recogniser say (and the screen write) that it
/// hears English only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitor_chooses_german_on_the_screen_and_asks_by_touch() {
    let (s, cid) = kiosk(&["en", "de"]).await;
    let res = s
        .put(&format!("/api/v1/characters/{cid}/screen-questions"))
        .json(&json!({ "questions": ["Where is the cloakroom?", "Wo ist die Garderobe?"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    until(&s, "the kiosk offers to choose", |d| {
        d["can_choose"] == true
    })
    .await;

    // The kiosk reads the questions on the screen once a second: opened until they are there.
    let start = Instant::now();
    let d = loop {
        choose(&s, json!({"touch": {"x": 0.5, "y": 0.5}})).await;
        let d = until(&s, "the question screen", |d| !d["questions"].is_null()).await;
        if d["questions"]["rows"].as_array().unwrap().len() == 2 {
            break d;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "{d}");
        choose(&s, json!({"touch": {"x": 0.5, "y": 0.95}})).await;
        until(&s, "closed", |d| d["questions"].is_null()).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        d["questions"]["rows"],
        json!(["Languages: English · Deutsch", "Where is the cloakroom?"]),
        "{d}"
    );
    // The first row opens the languages, each by its own name; the second is German.
    choose(
        &s,
        json!({"touch": {"x": 0.5, "y": questions::row_centre(0)}}),
    )
    .await;
    let d = until(&s, "the languages", |d| {
        d["questions"]["rows"] == json!(["English", "Deutsch"])
    })
    .await;
    assert_eq!(d["questions"]["title"], "Languages");
    choose(
        &s,
        json!({"touch": {"x": 0.5, "y": questions::row_centre(1)}}),
    )
    .await;
    let d = until(&s, "the German questions", |d| d["language"] == "de").await;
    assert_eq!(
        d["questions"]["title"], "Wählen Sie eine Frage (1 von 1)",
        "{d}"
    );
    assert_eq!(
        d["questions"]["rows"],
        json!([
            "Sprachen: English · Deutsch",
            "Wo ist die Garderobe?",
            "Meinen Besuch vergessen"
        ]),
        "{d}"
    );

    let before = speaker_len(&d);
    let (d, played) = touch_row(&s, 1, before).await;
    let answer = "Die Garderobe ist links vom Haupteingang.";
    assert_eq!(d["captions"]["heard"], "Wo ist die Garderobe?", "{d}");
    assert_eq!(d["captions"]["said"], json!([answer]), "{d}");
    assert!(said_in(played, answer, "de", "en-us"), "the German voice");

    // The curator records the answer (here espeak-ng's German of other words, as Ogg Vorbis):
    // the next visitor to ask hears the recording, captioned with the FAQ's answer.
    let dir = tempfile::tempdir().unwrap();
    let (ogg, recorded_bytes) = recording(
        dir.path(),
        "Die Garderobe finden Sie links vom Haupteingang, gleich neben der Kasse.",
    );
    let bytes = std::fs::read(&ogg).unwrap();
    let (status, _) = upload(&s, &cid, "Wo ist die Garderobe?", "garderobe.ogg", bytes).await;
    assert_eq!(status, 201);
    choose(&s, json!({"touch": {"x": 0.5, "y": 0.5}})).await;
    let d = until(&s, "the question screen", |d| !d["questions"].is_null()).await;
    assert_eq!(d["questions"]["rows"][1], "Wo ist die Garderobe?", "{d}");
    let before = speaker_len(&d);
    let (d, played) = touch_row(&s, 1, before).await;
    assert_eq!(d["captions"]["said"], json!([answer]), "{d}");
    let off = (played as f64 - recorded_bytes as f64).abs() / recorded_bytes as f64;
    assert!(
        off < 0.03,
        "the recording played: {played} bytes, {recorded_bytes} recorded"
    );
    screen_writes(
        &s,
        &["Für weitere Fragen den Knopf halten oder den Bildschirm berühren"],
    )
    .await;
    // Staff word a line their own way; a line without the placeholder it needs is refused.
    let own = "Noch eine Frage? Knopf halten oder Bildschirm antippen";
    s.put_json(
        "/api/v1/settings",
        json!({"kiosk": {"lines": {"de": {"hold_or_touch_to_ask_more": own}}}}),
        200,
    )
    .await;
    screen_writes(&s, &[own]).await;
    let refused = s
        .put_json(
            "/api/v1/settings",
            json!({"kiosk": {"lines": {"de": {"greeting": "Hallo!"}}}}),
            400,
        )
        .await;
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("kiosk.lines.de.greeting must contain {name}"),
        "{refused}"
    );

    // The offline recogniser hears English only: it says so in German, and writes it.
    let (d, _) = speak(&s).await;
    let line = "Gesprochene Fragen verstehe ich nur auf Englisch. Bitte tippen Sie auf den \
                Bildschirm, um eine Frage zu wählen.";
    assert_eq!(d["captions"]["said"], json!([line]), "{d}");
    let history = s.history(&cid).await;
    let stored = last_user_message(&history);
    assert_eq!(stored["content"], "Wo ist die Garderobe?");
    assert_eq!(stored["language"], "de", "{stored}");
    s.stop().await;
}
