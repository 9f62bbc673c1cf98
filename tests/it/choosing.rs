//! Choosing without speaking (issue 31, point 3): with `--devices sim`, the internal route's
//! touches and buttons reach the kiosk loop, which shows the question screen and asks the
//! question chosen as a spoken one; health says which inputs run. (The real touch screen's reader is tested in
//! `device::touch` over a pipe carrying the kernel's records: this machine has no
//! `/dev/uinput`.)

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use docent::config::{Config, DeviceMode};
use docent::device::Devices;
use docent::device::choice::QUEUE;
use docent::device::display::text::{Style, Weight, drawn_line_from, drawn_lines};
use docent::device::display::{captions, questions};
use serde_json::{Value, json};

use crate::languages::last_user_message;
use crate::support::{Server, Started, body_of, sign_in, start_kiosk};
use tokio::sync::oneshot;

/// A kiosk on `dir` whose devices the test holds.
struct Kiosk {
    base: String,
    devices: Arc<Devices>,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Kiosk {
    async fn start(dir: &Path, mode: DeviceMode) -> Kiosk {
        let config = Config {
            data_dir: dir.to_path_buf(),
            listen: "127.0.0.1:0".parse().unwrap(),
            devices: mode,
            ..Config::default()
        };
        let Started { ready, stop, task } = start_kiosk(config).await;
        Kiosk {
            base: format!("http://{}", ready.addr),
            devices: ready.devices,
            stop,
            task,
        }
    }

    async fn choose(&self, body: Value) -> (u16, Value) {
        let res = reqwest::Client::new()
            .post(format!("{}/api/v1/internal/device/choose", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), res.json().await.unwrap())
    }

    async fn health(&self) -> Value {
        let res = reqwest::get(format!("{}/api/v1/health", self.base)).await;
        res.unwrap().json::<Value>().await.unwrap()["device"].clone()
    }

    async fn stop(self) {
        drop(self.devices);
        let _ = self.stop.send(());
        self.task.await.unwrap();
    }
}

const PASSWORD: &str = "choosing-password";

const FAQ: &str = "Visiting\n\n\
    Q: Can I bring my dog?\nA: Only guide dogs are allowed inside the museum.\n\n\
    Q: Is there free wifi?\nA: Yes, the network is called Harbour Guest and it is free.\n\n\
    Q: Where is the cloakroom?\nA: The cloakroom is left of the main entrance.\n";

const QUESTIONS: [&str; 3] = [
    "Can I bring my dog?",
    "Is there free wifi?",
    "Where is the cloakroom?",
];

/// The kiosk's state as the internal device route shows it.
pub(crate) async fn device(s: &Server) -> Value {
    s.get_json("/api/v1/internal/device", 200).await
}

pub(crate) async fn choose(s: &Server, body: Value) {
    let v = s
        .post_json("/api/v1/internal/device/choose", body.clone(), 200)
        .await;
    assert_eq!(v["chosen"], true, "{body}");
}

/// Polls the device route until `ok` holds (10 s at most); returns the view then.
pub(crate) async fn until(s: &Server, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let d = device(s).await;
        if ok(&d) {
            return d;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{what}: {d}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The lines of `lines` are drawn in the caption panel's state colour, read back from the
/// simulated screen (waits up to 5 s for the frame).
pub(crate) async fn screen_writes(s: &Server, lines: &[&str]) {
    let (w, h) = docent::device::display::SIM_SIZE;
    let (pitch, size) = captions::metrics(h, 20);
    let lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let style = Style::new(size, Weight::Bold, captions::STATE_TEXT);
    let start = Instant::now();
    while drawn_lines(
        &snapshot(s).await,
        w,
        captions::margin(size) as i32,
        &lines,
        style,
        pitch,
    )
    .is_none()
    {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the screen writes {lines:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub(crate) async fn snapshot(s: &Server) -> Vec<u32> {
    let bytes = body_of(s.get("/api/v1/internal/device/snapshot")).await;
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes))
        .read_info()
        .unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    buf[..info.buffer_size()]
        .chunks(3)
        .map(|c| (c[0] as u32) << 16 | (c[1] as u32) << 8 | c[2] as u32)
        .collect()
}

pub(crate) fn speaker_len(d: &Value) -> u64 {
    let path = d["sim_audio"]["speaker"].as_str().unwrap();
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// Waits for the turn a choice started to be heard to its end; checks that it was the
/// question chosen, stored as asked by touch, and answered aloud.
async fn answered(s: &Server, cid: &str, question: &str) {
    let before = speaker_len(&device(s).await);
    until(s, "speaking", |d| d["status"] == "speaking").await;
    let d = until(s, "idle again", |d| d["status"] == "idle").await;
    assert_eq!(d["captions"]["heard"], question, "{d}");
    assert!(
        speaker_len(&d) > before + 24_000,
        "the answer was heard (more than half a second)"
    );
    let asked = last_user_message(&s.history(cid).await);
    assert_eq!(asked["content"], question);
    assert_eq!(asked["touch"], true, "{asked}");
}

/// A kiosk with simulated devices and `password`, its administrator signed in, and a character
/// "Harbour Guide": the server and the character's id.
pub(crate) async fn guide_on_a_sim_kiosk(password: &str) -> (Server, String) {
    let mut s = Server::start_with(|c| {
        c.devices = DeviceMode::Sim;
        c.access.admin_password = Some(password.into());
    })
    .await;
    let cookie = sign_in(&s, password).await;
    s.as_admin(&cookie);
    let cid = s.character("Harbour Guide").await;
    (s, cid)
}

/// A kiosk with simulated devices, signed in, speaking as a character whose FAQ's questions
/// are on the screen.
async fn kiosk_with_questions() -> (Server, String) {
    let (s, cid) = guide_on_a_sim_kiosk(PASSWORD).await;
    s.knowledge_ready(&cid, "faq.txt", FAQ).await;
    let res = s
        .put(&format!("/api/v1/characters/{cid}/screen-questions"))
        .json(&json!({ "questions": QUESTIONS }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    s.put_json(
        "/api/v1/settings",
        json!({"kiosk": {"character_id": cid}}),
        200,
    )
    .await;
    (s, cid)
}

/// A visitor who does not speak: the idle screen says the screen can be touched; a touch
/// opens the question screen (drawn, read back); the buttons walk it and choose; a touch on a
/// question asks it; a touch while the kiosk speaks cuts the answer; "Close" closes. Every
/// question chosen is heard, written (captions) and stored as asked by touch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitor_asks_by_touch_and_by_the_buttons_and_a_touch_cuts_the_reply() {
    let (s, cid) = kiosk_with_questions().await;
    assert_eq!(device(&s).await["health"]["choice"], "sim");

    // Idle: the panel offers the touch screen.
    until(&s, "the kiosk offers to choose", |d| {
        d["can_choose"] == true
    })
    .await;
    screen_writes(
        &s,
        &[
            "Hold the button to talk",
            "or touch the screen to choose a question",
        ],
    )
    .await;
    let (w, h) = docent::device::display::SIM_SIZE;

    // A touch anywhere opens the question screen: its title and its questions, drawn.
    choose(&s, json!({"touch": {"x": 0.5, "y": 0.5}})).await;
    let d = until(&s, "the question screen", |d| !d["questions"].is_null()).await;
    assert_eq!(d["questions"]["rows"], json!(QUESTIONS));
    let page = questions::Page {
        title: "Choose a question (1 of 1)".into(),
        rows: QUESTIONS.iter().map(|q| q.to_string()).collect(),
        page: 0,
        pages: 1,
        selected: 0,
        bar: ["‹ Previous".into(), "Close".into(), "Next ›".into()],
    };
    let mut want = vec![0u32; (w * h) as usize];
    questions::draw(&mut want, (w, h), &page);
    let start = Instant::now();
    loop {
        let px = snapshot(&s).await;
        if px == want {
            drawn_line_from(
                &px,
                w,
                (w / 30) as i32,
                "Choose a question (1 of 1)",
                questions::TITLE_TEXT,
            )
            .expect("the title, read back");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the question screen drawn"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The buttons: "next" points at the second question, "choose" asks it.
    choose(&s, json!("next")).await;
    until(&s, "the second question pointed at", |d| {
        d["questions"]["selected"] == 1
    })
    .await;
    choose(&s, json!("choose")).await;
    answered(&s, &cid, QUESTIONS[1]).await;

    // A touch on the third question's row asks it; a touch while it is said cuts it and opens
    // the question screen again.
    choose(&s, json!({"touch": {"x": 0.5, "y": 0.5}})).await;
    until(&s, "the question screen", |d| !d["questions"].is_null()).await;
    choose(
        &s,
        json!({"touch": {"x": 0.5, "y": questions::row_centre(2)}}),
    )
    .await;
    let d = until(&s, "speaking", |d| d["status"] == "speaking").await;
    assert_eq!(d["captions"]["heard"], QUESTIONS[2]);
    choose(&s, json!({"touch": {"x": 0.5, "y": 0.5}})).await;
    let d = until(&s, "cut", |d| {
        d["status"] == "idle" && !d["questions"].is_null()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let cut = speaker_len(&d);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(speaker_len(&device(&s).await), cut, "the answer stopped");

    // "Close" closes it; the first row asks the first question.
    choose(&s, json!({"touch": {"x": 0.5, "y": 0.95}})).await;
    until(&s, "closed", |d| d["questions"].is_null()).await;
    choose(&s, json!({"touch": {"x": 0.5, "y": 0.5}})).await;
    until(&s, "the question screen", |d| !d["questions"].is_null()).await;
    choose(
        &s,
        json!({"touch": {"x": 0.5, "y": questions::row_centre(0)}}),
    )
    .await;
    answered(&s, &cid, QUESTIONS[0]).await;

    // Off the screen, unknown, or not a choice at all: 400.
    for body in [
        json!({"touch": {"x": 1.5, "y": 0.5}}),
        json!({"touch": {"x": -0.1, "y": 0.5}}),
        json!({"touch": {"x": 0.5}}),
        json!("louder"),
        json!({"pressed": true}),
    ] {
        let res = s
            .post("/api/v1/internal/device/choose")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 400, "{body}");
    }
    // A visitor tapping on and on: every tap is answered, the queue stays bounded.
    for _ in 0..QUEUE + 5 {
        choose(&s, json!("next")).await;
    }
    s.stop().await;
}

/// A visitor who wants nothing of their visit kept: during a visit the question screen's last
/// row forgets it at once: its transcript goes (the counts stay), the visit ends, and the screen
/// says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitor_has_their_visit_forgotten_from_the_question_screen() {
    let (s, cid) = kiosk_with_questions().await;
    until(&s, "the kiosk offers to choose", |d| {
        d["can_choose"] == true
    })
    .await;

    // No visit yet: nothing to forget on the screen.
    choose(&s, json!({"touch": {"x": 0.5, "y": 0.5}})).await;
    let d = until(&s, "the question screen", |d| !d["questions"].is_null()).await;
    assert_eq!(d["questions"]["rows"], json!(QUESTIONS), "{d}");
    choose(
        &s,
        json!({"touch": {"x": 0.5, "y": questions::row_centre(0)}}),
    )
    .await;
    answered(&s, &cid, QUESTIONS[0]).await;
    let visit = device(&s).await["session_id"].as_str().unwrap().to_string();
    assert!(!visit.is_empty());

    choose(&s, json!({"touch": {"x": 0.5, "y": 0.5}})).await;
    let d = until(&s, "the question screen", |d| !d["questions"].is_null()).await;
    assert_eq!(d["questions"]["rows"][3], "Forget my visit", "{d}");
    choose(
        &s,
        json!({"touch": {"x": 0.5, "y": questions::row_centre(3)}}),
    )
    .await;
    let d = until(&s, "forgotten", |d| d["session_id"] == "").await;
    assert_eq!(
        d["captions"]["said"],
        json!(["Your visit is forgotten: nothing of it is kept."]),
        "{d}"
    );
    let history = s.history(&cid).await;
    assert!(
        history["messages"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["session_id"] != visit.as_str()),
        "{history}"
    );
    let stats = s
        .get_json(&format!("/api/v1/characters/{cid}/statistics"), 200)
        .await;
    assert_eq!(stats["days"][0]["questions"], 1, "the count stays: {stats}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_devices_there_is_nothing_to_choose_with() {
    let dir = tempfile::tempdir().unwrap();
    let k = Kiosk::start(dir.path(), DeviceMode::None).await;
    let (status, answer) = k.choose(json!("next")).await;
    assert_eq!(status, 503, "{answer}");
    assert_eq!(k.health().await["choice"], "absent");
    k.stop().await;
}
