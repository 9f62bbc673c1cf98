//! Recorded answers through the API (issue 32, point 4): each format a curator may have (WAV,
//! FLAC and Ogg Vorbis made by sox, MP3 by lame) is decoded to the right length; a file the
//! kiosk cannot play, a question that is not in the FAQ or a recording too long is refused
//! with the reason and leaves nothing stored; a new recording replaces the question's old one
//! (its blob gone); only the administrator may do any of it.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::{Server, sign_in};

const PASSWORD: &str = "recordings-password";

const FAQ: &str = "Q: Where is the cafe?\nA: The cafe is on the ground floor.\n\n\
    Q: When do you open?\nA: We open at nine every morning.\n";

/// A 2.5 s tone at 44.1 kHz stereo, as `name` (its extension chooses the format); made by
/// sox, or by lame from sox's WAV for an MP3.
fn tone(dir: &Path, name: &str, seconds: f64) -> PathBuf {
    let path = dir.join(name);
    let wav = dir.join(format!("{name}.wav"));
    let ok = Command::new("sox")
        .args(["-n", "-r", "44100", "-c", "2", "-b", "16"])
        .arg(&wav)
        .args(["synth", &seconds.to_string(), "sine", "330", "vol", "0.03"])
        .status()
        .unwrap();
    assert!(ok.success());
    let ok = if name.ends_with(".mp3") {
        Command::new("lame")
            .args(["--quiet", "-b", "128"])
            .arg(&wav)
            .arg(&path)
            .status()
    } else {
        Command::new("sox").arg(&wav).arg(&path).status()
    }
    .unwrap();
    assert!(ok.success(), "{name} made");
    path
}

/// Uploads `bytes` as the recorded answer `name` to `question`: the status and the answer.
pub(crate) async fn upload(
    s: &Server,
    cid: &str,
    question: &str,
    name: &str,
    bytes: Vec<u8>,
) -> (u16, Value) {
    let form = reqwest::multipart::Form::new()
        .text("question", question.to_string())
        .part(
            "file",
            reqwest::multipart::Part::bytes(bytes).file_name(name.to_string()),
        );
    let res = s
        .post(&format!("/api/v1/characters/{cid}/recordings"))
        .multipart(form)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

fn blob_files(s: &Server) -> usize {
    std::fs::read_dir(s.dir.path().join("blobs"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_type().unwrap().is_file())
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_format_is_read_a_bad_file_stores_nothing_and_a_new_one_replaces_the_old() {
    let mut s = Server::start_with(|c| c.access.admin_password = Some(PASSWORD.into())).await;
    let cookie = sign_in(&s, PASSWORD).await;
    s.as_admin(&cookie);
    let cid = s.character("Harbour Guide").await;
    s.knowledge_ready(&cid, "faq.txt", FAQ).await;
    let dir = tempfile::tempdir().unwrap();

    // Each format, 2.5 s: 2.5 s at 24 kHz once decoded (the MP3 encoder pads a little).
    for name in ["answer.wav", "answer.flac", "answer.ogg", "answer.mp3"] {
        let file = tone(dir.path(), name, 2.5);
        let (status, view) = upload(
            &s,
            &cid,
            "Where is the cafe?",
            name,
            std::fs::read(&file).unwrap(),
        )
        .await;
        assert_eq!(status, 201, "{name}: {view}");
        let seconds = view["seconds"].as_f64().unwrap();
        assert!((seconds - 2.5).abs() < 0.08, "{name}: {seconds} s");
        assert_eq!(view["language"], "en");
        assert_eq!(view["question"], "Where is the cafe?");
        // A quiet tone is raised to the speech's loudness.
        assert!(view["gain_db"].as_f64().unwrap() > 0.0, "{view}");
    }
    // One recording per question: each upload replaced the last, its blob gone.
    let list = s
        .get_json(&format!("/api/v1/characters/{cid}/recordings"), 200)
        .await;
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["orig_name"], "answer.mp3");
    let blobs = blob_files(&s);

    // Played back as WAV.
    let url = list[0]["url"].as_str().unwrap().to_string();
    let res = s.get(&url).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "audio/wav");
    let wav = res.bytes().await.unwrap();
    assert_eq!(&wav[..4], b"RIFF");

    // Refused, with the reason, storing nothing.
    let long = tone(dir.path(), "long.flac", 121.0);
    for (question, name, bytes, reason) in [
        (
            "Where is the cafe?",
            "page.html",
            b"<html>an answer</html>".to_vec(),
            "WAV (PCM or float), FLAC, Ogg Vorbis or MP3",
        ),
        (
            "Where is the cafe?",
            "cut.flac",
            std::fs::read(dir.path().join("answer.flac")).unwrap()[..2_000].to_vec(),
            "FLAC",
        ),
        (
            "Where is the cafe?",
            "long.flac",
            std::fs::read(&long).unwrap(),
            "longer than 120 seconds",
        ),
        (
            "Is there a lift?",
            "answer.wav",
            std::fs::read(dir.path().join("answer.wav")).unwrap(),
            "not an FAQ question",
        ),
    ] {
        let (status, body) = upload(&s, &cid, question, name, bytes).await;
        assert_eq!(status, 400, "{name}: {body}");
        let message = body["error"].as_str().unwrap_or_default().to_string()
            + body["detail"].as_str().unwrap_or_default();
        assert!(message.contains(reason), "{name}: {body}");
    }
    assert_eq!(blob_files(&s), blobs, "nothing stored on refusal");
    let again = s
        .get_json(&format!("/api/v1/characters/{cid}/recordings"), 200)
        .await;
    assert_eq!(again, list);

    // Only the administrator.
    let stranger = reqwest::Client::new();
    let res = stranger
        .get(s.url(&format!("/api/v1/characters/{cid}/recordings")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    let res = stranger.get(s.url(&url)).send().await.unwrap();
    assert_eq!(res.status(), 401);

    // Deleted: gone with its blob.
    let res = s.delete(&url).send().await.unwrap();
    assert_eq!(res.status(), 204);
    assert_eq!(blob_files(&s), blobs - 1);
    let res = s.get(&url).send().await.unwrap();
    assert_eq!(res.status(), 404);
    s.stop().await;
}
