//! The flash check of uploaded idle clips (WCAG 2.3.1 "Three Flashes or Below Threshold", for
//! EN 301 549's statement on photosensitive seizure triggers): a clip that flashes more than three
//! times in any one second over more than a quarter of the frame is refused, naming the second.
//! docs/clips-flash.md gives the rule, what is and is not checked, and the bounds.
//!
//! Each decoded frame is reduced to a [`GRID`]x[`GRID`] grid of cells of equal area, each the
//! mean linear RGB of 8x8 samples. Per cell, a [`Tracker`] turns its sequence into transitions
//! (WCAG's general flash: an opposing change of relative luminance by 0.1 or more with the darker
//! state below 0.8; the red flash: an opposing change of `(R-G-B)x320` by more than 20 with a
//! saturated red on either side). A cell fails a one-second window holding more than six
//! transitions (three flashes, each a pair of opposing changes); the clip fails when the failing
//! cells cover more than a quarter of the frame at once.

use std::collections::VecDeque;
use std::fs::File;
use std::time::Duration;

use super::clip::{Clip, ClipDecoder, YuvPlanes};

/// Cells per side of the grid each frame is reduced to (1024 cells, each 1/1024 of the frame).
pub const GRID: usize = 32;
const CELLS: usize = GRID * GRID;
/// Samples per side of a cell (64 per cell, 65,536 per frame whatever the picture's size).
const SAMPLES: usize = 8;
/// More than this many transitions in one second is more than three flashes.
const MAX_TRANSITIONS: usize = 6;
/// The window WCAG counts flashes in.
const WINDOW: Duration = Duration::from_secs(1);
/// More than this share of the frame flashing at once fails (WCAG's 25 % of a 10-degree visual
/// field, taken as a quarter of the frame).
const MAX_AREA: f32 = 0.25;
/// Transition times kept per cell and kind: enough to report a second of 60 fps flicker.
const KEPT: usize = 64;
/// Frames decoded again after the end, at most (1 s of 1000 fps).
const MAX_LOOPED: usize = 1000;
/// Decoding bounds: frames (120 s at 60 fps; each costs the grid's 65,536 samples whatever its
/// size) and frames times pixels (about 120 s of 1080p at 30 fps). A clip larger than these is
/// refused unchecked rather than kept unchecked.
pub const MAX_FRAMES: u64 = 120 * 60;
pub const MAX_PIXELS: u64 = 120 * 30 * 1920 * 1080;

/// Why a clip is refused.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// It flashes: `transitions` opposing changes in the second from `from`, over `area` of the
    /// frame.
    Flashes {
        kind: Kind,
        from: Duration,
        transitions: usize,
        area: f32,
        /// The second runs past the clip's end into its start again (it loops).
        across_loop: bool,
    },
    /// It has more frames, or frames times pixels, than the check decodes.
    TooLong { frames: u64, pixels: u64 },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Flashes {
                kind,
                from,
                transitions,
                area,
                across_loop,
            } => {
                let flashes = if transitions % 2 == 0 {
                    format!("{}", transitions / 2)
                } else {
                    format!("{}.5", transitions / 2)
                };
                let (from, to) = (from.as_secs_f64(), (*from + WINDOW).as_secs_f64());
                write!(
                    f,
                    "the clip flashes{} {flashes} times between {from:.1} s and {to:.1} s{} over \
                     {:.0} % of the frame; a clip may flash at most 3 times in any one second \
                     over more than a quarter of the frame (WCAG 2.3.1)",
                    match kind {
                        Kind::General => "",
                        Kind::Red => " red",
                    },
                    if *across_loop {
                        " (as it loops back to its start)"
                    } else {
                        ""
                    },
                    area * 100.0
                )
            }
            Refusal::TooLong { frames, pixels } => write!(
                f,
                "the clip is too long to check for flashes: {frames} frames, {:.1} gigapixels; \
                 the check decodes at most {MAX_FRAMES} frames and {:.1} gigapixels (about 120 s \
                 of 1080p at 30 fps)",
                *pixels as f64 / 1e9,
                MAX_PIXELS as f64 / 1e9
            ),
        }
    }
}

/// The two flash thresholds of WCAG 2.3.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Relative luminance.
    General,
    /// Saturated red.
    Red,
}

impl Kind {
    fn value(self, s: &Sample) -> f32 {
        match self {
            Kind::General => s.luminance,
            Kind::Red => s.red,
        }
    }

    /// Whether a change from `a` to `b` is large enough to be a transition.
    fn is_transition(self, a: &Sample, b: &Sample) -> bool {
        let change = (self.value(b) - self.value(a)).abs();
        match self {
            Kind::General => change >= 0.1 && a.luminance.min(b.luminance) < 0.8,
            Kind::Red => change > 20.0 && (a.saturated_red || b.saturated_red),
        }
    }
}

/// What one cell shows in one frame, in WCAG's terms (linear RGB from 0 to 1).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Sample {
    /// Relative luminance, 0 to 1.
    luminance: f32,
    /// `(R-G-B)x320`, negative values as 0.
    red: f32,
    /// `R/(R+G+B) >= 0.8`.
    saturated_red: bool,
}

impl Sample {
    /// From linear R, G and B.
    fn from_linear(r: f32, g: f32, b: f32) -> Sample {
        Sample {
            luminance: 0.2126 * r + 0.7152 * g + 0.0722 * b,
            red: ((r - g - b) * 320.0).max(0.0),
            saturated_red: r + g + b > 0.0 && r / (r + g + b) >= 0.8,
        }
    }
}

/// Turns one cell's sequence into transitions: the value moves away from the last extreme
/// (`anchor`) by the threshold, against the direction of the last transition. A move further in
/// the same direction only moves the extreme.
#[derive(Debug, Clone, Default)]
struct Tracker {
    anchor: Option<Sample>,
    rising: Option<bool>,
}

impl Tracker {
    /// Takes the next frame's sample; true when it completes a transition.
    fn step(&mut self, kind: Kind, s: Sample) -> bool {
        let Some(a) = self.anchor else {
            self.anchor = Some(s);
            return false;
        };
        let delta = kind.value(&s) - kind.value(&a);
        if delta == 0.0 {
            return false;
        }
        let up = delta > 0.0;
        if self.rising == Some(up) {
            self.anchor = Some(s);
            return false;
        }
        if kind.is_transition(&a, &s) {
            self.rising = Some(up);
            self.anchor = Some(s);
            return true;
        }
        false
    }
}

/// One cell's trackers and its recent transition times, per kind.
#[derive(Debug, Clone, Default)]
struct Cell {
    trackers: [Tracker; 2],
    times: [VecDeque<Duration>; 2],
}

/// The flash detector over a sequence of sampled frames.
struct Detector {
    cells: Vec<Cell>,
    /// A failure seen, waiting for the end of its second to count it whole.
    pending: Option<(Kind, Duration, Vec<usize>, f32)>,
}

impl Default for Detector {
    fn default() -> Detector {
        Detector {
            cells: vec![Cell::default(); CELLS],
            pending: None,
        }
    }
}

const KINDS: [Kind; 2] = [Kind::General, Kind::Red];

impl Detector {
    /// Takes the frame shown from `at` (one [`Sample`] per cell, row by row). Returns the
    /// refusal once a failing second is over.
    fn push(&mut self, at: Duration, frame: &[Sample]) -> Option<Refusal> {
        if let Some((kind, from, _, _)) = &self.pending
            && at >= *from + WINDOW
        {
            return self.report(*kind, *from);
        }
        for (cell, s) in self.cells.iter_mut().zip(frame) {
            for (k, kind) in KINDS.iter().enumerate() {
                if cell.trackers[k].step(*kind, *s) {
                    let times = &mut cell.times[k];
                    if times.len() == KEPT {
                        times.pop_front();
                    }
                    times.push_back(at);
                }
            }
        }
        if self.pending.is_some() {
            return None;
        }
        for (k, kind) in KINDS.iter().enumerate() {
            // A cell fails when its seventh latest transition is within the second up to now.
            let failing: Vec<(usize, Duration)> = self
                .cells
                .iter()
                .enumerate()
                .filter_map(|(i, c)| {
                    let t = &c.times[k];
                    let first = *t.get(t.len().checked_sub(MAX_TRANSITIONS + 1)?)?;
                    (first + WINDOW > at).then_some((i, first))
                })
                .collect();
            let area = failing.len() as f32 / CELLS as f32;
            if area > MAX_AREA {
                let from = failing.iter().map(|f| f.1).min().unwrap_or(at);
                let cells = failing.into_iter().map(|f| f.0).collect();
                self.pending = Some((*kind, from, cells, area));
                break;
            }
        }
        None
    }

    /// The refusal found, if any, at the end of the frames (its second cut short).
    fn finish(&mut self) -> Option<Refusal> {
        let (kind, from, ..) = self.pending.as_ref()?;
        self.report(*kind, *from)
    }

    fn report(&mut self, kind: Kind, from: Duration) -> Option<Refusal> {
        let (_, _, cells, area) = self.pending.take()?;
        let k = KINDS.iter().position(|&x| x == kind)?;
        let transitions = cells
            .iter()
            .map(|&i| {
                let t = &self.cells[i].times[k];
                t.iter()
                    .filter(|&&t| t >= from && t < from + WINDOW)
                    .count()
            })
            .max()
            .unwrap_or(0);
        Some(Refusal::Flashes {
            kind,
            from,
            transitions,
            area,
            across_loop: false,
        })
    }
}

/// sRGB's transfer function from 8-bit values to linear light.
fn linear_table() -> [f32; 256] {
    std::array::from_fn(|i| {
        let c = i as f32 / 255.0;
        if c <= 0.04045 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    })
}

/// Reduces decoded pictures to the grid: where to sample a picture of one size.
struct Sampler {
    size: (u32, u32),
    xs: Vec<usize>,
    ys: Vec<usize>,
    linear: [f32; 256],
}

impl Sampler {
    fn new(size: (u32, u32)) -> Sampler {
        let at = |len: u32| -> Vec<usize> {
            let n = GRID * SAMPLES;
            (0..n)
                .map(|i| ((2 * i + 1) as u64 * len as u64 / (2 * n) as u64) as usize)
                .collect()
        };
        Sampler {
            size,
            xs: at(size.0),
            ys: at(size.1),
            linear: linear_table(),
        }
    }

    /// One sample per cell, or none when the planes are shorter than the picture says.
    fn sample(&self, pic: &YuvPlanes<'_>, out: &mut Vec<Sample>) -> bool {
        let (w, h) = (pic.size.0 as usize, pic.size.1 as usize);
        let (ys, us, vs) = pic.strides;
        let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
        if w == 0
            || h == 0
            || pic.y.len() < ys * (h - 1) + w
            || pic.u.len() < us * (ch - 1) + cw
            || pic.v.len() < vs * (ch - 1) + cw
        {
            return false;
        }
        let mut sums = vec![[0f32; 3]; CELLS];
        let lin = |c: f32| self.linear[c.clamp(0.0, 255.0) as usize];
        for (j, &y) in self.ys.iter().enumerate() {
            let row = (j / SAMPLES) * GRID;
            for (i, &x) in self.xs.iter().enumerate() {
                let l = 1.164 * (pic.y[y * ys + x] as f32 - 16.0);
                let u = pic.u[(y / 2) * us + x / 2] as f32 - 128.0;
                let v = pic.v[(y / 2) * vs + x / 2] as f32 - 128.0;
                let cell = &mut sums[row + i / SAMPLES];
                cell[0] += lin(l + 1.596 * v + 0.5);
                cell[1] += lin(l - 0.392 * u - 0.813 * v + 0.5);
                cell[2] += lin(l + 2.017 * u + 0.5);
            }
        }
        let n = (SAMPLES * SAMPLES) as f32;
        out.clear();
        out.extend(
            sums.iter()
                .map(|s| Sample::from_linear(s[0] / n, s[1] / n, s[2] / n)),
        );
        true
    }
}

/// Checks a stored clip as the kiosk would play it: every frame once, looping back to the start
/// for one more second (a loop's seam flashes too). A file the decoder cannot read passes: the
/// display cannot show it either.
pub fn check_file(file: File) -> Result<(), Refusal> {
    match Clip::open(file) {
        Ok(clip) => check(clip),
        Err(_) => Ok(()),
    }
}

/// [`check_file`] for a parsed clip.
pub fn check(clip: Clip) -> Result<(), Refusal> {
    let (w, h) = clip.size();
    let durations = clip.frame_durations();
    let total: Duration = durations.iter().sum();
    // The frames of one more second from the start (as many passes of a short clip as it takes).
    let mut again = Duration::ZERO;
    let looped = durations
        .iter()
        .cycle()
        .take_while(|d| {
            let before = again;
            again += **d;
            before < WINDOW
        })
        .take(MAX_LOOPED)
        .count();
    let max_frames = (durations.len() + looped) as u64;
    let pixels = max_frames * w as u64 * h as u64;
    if durations.len() as u64 > MAX_FRAMES || pixels > MAX_PIXELS {
        return Err(Refusal::TooLong {
            frames: durations.len() as u64,
            pixels,
        });
    }
    let end = total + WINDOW;
    let Ok(mut decoder) = ClipDecoder::new(clip) else {
        return Ok(());
    };
    let mut sampler = Sampler::new((w, h));
    let mut detector = Detector::default();
    let mut grid = Vec::with_capacity(CELLS);
    let (mut at, mut shown) = (Duration::ZERO, 0u64);
    let across = |r: Refusal| match r {
        Refusal::Flashes {
            kind,
            from,
            transitions,
            area,
            ..
        } => Refusal::Flashes {
            kind,
            from,
            transitions,
            area,
            across_loop: from + WINDOW > total,
        },
        r => r,
    };
    while at < end && shown < max_frames {
        let mut sampled = false;
        let Ok(d) = decoder.next_frame(|pic| {
            if pic.size != sampler.size {
                sampler = Sampler::new(pic.size);
            }
            sampled = sampler.sample(pic, &mut grid);
        }) else {
            break;
        };
        if sampled && let Some(r) = detector.push(at, &grid) {
            return Err(across(r));
        }
        at += d;
        shown += 1;
    }
    detector.finish().map_or(Ok(()), |r| Err(across(r)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grey(l: f32) -> Sample {
        Sample::from_linear(l, l, l)
    }

    /// Feeds `frames` (one value for the whole grid, or per area share) shown `ms` each.
    fn run(ms: u64, frames: impl IntoIterator<Item = Vec<Sample>>) -> Option<Refusal> {
        let mut d = Detector::default();
        for (i, f) in frames.into_iter().enumerate() {
            if let Some(r) = d.push(Duration::from_millis(ms * i as u64), &f) {
                return Some(r);
            }
        }
        d.finish()
    }

    /// A frame whose first `share` of cells show `on` and the rest `off`.
    fn frame(share: f32, on: Sample, off: Sample) -> Vec<Sample> {
        let n = (share * CELLS as f32).round() as usize;
        (0..CELLS).map(|i| if i < n { on } else { off }).collect()
    }

    fn alternating(n: usize, a: Sample, b: Sample, share: f32) -> Vec<Vec<Sample>> {
        (0..n)
            .map(|i| frame(share, if i % 2 == 0 { a } else { b }, a))
            .collect()
    }

    #[test]
    fn ten_hertz_black_and_white_fails_naming_its_second() {
        // 2 s steady black, then black and white every 100 ms.
        let mut frames = vec![frame(1.0, grey(0.0), grey(0.0)); 20];
        frames.extend(alternating(30, grey(1.0), grey(0.0), 1.0));
        let r = run(100, frames).expect("refused");
        assert_eq!(
            r,
            Refusal::Flashes {
                kind: Kind::General,
                from: Duration::from_secs(2),
                transitions: 10,
                area: 1.0,
                across_loop: false,
            }
        );
        assert!(
            r.to_string()
                .contains("flashes 5 times between 2.0 s and 3.0 s over 100 % of the frame"),
            "{r}"
        );
    }

    #[test]
    fn three_flashes_a_second_pass_four_fail() {
        // Three flashes a second: a change every 1/6 s.
        let three = alternating(60, grey(1.0), grey(0.0), 1.0);
        assert_eq!(run(167, three), None);
        // 3.5 flashes a second (a change every 1/7 s) fails.
        let faster = alternating(60, grey(1.0), grey(0.0), 1.0);
        assert!(run(140, faster).is_some());
    }

    #[test]
    fn area_small_changes_and_bright_flicker_pass() {
        // A quarter of the frame flashing passes, just over fails.
        assert_eq!(run(100, alternating(30, grey(0.0), grey(1.0), 0.25)), None);
        assert!(run(100, alternating(30, grey(0.0), grey(1.0), 0.27)).is_some());
        // Changes under 10 % of the maximum are no transition.
        assert_eq!(run(100, alternating(30, grey(0.3), grey(0.39), 1.0)), None);
        // Between two bright states (the darker at 0.8 or above) neither.
        assert_eq!(run(100, alternating(30, grey(0.8), grey(1.0), 1.0)), None);
        // A slow fade through the whole range is one transition.
        let fade = (0..=50).map(|i| frame(1.0, grey(i as f32 / 50.0), grey(0.0)));
        assert_eq!(run(40, fade), None);
    }

    #[test]
    fn saturated_red_flashes_fail_as_red() {
        // Dark red against black: a luminance change of 0.08 (no general flash), a red one of
        // about 80.
        let red = Sample::from_linear(0.25, 0.0, 0.0);
        let black = grey(0.0);
        assert!(red.luminance < 0.1);
        match run(100, alternating(30, black, red, 1.0)) {
            Some(Refusal::Flashes {
                kind: Kind::Red, ..
            }) => {}
            other => panic!("{other:?}"),
        }
        // The same change in a desaturated pink is no red flash.
        let pink = Sample::from_linear(0.25, 0.1, 0.1);
        assert_eq!(
            run(
                100,
                alternating(30, Sample::from_linear(0.15, 0.1, 0.1), pink, 1.0)
            ),
            None
        );
    }

    #[test]
    fn a_failure_cut_short_by_the_end_is_reported() {
        // Eight changes in the last 0.8 s, then the frames end.
        let mut frames = vec![frame(1.0, grey(0.0), grey(0.0)); 5];
        frames.extend(alternating(8, grey(1.0), grey(0.0), 1.0));
        match run(100, frames) {
            Some(Refusal::Flashes { transitions: 8, .. }) => {}
            other => panic!("{other:?}"),
        }
    }
}
