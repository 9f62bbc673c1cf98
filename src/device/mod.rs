//! The board itself as a client of the engine: microphone and speaker (ALSA), the push-to-talk
//! button and its LED (GPIO through `embedded-hal`), the display (DRM/KMS or fbdev), and the
//! kiosk loop that ties them to one engine session for the visitor standing in front of it.
//!
//! Every device has a simulated stand-in (`--devices sim`, chosen automatically when the real one
//! is missing), so the whole loop runs on a laptop and in CI: ALSA's `file`/`null` plugins, an
//! in-memory button, an in-memory framebuffer.
//!
//! Choice per device (`devices` = `auto` | `sim` | `real` | `none`):
//! - audio: real when ALSA lists a sound card (`auto`) or always (`real`); else simulated: the
//!   PCMs of `board/sim/asoundrc` over `DATA_DIR/sim/mic.raw` (read from its start at every
//!   press; 16 kHz mono S16_LE) and `DATA_DIR/sim/speaker.raw` (everything played; 24 kHz mono
//!   S16_LE); with `audio.assistive_playback_device` set, the assistive speaker is
//!   `DATA_DIR/sim/assistive.raw` (the same form).
//! - button: real when the GPIO chip exists or an evdev key is configured (`auto`), or always
//!   (`real`); else the in-memory `SimPin`s (button and LED).
//! - display: see `display`.
//! - choosing without speaking (`choice`, docs/touch.md): a touch screen (evdev) and up to
//!   three GPIO buttons, real when one is present or configured (`auto`); else the internal
//!   route's simulated choices.
//!
//! A device that is missing in `real` mode is reported in health and the kiosk goes on without
//! it.

pub mod audio;
pub mod audio_check;
pub mod choice;
pub mod display;
pub mod kiosk;
pub mod presence;
pub mod ptt;
pub mod touch;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::{Notify, mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::config::DeviceMode;
use crate::engine::Engine;
use crate::engine::hours::Opening;
use crate::engine::language::{Language, Words};
use crate::engine::live::Status;
use crate::watchdog::Heartbeat;

/// What the kiosk shows and does right now; the display follows it.
#[derive(Debug, Clone, PartialEq)]
pub struct KioskState {
    pub status: Status,
    /// The character the kiosk speaks as ("" when there is none).
    pub character_id: String,
    /// The visitor's session ("" when none is open), so the console can watch it.
    pub session_id: String,
    /// In first boot, the button was held for 5 s less than 10 minutes ago: the setup screen
    /// shows the password (see `presence`).
    pub password_shown: bool,
    /// Whether the kiosk is open (the opening hours in the settings, at the kiosk loop's clock).
    pub opening: Opening,
    /// What the screen writes of the visit, for a visitor who cannot hear it.
    pub captions: Captions,
    /// The question screen, while a visitor chooses a question without speaking.
    pub questions: Option<display::questions::Page>,
    /// Whether a visitor can choose a question (the character has questions on the screen and
    /// the kiosk has a touch screen, buttons or their simulation): the idle screen says how.
    pub can_choose: bool,
    /// The visit's language (the museum's default until chosen or heard).
    pub language: Language,
    /// The kiosk's own lines in it, as the screen writes them.
    pub words: Arc<Words>,
}

/// The captions of the visit in progress: the kiosk loop keeps them in step with the button,
/// the recogniser and the speaker; the display writes them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Captions {
    /// The microphone's level while listening (0-100), so a visitor sees they are heard.
    pub level: u8,
    /// What the kiosk understood the visitor to ask ("" until the recogniser answers).
    pub heard: String,
    /// The reply's sentences whose speech has reached the speaker, in order: the last is the
    /// one being said. After the reply they stay for `kiosk.caption_linger_ms`.
    pub said: Vec<String>,
}

impl Captions {
    pub fn is_empty(&self) -> bool {
        self.heard.is_empty() && self.said.is_empty()
    }
}

impl KioskState {
    /// Idle, open, no character, no visit: where the kiosk starts.
    pub fn idle() -> KioskState {
        KioskState {
            status: Status::Idle,
            character_id: String::new(),
            session_id: String::new(),
            password_shown: false,
            opening: Opening::always(),
            captions: Captions::default(),
            questions: None,
            can_choose: false,
            language: Language::english(),
            words: Arc::default(),
        }
    }
}

/// How one device is doing. The health route shows it as `"ok"`, `"sim"`, `"absent"` or the
/// problem's text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Health {
    /// The real device works.
    Ok,
    /// Its simulated stand-in runs.
    Sim,
    /// There is none: devices are off, or it was never started.
    #[default]
    Absent,
    /// It is missing or failing: what is wrong.
    Problem(String),
}

impl Health {
    pub fn as_str(&self) -> &str {
        match self {
            Health::Ok => "ok",
            Health::Sim => "sim",
            Health::Absent => "absent",
            Health::Problem(p) => p,
        }
    }

    /// `Ok` or `Sim`, depending on which kind of device runs.
    pub fn working(sim: bool) -> Health {
        if sim { Health::Sim } else { Health::Ok }
    }
}

impl std::fmt::Display for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Health {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// How each device is doing, for the health route.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct DeviceHealth {
    pub audio: Health,
    pub ptt: Health,
    pub display: Health,
    /// The touch screen and the choice buttons together.
    pub choice: Health,
}

impl DeviceHealth {
    /// Whether the devices a visitor needs serve: audio, button and display each works or is
    /// absent (a kiosk without one is not less available for it). Availability counts this.
    pub fn serving(&self) -> bool {
        [&self.audio, &self.ptt, &self.display]
            .iter()
            .all(|h| !matches!(h, Health::Problem(_)))
    }
}

/// Shared, updatable device health.
#[derive(Default)]
pub struct HealthBoard(Mutex<DeviceHealth>);

impl HealthBoard {
    pub fn get(&self) -> DeviceHealth {
        self.0.lock().expect("health lock").clone()
    }

    pub fn set(&self, f: impl FnOnce(&mut DeviceHealth)) {
        f(&mut self.0.lock().expect("health lock"));
    }
}

/// The files behind the simulated microphone and speaker.
#[derive(Debug, Clone)]
pub struct SimAudio {
    /// Raw 16 kHz mono S16_LE samples, read from the start at every press (then silence).
    pub mic: PathBuf,
    /// Raw 24 kHz mono S16_LE samples: everything the kiosk played since it started.
    pub speaker: PathBuf,
    /// The assistive speaker's file (the same form), when one is configured.
    pub assistive: Option<PathBuf>,
}

impl SimAudio {
    pub const MIC_RATE: u32 = 16_000;
    pub const SPEAKER_RATE: u32 = 24_000;
}

/// Handles the rest of the program keeps on the running devices.
pub struct Devices {
    pub mode: DeviceMode,
    pub health: Arc<HealthBoard>,
    /// The simulated button, when the button is simulated (pressed by tests and the internal
    /// route).
    pub sim_button: Option<Arc<ptt::SimPin>>,
    /// The simulated LED, when the LED is simulated.
    pub sim_led: Option<Arc<ptt::SimPin>>,
    /// The in-memory framebuffer, when the display is simulated.
    pub sim_screen: Option<Arc<display::MemoryScreen>>,
    /// The microphone and speaker files, when the audio is simulated.
    pub sim_audio: Option<SimAudio>,
    /// The audio threads, when there is audio (their `subscribe` reports playback with times).
    pub audio: Option<Arc<audio::Audio>>,
    /// The kiosk state, as the display follows it.
    pub state: watch::Receiver<KioskState>,
    /// The kiosk loop's heartbeat, for the watchdog (none without devices).
    pub heartbeat: Option<Arc<Heartbeat>>,
    /// Stalls the kiosk loop (the test hook).
    stall: Option<Arc<Notify>>,
    /// The kiosk loop's test sound requests (none without a kiosk loop).
    test_sounds: Option<mpsc::UnboundedSender<u8>>,
    /// The touch screen and the choice buttons (the kiosk loop took their receiver).
    choice: choice::Inputs,
    running: Mutex<Option<Running>>,
}

struct Running {
    stop: CancellationToken,
    kiosk: Option<tokio::task::JoinHandle<()>>,
    ptt_stop: Arc<AtomicBool>,
    ptt_wake: Arc<ptt::Wake>,
    ptt_thread: Option<std::thread::JoinHandle<()>>,
    display_thread: Option<std::thread::JoinHandle<()>>,
    /// Holds the kiosk state channel open when there is no kiosk loop.
    _state: Option<watch::Sender<KioskState>>,
}

/// Why the internal route cannot press the button.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PressError {
    /// The kiosk runs with no devices.
    NoDevices,
    /// The button is a real one.
    NotSimulated,
}

impl Devices {
    /// No devices (what `--devices none` runs with).
    pub fn none() -> Devices {
        let (tx, rx) = watch::channel(KioskState::idle());
        Devices {
            mode: DeviceMode::None,
            health: Arc::new(HealthBoard::default()),
            sim_button: None,
            sim_led: None,
            sim_screen: None,
            sim_audio: None,
            audio: None,
            state: rx,
            heartbeat: None,
            stall: None,
            test_sounds: None,
            choice: choice::Inputs::none(),
            running: Mutex::new(Some(Running {
                stop: CancellationToken::new(),
                kiosk: None,
                ptt_stop: Arc::default(),
                ptt_wake: Arc::default(),
                ptt_thread: None,
                display_thread: None,
                _state: Some(tx),
            })),
        }
    }

    /// Starts the devices of `engine.config.devices` and the kiosk loop. `console` is where the
    /// display's setup screens send the administrator: the address the kiosk serves on (see
    /// `display::admin_url`) and the HTTPS certificate's fingerprint.
    pub async fn start(engine: &Arc<Engine>, console: display::Console) -> Arc<Devices> {
        let mode = engine.config.devices;
        if mode == DeviceMode::None {
            return Arc::new(Devices::none());
        }
        let health = Arc::new(HealthBoard::default());
        let (state_tx, state_rx) = watch::channel(KioskState::idle());

        let AudioParts {
            audio,
            captured,
            played,
            sim: sim_audio,
        } = start_audio(engine, mode, &health);

        let (buttons_tx, buttons) = mpsc::unbounded_channel();
        let ptt_stop = Arc::new(AtomicBool::new(false));
        let PttParts {
            sim_button,
            sim_led,
            wake: ptt_wake,
            thread: ptt_thread,
        } = start_ptt(
            engine,
            mode,
            &health,
            state_rx.clone(),
            buttons_tx,
            &ptt_stop,
        );

        // The display engineer's player: follows `state_rx`, draws the character's clips.
        let display = display::start(
            engine,
            &engine.config.display,
            mode,
            console,
            state_rx.clone(),
        );
        let sim_screen = display.sim_screen;
        health.set(|h| h.display = display.health);
        let choice = choice::Inputs::start(
            mode,
            &engine.config.touch,
            &engine.config.choice_buttons,
            &health,
        );

        let stop = CancellationToken::new();
        if let Some(a) = audio.as_ref().filter(|a| a.has_assistive()) {
            tokio::spawn(follow_assistive_volume(
                Arc::downgrade(engine),
                a.clone(),
                stop.clone(),
            ));
        }
        let heartbeat = Arc::new(Heartbeat::default());
        let stall = Arc::new(Notify::new());
        let (test_sounds, test_sounds_rx) = mpsc::unbounded_channel();
        let kiosk = tokio::spawn(kiosk::run(kiosk::KioskParts {
            engine: engine.clone(),
            config: engine.config.kiosk.clone(),
            audio: audio.clone(),
            captured,
            played,
            buttons,
            state: state_tx,
            wake: ptt_wake.clone(),
            stop: stop.clone(),
            heartbeat: heartbeat.clone(),
            stall: stall.clone(),
            test_sounds: test_sounds_rx,
            choices: choice.take(),
        }));
        let test_sounds = audio.is_some().then_some(test_sounds);
        let h = health.get();
        tracing::info!(audio = %h.audio, ptt = %h.ptt, display = %h.display, choice = %h.choice, "devices started");
        Arc::new(Devices {
            mode,
            health,
            sim_button,
            sim_led,
            sim_screen,
            sim_audio,
            audio,
            state: state_rx,
            heartbeat: Some(heartbeat),
            stall: Some(stall),
            test_sounds,
            choice,
            running: Mutex::new(Some(Running {
                stop,
                kiosk: Some(kiosk),
                ptt_stop,
                ptt_wake,
                ptt_thread,
                display_thread: display.thread,
                _state: None,
            })),
        })
    }

    /// Presses or releases the simulated button.
    pub fn press(&self, pressed: bool) -> Result<(), PressError> {
        match (&self.sim_button, self.mode) {
            (Some(b), _) => {
                b.set(pressed);
                Ok(())
            }
            (None, DeviceMode::None) => Err(PressError::NoDevices),
            (None, _) => Err(PressError::NotSimulated),
        }
    }

    /// A simulated choice (the internal route): into the same channel as a real touch.
    pub fn choose(&self, c: choice::Choose) -> Result<(), PressError> {
        match (&self.choice.sim, self.mode) {
            (Some(tx), _) => {
                choice::offer(tx, c);
                Ok(())
            }
            (None, DeviceMode::None) => Err(PressError::NoDevices),
            (None, _) => Err(PressError::NotSimulated),
        }
    }

    /// Plays the test sound at `volume` on the kiosk's speaker (when it is idle); false when
    /// there is no speaker.
    pub fn test_sound(&self, volume: u8) -> bool {
        self.test_sounds
            .as_ref()
            .is_some_and(|t| t.send(volume).is_ok())
    }

    /// Test hook (`test.hooks`): the kiosk loop stops turning (and beating) until the devices
    /// stop. False when there is no kiosk loop.
    pub fn stall_for_test(&self) -> bool {
        self.stall.as_ref().map(|s| s.notify_one()).is_some()
    }

    /// The LED's level, when it is simulated.
    pub fn led(&self) -> Option<bool> {
        self.sim_led.as_ref().map(|l| l.get())
    }

    /// Stops the kiosk loop and the device threads, and waits for them (the loop lets go of the
    /// engine before this returns).
    pub async fn stop(&self) {
        let running = self.running.lock().expect("devices lock").take();
        let Some(mut r) = running else { return };
        r.stop.cancel();
        if let Some(k) = r.kiosk.take() {
            let _ = k.await;
        }
        r.ptt_stop.store(true, Ordering::SeqCst);
        r.ptt_wake.notify();
        // The kiosk loop has ended, and with it the state's sender: the player ends too.
        let thread = r
            .ptt_thread
            .take()
            .into_iter()
            .chain(r.display_thread.take());
        let choice_thread = self.choice.stop();
        let audio = self.audio.clone();
        let _ = tokio::task::spawn_blocking(move || {
            for t in thread.chain(choice_thread) {
                let _ = t.join();
            }
            if let Some(a) = audio {
                a.shutdown();
            }
        })
        .await;
    }
}

/// What `start_audio` started: all `None` when there is no audio.
#[derive(Default)]
struct AudioParts {
    audio: Option<Arc<audio::Audio>>,
    captured: Option<mpsc::UnboundedReceiver<audio::Captured>>,
    played: Option<mpsc::UnboundedReceiver<audio::Played>>,
    sim: Option<SimAudio>,
}

/// Whether ALSA lists any sound card.
fn has_sound_card() -> bool {
    alsa::card::Iter::new().next().is_some_and(|c| c.is_ok())
}

/// Keeps the assistive speaker at `kiosk.assistive_volume`, looked at every second as the kiosk
/// loop looks at `kiosk.volume`, until `stop` or the engine is gone (held weakly: the devices
/// must not keep it alive).
async fn follow_assistive_volume(
    engine: std::sync::Weak<Engine>,
    audio: Arc<audio::Audio>,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let Some(engine) = engine.upgrade() else {
            return;
        };
        audio.set_assistive_volume(engine.settings().kiosk.assistive_volume);
    }
}

fn start_audio(engine: &Engine, mode: DeviceMode, health: &Arc<HealthBoard>) -> AudioParts {
    let cfg = &engine.config.audio;
    let period = cfg.period_frames.max(16);
    let buffer = cfg.buffer_frames.max(period * 2);
    let wants_assistive = cfg.assistive_playback_device.is_some();
    let (setup, files) = if mode.simulates(has_sound_card) {
        match sim_audio_files(&engine.config.data_dir, wants_assistive) {
            Ok((capture, playback, assistive, files)) => (
                audio::AudioSetup {
                    capture,
                    playback,
                    assistive,
                    mixer: None,
                    period,
                    buffer,
                    sim: true,
                },
                Some(files),
            ),
            Err(e) => {
                tracing::warn!("simulated audio: {e}");
                health.set(|h| h.audio = Health::Problem(format!("sim: {e}")));
                return AudioParts::default();
            }
        }
    } else {
        let mixer = (!cfg.mixer_control.is_empty()).then(|| {
            (
                audio::mixer_card(cfg.playback_device.as_str()),
                cfg.mixer_control.clone(),
            )
        });
        let setup = audio::AudioSetup {
            capture: cfg.capture_device.as_str().to_string(),
            playback: cfg.playback_device.as_str().to_string(),
            assistive: cfg
                .assistive_playback_device
                .as_ref()
                .map(|d| d.as_str().to_string()),
            mixer,
            period,
            buffer,
            sim: false,
        };
        (setup, None)
    };
    match audio::Audio::start(setup, health.clone()) {
        Ok((a, captured, played)) => {
            a.set_assistive_volume(engine.settings().kiosk.assistive_volume);
            AudioParts {
                audio: Some(Arc::new(a)),
                captured: Some(captured),
                played: Some(played),
                sim: files,
            }
        }
        Err(e) => {
            health
                .set(|h| h.audio = Health::Problem(format!("cannot start the audio threads: {e}")));
            AudioParts::default()
        }
    }
}

/// Prepares `DATA_DIR/sim`: the microphone file (empty unless a test or a person put samples
/// in it), a fresh speaker file (and assistive speaker file, with `assistive`), and a copy of
/// the ALSA configuration for reference. Returns the capture, playback and assistive PCM names
/// and the files. (The assistive speaker is the speaker's PCM over its own file.)
fn sim_audio_files(
    data_dir: &std::path::Path,
    assistive: bool,
) -> Result<(String, String, Option<String>, SimAudio), String> {
    let dir = data_dir.join("sim");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let files = SimAudio {
        mic: dir.join("mic.raw"),
        speaker: dir.join("speaker.raw"),
        assistive: assistive.then(|| dir.join("assistive.raw")),
    };
    if !files.mic.exists() {
        std::fs::write(&files.mic, b"").map_err(|e| format!("{}: {e}", files.mic.display()))?;
    }
    // Created by the first sample played; an old one would mislead.
    for played in std::iter::once(&files.speaker).chain(&files.assistive) {
        let _ = std::fs::remove_file(played);
    }
    let _ = std::fs::write(dir.join("asoundrc"), audio::SIM_ASOUNDRC);
    let capture = audio::sim_pcm("mic", &files.mic)?;
    let playback = audio::sim_pcm("speaker", &files.speaker)?;
    let assistive = match &files.assistive {
        Some(f) => Some(audio::sim_pcm("speaker", f)?),
        None => None,
    };
    Ok((capture, playback, assistive, files))
}

/// What `start_ptt` started.
struct PttParts {
    /// The simulated button and LED, when the button is simulated.
    sim_button: Option<Arc<ptt::SimPin>>,
    sim_led: Option<Arc<ptt::SimPin>>,
    wake: Arc<ptt::Wake>,
    /// The button thread, unless the button could not be started.
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PttParts {
    fn failed(wake: Arc<ptt::Wake>) -> PttParts {
        PttParts {
            sim_button: None,
            sim_led: None,
            wake,
            thread: None,
        }
    }
}

fn start_ptt(
    engine: &Engine,
    mode: DeviceMode,
    health: &Arc<HealthBoard>,
    state: watch::Receiver<KioskState>,
    events: mpsc::UnboundedSender<ptt::PttEvent>,
    stop: &Arc<AtomicBool>,
) -> PttParts {
    let cfg = &engine.config.ptt;
    let min_press = Duration::from_millis(engine.config.kiosk.min_press_ms);
    let debounce = Duration::from_millis(cfg.debounce_ms as u64);
    let key_configured = cfg.key.as_deref().is_some_and(|k| !k.is_empty());
    let sim = mode.simulates(|| std::path::Path::new(&cfg.chip).exists() || key_configured);
    let mut sim_button = None;
    let mut sim_led = None;
    let (button, led, sampling, wake) = if sim {
        let button = Arc::new(ptt::SimPin::default());
        let led = Arc::new(ptt::SimPin::default());
        sim_button = Some(button.clone());
        sim_led = Some(led.clone());
        let wake = button.wake();
        (
            ptt::Button::new(ptt::Line::Sim(button), false, debounce),
            Some(ptt::Line::Sim(led)),
            ptt::Sampling::OnWake,
            wake,
        )
    } else {
        let wake = Arc::new(ptt::Wake::default());
        match ptt::real_lines(cfg, &wake, stop) {
            Ok((button, led, sampling)) => (
                ptt::Button::new(button, cfg.active_low, debounce),
                led,
                sampling,
                wake,
            ),
            Err(e) => {
                tracing::warn!("push-to-talk: {e}");
                health.set(|h| h.ptt = Health::Problem(format!("absent: {e}")));
                return PttParts::failed(wake);
            }
        }
    };
    let healthy = Health::working(sim);
    health.set(|h| h.ptt = healthy.clone());
    let thread = ptt::spawn(ptt::PttThread {
        ptt: ptt::Ptt::new(button, led, min_press),
        sampling,
        wake: wake.clone(),
        state,
        events,
        stop: stop.clone(),
        health: health.clone(),
        healthy,
    });
    match thread {
        Ok(t) => PttParts {
            sim_button,
            sim_led,
            wake,
            thread: Some(t),
        },
        Err(e) => {
            health.set(|h| h.ptt = Health::Problem(format!("cannot start the button thread: {e}")));
            PttParts::failed(wake)
        }
    }
}
