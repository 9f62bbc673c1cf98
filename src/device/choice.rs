//! Choosing without speaking (EN 301 549 4.2.9): what a visitor does to choose one of the
//! questions on the screen, from a touch screen (`touch`), up to three GPIO buttons (previous,
//! next, choose) or, simulated, the internal route. Every source feeds one bounded channel of
//! [`Choose`], which the kiosk loop reads (`KioskParts::choices`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::sync::mpsc;

use super::ptt::{self, Button, Edge, Line, Request};
use super::{Health, HealthBoard, touch};
use crate::config::{ChoiceButtonsConfig, DeviceMode, TouchConfig};

/// Choices waiting for the kiosk loop at most: a visitor tapping on while the kiosk is busy
/// must not grow a queue; beyond it, a choice is dropped (the visitor taps again).
pub const QUEUE: usize = 16;

/// One thing a visitor did to choose a question.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Choose {
    /// A finger came down at this point of the picture as the visitor sees it (the display's
    /// orientation): 0..1 from the left and from the top.
    Touch {
        x: f32,
        y: f32,
    },
    Previous,
    Next,
    Choose,
}

impl Choose {
    /// Whether a touch is on the screen (0..1 both ways, not NaN).
    pub fn is_valid(&self) -> bool {
        match *self {
            Choose::Touch { x, y } => (0.0..=1.0).contains(&x) && (0.0..=1.0).contains(&y),
            _ => true,
        }
    }
}

/// Sends a choice without ever blocking a device thread; false when the kiosk loop is gone.
pub fn offer(tx: &mpsc::Sender<Choose>, c: Choose) -> bool {
    match tx.try_send(c) {
        Ok(()) => true,
        Err(mpsc::error::TrySendError::Full(_)) => {
            tracing::debug!("choice dropped: {QUEUE} are waiting");
            true
        }
        Err(mpsc::error::TrySendError::Closed(_)) => false,
    }
}

/// The running choice inputs, as the devices keep them.
pub struct Inputs {
    /// The receiving end, until the kiosk loop takes it.
    pub choices: std::sync::Mutex<Option<mpsc::Receiver<Choose>>>,
    /// The simulated inputs' sender (`--devices sim`, or `auto` with neither a touch screen
    /// nor buttons).
    pub sim: Option<mpsc::Sender<Choose>>,
    stop: Arc<AtomicBool>,
    buttons: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl Inputs {
    /// No inputs (a kiosk without devices).
    pub fn none() -> Inputs {
        Inputs {
            choices: std::sync::Mutex::new(None),
            sim: None,
            stop: Arc::new(AtomicBool::new(true)),
            buttons: std::sync::Mutex::new(None),
        }
    }

    /// Starts the touch screen and the buttons, or their simulated stand-in; says in health
    /// (`choice`) which runs.
    pub fn start(
        mode: DeviceMode,
        touch_cfg: &TouchConfig,
        buttons_cfg: &ChoiceButtonsConfig,
        health: &Arc<HealthBoard>,
    ) -> Inputs {
        let (tx, rx) = mpsc::channel(QUEUE);
        let stop = Arc::new(AtomicBool::new(false));
        let buttons_wanted = !buttons_cfg.chip.is_empty();
        let sim =
            mode.simulates(|| buttons_wanted || touch::present(&touch_cfg.device).unwrap_or(false));
        let mut inputs = Inputs {
            choices: std::sync::Mutex::new(Some(rx)),
            sim: None,
            stop: stop.clone(),
            buttons: std::sync::Mutex::new(None),
        };
        if sim {
            inputs.sim = Some(tx);
            health.set(|h| h.choice = Health::Sim);
            return inputs;
        }
        let mut working = Vec::new();
        let mut problems = Vec::new();
        match touch::watch(touch_cfg, tx.clone(), stop.clone()) {
            Ok(true) => working.push("touch"),
            // None yet: one plugged in later is still read.
            Ok(false) => {}
            Err(e) => problems.push(e),
        }
        if buttons_wanted {
            let started = real_buttons(buttons_cfg)
                .and_then(|b| spawn_buttons(b, tx, stop).map_err(|e| e.to_string()));
            match started {
                Ok(thread) => {
                    *inputs.buttons.lock().expect("buttons lock") = Some(thread);
                    working.push("buttons");
                }
                Err(e) => problems.push(format!("choice buttons: {e}")),
            }
        }
        for p in &problems {
            tracing::warn!("choosing without speaking: {p}");
        }
        let h = if !problems.is_empty() {
            Health::Problem(problems.join("; "))
        } else if working.is_empty() {
            Health::Absent
        } else {
            Health::Ok
        };
        health.set(|d| d.choice = h);
        inputs
    }

    /// The receiver of the choices, once (the kiosk loop takes it).
    pub fn take(&self) -> Option<mpsc::Receiver<Choose>> {
        self.choices.lock().expect("choices lock").take()
    }

    /// Stops the threads; waits for the buttons' (a touch reader ends at its next event, or
    /// with the process, as the key readers of `ptt` do).
    pub fn stop(&self) -> Option<JoinHandle<()>> {
        self.stop.store(true, Ordering::SeqCst);
        self.buttons.lock().expect("buttons lock").take()
    }
}

/// The configured buttons as debounced lines, each with what it chooses.
fn real_buttons(cfg: &ChoiceButtonsConfig) -> Result<Vec<(Button<Line>, Choose)>, String> {
    let debounce = Duration::from_millis(u64::from(cfg.debounce_ms));
    let wanted = [
        (cfg.previous, Choose::Previous),
        (cfg.next, Choose::Next),
        (cfg.choose, Choose::Choose),
    ];
    let mut out = Vec::new();
    for (offset, choose) in wanted {
        let Some(offset) = offset else { continue };
        let line = ptt::gpio_line(&cfg.chip, offset, Request::Input(cfg.bias()))?;
        out.push((Button::new(line, cfg.active_low, debounce), choose));
    }
    if out.is_empty() {
        return Err(format!("{}: no line named", cfg.chip));
    }
    Ok(out)
}

/// Samples the buttons every `ptt::POLL` on a plain thread until `stop`; a press (after the
/// debounce) is a choice. A line that fails is said once and sampled again a second later.
pub fn spawn_buttons(
    mut buttons: Vec<(Button<Line>, Choose)>,
    tx: mpsc::Sender<Choose>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("docent-choice".into())
        .spawn(move || {
            let mut failing = false;
            while !stop.load(Ordering::SeqCst) {
                let now = Instant::now();
                let mut pause = ptt::POLL;
                for (button, choose) in &mut buttons {
                    match button.poll(now) {
                        Ok(Some(Edge::Press)) => {
                            if !offer(&tx, *choose) {
                                return;
                            }
                        }
                        Ok(_) => {}
                        Err(e) => {
                            if !failing {
                                tracing::warn!("choice button: {}", e.0);
                                failing = true;
                            }
                            pause = Duration::from_secs(1);
                        }
                    }
                }
                std::thread::sleep(pause);
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::ptt::SimPin;

    #[test]
    fn a_touch_is_on_the_screen_or_refused() {
        assert!(Choose::Touch { x: 0.0, y: 1.0 }.is_valid());
        assert!(!Choose::Touch { x: 1.01, y: 0.5 }.is_valid());
        assert!(
            !Choose::Touch {
                x: f32::NAN,
                y: 0.5
            }
            .is_valid()
        );
        let c: Choose = serde_json::from_str(r#"{"touch": {"x": 0.25, "y": 0.75}}"#).unwrap();
        assert_eq!(c, Choose::Touch { x: 0.25, y: 0.75 });
        let c: Choose = serde_json::from_str(r#""previous""#).unwrap();
        assert_eq!(c, Choose::Previous);
        assert!(serde_json::from_str::<Choose>(r#""louder""#).is_err());
    }

    /// The buttons' thread on simulated lines (active-high): a press is one choice, and holding
    /// does not repeat it.
    #[tokio::test]
    async fn each_button_press_is_one_choice() {
        let pins: Vec<Arc<SimPin>> = (0..3).map(|_| Arc::new(SimPin::default())).collect();
        let buttons = pins
            .iter()
            .zip([Choose::Previous, Choose::Next, Choose::Choose])
            .map(|(p, c)| {
                let b = Button::new(Line::Sim(p.clone()), false, Duration::from_millis(20));
                (b, c)
            })
            .collect();
        let (tx, mut rx) = mpsc::channel(QUEUE);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = spawn_buttons(buttons, tx, stop.clone()).unwrap();
        let hold = |pin: &Arc<SimPin>, ms: u64| {
            pin.set(true);
            std::thread::sleep(Duration::from_millis(ms));
            pin.set(false);
            std::thread::sleep(Duration::from_millis(60));
        };
        hold(&pins[1], 200);
        hold(&pins[2], 80);
        hold(&pins[0], 80);
        let mut got = Vec::new();
        while let Ok(c) = rx.try_recv() {
            got.push(c);
        }
        assert_eq!(got, [Choose::Next, Choose::Choose, Choose::Previous]);
        stop.store(true, Ordering::SeqCst);
        thread.join().unwrap();
    }
}
