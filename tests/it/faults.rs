//! Faults of the kiosk's surroundings: the data partition filling up (a real tmpfs of a few MB
//! as the data directory), a language model that hangs, cuts or garbles its stream, the soak of
//! many WebSocket clients in its short form.

use std::path::Path;
use std::time::Duration;

use crate::support::disk::{Tmpfs, fill, unfill};
use crate::support::{Server, assert_error, expect};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n";
const RESERVE: u64 = 1 << 20;

fn files_in(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

async fn create_character(s: &Server, name: &str, status: u16) -> Value {
    expect(
        s.post("/api/v1/characters").json(&json!({"name": name})),
        status,
    )
    .await
}

async fn upload_image(s: &Server, cid: &str, bytes: Vec<u8>, status: u16) -> Value {
    let form = reqwest::multipart::Form::new().part(
        "avatar",
        reqwest::multipart::Part::bytes(bytes).file_name("face.png"),
    );
    expect(
        s.post(&format!("/api/v1/characters/{cid}/avatar"))
            .multipart(form),
        status,
    )
    .await
}

async fn upload_knowledge(s: &Server, cid: &str, text: String, status: u16) -> Value {
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(text.into_bytes()).file_name("facts.txt"),
    );
    expect(
        s.post(&format!("/api/v1/characters/{cid}/knowledge/files"))
            .multipart(form),
        status,
    )
    .await
}

/// Asserts a 507 with a clear message.
fn assert_full(v: &Value, what: &str) {
    assert_error(v);
    let m = v["error"].as_str().unwrap();
    assert!(m.contains("storage is full"), "{what}: {v}");
}

/// Sends one typed question on the session's WebSocket and returns the assistant's final text.
pub async fn ws_turn(addr: std::net::SocketAddr, sid: &str, text: &str) -> String {
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/ws/chat/{sid}"))
        .await
        .expect("WebSocket connects");
    ws.send(Message::text(
        json!({"type": "text_input", "text": text}).to_string(),
    ))
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let frame = tokio::time::timeout_at(deadline, ws.next())
            .await
            .expect("the turn answers in time")
            .expect("the WebSocket stays open")
            .expect("a frame");
        let Message::Text(t) = frame else { continue };
        let v: Value = serde_json::from_str(&t).unwrap();
        if v["type"] == "transcript" && v["speaker"] == "assistant" && v["is_final"] == true {
            let _ = ws.close(None).await;
            return v["text"].as_str().unwrap().to_string();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_data_partition_refuses_writes_keeps_talking_and_recovers() {
    let Some(mut fs) = Tmpfs::mount(24) else {
        return;
    };
    let root = fs.path.clone();
    let s = Server::start_in(fs.take_dir(), |c| {
        c.storage.data_reserve_bytes = RESERVE;
        c.devices = docent::config::DeviceMode::None;
    })
    .await;
    let cid = create_character(&s, "Before", 201).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    upload_image(&s, &cid, [PNG, &[1u8; 4000]].concat(), 200).await;
    let sid = s.session(&cid).await;
    let blobs_before = files_in(&root.join("blobs"));

    // Below the reserve: every write is refused before it touches anything.
    fill(&root, RESERVE / 2);
    assert_full(&create_character(&s, "During", 507).await, "character");
    assert_full(
        &upload_image(&s, &cid, [PNG, &[2u8; 4000]].concat(), 507).await,
        "image",
    );
    assert_full(
        &upload_knowledge(&s, &cid, "The lens is from 1872.\n".into(), 507).await,
        "knowledge",
    );
    // The kiosk still answers a visitor, over REST and the WebSocket, without its history.
    let answer = ws_turn(s.addr, &sid, "Hello, are you there?").await;
    assert!(!answer.is_empty());
    expect(
        s.post(&format!("/api/v1/sessions/{sid}/message"))
            .json(&json!({"text": "Still there?"})),
        202,
    )
    .await;

    // Above the reserve but too little for the upload: the blob write itself meets ENOSPC.
    unfill(&root);
    fill(&root, RESERVE + (256 << 10));
    let big = "The lighthouse lens was made in Paris. ".repeat(2 << 20 >> 5);
    assert_full(&upload_knowledge(&s, &cid, big, 507).await, "knowledge");
    assert_eq!(
        files_in(&root.join("blobs")),
        blobs_before,
        "nothing half-written is left"
    );
    assert!(files_in(&root.join("blobs/tmp")).is_empty());

    // Space freed: everything works again, without a restart.
    unfill(&root);
    let after = create_character(&s, "After", 201).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    upload_image(&s, &after, [PNG, &[3u8; 4000]].concat(), 200).await;
    upload_knowledge(&s, &after, "The lens is from 1872.\n".into(), 201).await;
    let answer = ws_turn(s.addr, &sid, "And now?").await;
    assert!(!answer.is_empty());

    // The database is sound: a restart finds exactly what was acknowledged.
    let dir = s.stop().await;
    let s = Server::start_in(dir, |c| {
        c.storage.data_reserve_bytes = RESERVE;
        c.devices = docent::config::DeviceMode::None;
    })
    .await;
    let list = s.get_json("/api/v1/characters", 200).await;
    let names: Vec<&str> = list
        .as_array()
        .or(list["characters"].as_array())
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"Before") && names.contains(&"After"),
        "{names:?}"
    );
    assert!(!names.contains(&"During"), "{names:?}");
    let images = s
        .get_json(&format!("/api/v1/characters/{after}/images"), 200)
        .await;
    assert!(images.to_string().contains(".png"), "{images}");
    let history = s.history(&cid).await;
    assert!(
        history.to_string().contains("And now?"),
        "the turn after recovery is stored: {history}"
    );
    drop(s);
    drop(fs);
}

/// Without a reserve the database itself meets the full disk: redb fails the commit and then
/// refuses everything until it is opened again, which the store does once space is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_recovers_from_a_commit_on_a_full_disk_without_a_restart() {
    let Some(mut fs) = Tmpfs::mount(16) else {
        return;
    };
    let root = fs.path.clone();
    let tweak = |c: &mut docent::config::Config| {
        c.storage.data_reserve_bytes = 0;
        c.devices = docent::config::DeviceMode::None;
    };
    let s = Server::start_in(fs.take_dir(), tweak).await;
    create_character(&s, "Before", 201).await;
    fill(&root, 0);
    let mut refused = 0;
    for i in 0..50 {
        let res = s
            .post("/api/v1/characters")
            .json(&json!({"name": format!("Full {i}"), "description": "x".repeat(4000)}))
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        assert!(
            status == 201 || status == 507,
            "a full disk is 507, not {status}: {}",
            res.text().await.unwrap()
        );
        if status == 507 {
            refused += 1;
            let v: Value = res.json().await.unwrap();
            assert_full(&v, "character on a full disk");
        }
    }
    assert!(refused > 0, "the disk filled up");
    unfill(&root);
    create_character(&s, "After", 201).await;
    let dir = s.stop().await;
    let s = Server::start_in(dir, tweak).await;
    let list = s.get_json("/api/v1/characters", 200).await.to_string();
    assert!(
        list.contains("\"After\"") && list.contains("\"Before\""),
        "{list}"
    );
    drop(s);
    drop(fs);
}
