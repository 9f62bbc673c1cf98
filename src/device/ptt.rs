//! The push-to-talk button and its LED.
//!
//! The logic (`Button`, `Ptt`) is written against `embedded-hal` 1.0 `InputPin`/`OutputPin`, so
//! it runs the same on a GPIO character-device line (`linux-embedded-hal`'s `CdevPin`), on the
//! in-memory `SimPin`, on an evdev keyboard key (`KeyPin`) and on `embedded-hal-mock` pins in
//! the unit tests. Time is passed in (`now`), never read inside, so the tests are exact.
//!
//! Debounce: an edge counts once two successive samples agree on the new level (a one-sample
//! glitch is dropped), and from then on the line is not looked at for `debounce_ms` (contact
//! bounce after a real edge cannot make a second one). A press is therefore seen within two
//! polls (4 ms on GPIO), which keeps "press during speech" to "playback stopped" short.
//!
//! A press released sooner than `min_press` (300 ms) is a `Tap`: it still interrupts (the
//! press did), but starts no turn.
//!
//! LED, following the kiosk state: on while listening; blinking (250 ms on, 250 ms off) while
//! the kiosk thinks (processing); off while it speaks and when idle.

use std::convert::Infallible;
use std::fs::File;
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use embedded_hal::digital::{ErrorType, InputPin, OutputPin, StatefulOutputPin};
use tokio::sync::{mpsc, watch};

use super::{Health, HealthBoard, KioskState};
use crate::config::{Bias, PttConfig};
use crate::engine::live::Status;

/// How often a GPIO line is sampled.
pub const POLL: Duration = Duration::from_millis(2);
/// Half period of the LED's blink while processing.
pub const BLINK: Duration = Duration::from_millis(250);

/// What the button did, as the kiosk loop sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PttEvent {
    Press,
    /// Released after at least `min_press`.
    Release,
    /// Released sooner: ignored as an utterance.
    Tap,
}

/// A raw, debounced edge of the button.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edge {
    Press,
    Release { held: Duration },
}

/// A debounced button on any `InputPin`.
pub struct Button<P> {
    pin: P,
    active_low: bool,
    debounce: Duration,
    pressed: bool,
    pressed_at: Option<Instant>,
    /// The line is not sampled before this (after an accepted edge).
    quiet_until: Option<Instant>,
    /// A first sample disagreed with the debounced level; the next one decides.
    pending: bool,
}

impl<P: InputPin> Button<P> {
    pub fn new(pin: P, active_low: bool, debounce: Duration) -> Button<P> {
        Button {
            pin,
            active_low,
            debounce,
            pressed: false,
            pressed_at: None,
            quiet_until: None,
            pending: false,
        }
    }

    /// The debounced level.
    pub fn is_pressed(&self) -> bool {
        self.pressed
    }

    /// Samples the line (unless inside the quiet time after an edge) and returns the edge, if
    /// one is now confirmed.
    pub fn poll(&mut self, now: Instant) -> Result<Option<Edge>, P::Error> {
        if let Some(until) = self.quiet_until {
            if now < until {
                return Ok(None);
            }
            self.quiet_until = None;
        }
        let level = self.pin.is_high()? != self.active_low;
        if level == self.pressed {
            self.pending = false;
            return Ok(None);
        }
        if !self.pending {
            self.pending = true;
            return Ok(None);
        }
        self.pending = false;
        self.pressed = level;
        self.quiet_until = Some(now + self.debounce);
        if level {
            self.pressed_at = Some(now);
            Ok(Some(Edge::Press))
        } else {
            let held = self
                .pressed_at
                .take()
                .map(|t| now.saturating_duration_since(t))
                .unwrap_or_default();
            Ok(Some(Edge::Release { held }))
        }
    }

    /// When the button wants to be sampled again at the latest, if it is waiting on something
    /// (a confirming sample, the end of the quiet time).
    pub fn next_poll(&self, now: Instant) -> Option<Instant> {
        if self.pending {
            Some(now + POLL)
        } else {
            self.quiet_until
        }
    }
}

/// Whether the LED is lit in `status`, `in_state` after the state began.
pub fn led_level(status: Status, in_state: Duration) -> bool {
    match status {
        Status::Listening => true,
        Status::Processing => (in_state.as_millis() / BLINK.as_millis()).is_multiple_of(2),
        Status::Idle | Status::Speaking => false,
    }
}

/// Why the button or the LED failed.
#[derive(Debug)]
pub struct PttError(pub String);

impl std::fmt::Display for PttError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The button and its optional LED, driven together.
pub struct Ptt<B, L> {
    button: Button<B>,
    led: Option<L>,
    led_lit: Option<bool>,
    min_press: Duration,
}

impl<B: InputPin, L: OutputPin> Ptt<B, L> {
    pub fn new(button: Button<B>, led: Option<L>, min_press: Duration) -> Ptt<B, L> {
        Ptt {
            button,
            led,
            led_lit: None,
            min_press,
        }
    }

    pub fn poll(&mut self, now: Instant) -> Result<Option<PttEvent>, PttError> {
        let edge = self
            .button
            .poll(now)
            .map_err(|e| PttError(format!("button: {e:?}")))?;
        Ok(edge.map(|e| match e {
            Edge::Press => PttEvent::Press,
            Edge::Release { held } if held < self.min_press => PttEvent::Tap,
            Edge::Release { .. } => PttEvent::Release,
        }))
    }

    /// Sets the LED for the kiosk state (writes only on change).
    pub fn show(&mut self, status: Status, in_state: Duration) -> Result<(), PttError> {
        let Some(led) = &mut self.led else {
            return Ok(());
        };
        let lit = led_level(status, in_state);
        if self.led_lit == Some(lit) {
            return Ok(());
        }
        let done = if lit { led.set_high() } else { led.set_low() };
        done.map_err(|e| PttError(format!("LED: {e:?}")))?;
        self.led_lit = Some(lit);
        Ok(())
    }

    pub fn next_poll(&self, now: Instant) -> Option<Instant> {
        self.button.next_poll(now)
    }

    pub fn has_led(&self) -> bool {
        self.led.is_some()
    }
}

/// Wakes a sleeping button thread (a simulated press, a key event, a kiosk state change).
#[derive(Debug, Default)]
pub struct Wake {
    generation: Mutex<u64>,
    cv: Condvar,
}

impl Wake {
    pub fn notify(&self) {
        *self.generation.lock().expect("wake lock") += 1;
        self.cv.notify_all();
    }

    /// Sleeps until notified or for `timeout`, whichever comes first. `seen` is the generation
    /// the caller last saw (updated), so a notification between two waits is not lost.
    pub fn wait(&self, seen: &mut u64, timeout: Duration) {
        let guard = self.generation.lock().expect("wake lock");
        let (guard, _) = self
            .cv
            .wait_timeout_while(guard, timeout, |g| *g == *seen)
            .expect("wake lock");
        *seen = *guard;
    }

    pub fn generation(&self) -> u64 {
        *self.generation.lock().expect("wake lock")
    }
}

/// An in-memory GPIO line: the simulated button (set by tests and the internal route) or LED.
/// It implements the `embedded-hal` pin traits, so the button logic runs on it unchanged.
#[derive(Debug, Default)]
pub struct SimPin {
    level: AtomicBool,
    wake: Arc<Wake>,
}

impl SimPin {
    pub fn set(&self, high: bool) {
        self.level.store(high, Ordering::SeqCst);
        self.wake.notify();
    }

    pub fn get(&self) -> bool {
        self.level.load(Ordering::SeqCst)
    }

    /// Notified whenever the pin is set.
    pub fn wake(&self) -> Arc<Wake> {
        self.wake.clone()
    }
}

impl ErrorType for SimPin {
    type Error = Infallible;
}

impl InputPin for SimPin {
    fn is_high(&mut self) -> Result<bool, Infallible> {
        Ok(self.get())
    }

    fn is_low(&mut self) -> Result<bool, Infallible> {
        Ok(!self.get())
    }
}

impl OutputPin for SimPin {
    fn set_low(&mut self) -> Result<(), Infallible> {
        self.set(false);
        Ok(())
    }

    fn set_high(&mut self) -> Result<(), Infallible> {
        self.set(true);
        Ok(())
    }
}

impl StatefulOutputPin for SimPin {
    fn is_set_high(&mut self) -> Result<bool, Infallible> {
        Ok(self.get())
    }

    fn is_set_low(&mut self) -> Result<bool, Infallible> {
        Ok(!self.get())
    }
}

/// An evdev key as a pin: high while any keyboard holds it down.
#[derive(Debug, Default)]
pub struct KeyPin {
    held: AtomicUsize,
}

impl KeyPin {
    pub fn is_down(&self) -> bool {
        self.held.load(Ordering::SeqCst) > 0
    }
}

/// A pin error of any line kind.
#[derive(Debug)]
pub struct LineError(pub String);

impl embedded_hal::digital::Error for LineError {
    fn kind(&self) -> embedded_hal::digital::ErrorKind {
        embedded_hal::digital::ErrorKind::Other
    }
}

/// The lines the kiosk runs with: a GPIO line, a simulated one, a keyboard key, or any of
/// several (the button and the key both trigger).
pub enum Line {
    Gpio(linux_embedded_hal::CdevPin),
    Sim(Arc<SimPin>),
    Key(Arc<KeyPin>),
    Any(Vec<Line>),
}

impl ErrorType for Line {
    type Error = LineError;
}

impl InputPin for Line {
    fn is_high(&mut self) -> Result<bool, LineError> {
        match self {
            Line::Gpio(p) => p.is_high().map_err(|e| LineError(e.to_string())),
            Line::Sim(p) => Ok(p.get()),
            Line::Key(k) => Ok(k.is_down()),
            Line::Any(lines) => {
                for l in lines {
                    if l.is_high()? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
        }
    }

    fn is_low(&mut self) -> Result<bool, LineError> {
        self.is_high().map(|h| !h)
    }
}

impl OutputPin for Line {
    fn set_low(&mut self) -> Result<(), LineError> {
        self.set_state(embedded_hal::digital::PinState::Low)
    }

    fn set_high(&mut self) -> Result<(), LineError> {
        self.set_state(embedded_hal::digital::PinState::High)
    }

    fn set_state(&mut self, state: embedded_hal::digital::PinState) -> Result<(), LineError> {
        let high = state == embedded_hal::digital::PinState::High;
        match self {
            Line::Gpio(p) => p.set_state(state).map_err(|e| LineError(e.to_string())),
            Line::Sim(p) => {
                p.set(high);
                Ok(())
            }
            Line::Key(_) => Err(LineError("a key is not an output".into())),
            Line::Any(lines) => lines.iter_mut().try_for_each(|l| l.set_state(state)),
        }
    }
}

/// The GPIO v1 uAPI's bias flags of a line handle request (`GPIOHANDLE_REQUEST_BIAS_*` in
/// linux/gpio.h, Linux 5.5), which gpio-cdev 0.6's `LineRequestFlags` does not name: its
/// `request` hands `flags.bits()` to the ioctl as they are, so the bits are set by number.
pub const BIAS_PULL_UP: u32 = 1 << 5;
pub const BIAS_PULL_DOWN: u32 = 1 << 6;
pub const BIAS_DISABLE: u32 = 1 << 7;

/// The bias flag of `bias` (none for `as-is`).
pub fn bias_bits(bias: Bias) -> u32 {
    match bias {
        Bias::PullUp => BIAS_PULL_UP,
        Bias::PullDown => BIAS_PULL_DOWN,
        Bias::Disabled => BIAS_DISABLE,
        Bias::AsIs => 0,
    }
}

/// The request flags of the button's line: an input with the bias asked for.
pub fn input_flags(bias: Bias) -> linux_embedded_hal::gpio_cdev::LineRequestFlags {
    use linux_embedded_hal::gpio_cdev::LineRequestFlags;
    LineRequestFlags::from_bits_retain(LineRequestFlags::INPUT.bits() | bias_bits(bias))
}

/// How a GPIO line is requested: the button (an input, with its bias) or the LED (an output,
/// off; no bias: it is driven).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    Input(Bias),
    Output,
}

/// Requests a GPIO character-device line. A kernel that refuses the button's bias (older than
/// 5.5: EINVAL) is an error saying so: the line is not used without it, since a line left
/// floating may read as a press (and a 5 s press in first boot shows the password).
pub fn gpio_line(chip: &str, offset: u32, request: Request) -> Result<Line, String> {
    use linux_embedded_hal::gpio_cdev::{Chip, LineRequestFlags};
    let mut chip = Chip::new(chip).map_err(|e| format!("{chip}: {e}"))?;
    let line = chip
        .get_line(offset)
        .map_err(|e| format!("line {offset}: {e}"))?;
    let flags = match request {
        Request::Input(bias) => input_flags(bias),
        Request::Output => LineRequestFlags::OUTPUT,
    };
    let handle = match line.request(flags, 0, "docent") {
        Ok(handle) => handle,
        Err(e) => {
            if let Request::Input(bias) = request
                && bias_bits(bias) != 0
                // Whether the bias was the trouble: the same request without it (let go at once).
                && line.request(LineRequestFlags::INPUT, 0, "docent").is_ok()
            {
                return Err(format!(
                    "line {offset}: the kernel refused the bias {} ({e}): a kernel older than \
                     5.5 knows no bias, and some GPIO controllers refuse one; set bias = \
                     \"as-is\" (in [ptt] or [choice_buttons]) to use the line with the pull the \
                     firmware set",
                    bias.name()
                ));
            }
            return Err(format!("line {offset}: {e}"));
        }
    };
    linux_embedded_hal::CdevPin::new(handle)
        .map(Line::Gpio)
        .map_err(|e| format!("line {offset}: {e}"))
}

/// How the button thread waits between samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampling {
    /// A GPIO line: sampled every `POLL`.
    Poll,
    /// Only simulated or key lines: sampled when woken.
    OnWake,
}

/// What the button thread runs with.
pub struct PttThread {
    pub ptt: Ptt<Line, Line>,
    pub sampling: Sampling,
    pub wake: Arc<Wake>,
    pub state: watch::Receiver<KioskState>,
    pub events: mpsc::UnboundedSender<PttEvent>,
    pub stop: Arc<AtomicBool>,
    pub health: Arc<HealthBoard>,
    /// What health says while the button works (`Ok` or `Sim`).
    pub healthy: Health,
}

/// Runs the button and LED on a plain thread until `stop` is set (and the wake notified).
pub fn spawn(mut t: PttThread) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("docent-ptt".into())
        .spawn(move || {
            let mut seen = t.wake.generation();
            let mut status = t.state.borrow().status;
            let mut since = Instant::now();
            let mut failing = false;
            while !t.stop.load(Ordering::SeqCst) {
                let now = Instant::now();
                match t.ptt.poll(now) {
                    Ok(Some(e)) => {
                        if t.events.send(e).is_err() {
                            break;
                        }
                    }
                    Ok(None) => {}
                    Err(e) => {
                        if !failing {
                            tracing::warn!("push-to-talk: {e}");
                            t.health
                                .set(|h| h.ptt = Health::Problem(format!("error: {e}")));
                            failing = true;
                        }
                        t.wake.wait(&mut seen, Duration::from_secs(1));
                        continue;
                    }
                }
                if failing {
                    failing = false;
                    t.health.set(|h| h.ptt = t.healthy.clone());
                }
                let current = t.state.borrow().status;
                if current != status {
                    status = current;
                    since = now;
                }
                if let Err(e) = t.ptt.show(status, now - since) {
                    tracing::warn!("push-to-talk: {e}");
                }
                // Sleep until the next sample, the next blink or a wake-up.
                let mut until = t.ptt.next_poll(now);
                if t.sampling == Sampling::Poll {
                    until = Some(until.map_or(now + POLL, |u| u.min(now + POLL)));
                }
                if status == Status::Processing && t.ptt.has_led() {
                    let elapsed = (now - since).as_millis();
                    let next_toggle =
                        (elapsed / BLINK.as_millis() + 1) * BLINK.as_millis() - elapsed;
                    let toggle_at = now + Duration::from_millis(next_toggle as u64);
                    until = Some(until.map_or(toggle_at, |u| u.min(toggle_at)));
                }
                let timeout = until
                    .map(|u| u.saturating_duration_since(now))
                    .unwrap_or(Duration::from_secs(1))
                    .min(Duration::from_secs(1));
                if t.sampling == Sampling::Poll {
                    std::thread::sleep(timeout);
                } else {
                    t.wake.wait(&mut seen, timeout);
                }
            }
        })
}

/// Builds the real button (GPIO line, evdev key or both) and LED from the configuration.
/// Returns the button, the LED, how to sample, and a description for health; `Err` when
/// nothing is configured or present.
pub fn real_lines(
    cfg: &PttConfig,
    wake: &Arc<Wake>,
    stop: &Arc<AtomicBool>,
) -> Result<(Line, Option<Line>, Sampling), String> {
    let mut inputs = Vec::new();
    let mut problems = Vec::new();
    let mut sampling = Sampling::OnWake;
    if !cfg.chip.is_empty() {
        match gpio_line(&cfg.chip, cfg.line, Request::Input(cfg.bias())) {
            Ok(l) => {
                inputs.push(l);
                sampling = Sampling::Poll;
            }
            Err(e) => problems.push(format!("button {e}")),
        }
    }
    if let Some(name) = cfg.key.as_deref().filter(|k| !k.is_empty()) {
        match key_code(name) {
            Some(code) => {
                let key = Arc::new(KeyPin::default());
                watch_key(code, key.clone(), wake.clone(), stop.clone());
                inputs.push(Line::Key(key));
            }
            None => problems.push(format!("unknown key {name:?}")),
        }
    }
    if inputs.is_empty() {
        return Err(if problems.is_empty() {
            "no button configured".into()
        } else {
            problems.join("; ")
        });
    }
    // The key works; the line that does not is still said.
    for problem in &problems {
        tracing::warn!("push-to-talk: {problem}");
    }
    let led = match cfg.led_line {
        Some(offset) if sampling == Sampling::Poll => {
            match gpio_line(&cfg.chip, offset, Request::Output) {
                Ok(l) => Some(l),
                Err(e) => {
                    tracing::warn!("push-to-talk LED: {e}");
                    None
                }
            }
        }
        _ => None,
    };
    let button = if inputs.len() == 1 {
        inputs.pop().expect("one input")
    } else {
        Line::Any(inputs)
    };
    Ok((button, led, sampling))
}

/// Linux input event codes of the keys a kiosk button is likely to send; any other key may be
/// given by number (`"KEY_212"` or `"212"`; a single digit is that digit's key).
const KEYS: &[(&str, u16)] = &[
    ("ESC", 1),
    ("ENTER", 28),
    ("LEFTCTRL", 29),
    ("LEFTSHIFT", 42),
    ("SPACE", 57),
    ("F1", 59),
    ("F2", 60),
    ("F3", 61),
    ("F4", 62),
    ("F5", 63),
    ("F6", 64),
    ("F7", 65),
    ("F8", 66),
    ("F9", 67),
    ("F10", 68),
    ("F11", 87),
    ("F12", 88),
    ("RIGHTCTRL", 97),
    ("UP", 103),
    ("LEFT", 105),
    ("RIGHT", 106),
    ("DOWN", 108),
    ("MUTE", 113),
    ("VOLUMEDOWN", 114),
    ("VOLUMEUP", 115),
    ("PAUSE", 119),
    ("PLAYPAUSE", 164),
    ("RECORD", 167),
    ("MICMUTE", 248),
    ("BTN_0", 256),
    ("BTN_1", 257),
    ("BTN_LEFT", 272),
    ("BTN_TRIGGER", 288),
    ("BTN_SOUTH", 304),
];

/// The event code of a key name (`KEY_SPACE`, `space`, `BTN_0`, `212`).
pub fn key_code(name: &str) -> Option<u16> {
    let upper = name.trim().to_ascii_uppercase();
    let bare = upper.strip_prefix("KEY_").unwrap_or(&upper);
    if bare.len() > 1
        && let Ok(n) = bare.parse::<u16>()
    {
        return Some(n);
    }
    if bare.len() == 1 {
        // Letters, in the keyboard's row order.
        const ROWS: [(&str, u16); 3] = [("QWERTYUIOP", 16), ("ASDFGHJKL", 30), ("ZXCVBNM", 44)];
        for (row, first) in ROWS {
            if let Some(i) = row.find(bare) {
                return Some(first + i as u16);
            }
        }
        if let Some(d) = bare.chars().next().and_then(|c| c.to_digit(10)) {
            return Some(if d == 0 { 11 } else { 1 + d as u16 });
        }
    }
    KEYS.iter().find(|(n, _)| *n == bare).map(|(_, c)| *c)
}

/// `struct input_event`: a `struct timeval` (two C longs), then type, code and value.
pub const EVENT_SIZE: usize = 2 * size_of::<std::ffi::c_long>() + 8;
const EV_KEY: u16 = 1;

/// The type, code and value of an `input_event` record (also read by `touch`).
pub fn input_event(record: &[u8]) -> Option<(u16, u16, i32)> {
    let at = 2 * size_of::<std::ffi::c_long>();
    let r = record.get(at..at + 8)?;
    let kind = u16::from_ne_bytes([r[0], r[1]]);
    let code = u16::from_ne_bytes([r[2], r[3]]);
    let value = i32::from_ne_bytes([r[4], r[5], r[6], r[7]]);
    Some((kind, code, value))
}

/// The key state an `input_event` record sets, if it is about `code`.
pub fn key_event(record: &[u8], code: u16) -> Option<bool> {
    let (kind, c, value) = input_event(record)?;
    (kind == EV_KEY && c == code && value != 2).then_some(value != 0)
}

/// Watches every `/dev/input/event*` device (and ones plugged in later) for `code`.
fn watch_key(code: u16, key: Arc<KeyPin>, wake: Arc<Wake>, stop: Arc<AtomicBool>) {
    let spawned = std::thread::Builder::new()
        .name("docent-keys".into())
        .spawn(move || {
            let mut watched: Vec<PathBuf> = Vec::new();
            let open: Arc<Mutex<Vec<PathBuf>>> = Arc::default();
            while !stop.load(Ordering::SeqCst) {
                let current = open.lock().expect("keys lock").clone();
                watched.retain(|p| current.contains(p));
                if let Ok(dir) = std::fs::read_dir("/dev/input") {
                    for entry in dir.flatten() {
                        let path = entry.path();
                        let is_event = path
                            .file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with("event"));
                        if !is_event || watched.contains(&path) {
                            continue;
                        }
                        let Ok(file) = File::open(&path) else {
                            continue;
                        };
                        watched.push(path.clone());
                        open.lock().expect("keys lock").push(path.clone());
                        let (key, wake, open, stop) =
                            (key.clone(), wake.clone(), open.clone(), stop.clone());
                        let _ = std::thread::Builder::new().name("docent-key".into()).spawn(
                            move || {
                                read_keys(file, code, &key, &wake, &stop, || {
                                    open.lock().expect("keys lock").retain(|p| *p != path);
                                })
                            },
                        );
                    }
                }
                std::thread::sleep(Duration::from_secs(2));
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot watch keyboard keys: {e}");
    }
}

/// Reads one input device until it goes away (or the kiosk stops and an event arrives).
fn read_keys(
    mut file: File,
    code: u16,
    key: &KeyPin,
    wake: &Wake,
    stop: &AtomicBool,
    gone: impl FnOnce(),
) {
    let mut record = [0u8; EVENT_SIZE];
    let mut down = false;
    while !stop.load(Ordering::SeqCst) {
        if file.read_exact(&mut record).is_err() {
            break;
        }
        if let Some(now_down) = key_event(&record, code)
            && now_down != down
        {
            down = now_down;
            if down {
                key.held.fetch_add(1, Ordering::SeqCst);
            } else {
                key.held.fetch_sub(1, Ordering::SeqCst);
            }
            wake.notify();
        }
    }
    if down {
        key.held.fetch_sub(1, Ordering::SeqCst);
        wake.notify();
    }
    gone();
}

#[cfg(test)]
mod tests {
    use super::*;
    use embedded_hal_mock::eh1::digital::{Mock, State, Transaction as T};

    const DEBOUNCE: Duration = Duration::from_millis(20);
    const MIN_PRESS: Duration = Duration::from_millis(300);

    fn ms(t0: Instant, n: u64) -> Instant {
        t0 + Duration::from_millis(n)
    }

    /// Active-low button: low = pressed.
    fn button(expect: &[T]) -> Button<Mock> {
        Button::new(Mock::new(expect), true, DEBOUNCE)
    }

    #[test]
    fn bounces_and_glitches_make_one_edge() {
        let mut b = button(&[
            T::get(State::High),
            // A one-sample glitch: dropped.
            T::get(State::Low),
            T::get(State::High),
            // A real press, confirmed by the second sample...
            T::get(State::Low),
            T::get(State::Low),
            // ...then the line is not read during the quiet time; after it, still pressed.
            T::get(State::Low),
            // Release with bounce: the first low-high-low is dropped, then confirmed.
            T::get(State::High),
            T::get(State::Low),
            T::get(State::High),
            T::get(State::High),
        ]);
        let t0 = Instant::now();
        assert_eq!(b.poll(ms(t0, 0)).unwrap(), None);
        assert_eq!(b.poll(ms(t0, 2)).unwrap(), None);
        assert_eq!(b.poll(ms(t0, 4)).unwrap(), None);
        assert_eq!(b.poll(ms(t0, 6)).unwrap(), None);
        assert_eq!(b.poll(ms(t0, 8)).unwrap(), Some(Edge::Press));
        assert_eq!(b.next_poll(ms(t0, 8)), Some(ms(t0, 28)));
        for t in (10..28).step_by(2) {
            assert_eq!(b.poll(ms(t0, t)).unwrap(), None, "quiet at {t} ms");
        }
        assert_eq!(b.poll(ms(t0, 28)).unwrap(), None);
        assert!(b.is_pressed());
        assert_eq!(b.poll(ms(t0, 500)).unwrap(), None);
        assert_eq!(b.poll(ms(t0, 502)).unwrap(), None);
        assert_eq!(b.poll(ms(t0, 504)).unwrap(), None);
        assert_eq!(
            b.poll(ms(t0, 506)).unwrap(),
            Some(Edge::Release {
                held: Duration::from_millis(498)
            })
        );
        b.pin.done();
    }

    #[test]
    fn active_high_lines_work_too() {
        let mut b = Button::new(
            Mock::new(&[T::get(State::High), T::get(State::High)]),
            false,
            DEBOUNCE,
        );
        let t0 = Instant::now();
        assert_eq!(b.poll(t0).unwrap(), None);
        assert_eq!(b.poll(ms(t0, 2)).unwrap(), Some(Edge::Press));
        b.pin.done();
    }

    fn ptt(button: &[T], led: &[T]) -> Ptt<Mock, Mock> {
        Ptt::new(
            Button::new(Mock::new(button), true, DEBOUNCE),
            Some(Mock::new(led)),
            MIN_PRESS,
        )
    }

    fn done(mut p: Ptt<Mock, Mock>) {
        p.button.pin.done();
        p.led.as_mut().unwrap().done();
    }

    #[test]
    fn short_press_is_a_tap() {
        let mut p = ptt(
            &[
                T::get(State::Low),
                T::get(State::Low),
                T::get(State::High),
                T::get(State::High),
                T::get(State::Low),
                T::get(State::Low),
                T::get(State::High),
                T::get(State::High),
            ],
            &[],
        );
        let t0 = Instant::now();
        assert_eq!(p.poll(t0).unwrap(), None);
        assert_eq!(p.poll(ms(t0, 2)).unwrap(), Some(PttEvent::Press));
        assert_eq!(p.poll(ms(t0, 100)).unwrap(), None);
        assert_eq!(p.poll(ms(t0, 102)).unwrap(), Some(PttEvent::Tap));
        // A press held past the minimum is a real release.
        assert_eq!(p.poll(ms(t0, 1000)).unwrap(), None);
        assert_eq!(p.poll(ms(t0, 1002)).unwrap(), Some(PttEvent::Press));
        assert_eq!(p.poll(ms(t0, 1400)).unwrap(), None);
        assert_eq!(p.poll(ms(t0, 1402)).unwrap(), Some(PttEvent::Release));
        done(p);
    }

    #[test]
    fn held_through_state_changes_the_led_follows_and_no_edge_is_made() {
        let mut p = ptt(
            &[
                T::get(State::Low),
                T::get(State::Low),
                // Held while the kiosk moves on (the utterance timed out, it thinks, it speaks).
                T::get(State::Low),
                T::get(State::Low),
                T::get(State::Low),
                T::get(State::Low),
                T::get(State::Low),
                // Released at last: one release, nothing else.
                T::get(State::High),
                T::get(State::High),
            ],
            &[
                T::set(State::Low),
                T::set(State::High),
                T::set(State::Low),
                T::set(State::High),
                T::set(State::Low),
            ],
        );
        let t0 = Instant::now();
        p.show(Status::Idle, Duration::ZERO).unwrap();
        assert_eq!(p.poll(t0).unwrap(), None);
        assert_eq!(p.poll(ms(t0, 2)).unwrap(), Some(PttEvent::Press));
        p.show(Status::Listening, Duration::ZERO).unwrap();
        p.show(Status::Listening, Duration::from_millis(100))
            .unwrap();
        assert_eq!(p.poll(ms(t0, 100)).unwrap(), None);
        // The utterance timed out: processing blinks.
        p.show(Status::Processing, Duration::ZERO).unwrap();
        assert_eq!(p.poll(ms(t0, 200)).unwrap(), None);
        p.show(Status::Processing, Duration::from_millis(100))
            .unwrap();
        p.show(Status::Processing, Duration::from_millis(260))
            .unwrap();
        assert_eq!(p.poll(ms(t0, 400)).unwrap(), None);
        p.show(Status::Processing, Duration::from_millis(510))
            .unwrap();
        assert_eq!(p.poll(ms(t0, 600)).unwrap(), None);
        p.show(Status::Speaking, Duration::ZERO).unwrap();
        assert_eq!(p.poll(ms(t0, 900)).unwrap(), None);
        assert_eq!(p.poll(ms(t0, 2000)).unwrap(), None);
        assert_eq!(p.poll(ms(t0, 2002)).unwrap(), Some(PttEvent::Release));
        done(p);
    }

    /// The button's request carries the bias of its configuration (the uAPI's bit numbers),
    /// by default the one that reads a released button as released; the LED asks for none.
    #[test]
    fn the_buttons_line_asks_for_the_bias_of_its_configuration() {
        use crate::config::Config;
        let bits = |toml: &str| {
            let cfg = Config::from_toml(&format!("[ptt]\n{toml}")).unwrap().ptt;
            input_flags(cfg.bias()).bits()
        };
        const INPUT: u32 = 1;
        assert_eq!(bits("active_low = true"), INPUT | 1 << 5, "pull-up");
        assert_eq!(bits("active_low = false"), INPUT | 1 << 6, "pull-down");
        assert_eq!(
            bits(""),
            INPUT | BIAS_PULL_UP,
            "the default button is active low"
        );
        assert_eq!(
            bits("active_low = true\nbias = \"pull-down\""),
            INPUT | BIAS_PULL_DOWN
        );
        assert_eq!(
            bits("active_low = false\nbias = \"pull-up\""),
            INPUT | BIAS_PULL_UP
        );
        assert_eq!(bits("bias = \"disabled\""), INPUT | 1 << 7, "bias off");
        assert_eq!(bits("bias = \"as-is\""), INPUT, "nothing asked");
    }

    #[test]
    fn sim_pins_are_pins() {
        let pin = Arc::new(SimPin::default());
        let mut line = Line::Sim(pin.clone());
        assert!(!line.is_high().unwrap());
        pin.set(true);
        assert!(line.is_high().unwrap());
        line.set_low().unwrap();
        assert!(!pin.get());
        let mut own = SimPin::default();
        own.set_high().unwrap();
        assert!(own.is_set_high().unwrap());
        let key = Arc::new(KeyPin::default());
        let mut any = Line::Any(vec![Line::Sim(pin.clone()), Line::Key(key.clone())]);
        assert!(!any.is_high().unwrap());
        key.held.store(1, Ordering::SeqCst);
        assert!(any.is_high().unwrap());
    }

    #[test]
    fn key_names_and_events() {
        assert_eq!(key_code("KEY_SPACE"), Some(57));
        assert_eq!(key_code("space"), Some(57));
        assert_eq!(key_code("KEY_A"), Some(30));
        assert_eq!(key_code("KEY_M"), Some(50));
        assert_eq!(key_code("KEY_1"), Some(2));
        assert_eq!(key_code("KEY_0"), Some(11));
        assert_eq!(key_code("KEY_212"), Some(212));
        assert_eq!(key_code("BTN_0"), Some(256));
        assert_eq!(key_code("KEY_NOPE"), None);
        let mut rec = vec![0u8; EVENT_SIZE];
        let at = 2 * size_of::<std::ffi::c_long>();
        rec[at..at + 2].copy_from_slice(&EV_KEY.to_ne_bytes());
        rec[at + 2..at + 4].copy_from_slice(&57u16.to_ne_bytes());
        rec[at + 4..at + 8].copy_from_slice(&1i32.to_ne_bytes());
        assert_eq!(key_event(&rec, 57), Some(true));
        assert_eq!(key_event(&rec, 28), None);
        rec[at + 4..at + 8].copy_from_slice(&2i32.to_ne_bytes());
        assert_eq!(key_event(&rec, 57), None, "auto-repeat is not an edge");
        rec[at + 4..at + 8].copy_from_slice(&0i32.to_ne_bytes());
        assert_eq!(key_event(&rec, 57), Some(false));
    }
}
