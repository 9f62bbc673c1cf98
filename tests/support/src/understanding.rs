//! The understanding rig, shared by the benchmark (`benches/understanding/main.rs`) and its smaller
//! CI version (`tests/it/understanding.rs`): a kiosk with simulated devices and the offline
//! engine in this process, a character that knows the three files of `tests/data/understanding`
//! (markdown sections, an FAQ, a long text), and questions spoken by synthetic voices (espeak-ng
//! variants and flite, separate programs from Debian's packages), slowed, sped up or with noise
//! added (sox), written to the simulated microphone and asked by holding the simulated button,
//! as a visitor would. A reply is right when it holds the expected fact, "say again" when the
//! kiosk asks to hear the question again, says it does not know or asks which of two topics is
//! meant (the benchmark asks once; `tests/it/understanding.rs` answers one), wrong otherwise.

use std::path::Path;
use std::time::{Duration, Instant};

use docent::config::DeviceMode;
use docent::device::Devices;
use docent::engine::live::{Event, Status};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::{broadcast, watch};

use crate::bench::{Kiosk, get_json};

pub const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/understanding");
const KNOWLEDGE: &[&str] = &["museum.md", "faq.md", "history.txt"];

/// A synthetic voice: the program and its voice name.
#[derive(Clone, Copy)]
pub enum Voice {
    Espeak(&'static str),
    Flite(&'static str),
}

pub const VOICES: &[Voice] = &[
    Voice::Espeak("en-us"),
    Voice::Espeak("en-gb-x-rp+f3"),
    Voice::Flite("slt"),
    Voice::Flite("awb"),
];

/// How a question's recording is changed; questions take them in turn.
#[derive(Clone, Copy, Debug)]
pub enum Variation {
    Clean,
    Slower,
    Faster,
    Noise,
}

pub const VARIATIONS: [Variation; 4] = [
    Variation::Clean,
    Variation::Slower,
    Variation::Faster,
    Variation::Noise,
];

#[derive(Deserialize)]
struct Questions {
    question: Vec<Question>,
}

#[derive(Deserialize)]
pub struct Question {
    pub text: String,
    pub expect: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    Right,
    SayAgain,
    Wrong,
}

/// One question asked and answered.
pub struct Outcome {
    pub verdict: Verdict,
    /// Button release to the first reply audio, in ms.
    pub latency_ms: Option<f64>,
}

/// Right, say again and wrong answers of a voice (or of all), with the latencies.
#[derive(Default)]
pub struct Tally {
    pub counts: [usize; 3],
    pub latencies_ms: Vec<f64>,
}

impl Tally {
    pub fn add(&mut self, o: &Outcome) {
        self.counts[o.verdict as usize] += 1;
        self.latencies_ms.extend(o.latency_ms);
    }

    pub fn percent(&self, verdict: Verdict) -> f64 {
        let all: usize = self.counts.iter().sum();
        self.counts[verdict as usize] as f64 * 100.0 / all.max(1) as f64
    }

    /// The 50th and 95th percentiles of the latencies.
    pub fn p50_p95(&mut self) -> (f64, f64) {
        let v = &mut self.latencies_ms;
        if v.is_empty() {
            return (f64::NAN, f64::NAN);
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let at = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
        (at(0.5), at(0.95))
    }

    pub fn row(&mut self, label: &str) -> String {
        let (p50, p95) = self.p50_p95();
        format!(
            "{label:24} {:>5.0}% {:>8.0}% {:>5.0}%  {p50:>9.0} {p95:>9.0}",
            self.percent(Verdict::Right),
            self.percent(Verdict::SayAgain),
            self.percent(Verdict::Wrong),
        )
    }
}

pub const HEADER: &str = "voice                     right say again  wrong     p50 ms    p95 ms";

/// Every question of `questions.toml`.
pub fn questions() -> Vec<Question> {
    let text = std::fs::read_to_string(Path::new(DATA).join("questions.toml")).unwrap();
    toml::from_str::<Questions>(&text)
        .expect("questions.toml")
        .question
}

/// A running kiosk whose visitor session is followed.
pub struct Rig {
    devices: std::sync::Arc<Devices>,
    state: watch::Receiver<docent::device::KioskState>,
    events: broadcast::Receiver<Event>,
    mic: std::path::PathBuf,
    kiosk: Kiosk,
    _dir: tempfile::TempDir,
    asked: usize,
    /// The character the kiosk speaks as.
    pub character: String,
}

/// A question asked through the kiosk, as it went.
pub struct Asked {
    pub outcome: Outcome,
    /// What the kiosk heard (its `user_speech`), and its reply.
    pub heard: String,
    pub reply: String,
}

impl Rig {
    pub async fn start() -> Rig {
        Rig::start_with(|_| {}).await
    }

    /// A rig whose kiosk's configuration `tweak` adjusts (its devices are simulated).
    pub async fn start_with(tweak: impl FnOnce(&mut docent::config::Config)) -> Rig {
        if std::env::var_os("UNDERSTANDING_VERBOSE").is_some() {
            // How each question's two recognition passes were weighed.
            let _ = tracing_subscriber::fmt()
                .with_env_filter("docent::engine::providers=debug")
                .try_init();
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let kiosk = Kiosk::start(dir.path(), |c| {
            c.devices = DeviceMode::Sim;
            tweak(c);
        })
        .await;
        let ready = &kiosk.ready;
        let site = kiosk.site();
        let character = make_character(&reqwest::Client::new(), &site).await;
        let engine = ready.engine.clone();
        let id = character.clone();
        tokio::task::spawn_blocking(move || {
            engine.update_settings(&json!({ "kiosk": { "character_id": id } }))
        })
        .await
        .unwrap()
        .expect("kiosk character");

        let devices = ready.devices.clone();
        let mic = devices.sim_audio.clone().expect("simulated audio").mic;
        let mut state = devices.state.clone();
        // The kiosk follows the settings within a second.
        state
            .wait_for(|s| s.character_id == character)
            .await
            .unwrap();
        // A first press of silence opens the visitor's session (and warms up the recogniser).
        devices.press(true).unwrap();
        state
            .wait_for(|s| s.status == Status::Listening)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        devices.press(false).unwrap();
        state
            .wait_for(|s| s.status != Status::Listening)
            .await
            .unwrap();
        state.wait_for(|s| s.status == Status::Idle).await.unwrap();
        let session = state.borrow().session_id.clone();
        assert!(!session.is_empty(), "the kiosk opened its visitor session");
        let events = ready
            .engine
            .live(&docent::engine::SessionId::parse(&session).unwrap())
            .unwrap()
            .subscribe();
        Rig {
            devices,
            state,
            events,
            mic,
            kiosk,
            _dir: dir,
            asked: 0,
            character,
        }
    }

    /// The kiosk's engine.
    pub fn engine(&self) -> std::sync::Arc<docent::engine::Engine> {
        self.kiosk.ready.engine.clone()
    }

    /// The kiosk's devices (its simulated screen, audio and state).
    pub fn devices(&self) -> std::sync::Arc<Devices> {
        self.devices.clone()
    }

    /// Asks `q` in `voice`, the recording changed by the next variation in turn.
    pub async fn ask(&mut self, voice: Voice, q: &Question) -> Outcome {
        let variation = VARIATIONS[self.asked % VARIATIONS.len()];
        self.asked += 1;
        self.ask_as(voice, q, variation).await.outcome
    }

    /// Asks `q` in `voice`, the recording changed by `variation`.
    pub async fn ask_as(&mut self, voice: Voice, q: &Question, variation: Variation) -> Asked {
        let pcm = spoken(voice, &q.text, variation);
        std::fs::write(&self.mic, &pcm).unwrap();
        let seconds = pcm.len() as f64 / 32_000.0;
        while self.events.try_recv().is_ok() {}
        self.devices.press(true).unwrap();
        self.state
            .wait_for(|s| s.status == Status::Listening)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs_f64(seconds + 0.3)).await;
        self.devices.press(false).unwrap();
        let released = Instant::now();
        let (heard, reply, first_audio) = turn(&mut self.events).await;
        let verdict = judge(&reply, &q.expect);
        if std::env::var_os("UNDERSTANDING_VERBOSE").is_some() {
            println!(
                "  {verdict:?} {} {variation:?} {:?} heard {heard:?} -> {reply:?}",
                voice.label(),
                q.text
            );
        }
        self.state
            .wait_for(|s| s.status == Status::Idle)
            .await
            .unwrap();
        Asked {
            outcome: Outcome {
                verdict,
                latency_ms: first_audio.map(|at| (at - released).as_secs_f64() * 1000.0),
            },
            heard,
            reply,
        }
    }

    pub async fn stop(self) {
        self.kiosk.stop().await;
    }
}

impl Voice {
    pub fn label(&self) -> String {
        match self {
            Voice::Espeak(v) => format!("espeak-ng {v}"),
            Voice::Flite(v) => format!("flite {v}"),
        }
    }
}

/// A character that knows the three files, ready to answer.
pub async fn make_character(http: &reqwest::Client, site: &str) -> String {
    let created = crate::answer_json(
        http.post(format!("{site}/api/v1/characters"))
            .json(&json!({ "name": "Harbour guide" })),
    )
    .await;
    let id = created["id"].as_str().expect("character id").to_string();
    let mut form = reqwest::multipart::Form::new();
    for name in KNOWLEDGE {
        let bytes = std::fs::read(Path::new(DATA).join(name)).unwrap();
        form = form.part(
            "files",
            reqwest::multipart::Part::bytes(bytes).file_name(name.to_string()),
        );
    }
    crate::send_ok(
        http.post(format!("{site}/api/v1/characters/{id}/knowledge/files"))
            .multipart(form),
        "knowledge upload",
    )
    .await;
    let started = Instant::now();
    loop {
        let list = get_json(http, &format!("{site}/api/v1/characters/{id}/knowledge")).await;
        let sources = list["sources"].as_array().cloned().unwrap_or_default();
        if sources.len() == KNOWLEDGE.len() && sources.iter().all(|s| s["status"] == "ready") {
            return id;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "knowledge not ready: {list}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The question as the microphone hears it: 16 kHz mono S16_LE.
pub fn spoken(voice: Voice, text: &str, variation: Variation) -> Vec<u8> {
    let wav = tempfile::Builder::new().suffix(".wav").tempfile().unwrap();
    let raw = tempfile::Builder::new().suffix(".raw").tempfile().unwrap();
    let ok = match voice {
        Voice::Espeak(v) => std::process::Command::new("espeak-ng")
            .args(["-v", v, "-w"])
            .arg(wav.path())
            .arg(text)
            .status(),
        Voice::Flite(v) => std::process::Command::new("flite")
            .args(["-voice", v, "-t", text, "-o"])
            .arg(wav.path())
            .status(),
    }
    .expect("the voice's program runs (./x bench installs it)");
    assert!(ok.success(), "{} failed", voice.label());
    let mut sox = std::process::Command::new("sox");
    sox.arg(wav.path())
        .args([
            "-r", "16000", "-c", "1", "-b", "16", "-e", "signed", "-t", "raw",
        ])
        .arg(raw.path());
    match variation {
        Variation::Clean | Variation::Noise => {}
        Variation::Slower => {
            sox.args(["tempo", "0.85"]);
        }
        Variation::Faster => {
            sox.args(["tempo", "1.15"]);
        }
    }
    assert!(sox.status().expect("sox runs").success());
    let mut bytes = std::fs::read(raw.path()).unwrap();
    if let Variation::Noise = variation {
        add_noise(&mut bytes);
    }
    bytes
}

/// White noise about 26 dB below full scale, the same every run.
fn add_noise(bytes: &mut [u8]) {
    let mut x: u32 = 0x9E37_79B9;
    for s in bytes.chunks_exact_mut(2) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let noise = (x % 1200) as i32 - 600;
        let v = i16::from_le_bytes([s[0], s[1]]) as i32 + noise;
        s.copy_from_slice(&(v.clamp(-32768, 32767) as i16).to_le_bytes());
    }
}

/// Follows one turn: what was heard, the reply, when its first audio came.
async fn turn(events: &mut broadcast::Receiver<Event>) -> (String, String, Option<Instant>) {
    let mut heard = String::new();
    let mut first_audio = None;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let event = tokio::time::timeout_at(deadline, events.recv())
            .await
            .expect("a reply within a minute");
        match event {
            Ok(Event::UserSpeech { text, .. }) => heard = text,
            Ok(Event::Audio { .. }) if first_audio.is_none() => first_audio = Some(Instant::now()),
            Ok(Event::Transcript {
                speaker: "assistant",
                text,
                is_final: true,
                ..
            }) => {
                return (heard, text, first_audio);
            }
            Ok(Event::Error { message, .. }) => return (heard, format!("error: {message}"), None),
            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => panic!("session closed"),
        }
    }
}

pub fn judge(reply: &str, expect: &[String]) -> Verdict {
    let reply = reply.to_lowercase();
    if expect.iter().any(|e| reply.contains(&e.to_lowercase())) {
        Verdict::Right
    } else if [
        "say that again",
        "say it again",
        "don't know",
        "do you mean",
    ]
    .iter()
    .any(|p| reply.contains(p))
    {
        Verdict::SayAgain
    } else {
        Verdict::Wrong
    }
}
