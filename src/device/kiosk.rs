//! The kiosk loop: idle -> listening -> processing -> speaking -> idle, for the in-person visitor.
//!
//! One async task owns the loop. It drives one ordinary engine session (created at the first
//! press, as the kiosk character; WebSocket watchers of that session see everything it does and
//! its history is stored), and hears from the button thread (`PttEvent`), the capture thread
//! (periods of the utterance), the playback thread (a reply played to its end) and the session's
//! events (reply audio).
//!
//! - idle + press: the microphone opens, watchers see `listening`; LED on.
//! - listening + release (or `max_utterance_ms`): the microphone closes; the utterance starts a
//!   turn; processing. A release sooner than `min_press_ms` (a tap) starts nothing: idle; but
//!   the tap that opened a visit (a visitor pressing to start, not to ask) has the character
//!   greet them with its welcome message: processing, speaking.
//! - processing + the turn's first audio: speaking; the audio goes to the speaker as it comes.
//! - speaking + the last sample played: idle.
//! - processing or speaking + press: playback stops at once, the turn is cancelled, listening.
//! - `max_processing_ms` / `max_speaking_ms`: the turn is cancelled, idle.
//!
//! - closed (the opening hours in the settings, read at the loop's clock every second and at
//!   each press): a press starts no visit; it either does nothing or has the kiosk say that it
//!   is closed and when it opens again (`hours.when_closed`): processing while the line is
//!   synthesised, speaking while it plays, idle. The display shows the closed screen.
//! - the console's test sound (while idle): a chime at the volume asked, speaking, idle.
//! - first boot, button held 5 s: the password is shown (see `presence`); the utterance or turn
//!   that press began is dropped, idle (where the setup screen shows it).
//!
//! The microphone is open only while listening, so the kiosk never hears (and answers) itself;
//! the one way to talk over it is a press (barge-in), which silences it first.
//!
//! Choosing without speaking (docs/touch.md): a touch or a choice button while idle opens the
//! question screen (`KioskState::questions`: the character's questions on the screen, a page at
//! a time); a touch on a question, or "choose" on the one the buttons point at, asks it as a
//! spoken question would be (a turn of the visit; captions; cut by a press or a touch). A touch
//! while the kiosk thinks or speaks cuts the reply and opens the question screen. The screen
//! closes by its "Close", a press, or after `QUESTIONS_IDLE` without a choice.
//!
//! Captions (`KioskState::captions`, which the display writes): while listening, the
//! microphone's level; then what the recogniser heard (`UserSpeech`); then each sentence of the
//! reply (`Caption`) once the speaker reaches its first sample (the playback thread reports the
//! mark, `Played::Reached`), so the words on the screen are the words being said. After the
//! reply they stay `caption_linger_ms`, or until the next press.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, broadcast, mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::audio::{self, Audio, Captured, Played};
use super::choice::Choose;
use super::display::questions::{self, Hit, Page};
use super::presence::{self, Presence};
use super::ptt::{PttEvent, Wake};
use super::{Captions, KioskState};
use crate::config::KioskConfig;
use crate::engine::ScreenQuestion;
use crate::engine::access::Owner;
use crate::engine::hours::{Opening, WhenClosed};
use crate::engine::language::{Language, Phrase, Words};
use crate::engine::live::{AudioWanted, Event, LiveSession, Status};
use crate::engine::sessions::NewSession;
use crate::engine::turn::TurnInput;
use crate::engine::{CharacterId, Engine};
use crate::watchdog::{self, Heartbeat};

/// How often the loop looks at the settings (volume, kiosk character).
const HOUSEKEEPING: Duration = Duration::from_secs(1);

/// Everything the loop runs with.
pub struct KioskParts {
    pub engine: Arc<Engine>,
    pub config: KioskConfig,
    pub audio: Option<Arc<Audio>>,
    pub captured: Option<mpsc::UnboundedReceiver<Captured>>,
    pub played: Option<mpsc::UnboundedReceiver<Played>>,
    pub buttons: mpsc::UnboundedReceiver<PttEvent>,
    pub state: watch::Sender<KioskState>,
    /// Woken on every state change (the LED follows at once).
    pub wake: Arc<Wake>,
    pub stop: CancellationToken,
    /// Beaten at every turn of the loop, which wakes at least every `watchdog::BEAT`.
    pub heartbeat: Arc<Heartbeat>,
    /// Test hook (`test.hooks`): when notified, the loop stops turning until `stop`.
    pub stall: Arc<Notify>,
    /// The console's "test sound" requests, each at a volume (0-100).
    pub test_sounds: mpsc::UnboundedReceiver<u8>,
    /// Touches and choice buttons (`None`: the kiosk has neither).
    pub choices: Option<mpsc::Receiver<Choose>>,
}

/// The question screen closes after this long without a choice (the next visitor finds the
/// kiosk as it should be).
const QUESTIONS_IDLE: Duration = Duration::from_secs(45);

/// What the question screen lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listing {
    /// The character's questions in the visit's language; first, when the museum offers
    /// several languages, the row that opens the list of languages.
    Questions,
    /// The museum's languages, each by its own name.
    Languages,
}

/// The question screen while open: what it lists, its page, the row the buttons point at,
/// and when it closes by itself.
#[derive(Debug, Clone, Copy)]
struct Choosing {
    listing: Listing,
    page: usize,
    selected: usize,
    until: Instant,
}

/// A row of the question screen.
#[derive(Debug, Clone)]
enum Entry {
    Question(ScreenQuestion),
    OpenLanguages,
    Language(Language),
    /// The visitor's own visit deleted at once (docs/privacy.md).
    ForgetVisit,
}

/// The visitor's session as the kiosk holds it.
struct Visit {
    live: Arc<LiveSession>,
    /// Keeps reply audio synthesised.
    _audio: AudioWanted,
}

struct Kiosk {
    engine: Arc<Engine>,
    config: KioskConfig,
    audio: Option<Arc<Audio>>,
    state: watch::Sender<KioskState>,
    wake: Arc<Wake>,
    status: Status,
    deadline: Option<Instant>,
    visit: Option<Visit>,
    /// The kiosk's turn in progress (processing or speaking).
    turn: Option<u64>,
    utterance: u64,
    parts: Vec<Captured>,
    volume: u8,
    character_id: String,
    /// The first-boot password's hold and how long it is shown.
    presence: Presence,
    password_shown: bool,
    /// The press being listened to opened the visit (its tap is a greeting, not a cut).
    opening: bool,
    /// Whether the kiosk is open now.
    hours: Opening,
    /// The "we're closed" line being synthesised or played: its playback number (far above any
    /// turn's), and where its synthesis reports.
    announcement: Option<u64>,
    announcements: u64,
    announced: mpsc::UnboundedSender<(u64, Option<Vec<i16>>)>,
    /// The closed line being said, captioned when it plays.
    announcement_text: String,
    /// What the screen writes of the visit now.
    captions: Captions,
    /// The turn's sentences and the sample each starts at, in order: `captions.said` shows
    /// those the speaker has reached.
    sentences: Vec<(String, u64)>,
    /// When the last reply's captions leave the screen.
    linger: Option<Instant>,
    /// When the microphone's level was last published (a few times a second is enough).
    level_shown: Instant,
    /// The character's questions on the screen (read at housekeeping), whether a visitor has
    /// a way to choose them, and the question screen while open (page, row pointed at, when
    /// it closes by itself).
    screen_questions: Vec<ScreenQuestion>,
    can_choose: bool,
    choosing: Option<Choosing>,
    /// When a visitor last did something (a press, a touch, a reply heard to its end): a visit
    /// ends `visit_idle_ms` after it.
    last_seen: Instant,
}

/// How often, at most, the microphone's level is published while listening.
const LEVEL_EVERY: Duration = Duration::from_millis(100);

/// Runs the loop until `stop`.
pub async fn run(parts: KioskParts) {
    let KioskParts {
        engine,
        config,
        audio,
        captured,
        played,
        mut buttons,
        state,
        wake,
        stop,
        heartbeat,
        stall,
        mut test_sounds,
        choices,
    } = parts;
    let can_choose = choices.is_some();
    let mut choices = choices;
    let (announced, mut announced_rx) = mpsc::unbounded_channel();
    let mut captured = captured;
    let mut played = played;
    let volume = engine.settings().kiosk.volume;
    if let Some(a) = &audio {
        a.set_volume(volume);
    }
    let mut k = Kiosk {
        engine,
        config,
        audio,
        state,
        wake,
        status: Status::Idle,
        deadline: None,
        visit: None,
        turn: None,
        utterance: 0,
        parts: Vec::new(),
        volume,
        character_id: String::new(),
        presence: Presence::default(),
        password_shown: false,
        opening: false,
        hours: Opening::always(),
        announcement: None,
        announcements: 0,
        announced,
        announcement_text: String::new(),
        captions: Captions::default(),
        sentences: Vec::new(),
        linger: None,
        level_shown: Instant::now(),
        screen_questions: Vec::new(),
        can_choose,
        choosing: None,
        last_seen: Instant::now(),
    };
    k.housekeeping().await;
    let mut events: Option<broadcast::Receiver<Event>> = None;
    let mut tick = tokio::time::interval(HOUSEKEEPING);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut beat = tokio::time::interval(watchdog::BEAT);
    beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        heartbeat.beat();
        let deadline = k.deadline;
        let linger = k.linger;
        let questions_close = k.choosing.map(|c| c.until);
        let presence_due = k.presence.next().map(Instant::from_std);
        tokio::select! {
            biased;
            _ = stop.cancelled() => break,
            _ = stall.notified() => {
                tracing::warn!("test hook: the kiosk loop stalls until it is stopped");
                stop.cancelled().await;
                break;
            }
            Some(e) = buttons.recv() => {
                k.button(e, &mut events).await;
            }
            Some(p) = recv(&mut played) => k.played(p),
            Some((seq, line)) = announced_rx.recv() => k.announce(seq, line),
            Some(volume) = test_sounds.recv() => k.test_sound(volume),
            Some(c) = recv_bounded(&mut choices) => k.choose(c, &mut events).await,
            _ = sleep_until(questions_close) => k.close_questions(),
            event = next_event(&mut events) => match event {
                Ok(e) => k.event(e),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!("kiosk: fell behind its session by {n} events");
                }
                Err(broadcast::error::RecvError::Closed) => {
                    events = None;
                    k.session_gone();
                }
            },
            Some(c) = recv(&mut captured) => {
                if k.status == Status::Listening && c.id == k.utterance {
                    k.hear_level(&c.samples);
                    k.parts.push(c);
                }
            }
            _ = sleep_until(deadline) => k.timeout(),
            _ = sleep_until(linger) => k.end_linger(),
            _ = sleep_until(presence_due) => k.presence_tick(),
            _ = tick.tick() => k.housekeeping().await,
            _ = beat.tick() => {}
        }
    }
    if let Some(a) = &k.audio {
        a.stop_capture();
        a.stop_playback();
    }
}

async fn recv<T>(rx: &mut Option<mpsc::UnboundedReceiver<T>>) -> Option<T> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

async fn recv_bounded<T>(rx: &mut Option<mpsc::Receiver<T>>) -> Option<T> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

async fn next_event(
    rx: &mut Option<broadcast::Receiver<Event>>,
) -> Result<Event, broadcast::error::RecvError> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

impl Kiosk {
    fn enter(&mut self, status: Status, bound_ms: Option<u64>) {
        self.status = status;
        self.deadline = bound_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
        self.publish();
    }

    fn publish(&self) {
        let next = KioskState {
            password_shown: self.password_shown,
            opening: self.hours.clone(),
            status: self.status,
            character_id: self.character_id.clone(),
            session_id: self
                .visit
                .as_ref()
                .map(|v| v.live.id.to_string())
                .unwrap_or_default(),
            captions: self.captions.clone(),
            questions: self.choosing.map(|c| self.page(c)),
            can_choose: self.can_choose && !self.entries(Listing::Questions).is_empty(),
            words: Arc::new(self.words()),
            language: self.language(),
        };
        let changed = self.state.send_if_modified(|s| {
            if *s == next {
                false
            } else {
                *s = next;
                true
            }
        });
        if changed {
            self.wake.notify();
        }
    }

    async fn button(&mut self, e: PttEvent, events: &mut Option<broadcast::Receiver<Event>>) {
        match e {
            PttEvent::Press if self.engine.in_first_boot() => {
                self.presence.press(Instant::now().into_std())
            }
            PttEvent::Press => {}
            PttEvent::Release | PttEvent::Tap => self.presence.release(),
        }
        if e == PttEvent::Press {
            self.last_seen = Instant::now();
            self.choosing = None;
            self.follow_hours();
            if !self.hours.open {
                self.closed_press();
                return;
            }
        }
        match (e, self.status) {
            (PttEvent::Press, Status::Listening) => {}
            (PttEvent::Press, previous) => {
                // Silence first: nothing else stands between the press and the speaker stopping.
                if let Some(a) = &self.audio {
                    if previous != Status::Idle {
                        a.stop_playback();
                    }
                    self.utterance += 1;
                    a.start_capture(self.utterance);
                }
                self.parts.clear();
                self.turn = None;
                self.clear_captions();
                self.enter(Status::Listening, Some(self.config.max_utterance_ms));
                self.opening = self.visit.is_none();
                if self.opening {
                    *events = self.open_visit().await;
                }
                if let Some(v) = &self.visit {
                    self.engine.listen(&v.live);
                }
            }
            (PttEvent::Release, Status::Listening) => self.end_utterance(),
            (PttEvent::Tap, Status::Listening) => {
                if let Some(a) = &self.audio {
                    a.stop_capture();
                }
                self.parts.clear();
                if std::mem::take(&mut self.opening)
                    && let Some(v) = &self.visit
                    && v.live.first_greeting()
                {
                    let seq = self.engine.start_turn(&v.live, TurnInput::Greeting);
                    self.turn = Some(seq);
                    self.enter(Status::Processing, Some(self.config.max_processing_ms));
                    return;
                }
                if let Some(v) = &self.visit {
                    self.engine.interrupt(&v.live);
                }
                self.enter(Status::Idle, None);
            }
            // A release after the utterance already ended (it timed out while held).
            (PttEvent::Release | PttEvent::Tap, _) => {}
        }
    }

    /// The utterance is complete: it becomes a turn.
    fn end_utterance(&mut self) {
        self.opening = false;
        if let Some(a) = &self.audio {
            a.stop_capture();
        }
        let pcm = audio::utterance(&std::mem::take(&mut self.parts));
        let Some(v) = &self.visit else {
            self.enter(Status::Idle, None);
            return;
        };
        let seq = self.engine.start_turn(&v.live, TurnInput::Audio(pcm));
        self.turn = Some(seq);
        self.enter(Status::Processing, Some(self.config.max_processing_ms));
    }

    fn event(&mut self, e: Event) {
        let Some(turn) = self.turn else {
            if matches!(e, Event::Closed) {
                self.session_gone();
            }
            return;
        };
        // Another client of the session interrupted or started a turn: the kiosk's is over.
        if let Event::Status { turn_seq, .. } = &e
            && *turn_seq > turn
        {
            tracing::info!(turn, "kiosk: the turn was superseded by another client");
            if let Some(a) = &self.audio {
                a.stop_playback();
            }
            self.finish();
            return;
        }
        match e {
            Event::Status {
                status: Status::Speaking,
                turn_seq,
            }
            | Event::AudioStart { turn_seq }
                if turn_seq == turn && self.status == Status::Processing =>
            {
                self.speak(turn);
            }
            Event::Audio { pcm, turn_seq } if turn_seq == turn => {
                if self.status == Status::Processing {
                    self.speak(turn);
                }
                if let Some(a) = &self.audio {
                    a.play(turn, pcm);
                }
            }
            Event::AudioEnd { turn_seq } if turn_seq == turn => match &self.audio {
                Some(a) => a.end(turn),
                None => self.finish(),
            },
            Event::UserSpeech { text, turn_seq } if turn_seq == turn => {
                self.captions.heard = text;
                self.publish();
            }
            Event::Caption { text, at, turn_seq } if turn_seq == turn => {
                let mark = self.sentences.len() as u64;
                self.sentences.push((text, at));
                match &self.audio {
                    Some(a) if self.status == Status::Speaking => a.mark(turn, at, mark),
                    // Marked when the speech begins (`speak`).
                    Some(_) => {}
                    None => self.reached(mark),
                }
            }
            // The turn ended without a word spoken (text only, or it failed silently).
            Event::Status {
                status: Status::Idle,
                turn_seq,
            } if turn_seq == turn && self.status == Status::Processing => self.finish(),
            Event::Closed => self.session_gone(),
            _ => {}
        }
    }

    fn speak(&mut self, turn: u64) {
        if let Some(a) = &self.audio {
            a.begin(turn, self.volume);
            for (mark, (_, at)) in self.sentences.iter().enumerate() {
                a.mark(turn, *at, mark as u64);
            }
        }
        self.enter(Status::Speaking, Some(self.config.max_speaking_ms));
    }

    fn finish(&mut self) {
        self.last_seen = Instant::now();
        self.turn = None;
        self.announcement = None;
        // Whatever was not marked on the speaker (cut short, or no speaker) is written now.
        if let Some(last) = self.sentences.len().checked_sub(1) {
            self.reached(last as u64);
        }
        self.sentences.clear();
        self.captions.level = 0;
        self.linger = (!self.captions.is_empty())
            .then(|| Instant::now() + Duration::from_millis(self.config.caption_linger_ms));
        self.enter(Status::Idle, None);
    }

    /// The speaker reached sentence `mark`: it and every one before it are written.
    fn reached(&mut self, mark: u64) {
        let upto = (mark as usize + 1).min(self.sentences.len());
        let before = self.captions.said.len();
        for (text, _) in self.sentences.iter().take(upto).skip(before) {
            self.captions.said.push(text.clone());
        }
        if self.captions.said.len() != before {
            self.publish();
        }
    }

    fn clear_captions(&mut self) {
        self.captions = Captions::default();
        self.sentences.clear();
        self.linger = None;
    }

    /// The last reply has been on the screen long enough.
    fn end_linger(&mut self) {
        self.linger = None;
        if self.status == Status::Idle {
            self.captions = Captions::default();
            self.publish();
        }
    }

    /// Publishes the microphone's level (0-100 over -60 to 0 dBFS) a few times a second.
    fn hear_level(&mut self, samples: &[i16]) {
        if self.level_shown.elapsed() < LEVEL_EVERY || samples.is_empty() {
            return;
        }
        let power = samples.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / samples.len() as f64;
        let dbfs = 10.0 * (power.max(1.0) / (i16::MAX as f64).powi(2)).log10();
        let level = ((dbfs + 60.0) / 60.0 * 100.0).clamp(0.0, 100.0) as u8;
        if level != self.captions.level {
            self.captions.level = level;
            self.level_shown = Instant::now();
            self.publish();
        }
    }

    fn played(&mut self, p: Played) {
        match p {
            Played::Finished { seq } => {
                let ours = self.turn == Some(seq) || self.announcement == Some(seq);
                if ours && self.status == Status::Speaking {
                    self.finish();
                }
            }
            Played::Reached { seq, mark } if self.turn == Some(seq) => self.reached(mark),
            Played::Reached { .. } => {}
        }
    }

    fn timeout(&mut self) {
        let status = self.status;
        tracing::info!(?status, "kiosk: state timed out");
        match status {
            Status::Listening => self.end_utterance(),
            Status::Processing | Status::Speaking => {
                if let Some(a) = &self.audio {
                    a.stop_playback();
                }
                if let Some(v) = &self.visit {
                    self.engine.interrupt(&v.live);
                }
                self.finish();
            }
            Status::Idle => self.deadline = None,
        }
    }

    /// The first-boot hold reached 5 s, or the password's time on the screen is over.
    fn presence_tick(&mut self) {
        match self.presence.tick(Instant::now().into_std()) {
            Some(presence::Change::Shown) => {
                tracing::info!("kiosk: the button was held 5 s: the first-boot password is shown");
                self.password_shown = true;
                // The press began a visitor's utterance: it was the gesture, not a question.
                if self.status != Status::Idle {
                    if let Some(a) = &self.audio {
                        a.stop_capture();
                        a.stop_playback();
                    }
                    self.parts.clear();
                    if let Some(v) = &self.visit {
                        self.engine.interrupt(&v.live);
                    }
                    self.turn = None;
                    self.enter(Status::Idle, None);
                } else {
                    self.publish();
                }
            }
            Some(presence::Change::Hidden) => {
                tracing::info!("kiosk: the first-boot password is hidden again");
                self.password_shown = false;
                self.publish();
            }
            None => {}
        }
    }

    /// The session was deleted or expired: the next press opens a new one.
    fn session_gone(&mut self) {
        self.visit = None;
        self.clear_captions();
        self.publish();
        if self.status != Status::Idle {
            if let Some(a) = &self.audio {
                a.stop_capture();
                a.stop_playback();
            }
            self.parts.clear();
            self.finish();
        }
    }

    /// Opens the visitor's session as the kiosk character; returns its event stream.
    async fn open_visit(&mut self) -> Option<broadcast::Receiver<Event>> {
        let engine = self.engine.clone();
        let character = self.character_id.clone();
        let opened = tokio::task::spawn_blocking(move || {
            let created = engine.create_session(
                NewSession {
                    mode: None,
                    character_id: Some(character).filter(|c| !c.is_empty()),
                },
                Owner::Kiosk,
            )?;
            engine.live(&crate::engine::SessionId::of_record(&created.session_id))
        })
        .await;
        match opened {
            Ok(Ok(live)) => {
                tracing::info!(session = %live.id, character = %live.character_id, "kiosk: visitor session opened");
                let events = live.subscribe();
                self.visit = Some(Visit {
                    _audio: live.want_audio(),
                    live,
                });
                self.publish();
                Some(events)
            }
            Ok(Err(e)) => {
                tracing::warn!("kiosk: cannot open a session: {e}");
                None
            }
            Err(_) => None,
        }
    }

    /// Reads the opening hours at the engine's clock; publishes a change.
    fn follow_hours(&mut self) {
        let now = self.engine.opening();
        if now != self.hours {
            tracing::info!(open = now.open, until = %now.when, "kiosk: opening hours");
            self.hours = now;
            self.publish();
        }
    }

    /// A press while closed: nothing, or the closed line (once: a press while it is said is
    /// ignored). A turn still running when the kiosk closed is cut, as any press cuts it.
    fn closed_press(&mut self) {
        if self.engine.settings().hours.when_closed == WhenClosed::Nothing
            || self.announcement.is_some()
        {
            return;
        }
        if self.status != Status::Idle {
            self.stop_turn();
        }
        self.announcements += 1;
        let seq = u64::MAX - self.announcements;
        self.announcement = Some(seq);
        self.enter(Status::Processing, Some(self.config.max_processing_ms));
        let engine = self.engine.clone();
        let text = self.hours.closed_line();
        self.announcement_text = text.clone();
        let done = self.announced.clone();
        tokio::spawn(async move {
            let line = match engine.speak_line(&text).await {
                Ok(pcm) => Some(pcm),
                Err(e) => {
                    tracing::warn!("kiosk: the closed line cannot be spoken: {e}");
                    None
                }
            };
            let _ = done.send((seq, line));
        });
    }

    /// The console's test sound: a short chime at `volume`, only while idle (a visitor comes
    /// first); the next reply plays at the settings' volume again.
    fn test_sound(&mut self, volume: u8) {
        let Some(a) = &self.audio else { return };
        if self.status != Status::Idle {
            tracing::info!("kiosk: no test sound while {:?}", self.status);
            return;
        }
        self.announcements += 1;
        let seq = u64::MAX - self.announcements;
        self.announcement = Some(seq);
        a.begin(seq, volume.min(100));
        a.play(seq, crate::engine::pcm::samples_to_le(&chime()).into());
        a.end(seq);
        self.enter(Status::Speaking, Some(self.config.max_speaking_ms));
    }

    /// The closed line is synthesised (or failed): it plays, or the kiosk is idle again.
    fn announce(&mut self, seq: u64, line: Option<Vec<i16>>) {
        if self.announcement != Some(seq) || self.status != Status::Processing {
            return;
        }
        match (&self.audio, line) {
            (Some(a), Some(pcm)) if !pcm.is_empty() => {
                a.begin(seq, self.volume);
                a.play(seq, crate::engine::pcm::samples_to_le(&pcm).into());
                a.end(seq);
                self.clear_captions();
                self.captions.said = vec![self.announcement_text.clone()];
                self.enter(Status::Speaking, Some(self.config.max_speaking_ms));
            }
            _ => self.finish(),
        }
    }

    /// The visit's language: chosen on the screen or heard, else the museum's default.
    fn language(&self) -> Language {
        self.visit
            .as_ref()
            .and_then(|v| v.live.language())
            .unwrap_or_else(|| self.engine.settings().default_language())
    }

    /// The kiosk's lines in the visit's language.
    fn words(&self) -> Words {
        let (settings, language) = (self.engine.settings(), self.language());
        Words::new(|p| settings.line(&language, p))
    }

    /// The rows of `listing`: the questions in the visit's language (the default's when it
    /// has none), after the row of languages when the museum offers several.
    fn entries(&self, listing: Listing) -> Vec<(String, Entry)> {
        let settings = self.engine.settings();
        let languages = settings.languages();
        if listing == Listing::Languages {
            return languages
                .iter()
                .map(|l| (l.own_name(), Entry::Language(l.clone())))
                .collect();
        }
        let mut out = Vec::new();
        if languages.len() > 1 {
            let names: Vec<String> = languages.iter().map(Language::own_name).collect();
            let label = settings.line(&self.language(), Phrase::Languages);
            out.push((
                format!("{label}: {}", names.join(" · ")),
                Entry::OpenLanguages,
            ));
        }
        let default = settings.default_language();
        let of = |q: &ScreenQuestion| Language::parse(&q.language).unwrap_or(default.clone());
        let language = self.language();
        let mut questions: Vec<&ScreenQuestion> = self
            .screen_questions
            .iter()
            .filter(|q| of(q).same_as(&language))
            .collect();
        if questions.is_empty() {
            questions = self
                .screen_questions
                .iter()
                .filter(|q| of(q).same_as(&default))
                .collect();
        }
        out.extend(
            questions
                .into_iter()
                .map(|q| (q.text.clone(), Entry::Question(q.clone()))),
        );
        if self.visit.is_some() && !out.is_empty() {
            let forget = settings.line(&self.language(), Phrase::ForgetVisit);
            out.push((forget, Entry::ForgetVisit));
        }
        out
    }

    /// The page of the question screen `c` shows, in the visit's language.
    fn page(&self, c: Choosing) -> Page {
        let entries = self.entries(c.listing);
        let pages = entries.len().div_ceil(questions::ROWS).max(1);
        let words = self.words();
        let say = |p: Phrase| words.get(p).to_string();
        let title = match c.listing {
            Listing::Questions => say(Phrase::ChooseQuestion)
                .replace("{pages}", &pages.to_string())
                .replace("{page}", &(c.page + 1).to_string()),
            Listing::Languages => say(Phrase::Languages),
        };
        Page {
            title,
            rows: entries
                .into_iter()
                .skip(c.page * questions::ROWS)
                .take(questions::ROWS)
                .map(|(text, _)| text)
                .collect(),
            page: c.page,
            pages,
            selected: c.selected,
            bar: [say(Phrase::Previous), say(Phrase::Close), say(Phrase::Next)],
        }
    }

    /// A touch or a choice button.
    async fn choose(&mut self, c: Choose, events: &mut Option<broadcast::Receiver<Event>>) {
        self.follow_hours();
        self.last_seen = Instant::now();
        if self.entries(Listing::Questions).is_empty()
            || !self.hours.open
            || self.engine.in_first_boot()
        {
            return;
        }
        let Some(open) = self.choosing else {
            // The first touch opens the question screen; one while the kiosk listens, thinks
            // or speaks cuts that first, as a press does.
            match self.status {
                Status::Idle => {}
                Status::Listening => return,
                Status::Processing | Status::Speaking => self.cut(),
            }
            self.clear_captions();
            self.open_questions(Listing::Questions, 0, 0);
            return;
        };
        let (listing, page, selected) = (open.listing, open.page, open.selected);
        let entries = self.entries(listing);
        let count = entries.len();
        let pages = count.div_ceil(questions::ROWS).max(1);
        let rows = self.page(open).rows.len();
        let index = |page: usize, row: usize| page * questions::ROWS + row;
        let chosen = match c {
            Choose::Touch { x, y } => match questions::hit(x, y, rows) {
                Hit::Row(row) => Some(index(page, row)),
                Hit::Previous => {
                    self.open_questions(listing, (page + pages - 1) % pages, 0);
                    None
                }
                Hit::Next => {
                    self.open_questions(listing, (page + 1) % pages, 0);
                    None
                }
                Hit::Close => {
                    self.close_questions();
                    None
                }
                Hit::Nothing => {
                    self.open_questions(listing, page, selected);
                    None
                }
            },
            // The buttons walk the rows one by one, across pages.
            Choose::Previous | Choose::Next => {
                let at = index(page, selected);
                let to = if c == Choose::Next {
                    (at + 1) % count
                } else {
                    (at + count - 1) % count
                };
                self.open_questions(listing, to / questions::ROWS, to % questions::ROWS);
                None
            }
            Choose::Choose => Some(index(page, selected)),
        };
        match chosen
            .and_then(|i| entries.into_iter().nth(i))
            .map(|(_, e)| e)
        {
            Some(Entry::Question(q)) => self.ask_question(q, events).await,
            Some(Entry::OpenLanguages) => self.open_questions(Listing::Languages, 0, 0),
            Some(Entry::Language(l)) => self.choose_language(l, events).await,
            Some(Entry::ForgetVisit) => self.forget_visit(events).await,
            None => {}
        }
    }

    /// Shows (or keeps showing) the question screen at `page`, `selected`, for another while.
    fn open_questions(&mut self, listing: Listing, page: usize, selected: usize) {
        self.choosing = Some(Choosing {
            listing,
            page,
            selected,
            until: Instant::now() + QUESTIONS_IDLE,
        });
        self.publish();
    }

    /// The visitor chose a language: the visit is in it from now on, and the question screen
    /// lists its questions.
    async fn choose_language(
        &mut self,
        language: Language,
        events: &mut Option<broadcast::Receiver<Event>>,
    ) {
        if self.visit.is_none() {
            *events = self.open_visit().await;
        }
        let Some(live) = self.visit.as_ref().map(|v| v.live.clone()) else {
            return;
        };
        let engine = self.engine.clone();
        let chosen = language.clone();
        let set =
            tokio::task::spawn_blocking(move || engine.set_visit_language(&live, &chosen)).await;
        match set {
            Ok(Ok(())) => tracing::info!(%language, "kiosk: the visitor chose a language"),
            Ok(Err(e)) => tracing::warn!("kiosk: the language chosen is not kept: {e}"),
            Err(_) => {}
        }
        self.open_questions(Listing::Questions, 0, 0);
    }

    fn close_questions(&mut self) {
        if self.choosing.take().is_some() {
            self.publish();
        }
    }

    /// The microphone and the speaker stop at once and the turn in progress is cancelled.
    fn stop_turn(&mut self) {
        if let Some(a) = &self.audio {
            a.stop_capture();
            a.stop_playback();
        }
        if let Some(v) = &self.visit {
            self.engine.interrupt(&v.live);
        }
        self.parts.clear();
        self.turn = None;
    }

    /// The kiosk's reply in progress stops (playback at once, the turn cancelled).
    fn cut(&mut self) {
        self.stop_turn();
        self.announcement = None;
        self.enter(Status::Idle, None);
    }

    /// The visitor asked that their visit be forgotten: its transcript goes at once (its
    /// counts stay in the statistics), the visit ends, and the screen says so.
    async fn forget_visit(&mut self, events: &mut Option<broadcast::Receiver<Event>>) {
        self.choosing = None;
        let line = self
            .engine
            .settings()
            .line(&self.language(), Phrase::VisitForgotten);
        let Some(v) = self.visit.take() else {
            return;
        };
        // The session's end is the kiosk's own doing: its closing event is not awaited.
        *events = None;
        let (engine, character, session) = (
            self.engine.clone(),
            v.live.character_id.clone(),
            v.live.id.clone(),
        );
        let forgotten =
            tokio::task::spawn_blocking(move || engine.forget_visit(&character, &session)).await;
        match forgotten {
            Ok(Ok(n)) => tracing::info!(messages = n, "kiosk: a visitor had their visit forgotten"),
            Ok(Err(e)) => tracing::warn!("kiosk: the visit could not be forgotten: {e}"),
            Err(_) => {}
        }
        self.clear_captions();
        self.captions.said = vec![line];
        self.linger = Some(Instant::now() + Duration::from_millis(self.config.caption_linger_ms));
        self.publish();
    }

    /// Asks question `q` of the screen as the visit's next turn.
    async fn ask_question(
        &mut self,
        q: ScreenQuestion,
        events: &mut Option<broadcast::Receiver<Event>>,
    ) {
        self.choosing = None;
        if self.visit.is_none() {
            *events = self.open_visit().await;
        }
        let Some(live) = self.visit.as_ref().map(|v| v.live.clone()) else {
            self.publish();
            return;
        };
        let engine = self.engine.clone();
        let id = q.id.clone();
        let asked = tokio::task::spawn_blocking(move || engine.ask_on_screen(&live, &id)).await;
        match asked {
            Ok(Ok(seq)) => {
                tracing::info!(turn = seq, "kiosk: a question chosen on the screen");
                self.clear_captions();
                self.captions.heard = q.text;
                self.turn = Some(seq);
                self.enter(Status::Processing, Some(self.config.max_processing_ms));
            }
            Ok(Err(e)) => {
                tracing::warn!("kiosk: the question chosen cannot be asked: {e}");
                self.publish();
            }
            Err(_) => self.publish(),
        }
    }

    /// Follows the settings: the volume, the opening hours, and the kiosk character (a new
    /// character means a new session at the next press); ends a visit nobody continues.
    async fn housekeeping(&mut self) {
        self.follow_hours();
        if self.status == Status::Idle
            && self.choosing.is_none()
            && self.last_seen.elapsed() >= Duration::from_millis(self.config.visit_idle_ms)
            && let Some(v) = self.visit.take()
        {
            tracing::info!(session = %v.live.id, "kiosk: the visit ended (nobody there)");
            let engine = self.engine.clone();
            let id = v.live.id.clone();
            tokio::task::spawn_blocking(move || engine.delete_session(&id, &Owner::Kiosk));
            self.publish();
        }
        if (self.password_shown || self.presence.next().is_some()) && !self.engine.in_first_boot() {
            // The first login ended first boot: nothing to show any more.
            self.presence.end();
            self.password_shown = false;
            self.publish();
        }
        let volume = self.engine.settings().kiosk.volume;
        if volume != self.volume {
            self.volume = volume;
            if let Some(a) = &self.audio {
                a.set_volume(volume);
            }
        }
        let engine = self.engine.clone();
        let character = tokio::task::spawn_blocking(move || engine.kiosk_character())
            .await
            .ok()
            .and_then(|c| c.ok())
            .map(|c| c.id)
            .unwrap_or_default();
        if self.can_choose {
            let engine = self.engine.clone();
            let id = character.clone();
            let questions = tokio::task::spawn_blocking(move || {
                CharacterId::parse(&id).and_then(|id| engine.on_screen_questions(&id))
            })
            .await
            .ok()
            .and_then(|q| q.ok())
            .unwrap_or_default();
            if questions != self.screen_questions {
                self.screen_questions = questions;
                self.choosing = None;
                self.publish();
            }
        }
        // The settings may have changed the museum's languages or the kiosk's words.
        self.publish();
        if character != self.character_id {
            self.character_id = character;
            if self.status == Status::Idle
                && let Some(v) = self.visit.take()
            {
                let engine = self.engine.clone();
                let id = v.live.id.clone();
                tokio::task::spawn_blocking(move || engine.delete_session(&id, &Owner::Kiosk));
            }
            self.publish();
        }
    }
}

/// Two notes (660 Hz then 880 Hz, 0.3 s each, faded in and out) at `audio::OUTPUT_RATE`: the
/// test sound.
fn chime() -> Vec<i16> {
    let rate = crate::engine::pcm::OUTPUT_RATE as f32;
    let note = (rate * 0.3) as usize;
    let fade = (rate * 0.02) as usize;
    [660.0f32, 880.0]
        .iter()
        .flat_map(|f| {
            (0..note).map(move |i| {
                let edge = i.min(note - 1 - i).min(fade) as f32 / fade as f32;
                let phase = std::f32::consts::TAU * f * i as f32 / rate;
                (phase.sin() * edge * 12_000.0) as i16
            })
        })
        .collect()
}
