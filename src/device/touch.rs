//! The touch screen, read from evdev: a single-touch panel (`ABS_X`/`ABS_Y` with `BTN_TOUCH`),
//! a multi-touch one (type B slots: `ABS_MT_POSITION_X`/`Y`, `ABS_MT_TRACKING_ID`; the first
//! finger down counts) or an absolute pointer such as QEMU's virtio tablet (`BTN_LEFT`). A
//! finger coming down is one [`Choose::Touch`], at its point mapped through the axes' ranges
//! and the screen's rotation to 0..1 of the picture the visitor sees.
//!
//! Plain reads of `struct input_event` (as `ptt` reads a key) and three ioctls for what a device
//! reports (`EVIOCGPROP`, `EVIOCGBIT`, `EVIOCGABS`): no crate needed.

use std::fs::File;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use super::choice::{Choose, offer};
use super::ptt::{EVENT_SIZE, input_event};
use crate::config::{Rotation, TouchConfig};

const EV_SYN: u16 = 0;
const EV_KEY: u16 = 1;
const EV_ABS: u16 = 3;
const SYN_REPORT: u16 = 0;
const BTN_LEFT: u16 = 0x110;
const BTN_TOUCH: u16 = 0x14a;
const ABS_X: u16 = 0x00;
const ABS_Y: u16 = 0x01;
const ABS_MT_SLOT: u16 = 0x2f;
const ABS_MT_POSITION_X: u16 = 0x35;
const ABS_MT_POSITION_Y: u16 = 0x36;
const ABS_MT_TRACKING_ID: u16 = 0x39;
const INPUT_PROP_POINTER: u16 = 0x00;
const INPUT_PROP_DIRECT: u16 = 0x01;
/// `ABS_CNT`, `KEY_CNT` and `INPUT_PROP_CNT` in bytes of bits.
const ABS_BYTES: usize = 0x40 / 8;
const KEY_BYTES: usize = 0x300 / 8;
const PROP_BYTES: usize = 0x20 / 8;

/// How often the devices are looked for again (a screen plugged in later is found).
const RESCAN: Duration = Duration::from_secs(2);

/// The range of one absolute axis, as the device reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub min: i32,
    pub max: i32,
}

impl Range {
    /// Where `raw` lies in the range, 0..1 (clamped: panels report a little beyond it).
    fn unit(self, raw: i32) -> f32 {
        let span = (i64::from(self.max) - i64::from(self.min)).max(1) as f32;
        ((i64::from(raw) - i64::from(self.min)) as f32 / span).clamp(0.0, 1.0)
    }
}

/// What a touch device reports a contact by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Panel {
    pub x: Range,
    pub y: Range,
    /// Positions come in multi-touch slots (else in `ABS_X`/`ABS_Y`).
    pub multi: bool,
}

/// Turns one device's events into touches: a contact that begins is a touch at the point it
/// has when its frame (`SYN_REPORT`) ends.
pub struct Touches {
    panel: Panel,
    rotation: Rotation,
    /// The key says a contact (`BTN_TOUCH`, or `BTN_LEFT` of a tablet).
    key_down: bool,
    /// The multi-touch slot events now name, and the slot of the finger that counts.
    slot: i32,
    finger: Option<i32>,
    raw: (i32, i32),
    /// A contact at the end of the last frame.
    was_down: bool,
}

impl Touches {
    pub fn new(panel: Panel, rotation: Rotation) -> Touches {
        Touches {
            panel,
            rotation,
            key_down: false,
            slot: 0,
            finger: None,
            raw: (panel.x.min, panel.y.min),
            was_down: false,
        }
    }

    /// Takes one event; a frame that begins a contact gives its touch.
    pub fn feed(&mut self, kind: u16, code: u16, value: i32) -> Option<Choose> {
        let multi = self.panel.multi;
        match (kind, code) {
            (EV_KEY, BTN_TOUCH | BTN_LEFT) => self.key_down = value != 0,
            (EV_ABS, ABS_X) if !multi => self.raw.0 = value,
            (EV_ABS, ABS_Y) if !multi => self.raw.1 = value,
            (EV_ABS, ABS_MT_SLOT) => self.slot = value,
            (EV_ABS, ABS_MT_TRACKING_ID) if value >= 0 && self.finger.is_none() => {
                self.finger = Some(self.slot);
            }
            (EV_ABS, ABS_MT_TRACKING_ID) if value < 0 && self.finger == Some(self.slot) => {
                self.finger = None;
            }
            (EV_ABS, ABS_MT_POSITION_X) if multi && self.finger == Some(self.slot) => {
                self.raw.0 = value;
            }
            (EV_ABS, ABS_MT_POSITION_Y) if multi && self.finger == Some(self.slot) => {
                self.raw.1 = value;
            }
            (EV_SYN, SYN_REPORT) => {
                let down = self.key_down || self.finger.is_some();
                let began = down && !self.was_down;
                self.was_down = down;
                if began {
                    let (x, y) = self.point();
                    return Some(Choose::Touch { x, y });
                }
            }
            _ => {}
        }
        None
    }

    /// The contact's point on the picture: the panel's 0..1 turned back by the rotation the
    /// picture is shown with (90: the picture's top-left corner is the panel's top-right).
    fn point(&self) -> (f32, f32) {
        let u = self.panel.x.unit(self.raw.0);
        let v = self.panel.y.unit(self.raw.1);
        match self.rotation {
            Rotation::R0 => (u, v),
            Rotation::R90 => (v, 1.0 - u),
            Rotation::R180 => (1.0 - u, 1.0 - v),
            Rotation::R270 => (1.0 - v, u),
        }
    }
}

/// `_IOC(_IOC_READ, 'E', nr, size)`, as linux/input.h builds its ioctls (the same on every
/// architecture docent runs on).
fn ioc_read(nr: u64, size: usize) -> u64 {
    (2 << 30) | ((size as u64) << 16) | (u64::from(b'E') << 8) | nr
}

fn ioctl_into(file: &File, request: u64, out: &mut [u8]) -> std::io::Result<()> {
    // SAFETY: the request's size is `out`'s length, so the kernel writes only into it.
    let r = unsafe { libc::ioctl(file.as_raw_fd(), request as _, out.as_mut_ptr()) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn has(bits: &[u8], n: u16) -> bool {
    bits.get(usize::from(n / 8))
        .is_some_and(|b| b & (1 << (n % 8)) != 0)
}

/// The range of an absolute axis (`EVIOCGABS`: value, minimum, maximum, fuzz, flat, resolution).
fn range(file: &File, axis: u16) -> std::io::Result<Range> {
    let mut info = [0u8; 24];
    ioctl_into(
        file,
        ioc_read(0x40 + u64::from(axis), info.len()),
        &mut info,
    )?;
    let at = |i: usize| i32::from_ne_bytes(info[i * 4..i * 4 + 4].try_into().expect("4 bytes"));
    Ok(Range {
        min: at(1),
        max: at(2),
    })
}

/// Whether an opened input device is a touch screen, and how it reports contacts; `Err` says
/// why not (a keyboard, a mouse, a touchpad, not an input device at all).
pub fn probe(file: &File) -> Result<Panel, String> {
    let mut props = [0u8; PROP_BYTES];
    let mut abs = [0u8; ABS_BYTES];
    let mut keys = [0u8; KEY_BYTES];
    let ask = |nr: u64, out: &mut [u8]| ioctl_into(file, ioc_read(nr, out.len()), out);
    ask(0x09, &mut props).map_err(|e| format!("not an input device ({e})"))?;
    ask(0x20 + u64::from(EV_ABS), &mut abs).map_err(|e| e.to_string())?;
    ask(0x20 + u64::from(EV_KEY), &mut keys).map_err(|e| e.to_string())?;
    if has(&props, INPUT_PROP_POINTER) && !has(&props, INPUT_PROP_DIRECT) {
        return Err("a touchpad, not a screen".into());
    }
    let multi = has(&abs, ABS_MT_POSITION_X)
        && has(&abs, ABS_MT_POSITION_Y)
        && has(&abs, ABS_MT_TRACKING_ID);
    let single = has(&abs, ABS_X) && has(&abs, ABS_Y);
    let contact = has(&keys, BTN_TOUCH) || has(&keys, BTN_LEFT) || multi;
    if !(multi || single) || !contact {
        return Err("reports no absolute contact".into());
    }
    let (ax, ay) = if multi {
        (ABS_MT_POSITION_X, ABS_MT_POSITION_Y)
    } else {
        (ABS_X, ABS_Y)
    };
    let x = range(file, ax).map_err(|e| e.to_string())?;
    let y = range(file, ay).map_err(|e| e.to_string())?;
    if x.max <= x.min || y.max <= y.min {
        return Err(format!("its axes have no extent ({x:?}, {y:?})"));
    }
    Ok(Panel { x, y, multi })
}

/// A configured device must be an input device node: no other path is opened.
fn checked(device: &str) -> Result<Option<PathBuf>, String> {
    if device.is_empty() {
        return Ok(None);
    }
    let path = Path::new(device);
    let fine = path.starts_with("/dev/input/")
        && path.components().all(|c| {
            matches!(
                c,
                std::path::Component::RootDir | std::path::Component::Normal(_)
            )
        });
    if fine {
        Ok(Some(path.to_path_buf()))
    } else {
        Err(format!(
            "[touch] device {device:?} is not under /dev/input/"
        ))
    }
}

/// The devices to look at: the configured one, else every `/dev/input/event*`.
fn candidates(configured: &Option<PathBuf>) -> Vec<PathBuf> {
    if let Some(p) = configured {
        return vec![p.clone()];
    }
    let Ok(dir) = std::fs::read_dir("/dev/input") else {
        return Vec::new();
    };
    let mut all: Vec<PathBuf> = dir
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("event"))
        })
        .collect();
    all.sort();
    all
}

/// Whether a touch screen is there now (the configured one, or any); `Err` for a configured
/// path that is not an input device node.
pub fn present(device: &str) -> Result<bool, String> {
    let configured = checked(device)?;
    Ok(candidates(&configured)
        .iter()
        .any(|p| File::open(p).is_ok_and(|f| probe(&f).is_ok())))
}

/// Reads touches from every touch screen (the configured one, or each found, now and later)
/// into `tx` until `stop`. `Err` for a bad configured path, or a configured device that is not
/// there or not a touch screen now (it is still watched for).
pub fn watch(
    cfg: &TouchConfig,
    tx: mpsc::Sender<Choose>,
    stop: Arc<AtomicBool>,
) -> Result<bool, String> {
    let configured = checked(&cfg.device)?;
    let found = present(&cfg.device)?;
    let rotation = cfg.rotation;
    let watched: Arc<Mutex<Vec<PathBuf>>> = Arc::default();
    std::thread::Builder::new()
        .name("docent-touch".into())
        .spawn(move || {
            let mut told: Vec<PathBuf> = Vec::new();
            while !stop.load(Ordering::SeqCst) && !tx.is_closed() {
                for path in candidates(&configured) {
                    if watched.lock().expect("touch lock").contains(&path) {
                        continue;
                    }
                    let Ok(file) = File::open(&path) else {
                        continue;
                    };
                    let panel = match probe(&file) {
                        Ok(p) => p,
                        Err(why) => {
                            if configured.is_some() && !told.contains(&path) {
                                tracing::warn!("touch screen {}: {why}", path.display());
                                told.push(path.clone());
                            }
                            continue;
                        }
                    };
                    tracing::info!(device = %path.display(), ?panel, "touch screen");
                    watched.lock().expect("touch lock").push(path.clone());
                    let (tx, stop, watched) = (tx.clone(), stop.clone(), watched.clone());
                    let spawned = std::thread::Builder::new()
                        .name("docent-touch-read".into())
                        .spawn(move || {
                            read_touches(file, Touches::new(panel, rotation), &tx, &stop);
                            watched.lock().expect("touch lock").retain(|p| *p != path);
                        });
                    if let Err(e) = spawned {
                        tracing::warn!("touch screen: {e}");
                    }
                }
                std::thread::sleep(RESCAN);
            }
        })
        .map_err(|e| format!("cannot watch for a touch screen: {e}"))?;
    match (&cfg.device, found) {
        (d, false) if !d.is_empty() => {
            Err(format!("touch screen {d}: absent or not a touch screen"))
        }
        _ => Ok(found),
    }
}

/// Reads one device's events until it goes away, the kiosk loop lets go of the channel or
/// `stop` (seen at the next event).
pub fn read_touches(
    mut device: impl Read,
    mut touches: Touches,
    tx: &mpsc::Sender<Choose>,
    stop: &AtomicBool,
) {
    let mut record = [0u8; EVENT_SIZE];
    while !stop.load(Ordering::SeqCst) {
        if device.read_exact(&mut record).is_err() {
            return;
        }
        let Some((kind, code, value)) = input_event(&record) else {
            return;
        };
        if let Some(c) = touches.feed(kind, code, value)
            && !offer(tx, c)
        {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const SCREEN: Panel = Panel {
        x: Range { min: 0, max: 4095 },
        y: Range { min: 0, max: 4095 },
        multi: false,
    };

    /// One `struct input_event` as the kernel writes it.
    fn event(kind: u16, code: u16, value: i32) -> Vec<u8> {
        let mut r = vec![0u8; 2 * size_of::<std::ffi::c_long>()];
        r.extend(kind.to_ne_bytes());
        r.extend(code.to_ne_bytes());
        r.extend(value.to_ne_bytes());
        assert_eq!(r.len(), EVENT_SIZE);
        r
    }

    fn feed_all(t: &mut Touches, events: &[(u16, u16, i32)]) -> Vec<Choose> {
        events
            .iter()
            .filter_map(|&(k, c, v)| t.feed(k, c, v))
            .collect()
    }

    fn close(got: Choose, x: f32, y: f32) -> bool {
        matches!(got, Choose::Touch { x: gx, y: gy } if (gx - x).abs() < 0.001 && (gy - y).abs() < 0.001)
    }

    #[test]
    fn a_single_touch_is_one_choice_where_the_finger_came_down() {
        let mut t = Touches::new(SCREEN, Rotation::R0);
        let got = feed_all(
            &mut t,
            &[
                (EV_ABS, ABS_X, 1024),
                (EV_ABS, ABS_Y, 3071),
                (EV_KEY, BTN_TOUCH, 1),
                (EV_SYN, SYN_REPORT, 0),
                // The finger moves and lifts: no more choices.
                (EV_ABS, ABS_X, 2000),
                (EV_SYN, SYN_REPORT, 0),
                (EV_KEY, BTN_TOUCH, 0),
                (EV_SYN, SYN_REPORT, 0),
                // A second touch.
                (EV_ABS, ABS_X, 4095),
                (EV_ABS, ABS_Y, 0),
                (EV_KEY, BTN_TOUCH, 1),
                (EV_SYN, SYN_REPORT, 0),
            ],
        );
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(close(got[0], 1024.0 / 4095.0, 3071.0 / 4095.0), "{got:?}");
        assert!(close(got[1], 1.0, 0.0), "{got:?}");
    }

    #[test]
    fn multi_touch_counts_the_first_finger_and_its_axes_range() {
        let panel = Panel {
            x: Range { min: 0, max: 799 },
            y: Range { min: 0, max: 479 },
            multi: true,
        };
        let mut t = Touches::new(panel, Rotation::R0);
        let got = feed_all(
            &mut t,
            &[
                (EV_ABS, ABS_MT_SLOT, 0),
                (EV_ABS, ABS_MT_TRACKING_ID, 7),
                (EV_ABS, ABS_MT_POSITION_X, 799),
                (EV_ABS, ABS_MT_POSITION_Y, 240),
                (EV_KEY, BTN_TOUCH, 1),
                (EV_ABS, ABS_X, 1), // the legacy axes are not the ones read
                (EV_SYN, SYN_REPORT, 0),
                // A second finger in slot 1 while the first stays: no choice, no move.
                (EV_ABS, ABS_MT_SLOT, 1),
                (EV_ABS, ABS_MT_TRACKING_ID, 8),
                (EV_ABS, ABS_MT_POSITION_X, 10),
                (EV_SYN, SYN_REPORT, 0),
                // Both lift.
                (EV_ABS, ABS_MT_TRACKING_ID, -1),
                (EV_ABS, ABS_MT_SLOT, 0),
                (EV_ABS, ABS_MT_TRACKING_ID, -1),
                (EV_KEY, BTN_TOUCH, 0),
                (EV_SYN, SYN_REPORT, 0),
                // A panel without BTN_TOUCH: the tracking id alone says a contact.
                (EV_ABS, ABS_MT_TRACKING_ID, 9),
                (EV_ABS, ABS_MT_POSITION_X, 0),
                (EV_ABS, ABS_MT_POSITION_Y, 479),
                (EV_SYN, SYN_REPORT, 0),
            ],
        );
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(close(got[0], 1.0, 240.0 / 479.0), "{got:?}");
        assert!(close(got[1], 0.0, 1.0), "{got:?}");
    }

    #[test]
    fn rotation_turns_the_panel_s_point_back_to_the_picture_s() {
        // A touch near the panel's top-right corner (u = 0.9, v = 0.1).
        let at = |rotation| {
            let mut t = Touches::new(
                Panel {
                    x: Range {
                        min: 100,
                        max: 1100,
                    },
                    y: Range { min: 0, max: 1000 },
                    multi: false,
                },
                rotation,
            );
            let got = feed_all(
                &mut t,
                &[
                    (EV_ABS, ABS_X, 1000),
                    (EV_ABS, ABS_Y, 100),
                    (EV_KEY, BTN_LEFT, 1),
                    (EV_SYN, SYN_REPORT, 0),
                ],
            );
            got[0]
        };
        assert!(close(at(Rotation::R0), 0.9, 0.1));
        // Turned 90 clockwise, the panel's top-right corner is the picture's top-left.
        assert!(close(at(Rotation::R90), 0.1, 0.1));
        assert!(close(at(Rotation::R180), 0.1, 0.9));
        assert!(close(at(Rotation::R270), 0.9, 0.9));
    }

    /// The reading loop over a real pipe carrying the kernel's record layout: each contact is
    /// one choice on the channel; the loop ends when the device goes.
    #[tokio::test]
    async fn the_reader_turns_a_device_s_records_into_choices() {
        let (reader, mut writer) = std::io::pipe().unwrap();
        let (tx, mut rx) = mpsc::channel(crate::device::choice::QUEUE);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                read_touches(reader, Touches::new(SCREEN, Rotation::R0), &tx, &stop)
            })
        };
        for (x, y) in [(0, 0), (4095, 4095)] {
            for (k, c, v) in [
                (EV_ABS, ABS_X, x),
                (EV_ABS, ABS_Y, y),
                (EV_KEY, BTN_TOUCH, 1),
                (EV_SYN, SYN_REPORT, 0),
                (EV_KEY, BTN_TOUCH, 0),
                (EV_SYN, SYN_REPORT, 0),
            ] {
                writer.write_all(&event(k, c, v)).unwrap();
            }
        }
        drop(writer);
        thread.join().unwrap();
        assert_eq!(rx.recv().await, Some(Choose::Touch { x: 0.0, y: 0.0 }));
        assert_eq!(rx.recv().await, Some(Choose::Touch { x: 1.0, y: 1.0 }));
        assert_eq!(rx.recv().await, None, "the reader let go of the channel");
    }

    #[test]
    fn only_input_device_nodes_are_opened() {
        assert_eq!(checked("").unwrap(), None);
        assert!(checked("/dev/input/event3").unwrap().is_some());
        assert!(
            checked("/dev/input/by-id/usb-touch-event-if00")
                .unwrap()
                .is_some()
        );
        for bad in [
            "/etc/shadow",
            "/dev/input/../sda",
            "dev/input/event0",
            "/dev/inputs/x",
        ] {
            assert!(checked(bad).is_err(), "{bad}");
        }
        // Not an input device: refused by the first ioctl, never read.
        let null = File::open("/dev/null").unwrap();
        assert!(probe(&null).unwrap_err().contains("not an input device"));
    }
}
