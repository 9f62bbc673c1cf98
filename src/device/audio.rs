//! Microphone and speaker through ALSA.
//!
//! Two plain threads own the PCMs (every ALSA call blocks or may): the capture thread opens the
//! microphone when the kiosk starts listening and closes it when it stops, sending periods of
//! mono samples at the device's rate; the playback thread keeps the speaker open and plays the
//! reply of one turn at a time, resampled from the engine's 24 kHz to the device's rate. Both
//! talk to the async kiosk loop over channels.
//!
//! - Formats: S16_LE; mono where the device allows it (else the first channels are mixed down
//!   for capture and the sample is repeated on every channel for playback); the rate asked for is
//!   16 kHz (capture) and 24 kHz (playback), and whatever rate the device takes is resampled.
//! - Period and buffer: `audio.period_frames` / `audio.buffer_frames` (800 / 8000, known good on
//!   snd-aloop and USB cards).
//! - Xruns are recovered with `snd_pcm_recover`; a device that fails beyond that (unplugged) is
//!   closed at once and opened again with a growing delay (0.1 s to 2 s); health shows the
//!   problem meanwhile. The kernel's removal of a card waits for every open file of it, so the
//!   playback thread looks at the speaker's state on every wake, idle or not (a full buffer
//!   means no write would fail), and a reply whose speaker is gone is reported finished (the
//!   kiosk goes idle). A failed microphone is opened and closed again while idle until it
//!   works, so health clears without a press. See docs/audio.md.
//! - Volume (`kiosk.volume`, 0..100): the card's mixer control (`audio.mixer_control`) when it has
//!   one, else a gain on the samples.
//! - Assistive speaker (`audio.assistive_playback_device`, optional: a hearing loop's amplifier,
//!   headphones): a second playback thread of its own plays every reply the first one plays, at
//!   `kiosk.assistive_volume`, always as a gain on the samples (its card may be the speaker's,
//!   whose mixer is the speaker's volume). The [`Audio`] handle sends every command to both, so
//!   the kiosk loop does not know of it; only the first speaker's end of a reply is reported
//!   (`Played`), and a second speaker that fails is reported in health and never holds up the
//!   first.
//! - Simulation: the PCMs of `board/sim/asoundrc` (alsa-lib's `file` plugin over `null`). That
//!   file is loaded into alsa-lib's global configuration tree (`snd_config_load` after
//!   `snd_config_update`), so the ordinary `snd_pcm_open` path finds its PCMs; the null plugin
//!   has no clock, so in simulation both threads keep to the wall clock themselves.
//!
//! The playback thread never blocks in ALSA (the speaker is opened non-blocking), so a stop
//! is acted on at once.

use std::collections::VecDeque;
use std::ffi::{CString, c_char};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use alsa::pcm::{Access, Format, Frames, HwParams, PCM, State};
use alsa::{Direction, ValueOr};
use bytes::Bytes;
use tokio::sync::{broadcast, mpsc};

use super::{Health, HealthBoard};
use crate::engine::pcm::{self as pcm_util, OUTPUT_RATE, RECOGNISER_RATE, Resampler};

/// The project's simulated-audio ALSA configuration (see the file).
pub const SIM_ASOUNDRC: &str = include_str!("../../board/sim/asoundrc");

const REOPEN_FIRST: Duration = Duration::from_millis(100);
/// The longest wait between two opens of a missing device, so a card plugged back is in use
/// within about this long (an open of a missing card costs a few file opens).
const REOPEN_MAX: Duration = Duration::from_secs(2);
/// Longest sleep of the playback thread while it has audio to write or a reply to finish.
const PLAY_TICK: Duration = Duration::from_millis(5);
/// How often marks still ahead of the speaker are looked at while nothing else wakes the
/// thread (captions follow the speech within this).
const MARK_TICK: Duration = Duration::from_millis(20);

/// alsa-lib's configuration tree is global: opens (which read it) and the loading of the
/// simulated devices (which changes it) take turns.
static ALSA_LOCK: Mutex<()> = Mutex::new(());

unsafe extern "C" {
    /// alsa-lib's global configuration tree (`conf.h`).
    static mut snd_config: *mut alsa_sys::snd_config_t;
}

/// Makes sure the simulated PCMs are defined in alsa-lib's global configuration. alsa-lib
/// reloads the tree only when its files change, so this normally loads once; it is checked
/// before every open all the same. Call with `ALSA_LOCK` held.
fn ensure_sim_config() -> Result<(), String> {
    // SAFETY: plain alsa-lib calls on its global tree, serialised by ALSA_LOCK (the only
    // writer); the buffer outlives the input object that reads it.
    unsafe {
        let r = alsa_sys::snd_config_update();
        if r < 0 {
            return Err(format!("cannot read the ALSA configuration ({r})"));
        }
        let top = (&raw const snd_config).read();
        if top.is_null() {
            return Err("alsa-lib has no configuration".into());
        }
        let mut node = std::ptr::null_mut();
        if alsa_sys::snd_config_search(top, c"pcm.docent_sim_mic".as_ptr(), &mut node) >= 0 {
            return Ok(());
        }
        let mut input = std::ptr::null_mut();
        let r = alsa_sys::snd_input_buffer_open(
            &mut input,
            SIM_ASOUNDRC.as_ptr() as *const c_char,
            SIM_ASOUNDRC.len() as isize,
        );
        if r < 0 {
            return Err(format!(
                "cannot read the simulated audio configuration ({r})"
            ));
        }
        let r = alsa_sys::snd_config_load(top, input);
        alsa_sys::snd_input_close(input);
        if r < 0 {
            return Err(format!(
                "cannot load the simulated audio configuration ({r})"
            ));
        }
    }
    Ok(())
}

/// The PCM name of a simulated device over `file` (the path must not contain `"` or `\`).
pub fn sim_pcm(kind: &str, file: &std::path::Path) -> Result<String, String> {
    let path = file.to_str().ok_or("the data directory is not UTF-8")?;
    if path.contains(['"', '\\', '\n']) {
        return Err(format!("{path}: unusable in an ALSA device name"));
    }
    Ok(format!("docent_sim_{kind}:FILE=\"{path}\""))
}

pub(super) fn open_pcm(
    name: &str,
    dir: Direction,
    nonblock: bool,
    sim: bool,
) -> Result<PCM, String> {
    let _lock = ALSA_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if sim {
        ensure_sim_config()?;
    } else {
        // Checked again where it is opened: the name is parsed by ALSA as configuration.
        crate::config::PcmName::try_from(name.to_string())?;
    }
    let c = CString::new(name).map_err(|_| format!("{name:?}: not a device name"))?;
    PCM::open(&c, dir, nonblock).map_err(|e| format!("cannot open {name}: {}", why(&e)))
}

/// An ALSA error as a person reads it.
pub(super) fn why(e: &alsa::Error) -> String {
    std::io::Error::from_raw_os_error(e.errno()).to_string()
}

/// The state of an open PCM; `Err` with the reason once its card is gone (unplugged or its
/// driver unbound: the state reads DISCONNECTED, or the status cannot be read at all).
/// (`PCM::state` panics on the negative errno alsa-lib returns then.)
fn pcm_state(pcm: &PCM) -> Result<State, String> {
    let raw = pcm.state_raw();
    if raw < 0 {
        return Err(std::io::Error::from_raw_os_error(-raw).to_string());
    }
    if raw == State::Disconnected as i32 {
        return Err("the device was disconnected".into());
    }
    [
        State::Open,
        State::Setup,
        State::Prepared,
        State::Running,
        State::XRun,
        State::Draining,
        State::Paused,
        State::Suspended,
    ]
    .into_iter()
    .find(|s| *s as i32 == raw)
    .ok_or_else(|| format!("the device is in an unknown state ({raw})"))
}

/// What a device agreed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setup {
    pub rate: u32,
    pub channels: u32,
    pub period: u32,
    pub buffer: u32,
}

/// Sets S16_LE interleaved at (near) `rate`, as few channels as the device allows, and the
/// period and buffer asked for.
pub(super) fn configure(
    pcm: &PCM,
    rate: u32,
    period: u32,
    buffer: u32,
) -> Result<Setup, alsa::Error> {
    {
        let hw = HwParams::any(pcm)?;
        hw.set_access(Access::RWInterleaved)?;
        hw.set_format(Format::s16())?;
        hw.set_channels_near(1)?;
        hw.set_rate_near(rate, ValueOr::Nearest)?;
        hw.set_period_size_near(period as Frames, ValueOr::Nearest)?;
        hw.set_buffer_size_near(buffer as Frames)?;
        pcm.hw_params(&hw)?;
    }
    let hw = pcm.hw_params_current()?;
    let setup = Setup {
        rate: hw.get_rate()?,
        channels: hw.get_channels()?,
        period: hw.get_period_size()? as u32,
        buffer: hw.get_buffer_size()? as u32,
    };
    let sw = pcm.sw_params_current()?;
    sw.set_start_threshold(setup.period as Frames)?;
    sw.set_avail_min(setup.period as Frames)?;
    pcm.sw_params(&sw)?;
    Ok(setup)
}

/// Keeps an unclocked device (the simulation's null plugin) to the wall clock: never more than
/// `slack` frames ahead of real time since the transfer started.
#[derive(Debug)]
struct Pacer {
    rate: u32,
    slack: u64,
    start: Option<Instant>,
    frames: u64,
}

impl Pacer {
    fn new(rate: u32, slack: u32) -> Pacer {
        Pacer {
            rate,
            slack: slack as u64,
            start: None,
            frames: 0,
        }
    }

    fn due(&self, now: Instant) -> u64 {
        self.start.map_or(0, |t| {
            (now.saturating_duration_since(t).as_secs_f64() * self.rate as f64) as u64
        })
    }

    /// Frames that may be transferred now.
    fn allowance(&self, now: Instant) -> u64 {
        (self.due(now) + self.slack).saturating_sub(self.frames)
    }

    /// Time until `n` more frames may be transferred.
    fn wait_for(&self, n: u64, now: Instant) -> Duration {
        let short = n.saturating_sub(self.allowance(now));
        Duration::from_secs_f64(short as f64 / self.rate as f64)
    }

    /// Frames transferred that the wall clock has not reached yet (still "playing").
    fn ahead(&self, now: Instant) -> u64 {
        self.frames.saturating_sub(self.due(now))
    }

    fn advance(&mut self, n: u64, now: Instant) {
        // Caught up (an underrun on a real device): the clock starts again with this transfer.
        if self.start.is_none() || self.ahead(now) == 0 {
            self.start = Some(now);
            self.frames = 0;
        }
        self.frames += n;
    }

    fn reset(&mut self) {
        self.start = None;
        self.frames = 0;
    }
}

/// Scales samples by a volume of 0..100 (squared, so the steps sound even).
fn apply_gain(samples: &mut [i16], volume: u8) {
    if volume >= 100 {
        return;
    }
    let g = (volume as f32 / 100.0).powi(2);
    for s in samples {
        *s = (*s as f32 * g) as i16;
    }
}

/// The mixer (`hw:N` or `default`) that goes with a playback PCM name.
pub fn mixer_card(pcm: &str) -> String {
    if let Some(i) = pcm.find("CARD=") {
        let card: String = pcm[i + 5..]
            .chars()
            .take_while(|c| *c != ',' && *c != '}')
            .collect();
        return format!("hw:{card}");
    }
    for prefix in ["hw:", "plughw:"] {
        if let Some(rest) = pcm.strip_prefix(prefix) {
            return format!("hw:{}", rest.split(',').next().unwrap_or(rest));
        }
    }
    "default".into()
}

/// Sets `control` on `card` to `volume` percent of its range; `Err` when the card has no such
/// control.
fn set_mixer_volume(card: &str, control: &str, volume: u8) -> Result<(), String> {
    let _lock = ALSA_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mixer = alsa::mixer::Mixer::new(card, false).map_err(|e| why(&e))?;
    let selem = mixer
        .find_selem(&alsa::mixer::SelemId::new(control, 0))
        .filter(|s| s.has_playback_volume())
        .ok_or_else(|| format!("{card} has no playback control {control:?}"))?;
    let (min, max) = selem.get_playback_volume_range();
    let value = min + (max - min) * volume.min(100) as i64 / 100;
    selem.set_playback_volume_all(value).map_err(|e| why(&e))?;
    if selem.has_playback_switch() {
        let _ = selem.set_playback_switch_all((volume > 0) as i32);
    }
    Ok(())
}

/// Where the audio goes and how.
#[derive(Debug, Clone)]
pub struct AudioSetup {
    pub capture: String,
    pub playback: String,
    /// The assistive speaker, which plays the same speech at its own volume.
    pub assistive: Option<String>,
    /// Card and control of the hardware volume; `None`: volume on the samples.
    pub mixer: Option<(String, String)>,
    pub period: u32,
    pub buffer: u32,
    /// Simulated devices: load the sim configuration, keep to the wall clock.
    pub sim: bool,
}

/// One period of captured audio: mono at the device's rate, for utterance `id`.
#[derive(Debug)]
pub struct Captured {
    pub id: u64,
    pub rate: u32,
    pub samples: Vec<i16>,
}

enum CaptureCmd {
    Start(u64),
    Stop,
}

#[derive(Clone)]
enum PlayCmd {
    /// Plays the reply of turn `seq` (any other one stops).
    Begin {
        seq: u64,
        volume: u8,
    },
    /// Mono 24 kHz `pcm_s16le` of turn `seq`.
    Chunk {
        seq: u64,
        pcm: Bytes,
    },
    /// No more audio of `seq`: finish playing it.
    End {
        seq: u64,
    },
    /// Report `Played::Reached { seq, mark }` once sample `at` of turn `seq` (24 kHz, from
    /// its beginning) is on its way out of the speaker.
    Mark {
        seq: u64,
        at: u64,
        mark: u64,
    },
    /// Stops at once, dropping what is queued.
    Stop,
    Volume(u8),
}

/// What the speaker did, for the kiosk loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Played {
    /// Every sample of turn `seq` has been played (or the speaker is gone).
    Finished { seq: u64 },
    /// The speaker reached the sample of a `mark` (the start of a captioned sentence).
    Reached { seq: u64, mark: u64 },
}

/// What the speaker did, with times, for whoever watches (tests, benchmarks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AudioEvent {
    /// The first samples of turn `seq` were written to ALSA.
    Playing { seq: u64, at: Instant },
    /// Playback of turn `seq` was stopped (the device dropped its buffer).
    Stopped { seq: u64, at: Instant },
    /// Turn `seq` played to its end.
    Finished { seq: u64, at: Instant },
}

/// A device of the audio threads, as health names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Playback,
    /// The assistive speaker.
    Assistive,
    Capture,
}

impl Part {
    /// In the order health lists them.
    const ALL: [Part; 3] = [Part::Playback, Part::Assistive, Part::Capture];

    /// How health and the log name it, so staff can tell which speaker failed.
    fn name(self) -> &'static str {
        match self {
            Part::Playback => "playback",
            Part::Assistive => "assistive playback",
            Part::Capture => "capture",
        }
    }
}

/// Health of each device, combined into `DeviceHealth::audio`.
struct AudioHealth {
    board: Arc<HealthBoard>,
    ok: Health,
    /// The problem of each `Part`, by its index.
    problems: Mutex<[Option<String>; 3]>,
}

impl AudioHealth {
    /// Whether a problem of the microphone is reported.
    fn capture_failing(&self) -> bool {
        self.problems.lock().expect("audio health lock")[Part::Capture as usize].is_some()
    }

    fn set(&self, part: Part, problem: Option<String>) {
        let mut problems = self.problems.lock().expect("audio health lock");
        problems[part as usize] = problem;
        let listed: Vec<String> = Part::ALL
            .iter()
            .filter_map(|p| {
                problems[*p as usize]
                    .as_ref()
                    .map(|why| format!("{}: {why}", p.name()))
            })
            .collect();
        let health = if listed.is_empty() {
            self.ok.clone()
        } else {
            Health::Problem(listed.join("; "))
        };
        self.board.set(|h| h.audio = health);
    }
}

/// The running audio threads.
pub struct Audio {
    capture: Mutex<Option<Sender<CaptureCmd>>>,
    playback: Mutex<Option<Sender<PlayCmd>>>,
    /// The assistive speaker's thread, when there is one.
    assistive: Mutex<Option<Sender<PlayCmd>>>,
    /// `kiosk.assistive_volume`, which every reply begins at on the assistive speaker.
    assistive_volume: AtomicU8,
    events: broadcast::Sender<AudioEvent>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    pub setup: AudioSetup,
}

impl Audio {
    /// Starts the capture and playback threads. Captured periods and playback reports go to
    /// the returned receivers.
    pub fn start(
        setup: AudioSetup,
        board: Arc<HealthBoard>,
    ) -> std::io::Result<(
        Audio,
        mpsc::UnboundedReceiver<Captured>,
        mpsc::UnboundedReceiver<Played>,
    )> {
        let health = Arc::new(AudioHealth {
            board,
            ok: Health::working(setup.sim),
            problems: Mutex::default(),
        });
        health.set(Part::Capture, None);
        let (cap_tx, cap_rx) = std::sync::mpsc::channel();
        let (play_tx, play_rx) = std::sync::mpsc::channel();
        let (captured_tx, captured) = mpsc::unbounded_channel();
        let (played_tx, played) = mpsc::unbounded_channel();
        let (events, _) = broadcast::channel(256);
        let capture = {
            let (setup, health) = (setup.clone(), health.clone());
            std::thread::Builder::new()
                .name("docent-capture".into())
                .spawn(move || capture_thread(setup, cap_rx, captured_tx, health))?
        };
        let playback = {
            let (setup, health, events) = (setup.clone(), health.clone(), events.clone());
            std::thread::Builder::new()
                .name("docent-playback".into())
                .spawn(move || {
                    let reports = Some((played_tx, events));
                    Player::new(setup, Part::Playback, play_rx, reports, health).run();
                })?
        };
        let mut threads = vec![capture, playback];
        let assistive = match &setup.assistive {
            Some(device) => {
                // Its own copy of the setup: its device, and never the speaker's mixer.
                let setup = AudioSetup {
                    playback: device.clone(),
                    mixer: None,
                    ..setup.clone()
                };
                let health = health.clone();
                let (tx, rx) = std::sync::mpsc::channel();
                threads.push(
                    std::thread::Builder::new()
                        .name("docent-assistive".into())
                        .spawn(move || {
                            Player::new(setup, Part::Assistive, rx, None, health).run();
                        })?,
                );
                Some(tx)
            }
            None => None,
        };
        Ok((
            Audio {
                capture: Mutex::new(Some(cap_tx)),
                playback: Mutex::new(Some(play_tx)),
                assistive: Mutex::new(assistive),
                assistive_volume: AtomicU8::new(100),
                events,
                threads: Mutex::new(threads),
                setup,
            },
            captured,
            played,
        ))
    }

    fn capture_cmd(&self, cmd: CaptureCmd) {
        if let Some(tx) = &*self.capture.lock().expect("audio lock") {
            let _ = tx.send(cmd);
        }
    }

    /// Sends `cmd` to the speaker and, but for the speaker's volume, to the assistive speaker
    /// (a reply begins there at its own volume). Both sends are at once: neither thread waits
    /// for the other.
    fn play_cmd(&self, cmd: PlayCmd) {
        if let Some(tx) = &*self.assistive.lock().expect("audio lock") {
            let second = match &cmd {
                // The speaker's marks: only its reports are followed.
                PlayCmd::Volume(_) | PlayCmd::Mark { .. } => None,
                PlayCmd::Begin { seq, .. } => Some(PlayCmd::Begin {
                    seq: *seq,
                    volume: self.assistive_volume.load(Ordering::Relaxed),
                }),
                other => Some(other.clone()),
            };
            if let Some(second) = second {
                let _ = tx.send(second);
            }
        }
        if let Some(tx) = &*self.playback.lock().expect("audio lock") {
            let _ = tx.send(cmd);
        }
    }

    /// Opens the microphone for utterance `id`.
    pub fn start_capture(&self, id: u64) {
        self.capture_cmd(CaptureCmd::Start(id));
    }

    pub fn stop_capture(&self) {
        self.capture_cmd(CaptureCmd::Stop);
    }

    pub fn begin(&self, seq: u64, volume: u8) {
        self.play_cmd(PlayCmd::Begin { seq, volume });
    }

    pub fn play(&self, seq: u64, pcm: Bytes) {
        self.play_cmd(PlayCmd::Chunk { seq, pcm });
    }

    /// Asks for `Played::Reached { seq, mark }` when the speaker reaches sample `at` of turn
    /// `seq` (24 kHz, counted from the turn's first sample).
    pub fn mark(&self, seq: u64, at: u64, mark: u64) {
        self.play_cmd(PlayCmd::Mark { seq, at, mark });
    }

    pub fn end(&self, seq: u64) {
        self.play_cmd(PlayCmd::End { seq });
    }

    /// Stops playback at once.
    pub fn stop_playback(&self) {
        self.play_cmd(PlayCmd::Stop);
    }

    pub fn set_volume(&self, volume: u8) {
        self.play_cmd(PlayCmd::Volume(volume));
    }

    /// The assistive speaker's volume (0..100), at once and for every reply after.
    pub fn set_assistive_volume(&self, volume: u8) {
        let volume = volume.min(100);
        if self.assistive_volume.swap(volume, Ordering::Relaxed) == volume {
            return;
        }
        if let Some(tx) = &*self.assistive.lock().expect("audio lock") {
            let _ = tx.send(PlayCmd::Volume(volume));
        }
    }

    /// Whether there is an assistive speaker.
    pub fn has_assistive(&self) -> bool {
        self.assistive.lock().expect("audio lock").is_some()
    }

    /// Reports of the speaker, with times.
    pub fn subscribe(&self) -> broadcast::Receiver<AudioEvent> {
        self.events.subscribe()
    }

    /// Stops the threads and waits for them (blocking, short: they wake at least every 50 ms
    /// of audio or on a command).
    pub fn shutdown(&self) {
        self.capture.lock().expect("audio lock").take();
        self.playback.lock().expect("audio lock").take();
        self.assistive.lock().expect("audio lock").take();
        let threads = std::mem::take(&mut *self.threads.lock().expect("audio lock"));
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Drop for Audio {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The capture thread: idle until `Start`, then reads periods until `Stop`.
fn capture_thread(
    setup: AudioSetup,
    rx: Receiver<CaptureCmd>,
    out: mpsc::UnboundedSender<Captured>,
    health: Arc<AudioHealth>,
) {
    // Tried once at the start, so that health tells staff of a missing microphone before a
    // visitor's press finds it.
    if let Err(e) = open_pcm(&setup.capture, Direction::Capture, false, setup.sim) {
        tracing::warn!("microphone: {e}");
        health.set(Part::Capture, Some(e));
    }
    let mut next = idle(&setup, &rx, &health);
    while let Some(cmd) = next.take() {
        match cmd {
            CaptureCmd::Stop => next = idle(&setup, &rx, &health),
            CaptureCmd::Start(id) => next = capture(&setup, id, &rx, &out, &health),
        }
    }
}

/// Waits for the next command (`None`: the kiosk is gone). While the microphone is reported
/// failing, it is opened and closed again now and then (nothing is read), so health clears
/// once the card is back rather than at the next press.
fn idle(setup: &AudioSetup, rx: &Receiver<CaptureCmd>, health: &AudioHealth) -> Option<CaptureCmd> {
    let mut delay = REOPEN_FIRST;
    while health.capture_failing() {
        match rx.recv_timeout(delay) {
            Ok(cmd) => return Some(cmd),
            Err(RecvTimeoutError::Disconnected) => return None,
            Err(RecvTimeoutError::Timeout) => {}
        }
        match open_pcm(&setup.capture, Direction::Capture, false, setup.sim) {
            Ok(pcm) => {
                drop(pcm);
                tracing::info!(device = %setup.capture, "microphone back");
                health.set(Part::Capture, None);
            }
            Err(e) => {
                health.set(Part::Capture, Some(e));
                delay = (delay * 2).min(REOPEN_MAX);
            }
        }
    }
    rx.recv().ok()
}

/// Captures utterance `id` until a command arrives (returned; `None`: the kiosk is gone).
fn capture(
    setup: &AudioSetup,
    id: u64,
    rx: &Receiver<CaptureCmd>,
    out: &mpsc::UnboundedSender<Captured>,
    health: &AudioHealth,
) -> Option<CaptureCmd> {
    let mut delay = REOPEN_FIRST;
    loop {
        let opened =
            open_pcm(&setup.capture, Direction::Capture, false, setup.sim).and_then(|pcm| {
                configure(&pcm, RECOGNISER_RATE, setup.period, setup.buffer)
                    .map(|s| (pcm, s))
                    .map_err(|e| format!("cannot configure {}: {}", setup.capture, why(&e)))
            });
        let (pcm, s) = match opened {
            Ok(p) => p,
            Err(e) => {
                if !health.capture_failing() {
                    tracing::warn!("microphone: {e}; retrying");
                }
                health.set(Part::Capture, Some(e));
                // Keep trying while the visitor holds the button.
                match rx.recv_timeout(delay) {
                    Ok(cmd) => return Some(cmd),
                    Err(RecvTimeoutError::Disconnected) => return None,
                    Err(RecvTimeoutError::Timeout) => {}
                }
                delay = (delay * 2).min(REOPEN_MAX);
                continue;
            }
        };
        health.set(Part::Capture, None);
        let _ = pcm.start();
        let mut pacer = Pacer::new(s.rate, s.period);
        let mut buf = vec![0i16; (s.period * s.channels) as usize];
        loop {
            match rx.try_recv() {
                Ok(cmd) => return Some(cmd),
                Err(TryRecvError::Disconnected) => return None,
                Err(TryRecvError::Empty) => {}
            }
            if setup.sim {
                let now = Instant::now();
                let wait = pacer.wait_for(s.period as u64, now);
                if !wait.is_zero() {
                    match rx.recv_timeout(wait) {
                        Ok(cmd) => return Some(cmd),
                        Err(RecvTimeoutError::Disconnected) => return None,
                        Err(RecvTimeoutError::Timeout) => {}
                    }
                }
            }
            // (The simulation's null device leaves the buffer as it was past the mic file.)
            buf.fill(0);
            let read = pcm.io_i16().and_then(|io| io.readi(&mut buf));
            match read {
                Ok(n) => {
                    pacer.advance(n as u64, Instant::now());
                    let frames = &buf[..n * s.channels as usize];
                    let samples = pcm_util::downmix(frames, s.channels as u16);
                    if out
                        .send(Captured {
                            id,
                            rate: s.rate,
                            samples,
                        })
                        .is_err()
                    {
                        return None;
                    }
                }
                Err(e) => {
                    if pcm.try_recover(e, true).is_ok() {
                        let _ = pcm.start();
                        continue;
                    }
                    let problem = format!("{} failed: {}", setup.capture, why(&e));
                    tracing::warn!("microphone: {problem}; opening it again");
                    health.set(Part::Capture, Some(problem));
                    break;
                }
            }
        }
        drop(pcm);
        match rx.recv_timeout(delay) {
            Ok(cmd) => return Some(cmd),
            Err(RecvTimeoutError::Disconnected) => return None,
            Err(RecvTimeoutError::Timeout) => {}
        }
        delay = (delay * 2).min(REOPEN_MAX);
    }
}

/// The playback thread's state.
struct Player {
    setup: AudioSetup,
    /// Which speaker it is (health and the log name it).
    part: Part,
    rx: Receiver<PlayCmd>,
    /// Where the kiosk loop and watchers hear what it played: the speaker's only (the kiosk
    /// follows the speaker; the assistive speaker just plays along).
    reports: Option<(mpsc::UnboundedSender<Played>, broadcast::Sender<AudioEvent>)>,
    health: Arc<AudioHealth>,
    pcm: Option<(PCM, Setup)>,
    /// When to try opening the device again, and the delay after that.
    reopen_at: Instant,
    reopen_delay: Duration,
    /// The turn being played, its queued interleaved samples, whether it has ended.
    current: Option<u64>,
    queue: VecDeque<i16>,
    ending: bool,
    written: bool,
    /// Frames of the turn written to the device, and the marks still ahead of the speaker
    /// (device frame, mark).
    frames_written: u64,
    marks: VecDeque<(u64, u64)>,
    resampler: Resampler,
    pacer: Pacer,
    volume: u8,
    /// The volume is applied by the mixer (else on the samples).
    hardware_volume: bool,
    running: bool,
}

impl Player {
    fn new(
        setup: AudioSetup,
        part: Part,
        rx: Receiver<PlayCmd>,
        reports: Option<(mpsc::UnboundedSender<Played>, broadcast::Sender<AudioEvent>)>,
        health: Arc<AudioHealth>,
    ) -> Player {
        Player {
            setup,
            part,
            rx,
            reports,
            health,
            pcm: None,
            reopen_at: Instant::now(),
            reopen_delay: REOPEN_FIRST,
            current: None,
            queue: VecDeque::new(),
            ending: false,
            written: false,
            frames_written: 0,
            marks: VecDeque::new(),
            resampler: Resampler::new(OUTPUT_RATE, OUTPUT_RATE),
            pacer: Pacer::new(OUTPUT_RATE, 0),
            volume: 100,
            hardware_volume: false,
            running: true,
        }
    }

    fn played(&self, p: Played) {
        if let Some((played, _)) = &self.reports {
            let _ = played.send(p);
        }
    }

    fn event(&self, e: AudioEvent) {
        if let Some((_, events)) = &self.reports {
            let _ = events.send(e);
        }
    }

    fn run(mut self) {
        while self.running {
            let now = Instant::now();
            if self.pcm.is_none() && now >= self.reopen_at {
                self.open();
            }
            // Looked at on every wake, idle or not: a card that goes away while nothing plays
            // must be closed too (the kernel's unplug waits for every open file of the card).
            if let Some((pcm, _)) = &self.pcm
                && let Err(e) = pcm_state(pcm)
            {
                self.lost(&e);
            }
            if self.current.is_some() {
                self.write();
                self.report_marks();
                self.finish_if_done();
            }
            let timeout = self.sleep_time();
            match self.rx.recv_timeout(timeout) {
                Ok(cmd) => {
                    self.handle(cmd);
                    while let Ok(cmd) = self.rx.try_recv() {
                        self.handle(cmd);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => self.running = false,
            }
        }
        if self.current.is_some() {
            self.stop();
        }
    }

    /// How long to wait for a command before there is something to do.
    fn sleep_time(&self) -> Duration {
        let now = Instant::now();
        let reopen = if self.pcm.is_none() {
            self.reopen_at.saturating_duration_since(now)
        } else {
            Duration::from_secs(1)
        };
        let work = match (&self.pcm, self.current) {
            (Some((_, s)), Some(_)) if !self.queue.is_empty() => {
                if self.setup.sim {
                    let frames = (self.queue.len() / s.channels as usize).min(s.period as usize);
                    self.pacer
                        .wait_for(frames as u64, now)
                        .clamp(Duration::from_millis(1), PLAY_TICK)
                } else {
                    PLAY_TICK
                }
            }
            (Some(_), Some(_)) if self.ending => PLAY_TICK,
            (Some(_), Some(_)) if !self.marks.is_empty() => MARK_TICK,
            _ => Duration::from_secs(1),
        };
        reopen.min(work)
    }

    fn open(&mut self) {
        let opened = open_pcm(
            &self.setup.playback,
            Direction::Playback,
            true,
            self.setup.sim,
        )
        .and_then(|pcm| {
            configure(&pcm, OUTPUT_RATE, self.setup.period, self.setup.buffer)
                .map(|s| (pcm, s))
                .map_err(|e| format!("cannot configure {}: {}", self.setup.playback, why(&e)))
        });
        match opened {
            Ok((pcm, s)) => {
                tracing::info!(
                    device = %self.setup.playback,
                    rate = s.rate,
                    channels = s.channels,
                    period = s.period,
                    buffer = s.buffer,
                    "{} open",
                    self.part.name()
                );
                self.resampler = Resampler::new(OUTPUT_RATE, s.rate);
                self.pacer = Pacer::new(s.rate, s.buffer);
                self.pcm = Some((pcm, s));
                self.reopen_delay = REOPEN_FIRST;
                self.health.set(self.part, None);
                self.apply_volume();
            }
            Err(e) => {
                if self.reopen_delay == REOPEN_FIRST {
                    tracing::warn!("{}: {e}; retrying", self.part.name());
                }
                self.health.set(self.part, Some(format!("{e}; retrying")));
                self.reopen_at = Instant::now() + self.reopen_delay;
                self.reopen_delay = (self.reopen_delay * 2).min(REOPEN_MAX);
            }
        }
    }

    /// The device failed beyond recovery (unplugged): close it and open it again later.
    fn lost(&mut self, why: &str) {
        let problem = format!("{} failed: {why}", self.setup.playback);
        tracing::warn!("{}: {problem}; opening it again", self.part.name());
        self.health.set(self.part, Some(problem));
        self.pcm = None;
        self.reopen_at = Instant::now() + self.reopen_delay;
        self.reopen_delay = (self.reopen_delay * 2).min(REOPEN_MAX);
        // What was queued cannot be played; the turn is over as far as the speaker goes.
        if let Some(seq) = self.current.take() {
            self.queue.clear();
            self.marks.clear();
            self.played(Played::Finished { seq });
        }
    }

    /// Reports the marks the speaker has reached: the frames written but those still in the
    /// device's buffer (simulated: still ahead of the wall clock).
    fn report_marks(&mut self) {
        let (Some(seq), Some((pcm, _))) = (self.current, &self.pcm) else {
            return;
        };
        if self.marks.is_empty() || !self.written {
            return;
        }
        let waiting = if self.setup.sim {
            self.pacer.ahead(Instant::now())
        } else {
            pcm.delay().map_or(0, |d| d.max(0) as u64)
        };
        let out = self.frames_written.saturating_sub(waiting);
        while let Some(&(frame, mark)) = self.marks.front() {
            if frame > out {
                break;
            }
            self.marks.pop_front();
            self.played(Played::Reached { seq, mark });
        }
    }

    fn apply_volume(&mut self) {
        self.hardware_volume = match &self.setup.mixer {
            Some((card, control)) => match set_mixer_volume(card, control, self.volume) {
                Ok(()) => true,
                Err(e) => {
                    tracing::debug!("volume on the samples: {e}");
                    false
                }
            },
            None => false,
        };
    }

    /// Queues resampled mono samples on every channel and writes at once rather than after
    /// the next wait.
    fn enqueue(&mut self, mono: &[i16]) {
        let Some((_, s)) = &self.pcm else {
            return;
        };
        let channels = s.channels;
        for &v in mono {
            for _ in 0..channels {
                self.queue.push_back(v);
            }
        }
        self.write();
    }

    fn handle(&mut self, cmd: PlayCmd) {
        match cmd {
            PlayCmd::Begin { seq, volume } => {
                if self.current.is_some() {
                    self.stop();
                }
                if volume != self.volume {
                    self.volume = volume;
                    self.apply_volume();
                }
                self.current = Some(seq);
                self.ending = false;
                self.written = false;
                self.frames_written = 0;
                self.marks.clear();
                self.queue.clear();
                let rate = self.pcm.as_ref().map_or(OUTPUT_RATE, |(_, s)| s.rate);
                self.resampler = Resampler::new(OUTPUT_RATE, rate);
            }
            PlayCmd::Chunk { seq, pcm } if self.current == Some(seq) => {
                let Some((_, s)) = &self.pcm else {
                    return;
                };
                let mut mono = pcm_util::samples_from_le(&pcm);
                if !self.hardware_volume {
                    apply_gain(&mut mono, self.volume);
                }
                let mut out =
                    Vec::with_capacity(mono.len() * s.rate as usize / OUTPUT_RATE as usize + 2);
                self.resampler.push(&mono, &mut out);
                self.enqueue(&out);
            }
            PlayCmd::Chunk { .. } => {}
            PlayCmd::End { seq } if self.current == Some(seq) => {
                let mut last = Vec::new();
                self.resampler.finish(&mut last);
                self.enqueue(&last);
                self.ending = true;
                if self.pcm.is_none() {
                    self.current = None;
                    self.queue.clear();
                    self.played(Played::Finished { seq });
                }
            }
            PlayCmd::End { .. } => {}
            PlayCmd::Mark { seq, at, mark } if self.current == Some(seq) => {
                let rate = self.pcm.as_ref().map_or(OUTPUT_RATE, |(_, s)| s.rate);
                let frame = at * rate as u64 / OUTPUT_RATE as u64;
                self.marks.push_back((frame, mark));
                self.report_marks();
            }
            PlayCmd::Mark { .. } => {}
            PlayCmd::Stop => {
                if self.current.is_some() {
                    self.stop();
                }
            }
            PlayCmd::Volume(v) => {
                if v != self.volume {
                    self.volume = v;
                    self.apply_volume();
                }
            }
        }
    }

    /// Drops what the device holds and what is queued.
    fn stop(&mut self) {
        let seq = self.current.take().unwrap_or_default();
        self.queue.clear();
        self.marks.clear();
        self.ending = false;
        self.pacer.reset();
        if let Some((pcm, _)) = &self.pcm {
            let _ = pcm.drop();
            let _ = pcm.prepare();
        }
        self.event(AudioEvent::Stopped {
            seq,
            at: Instant::now(),
        });
    }

    /// Writes as much of the queue as the device (and, simulated, the clock) takes.
    fn write(&mut self) {
        let Some(seq) = self.current else { return };
        loop {
            let Some((pcm, s)) = &self.pcm else { return };
            let channels = s.channels as usize;
            let queued = self.queue.len() / channels;
            if queued == 0 {
                return;
            }
            let now = Instant::now();
            let mut room = match pcm.avail_update() {
                Ok(n) => n.max(0) as usize,
                Err(e) => {
                    if pcm.try_recover(e, true).is_err() {
                        self.lost(&why(&e));
                    }
                    continue;
                }
            };
            if self.setup.sim {
                room = room.min(self.pacer.allowance(now) as usize);
            }
            let n = room.min(queued);
            if n == 0 {
                return;
            }
            self.queue.make_contiguous();
            let (slice, _) = self.queue.as_slices();
            let result = pcm
                .io_i16()
                .and_then(|io| io.writei(&slice[..n * channels]));
            match result {
                Ok(done) => {
                    self.queue.drain(..done * channels);
                    self.pacer.advance(done as u64, now);
                    self.frames_written += done as u64;
                    if !self.written && done > 0 {
                        self.written = true;
                        self.event(AudioEvent::Playing {
                            seq,
                            at: Instant::now(),
                        });
                    }
                    if done < n {
                        return;
                    }
                }
                Err(e) if e.errno() == libc::EAGAIN => return,
                Err(e) => {
                    if pcm.try_recover(e, true).is_err() {
                        self.lost(&why(&e));
                        return;
                    }
                }
            }
        }
    }

    /// Reports the turn finished once its last sample has been played.
    fn finish_if_done(&mut self) {
        let Some(seq) = self.current else { return };
        if !self.ending || !self.queue.is_empty() {
            return;
        }
        let Some((pcm, _)) = &self.pcm else { return };
        let now = Instant::now();
        if self.setup.sim && self.pacer.ahead(now) > 0 {
            return;
        }
        match pcm_state(pcm) {
            Ok(State::Running | State::Draining) if pcm.delay().is_ok_and(|d| d > 0) => return,
            // Fewer frames than the start threshold: start them, then wait for them.
            Ok(State::Prepared) if self.written && pcm.delay().is_ok_and(|d| d > 0) => {
                let _ = pcm.start();
                return;
            }
            Ok(_) => {}
            Err(e) => {
                self.lost(&e);
                return;
            }
        }
        let _ = pcm.drop();
        let _ = pcm.prepare();
        self.pacer.reset();
        self.current = None;
        self.ending = false;
        self.played(Played::Finished { seq });
        self.event(AudioEvent::Finished { seq, at: now });
    }
}

/// Captured periods of one utterance, put together and resampled for the recogniser.
pub fn utterance(parts: &[Captured]) -> Vec<i16> {
    let rate = parts.first().map_or(RECOGNISER_RATE, |p| p.rate);
    let all: Vec<i16> = parts
        .iter()
        .flat_map(|p| p.samples.iter().copied())
        .collect();
    pcm_util::resample(&all, rate, RECOGNISER_RATE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_definition_is_refused_before_alsa_sees_it() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let name = format!("file:'|touch {}',raw", marker.display());
        let e = open_pcm(&name, Direction::Playback, true, false).unwrap_err();
        assert!(e.contains("not an ALSA device name"), "{e}");
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!marker.exists(), "the command ran");
    }

    #[test]
    fn pacer_keeps_to_the_clock() {
        let t0 = Instant::now();
        let mut p = Pacer::new(1000, 100);
        assert_eq!(p.allowance(t0), 100);
        p.advance(100, t0);
        assert_eq!(p.allowance(t0), 0);
        let t1 = t0 + Duration::from_millis(50);
        assert_eq!(p.allowance(t1), 50);
        assert_eq!(p.ahead(t1), 50);
        assert_eq!(p.wait_for(80, t1), Duration::from_millis(30));
        // Fell behind (underrun): the clock starts over.
        let t2 = t0 + Duration::from_secs(5);
        assert_eq!(p.ahead(t2), 0);
        p.advance(10, t2);
        assert_eq!(p.ahead(t2), 10);
    }

    #[test]
    fn mixer_names_follow_the_pcm() {
        assert_eq!(mixer_card("default"), "default");
        assert_eq!(mixer_card("hw:1,0"), "hw:1");
        assert_eq!(mixer_card("plughw:2"), "hw:2");
        assert_eq!(mixer_card("sysdefault:CARD=Device"), "hw:Device");
        assert_eq!(mixer_card("plughw:CARD=Loopback,DEV=0"), "hw:Loopback");
    }

    #[test]
    fn gain_and_utterances() {
        let mut s = [1000i16, -1000];
        apply_gain(&mut s, 50);
        assert_eq!(s, [250, -250]);
        let parts = [
            Captured {
                id: 1,
                rate: 48_000,
                samples: vec![0; 4800],
            },
            Captured {
                id: 1,
                rate: 48_000,
                samples: vec![0; 4800],
            },
        ];
        assert_eq!(utterance(&parts).len(), 3200);
    }

    /// The real ALSA path over the simulation's file/null plugins: what is played lands in the
    /// speaker file at the wall clock's pace; what is in the mic file is captured.
    #[test]
    fn sim_devices_play_and_capture_through_alsa() {
        let dir = tempfile::tempdir().unwrap();
        let mic = dir.path().join("mic.raw");
        let speaker = dir.path().join("speaker.raw");
        let question: Vec<i16> = (0..8000).map(|i| (i % 100) as i16).collect();
        std::fs::write(&mic, pcm_util::samples_to_le(&question)).unwrap();
        let setup = file_setup(&mic, &speaker);
        let board = Arc::new(HealthBoard::default());
        let (audio, mut captured, mut played) = Audio::start(setup, board.clone()).unwrap();
        let mut events = audio.subscribe();
        let reply: Vec<i16> = (0..12_000).map(|i| (i % 50) as i16 + 1).collect();
        let started = Instant::now();
        audio.begin(7, 100);
        for chunk in reply.chunks(2400) {
            audio.play(7, Bytes::from(pcm_util::samples_to_le(chunk)));
        }
        audio.end(7);
        assert_eq!(played.blocking_recv(), Some(Played::Finished { seq: 7 }));
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(450),
            "0.5 s of audio played in {took:?}"
        );
        assert!(matches!(
            events.try_recv(),
            Ok(AudioEvent::Playing { seq: 7, .. })
        ));
        let out = pcm_util::samples_from_le(&std::fs::read(&speaker).unwrap());
        assert_eq!(out, reply);
        assert_eq!(board.get().audio, Health::Sim);

        audio.start_capture(1);
        let mut got = Vec::new();
        while got.len() < 9600 {
            let c = captured.blocking_recv().unwrap();
            assert_eq!((c.id, c.rate), (1, 16_000));
            got.extend(c.samples);
        }
        audio.stop_capture();
        assert_eq!(&got[..8000], &question[..], "the mic file, then silence");
        assert!(got[8000..].iter().all(|s| *s == 0));
    }

    /// Waits until `ok` holds of the audio health, or panics after `within`.
    /// The simulated devices over two files, as the sim board has them.
    fn file_setup(mic: &std::path::Path, speaker: &std::path::Path) -> AudioSetup {
        AudioSetup {
            capture: sim_pcm("mic", mic).unwrap(),
            playback: sim_pcm("speaker", speaker).unwrap(),
            assistive: None,
            mixer: None,
            period: 800,
            buffer: 8000,
            sim: true,
        }
    }

    fn wait_health(board: &HealthBoard, within: Duration, ok: impl Fn(&Health) -> bool) {
        let start = Instant::now();
        while !ok(&board.get().audio) {
            assert!(
                start.elapsed() < within,
                "audio health: {:?}",
                board.get().audio
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// A microphone that cannot be opened (a card unplugged; here the simulation's mic file does
    /// not exist yet) is reported in health while the button is held and after; once it can be
    /// opened again, health clears without a press or a restart, and the next press captures.
    /// (The speaker's side needs a card that really goes away: the appliance test unbinds the
    /// simulated board's.)
    #[test]
    fn a_missing_microphone_is_reported_and_cleared_when_back() {
        let dir = tempfile::tempdir().unwrap();
        let mic = dir.path().join("mic.raw");
        let setup = file_setup(&mic, &dir.path().join("speaker.raw"));
        let board = Arc::new(HealthBoard::default());
        let (audio, mut captured, _played) = Audio::start(setup, board.clone()).unwrap();
        audio.start_capture(1);
        let problem = |h: &Health| matches!(h, Health::Problem(p) if p.starts_with("capture: "));
        wait_health(&board, Duration::from_secs(5), problem);
        audio.stop_capture();
        // Still reported once the button is up: the card is still missing.
        std::thread::sleep(Duration::from_millis(500));
        assert!(problem(&board.get().audio), "{:?}", board.get().audio);

        std::fs::write(&mic, pcm_util::samples_to_le(&[5; 1600])).unwrap();
        let back = Instant::now();
        wait_health(&board, REOPEN_MAX + Duration::from_secs(2), |h| {
            *h == Health::Sim
        });
        let took = back.elapsed();
        assert!(took <= REOPEN_MAX + Duration::from_millis(500), "{took:?}");
        assert!(
            captured.try_recv().is_err(),
            "nothing was captured while idle"
        );
        audio.start_capture(2);
        let c = captured.blocking_recv().unwrap();
        audio.stop_capture();
        assert_eq!(c.id, 2);
        assert!(c.samples.starts_with(&[5; 100]), "the mic file is captured");
    }

    /// Issue 31: an assistive speaker whose card is missing is named in health (apart from
    /// the speaker), and the speaker plays the whole reply in its own time.
    #[test]
    fn a_missing_assistive_speaker_is_reported_and_the_speaker_plays_on() {
        let dir = tempfile::tempdir().unwrap();
        let speaker = dir.path().join("speaker.raw");
        let setup = AudioSetup {
            capture: sim_pcm("mic", &dir.path().join("mic.raw")).unwrap(),
            playback: sim_pcm("speaker", &speaker).unwrap(),
            assistive: Some("hw:CARD=DocentNoSuchCard".into()),
            mixer: None,
            period: 800,
            buffer: 8000,
            sim: true,
        };
        std::fs::write(dir.path().join("mic.raw"), b"").unwrap();
        let board = Arc::new(HealthBoard::default());
        let (audio, _captured, mut played) = Audio::start(setup, board.clone()).unwrap();
        let missing = |h: &Health| {
            matches!(h, Health::Problem(p)
                if p.starts_with("assistive playback: cannot open hw:CARD=DocentNoSuchCard")
                    && !p.contains("; playback"))
        };
        wait_health(&board, Duration::from_secs(2), missing);

        let reply: Vec<i16> = (0..12_000).map(|i| (i % 50) as i16 + 1).collect();
        let started = Instant::now();
        audio.begin(3, 100);
        audio.play(3, Bytes::from(pcm_util::samples_to_le(&reply)));
        audio.end(3);
        assert_eq!(played.blocking_recv(), Some(Played::Finished { seq: 3 }));
        let took = started.elapsed();
        assert!(
            (Duration::from_millis(450)..Duration::from_millis(900)).contains(&took),
            "0.5 s of audio played in {took:?}"
        );
        let out = pcm_util::samples_from_le(&std::fs::read(&speaker).unwrap());
        assert_eq!(out, reply, "the whole reply on the speaker");
        assert!(missing(&board.get().audio), "{:?}", board.get().audio);
    }

    #[test]
    fn sim_names_quote_the_path() {
        assert_eq!(
            sim_pcm("mic", std::path::Path::new("/d/sim/mic.raw")).unwrap(),
            "docent_sim_mic:FILE=\"/d/sim/mic.raw\""
        );
        assert!(sim_pcm("mic", std::path::Path::new("/d/\"x")).is_err());
    }
}
