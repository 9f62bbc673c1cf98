//! The player: one dedicated thread that follows the kiosk state and keeps the screen showing
//! the right thing.
//!
//! What is shown, first that works wins (a source that fails to decode is remembered and
//! skipped until it changes):
//! 0. While a visitor chooses a question without speaking: the question screen (`questions`).
//! 1. While idle, in first boot (the password came from `access.admin_password_file` and no
//!    administrator has logged in yet, `Engine::first_boot_password`): the setup screen with the
//!    admin URL, the certificate's fingerprint (short form) and "hold the button for 5 seconds
//!    to show the password"; the password itself, in large type, only while the kiosk state
//!    says so (`KioskState::password_shown`: the button was held 5 s less than 10 minutes ago,
//!    see `device::presence`). In setup mode (no administrator password) while idle and no
//!    reply is still written for a visitor: the setup screen with the admin URL and the
//!    fingerprint. The URL is worked out from the listen address
//!    at every plan ([`super::admin_url`]): an address the board got after `docent` started (DHCP)
//!    is shown within about a second, and while it has none the screen says it is waiting for
//!    the network.
//! 2. While the kiosk is closed (its opening hours): the closed screen, "Closed" and when it
//!    opens again.
//! 3. The active image's clip for the status (`listening`, `speaking`, `idle`; `processing`
//!    shows `idle`), then the `idle` clip, then a clip made for this screen size (`WxH`), then
//!    the variant-less clip. Clips loop at their own frame rate.
//! 4. The active image (PNG/JPEG), letterboxed.
//! 5. A plain card with the character's name.
//!
//! The caption panel (`captions`) covers the bottom of clips, images and the name card: the
//! name and what to do, what is heard, what is said. The plan is made again on every state
//! change but the captions' own (the wait for the next frame ends at once, so a new clip starts
//! within a frame) and once a second (new uploads, another active image, the end of first boot, a
//! new network address); a change of the captions only draws the panel again.
//!
//! Decoding runs on this thread, never on the async runtime; a small current-thread runtime
//! only waits on the watch channel. The thread ends when the state sender or the engine is gone.

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::captions::{self, Panel, View};
use super::questions;
use super::scale::{Rect, YuvScaler, draw_rgb_bilinear};
use super::screen::Screen;
use super::still;
use super::text::{self, Canvas, Style, Weight};
use super::{AdminUrl, Console, admin_url, short_fingerprint};
use crate::device::KioskState;
use crate::engine::BlobRef;
use crate::engine::Engine;
use crate::engine::live::Status;
use crate::engine::media::clip::{Clip, ClipDecoder};

/// How often the plan is made again without a state change.
const RECHECK: Duration = Duration::from_secs(1);
const CARD_TEXT: u32 = 0xF2F2F2;
const SETUP_BG: u32 = 0x102A43;
const ACCENT: u32 = 0xFFC857;
/// The first-boot password, the only text in this colour on the first-boot screen.
const PASSWORD_TEXT: u32 = 0xFFFFFF;
/// The certificate's fingerprint, the only text in this colour on the setup screens.
const FINGERPRINT_TEXT: u32 = 0x9AD1FF;

/// Where the setup screens' address comes from: asked at each plan that shows one.
type AdminSource = Box<dyn FnMut() -> AdminUrl + Send>;

/// Starts the player thread on `screen`; the setup screens show the admin URL for
/// `console.listen` and its fingerprint.
pub fn spawn(
    engine: &Arc<Engine>,
    screen: Box<dyn Screen>,
    console: Console,
    state: watch::Receiver<KioskState>,
) -> std::io::Result<JoinHandle<()>> {
    let listen = console.listen;
    let fingerprint = short_fingerprint(&console.fingerprint);
    spawn_with(
        engine,
        screen,
        Box::new(move || admin_url(listen)),
        fingerprint,
        state,
    )
}

fn spawn_with(
    engine: &Arc<Engine>,
    screen: Box<dyn Screen>,
    admin_url: AdminSource,
    fingerprint: String,
    state: watch::Receiver<KioskState>,
) -> std::io::Result<JoinHandle<()>> {
    let engine = Arc::downgrade(engine);
    std::thread::Builder::new()
        .name("display".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!("display: no runtime for the player: {e}");
                    return;
                }
            };
            Player::new(engine, screen, admin_url, fingerprint, state).run(&rt);
        })
}

/// Something the screen can show.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Source {
    /// The setup screen with this address line ([`AdminUrl::text`]): another address is another
    /// source, so the screen is drawn again when the board's address changes.
    Setup(String),
    /// The first-boot screen with this address line, and the password when `password_shown`.
    /// The password itself is not part of the source: sources are logged.
    FirstBoot {
        url: String,
        password_shown: bool,
    },
    /// The closed screen, with when the kiosk opens again ("" when not known).
    Closed(String),
    /// The question screen, a page of it.
    Questions(questions::Page),
    Clip(String),
    Image(String),
    Card(String),
}

/// What to show for one state: sources in order of preference, and the character's name.
struct Plan {
    sources: Vec<(Source, Option<BlobRef>)>,
    name: String,
}

enum Showing {
    Nothing,
    Clip {
        source: Source,
        decoder: Box<ClipDecoder>,
        scaler: YuvScaler,
    },
    Still {
        source: Source,
        /// The picture without the overlay.
        base: Vec<u32>,
    },
}

impl Showing {
    fn source(&self) -> Option<&Source> {
        match self {
            Showing::Nothing => None,
            Showing::Clip { source, .. } | Showing::Still { source, .. } => Some(source),
        }
    }
}

struct Player {
    engine: Weak<Engine>,
    screen: Box<dyn Screen>,
    size: (u32, u32),
    admin_url: AdminSource,
    /// The certificate's fingerprint in short form.
    fingerprint: String,
    /// The admin URL last worked out, to log a change once.
    last_admin_url: Option<AdminUrl>,
    state: watch::Receiver<KioskState>,
    frame: Vec<u32>,
    showing: Showing,
    bad: HashSet<Source>,
    /// The state the plan was made for.
    planned_for: Option<KioskState>,
    /// What the caption panel shows, and the panel drawn.
    view: View,
    panel: Panel,
    /// `display.caption_lines`: the caption's line box is this part of the height.
    caption_lines: u32,
    present_failed: bool,
}

impl Player {
    fn new(
        engine: Weak<Engine>,
        screen: Box<dyn Screen>,
        admin_url: AdminSource,
        fingerprint: String,
        state: watch::Receiver<KioskState>,
    ) -> Player {
        let size = screen.size();
        let caption_lines = engine
            .upgrade()
            .map_or(20, |e| e.config.display.caption_lines);
        Player {
            engine,
            screen,
            size,
            admin_url,
            fingerprint,
            last_admin_url: None,
            state,
            frame: vec![0; (size.0 * size.1) as usize],
            showing: Showing::Nothing,
            bad: HashSet::new(),
            planned_for: None,
            view: View::default(),
            panel: Panel::default(),
            caption_lines,
            present_failed: false,
        }
    }

    fn run(mut self, rt: &tokio::runtime::Runtime) {
        let mut replan = true;
        let mut planned = Instant::now();
        // When the next clip frame is due; whether a still needs presenting, and when it was.
        let mut due = Instant::now();
        let mut dirty = true;
        let mut still_shown = Instant::now();
        loop {
            if replan || planned.elapsed() >= RECHECK {
                let state = self.state.borrow_and_update().clone();
                let same_plan = self.planned_for.as_ref().is_some_and(|p| {
                    KioskState {
                        captions: state.captions.clone(),
                        ..p.clone()
                    } == state
                });
                if replan && same_plan {
                    // Only the captions moved: the panel, not the plan.
                    if self.caption(&state) {
                        dirty = true;
                    }
                } else {
                    let Some(engine) = self.engine.upgrade() else {
                        return;
                    };
                    let size = self.size;
                    let plan = plan(&engine, &state, size, &mut || self.admin_url_text());
                    let panel_changed = self.name(plan.name.clone(), &state);
                    if self.apply(&engine, plan) || panel_changed {
                        due = Instant::now();
                        dirty = true;
                    }
                    drop(engine);
                    planned = Instant::now();
                    self.planned_for = Some(state);
                }
                replan = false;
            }
            let step = match &mut self.showing {
                Showing::Clip {
                    decoder, scaler, ..
                } => {
                    let frame = &mut self.frame;
                    Some(
                        decoder
                            .next_frame(|pic| scaler.draw(pic, frame))
                            .map(|d| (d, scaler.rect())),
                    )
                }
                Showing::Still { .. } | Showing::Nothing => None,
            };
            let wait = match step {
                Some(Ok((duration, rect))) => {
                    self.draw_overlay(Some(rect));
                    Some(duration)
                }
                Some(Err(e)) => {
                    if let Some(source) = self.showing.source() {
                        tracing::warn!("display: clip {source:?} cannot be played: {e:#}");
                        self.bad.insert(source.clone());
                    }
                    self.showing = Showing::Nothing;
                    replan = true;
                    continue;
                }
                None => None,
            };
            match wait {
                Some(duration) => {
                    // Present the decoded frame when it is due, unless the state changes first.
                    let now = Instant::now();
                    if due + duration < now {
                        // Fell behind by more than a frame (a slow decode): start counting anew.
                        due = now;
                    }
                    match self.wait(rt, due.saturating_duration_since(now)) {
                        Wake::Closed => return,
                        Wake::Changed => {
                            replan = true;
                            continue;
                        }
                        Wake::Timeout => {}
                    }
                    self.present();
                    due += duration;
                }
                None => {
                    if dirty || still_shown.elapsed() >= RECHECK {
                        // Stills are presented again now and then: a console may have drawn
                        // over a real framebuffer.
                        self.compose_still();
                        self.present();
                        dirty = false;
                        still_shown = Instant::now();
                    }
                    let left = RECHECK.saturating_sub(planned.elapsed());
                    match self.wait(rt, left) {
                        Wake::Closed => return,
                        Wake::Changed => replan = true,
                        Wake::Timeout => {}
                    }
                }
            }
        }
    }

    /// The address line of the setup screens, worked out now (the interfaces are listed only
    /// when a setup screen is planned: about once a second, and at state changes).
    fn admin_url_text(&mut self) -> String {
        let url = (self.admin_url)();
        if self.last_admin_url.as_ref() != Some(&url) {
            match &url {
                AdminUrl::Url(u) => tracing::info!("display: the admin URL is {u}"),
                AdminUrl::NoNetwork { port } => {
                    tracing::info!("display: no IPv4 address yet for the admin URL (port {port})")
                }
            }
        }
        let text = url.text();
        self.last_admin_url = Some(url);
        text
    }

    /// The panel for the character `name` and the state; true when it changed.
    fn name(&mut self, name: String, state: &KioskState) -> bool {
        let renamed = name != self.view.name;
        self.view.name = name;
        self.caption(state) || renamed
    }

    /// Draws the caption panel again if what it shows changed; true when it did.
    fn caption(&mut self, state: &KioskState) -> bool {
        if self.view.status == state.status
            && self.view.captions == state.captions
            && self.view.can_choose == state.can_choose
            && self.view.words == state.words
            && !self.panel.px.is_empty()
        {
            return false;
        }
        self.view.status = state.status;
        self.view.captions = state.captions.clone();
        self.view.can_choose = state.can_choose;
        self.view.words = state.words.clone();
        self.panel = captions::draw(&self.view, self.size, self.caption_lines);
        true
    }

    /// Switches to the first usable source of `plan`; true when what is shown changed.
    fn apply(&mut self, engine: &Engine, plan: Plan) -> bool {
        for (source, blob) in plan.sources {
            if self.bad.contains(&source) {
                continue;
            }
            if self.showing.source() == Some(&source) {
                return false;
            }
            match self.load(engine, &source, blob.as_ref()) {
                Ok(showing) => {
                    self.showing = showing;
                    return true;
                }
                Err(e) => {
                    tracing::warn!("display: cannot show {source:?}: {e:#}");
                    self.bad.insert(source);
                }
            }
        }
        self.showing = Showing::Nothing;
        true
    }

    fn load(
        &self,
        engine: &Engine,
        source: &Source,
        blob: Option<&BlobRef>,
    ) -> anyhow::Result<Showing> {
        let (w, h) = self.size;
        let mut base = vec![0u32; (w * h) as usize];
        match (source, blob) {
            (Source::Clip(_), Some(blob)) => {
                let clip = Clip::open(engine.blobs().open_file(blob)?)?;
                let scaler = YuvScaler::new(clip.size(), self.size);
                return Ok(Showing::Clip {
                    source: source.clone(),
                    decoder: Box::new(ClipDecoder::new(clip)?),
                    scaler,
                });
            }
            (Source::Image(_), Some(blob)) => {
                let img = still::decode(&engine.blobs().read(blob)?, self.size)?;
                draw_rgb_bilinear(&img, self.size, &mut base);
            }
            (Source::Card(name), _) => draw_card(&mut base, self.size, name),
            (Source::Closed(when), _) => draw_closed(&mut base, self.size, when),
            (Source::Questions(page), _) => questions::draw(&mut base, self.size, page),
            (Source::Setup(url), _) => draw_setup(&mut base, self.size, url, &self.fingerprint),
            (
                Source::FirstBoot {
                    url,
                    password_shown,
                },
                _,
            ) => {
                let password = engine
                    .first_boot_password()
                    .ok_or_else(|| anyhow::anyhow!("first boot is over"))?;
                let shown = password_shown.then_some(password.as_str());
                draw_first_boot(&mut base, self.size, url, &self.fingerprint, shown);
            }
            _ => anyhow::bail!("no data"),
        }
        Ok(Showing::Still {
            source: source.clone(),
            base,
        })
    }

    fn compose_still(&mut self) {
        match &self.showing {
            Showing::Still { base, source } => {
                self.frame.copy_from_slice(base);
                match source {
                    Source::Setup(_) | Source::FirstBoot { .. } | Source::Questions(_) => {}
                    // The closed line, while it is said.
                    Source::Closed(_) if self.view.captions.said.is_empty() => {}
                    _ => self.draw_overlay(None),
                }
            }
            _ => self.frame.fill(0),
        }
    }

    /// The caption panel over the bottom of the frame. `video` is where clip frames are drawn:
    /// pixels outside it are cleared, as nothing else redraws them (the panel covers its own).
    fn draw_overlay(&mut self, video: Option<Rect>) {
        let (w, h) = self.size;
        if let Some(v) = video {
            // The letterbox: a larger panel before may have been drawn there.
            for row in 0..self.panel.top.min(h) {
                let start = (row * w) as usize;
                let line_px = &mut self.frame[start..start + w as usize];
                if row < v.y || row >= v.y + v.h {
                    line_px.fill(0);
                } else {
                    line_px[..v.x as usize].fill(0);
                    line_px[(v.x + v.w) as usize..].fill(0);
                }
            }
        }
        self.panel.cover(&mut self.frame, w);
    }

    fn present(&mut self) {
        match self.screen.present(&self.frame) {
            Ok(()) => self.present_failed = false,
            Err(e) => {
                if !self.present_failed {
                    tracing::warn!("display: presenting a frame failed: {e}");
                }
                self.present_failed = true;
            }
        }
    }

    fn wait(&mut self, rt: &tokio::runtime::Runtime, timeout: Duration) -> Wake {
        if timeout.is_zero() {
            return match self.state.has_changed() {
                Ok(true) => Wake::Changed,
                Ok(false) => Wake::Timeout,
                Err(_) => Wake::Closed,
            };
        }
        let state = &mut self.state;
        rt.block_on(async {
            match tokio::time::timeout(timeout, state.changed()).await {
                Ok(Ok(())) => Wake::Changed,
                Ok(Err(_)) => Wake::Closed,
                Err(_) => Wake::Timeout,
            }
        })
    }
}

enum Wake {
    Changed,
    Timeout,
    Closed,
}

/// The sources for a state, in order of preference. `admin_url` gives the setup screens'
/// address line; it is called only when one of them is planned.
fn plan(
    engine: &Engine,
    state: &KioskState,
    size: (u32, u32),
    admin_url: &mut dyn FnMut() -> String,
) -> Plan {
    let mut sources = Vec::new();
    if let Some(page) = &state.questions {
        sources.push((Source::Questions(page.clone()), None));
    }
    let character = if state.character_id.is_empty() {
        None
    } else {
        crate::engine::CharacterId::parse(&state.character_id)
            .and_then(|id| engine.character_record(&id))
            .ok()
    };
    let name = character
        .as_ref()
        .map(|c| c.name.clone())
        .unwrap_or_default();
    // The setup screen waits while the last reply is still written for the visitor; the
    // first-boot screen does not: there the button is the administrator's (the 5 s hold).
    if state.status == Status::Idle {
        if engine.in_first_boot() {
            sources.push((
                Source::FirstBoot {
                    url: admin_url(),
                    password_shown: state.password_shown,
                },
                None,
            ));
        } else if !engine.has_admin_password() && state.captions.said.is_empty() {
            sources.push((Source::Setup(admin_url()), None));
        }
    }
    if !state.opening.open {
        sources.push((Source::Closed(state.opening.when.clone()), None));
    }
    if let Some(c) = &character {
        let clips = engine
            .active_clips(&crate::engine::CharacterId::of_record(&c.id))
            .unwrap_or_default();
        let wanted = match state.status {
            Status::Listening => "listening",
            Status::Speaking => "speaking",
            Status::Idle | Status::Processing => "idle",
        };
        let screen_variant = format!("{}x{}", size.0, size.1);
        for variant in [wanted, "idle", screen_variant.as_str(), ""] {
            // The newest clip of a variant, if there are several files.
            if let Some(clip) = clips
                .iter()
                .filter(|c| c.variant == variant)
                .max_by(|a, b| a.added_at.cmp(&b.added_at))
            {
                let source = Source::Clip(clip.blob.id.clone());
                if !sources.iter().any(|(s, _)| *s == source) {
                    sources.push((source, Some(clip.blob.clone())));
                }
            }
        }
        if !c.active_image.is_empty()
            && let Ok(image) = engine.image(&c.id, &c.active_image)
        {
            sources.push((Source::Image(image.blob.id.clone()), Some(image.blob)));
        }
    }
    sources.push((Source::Card(name.clone()), None));
    Plan { sources, name }
}

/// A soft dark colour picked from the name, so each character's card looks its own.
fn card_colour(name: &str) -> u32 {
    let hash = name
        .bytes()
        .fold(2166136261u32, |h, b| (h ^ b as u32).wrapping_mul(16777619));
    let palette = [0x1B3A4B, 0x3B1F4A, 0x1E4D3A, 0x4A2A1F, 0x23395B, 0x4B1D3F];
    palette[(hash % palette.len() as u32) as usize]
}

fn draw_card(px: &mut [u32], (w, h): (u32, u32), name: &str) {
    let mut c = Canvas { px, w, h };
    c.fill(card_colour(name));
    let name = if name.is_empty() { "Docent" } else { name };
    let room = w * 9 / 10;
    let max = (h / 5).max(1);
    let mut lines = vec![name.to_string()];
    let mut size = text::fit_size(name, room, max, Weight::Bold);
    // A long name is wrapped rather than shrunk to nothing.
    if size < max / 2 {
        size = (max / 2).max(1);
        lines = text::wrap(name, room, size, Weight::Bold);
        lines.truncate(3);
    }
    let line_h = text::line_height(size);
    let top = (h as i32 - (line_h * lines.len() as u32) as i32) / 2;
    for (i, line) in lines.iter().enumerate() {
        c.text_centered(
            top + (i as u32 * line_h) as i32,
            line,
            Style::new(size, Weight::Bold, CARD_TEXT),
        );
    }
}

/// The closed screen's background and its second line's colour.
pub const CLOSED_BG: u32 = 0x1B1F2A;
pub const CLOSED_TEXT: u32 = 0xF2F2F2;

/// The line under "Closed": when the kiosk opens again.
pub fn reopens_text(when: &str) -> String {
    if when.is_empty() {
        "Please come back later.".into()
    } else {
        format!("Open again {when}.")
    }
}

/// The closed screen: "Closed" large, and when the kiosk opens again.
fn draw_closed(px: &mut [u32], (w, h): (u32, u32), when: &str) {
    let mut c = Canvas { px, w, h };
    c.fill(CLOSED_BG);
    let (width, body) = setup_metrics(w, h);
    let title = text::fit_size("Closed", width, (h / 4).max(1), Weight::Bold);
    let reopens = reopens_text(when);
    // One line at the body size or larger; else wrapped at the body size (a small screen).
    let line = text::fit_size(&reopens, width, body * 2, Weight::Regular);
    let reopens = if line >= body {
        Block::new(
            vec![reopens],
            Style::new(line, Weight::Regular, CLOSED_TEXT),
            0,
        )
    } else {
        Block::para(
            &reopens,
            width,
            Style::new(body, Weight::Regular, CLOSED_TEXT),
            0,
        )
    };
    let blocks = vec![
        Block::new(
            vec!["Closed".into()],
            Style::new(title, Weight::Bold, ACCENT),
            0,
        )
        .gap(body),
        reopens,
    ];
    draw_blocks(&mut c, blocks);
}

/// A run of centred lines on a setup screen.
struct Block {
    lines: Vec<String>,
    style: Style,
    /// Blank space after the block, in pixels.
    gap: u32,
    /// When the screen is too small, blocks give way from the highest rank down; rank 0 (the
    /// address, the fingerprint, the password) always stays.
    rank: u8,
}

impl Block {
    fn new(lines: Vec<String>, style: Style, rank: u8) -> Block {
        Block {
            lines,
            style,
            gap: 0,
            rank,
        }
    }

    /// A paragraph wrapped at spaces to `width` pixels.
    fn para(text: &str, width: u32, style: Style, rank: u8) -> Block {
        Block::new(
            text::wrap(text, width, style.size, style.weight),
            style,
            rank,
        )
    }

    fn gap(mut self, gap: u32) -> Block {
        self.gap = gap;
        self
    }

    fn height(&self) -> u32 {
        text::line_height(self.style.size) * self.lines.len() as u32 + self.gap
    }
}

/// Height of the blocks that stay whatever the screen (rank 0).
fn essential_height(blocks: &[Block]) -> u32 {
    blocks
        .iter()
        .filter(|b| b.rank == 0)
        .map(Block::height)
        .sum()
}

/// Draws `blocks` centred on the screen, dropping the highest ranks until they fit in 90 % of
/// its height.
fn draw_blocks(c: &mut Canvas, mut blocks: Vec<Block>) {
    let room = c.h * 9 / 10;
    loop {
        let total: u32 = blocks.iter().map(Block::height).sum();
        let worst = blocks.iter().map(|b| b.rank).max().unwrap_or(0);
        if total <= room || worst == 0 {
            break;
        }
        blocks.retain(|b| b.rank != worst);
    }
    let total: u32 = blocks.iter().map(Block::height).sum();
    let mut y = (c.h.saturating_sub(total) / 2) as i32;
    for b in &blocks {
        for l in &b.lines {
            c.text_centered(y, l, b.style);
            y += text::line_height(b.style.size) as i32;
        }
        y += b.gap as i32;
    }
}

/// One line at the largest size up to `max` that fits `width`, if that is at least `min`; else
/// cut into lines at `min` (by `cut`).
fn sized_block(
    line: &str,
    width: u32,
    (min, max): (u32, u32),
    weight: Weight,
    colour: u32,
    cut: fn(&str, u32, u32, Weight) -> Vec<String>,
) -> Block {
    let size = text::fit_size(line, width, max, weight);
    if size >= min {
        Block::new(vec![line.to_string()], Style::new(size, weight, colour), 0)
    } else {
        Block::new(
            cut(line, width, min, weight),
            Style::new(min, weight, colour),
            0,
        )
    }
}

/// The address and fingerprint blocks of both setup screens, the address in `url_colour`.
fn console_blocks((w, h): (u32, u32), url: &str, url_colour: u32, fingerprint: &str) -> Vec<Block> {
    let (width, body) = setup_metrics(w, h);
    // An address is cut anywhere (it has no spaces); the fingerprint at its " ... ".
    let url = sized_block(
        url,
        width,
        (body, body * 2),
        Weight::Bold,
        url_colour,
        cut_chars,
    );
    let fp = sized_block(
        fingerprint,
        width,
        (body, body * 2),
        Weight::Regular,
        FINGERPRINT_TEXT,
        text::wrap,
    );
    vec![
        url.gap(body),
        Block::new(
            vec!["Certificate fingerprint (SHA-256):".into()],
            Style::new(body, Weight::Regular, CARD_TEXT),
            2,
        ),
        fp.gap(body),
    ]
}

/// Cuts `line` by characters into lines at most `width` pixels wide.
fn cut_chars(line: &str, width: u32, size: u32, weight: Weight) -> Vec<String> {
    let mut lines = Vec::new();
    let mut current = String::new();
    for c in line.chars() {
        current.push(c);
        if current.chars().count() > 1 && text::width(&current, size, weight) > width {
            current.pop();
            lines.push(std::mem::take(&mut current));
            current.push(c);
        }
    }
    if !current.is_empty() {
        lines.push(current);
    }
    lines
}

fn draw_setup(px: &mut [u32], (w, h): (u32, u32), url: &str, fingerprint: &str) {
    let mut c = Canvas { px, w, h };
    let mut blocks = setup_heading(
        &mut c,
        "No administrator password is set. Open this address from a device on the same \
         network to set up the kiosk:",
    );
    blocks.extend(console_blocks((w, h), url, 0xFFFFFF, fingerprint));
    draw_blocks(&mut c, blocks);
}

/// The setup screens' text width and body text size for a `w` x `h` screen (about a
/// twenty-eighth of the height, 16 pixels on 480 lines).
fn setup_metrics(w: u32, h: u32) -> (u32, u32) {
    (w * 9 / 10, (h / 30).max(10))
}

/// The start of both setup screens, on their background: the title, then `explanation`.
fn setup_heading(c: &mut Canvas, explanation: &str) -> Vec<Block> {
    c.fill(SETUP_BG);
    let (width, body) = setup_metrics(c.w, c.h);
    let title = text::fit_size("Kiosk setup", width, body * 2, Weight::Bold);
    vec![
        Block::new(
            vec!["Kiosk setup".into()],
            Style::new(title, Weight::Bold, ACCENT),
            3,
        )
        .gap(title / 2),
        Block::para(
            explanation,
            width,
            Style::new(body, Weight::Regular, CARD_TEXT),
            4,
        )
        .gap(body),
    ]
}

/// The first-boot screen: where to go, the certificate's fingerprint, and either how to show
/// the password (hold the button 5 s) or the password itself, as large as the width allows (a
/// 16-character password is set at 32 pixels or larger from 640 pixels wide up). The
/// explanation, then the title, then the labels give way on a small screen; a password too long
/// for one line is cut into several.
fn draw_first_boot(
    px: &mut [u32],
    (w, h): (u32, u32),
    url: &str,
    fingerprint: &str,
    password: Option<&str>,
) {
    let mut c = Canvas { px, w, h };
    let mut blocks = setup_heading(
        &mut c,
        "Open this address from a device on the same network; the browser's certificate \
         warning must show this fingerprint.",
    );
    let (width, body) = setup_metrics(w, h);
    let label = Style::new(body, Weight::Regular, CARD_TEXT);
    blocks.extend(console_blocks((w, h), url, ACCENT, fingerprint));
    let Some(password) = password else {
        blocks.push(Block::para(
            "Hold the button for 5 seconds to show the administrator password.",
            width,
            label,
            1,
        ));
        draw_blocks(&mut c, blocks);
        return;
    };
    blocks.push(Block::new(vec!["Administrator password".into()], label, 2));
    // As large as one line across allows, at most an eighth of the height; a long password
    // rather takes several lines than shrinks below twice the body text, unless they do not
    // fit on the screen.
    let room = h * 9 / 10;
    let others = essential_height(&blocks);
    let pw_max = (h / 6).max(1);
    let mut size =
        text::fit_size(password, width, pw_max, Weight::Bold).max((body * 2).min(pw_max));
    // Cut by characters, not at spaces: every character of a password counts.
    let pw_lines = loop {
        let lines = cut_chars(password, width, size, Weight::Bold);
        if size == 1 || others + text::line_height(size) * lines.len() as u32 <= room {
            break lines;
        }
        size -= 1;
    };
    blocks
        .push(Block::new(pw_lines, Style::new(size, Weight::Bold, PASSWORD_TEXT), 0).gap(body / 2));
    blocks.push(Block::para("Shown for 10 minutes.", width, label, 4));
    draw_blocks(&mut c, blocks);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::display::text::{bbox, drawn_line};

    const FP: &str = "3F:A1:09:7C:D2:44 ... 0B:9E:61:C8:27:F5";

    #[test]
    fn cards_and_setup_screens_draw_text() {
        for (w, h) in [(320, 240), (480, 320), (800, 480), (1280, 720)] {
            let mut px = vec![0u32; (w * h) as usize];
            draw_card(
                &mut px,
                (w, h),
                "Ada Lovelace, the first programmer of all time",
            );
            let bg = px[0];
            assert!(px.contains(&CARD_TEXT), "{w}x{h}: name drawn");
            assert!(px.contains(&bg));
            draw_setup(&mut px, (w, h), "http://192.168.1.20:8080/admin", FP);
            assert!(px.contains(&0xFFFFFF), "{w}x{h}: url drawn");
            assert!(px.contains(&FINGERPRINT_TEXT), "{w}x{h}: fingerprint drawn");
        }
    }

    #[test]
    fn the_closed_screen_says_when_the_kiosk_opens_again() {
        // A small screen: the line is inside the screen.
        let (w, h) = (320, 240);
        let mut px = vec![0u32; (w * h) as usize];
        draw_closed(&mut px, (w, h), "on Tuesday at 09:00");
        let (x0, _, x1, _) = bbox(&px, w, CLOSED_TEXT).expect("the line drawn");
        assert!(x0 > 0 && x1 < w - 1, "inside the screen: {x0}..{x1}");
        for (w, h) in [(480, 320), (800, 480), (1920, 1080)] {
            let mut px = vec![0u32; (w * h) as usize];
            draw_closed(&mut px, (w, h), "on Tuesday at 09:00");
            assert_eq!(px[0], CLOSED_BG, "{w}x{h}: background");
            let title = drawn_line(&px, (w, h), "Closed", ACCENT)
                .unwrap_or_else(|| panic!("{w}x{h}: \"Closed\" drawn"));
            let line = drawn_line(&px, (w, h), "Open again on Tuesday at 09:00.", CLOSED_TEXT)
                .unwrap_or_else(|| panic!("{w}x{h}: when it opens drawn"));
            assert!(title > line, "{w}x{h}: the title is the larger");
            draw_closed(&mut px, (w, h), "");
            drawn_line(&px, (w, h), "Please come back later.", CLOSED_TEXT)
                .unwrap_or_else(|| panic!("{w}x{h}: no opening known"));
        }
    }

    #[test]
    fn first_boot_screen_shows_the_password_large_and_whole() {
        let pw = "Qx7RmT2vLp9KwZ3a";
        let url = "http://192.168.1.20:8080/";
        for (w, h, min_size) in [
            (640, 480, 32),
            (800, 480, 40),
            (1024, 600, 56),
            (1280, 720, 72),
            (1920, 1080, 104),
            (480, 320, 24),
            (320, 240, 16),
        ] {
            let mut px = vec![0u32; (w * h) as usize];
            // Before the hold: the address, the fingerprint and the hint; no password.
            draw_first_boot(&mut px, (w, h), url, FP, None);
            assert_eq!(px[0], SETUP_BG, "{w}x{h}: background");
            assert!(px.contains(&ACCENT), "{w}x{h}: address drawn");
            assert!(px.contains(&FINGERPRINT_TEXT), "{w}x{h}: fingerprint drawn");
            assert!(!px.contains(&PASSWORD_TEXT), "{w}x{h}: no password");
            let hidden = px.clone();
            draw_first_boot(&mut px, (w, h), url, FP, Some(pw));
            assert_ne!(px, hidden, "{w}x{h}");
            assert!(px.contains(&FINGERPRINT_TEXT), "{w}x{h}: fingerprint drawn");
            if w >= 800 {
                drawn_line(&px, (w, h), FP, FINGERPRINT_TEXT)
                    .unwrap_or_else(|| panic!("{w}x{h}: the fingerprint is one line"));
            }
            let size = drawn_line(&px, (w, h), pw, PASSWORD_TEXT)
                .unwrap_or_else(|| panic!("{w}x{h}: the password is not drawn as one line"));
            assert!(size >= min_size, "{w}x{h}: set at {size} pixels");
        }
    }

    /// Waits (at most 5 s) for a frame after `*seen` whose pixels are `want`.
    fn frame_of(screen: &super::super::MemoryScreen, seen: &mut u64, want: &[u32], what: &str) {
        let end = Instant::now() + Duration::from_secs(5);
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let f = screen
                .wait_for_frame(*seen, left.max(Duration::from_millis(1)))
                .unwrap_or_else(|| panic!("no frame showing {what} within 5 s"));
            *seen = f.count;
            if f.pixels == want {
                return;
            }
        }
    }

    #[test]
    fn the_setup_screen_is_drawn_again_when_the_board_gets_an_address() {
        use super::super::MemoryScreen;
        use std::sync::Mutex;
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::open(crate::config::Config {
            data_dir: dir.path().to_path_buf(),
            ..Default::default()
        })
        .unwrap();
        assert!(!engine.has_admin_password(), "setup mode");
        let (w, h) = (320, 240);
        let setup = |url: &AdminUrl| {
            let mut px = vec![0u32; (w * h) as usize];
            draw_setup(&mut px, (w, h), &url.text(), FP);
            px
        };
        let url = Arc::new(Mutex::new(AdminUrl::NoNetwork { port: 8080 }));
        let shown = url.clone();
        let screen = Arc::new(MemoryScreen::new(w, h));
        let (tx, rx) = watch::channel(KioskState::idle());
        let player = spawn_with(
            &engine,
            Box::new(screen.clone()),
            Box::new(move || shown.lock().unwrap().clone()),
            FP.into(),
            rx,
        )
        .unwrap();
        let mut seen = 0;
        // No address yet: the screen says so, with the port.
        let waiting = setup(&AdminUrl::NoNetwork { port: 8080 });
        assert_ne!(
            waiting,
            setup(&AdminUrl::Url("http://0.0.0.0:8080/".into()))
        );
        frame_of(&screen, &mut seen, &waiting, "the wait for the network");
        // DHCP answers: the new address within about a second, with no state change.
        let first = AdminUrl::Url("http://192.168.1.20:8080/".into());
        *url.lock().unwrap() = first.clone();
        let asked = Instant::now();
        frame_of(&screen, &mut seen, &setup(&first), "the first address");
        assert!(asked.elapsed() < Duration::from_millis(2500));
        // Another address (a new lease, another network): that one.
        let second = AdminUrl::Url("http://10.1.2.3:8080/".into());
        *url.lock().unwrap() = second.clone();
        frame_of(&screen, &mut seen, &setup(&second), "the second address");
        drop(tx);
        player.join().unwrap();
        engine.knowledge.stop();
    }

    #[test]
    fn a_long_first_boot_password_is_cut_into_lines_not_lost() {
        let pw: String = ('a'..='z').cycle().take(70).collect();
        let (w, h) = (640, 480);
        let mut px = vec![0u32; (w * h) as usize];
        draw_first_boot(&mut px, (w, h), "http://10.0.0.2:8080/", FP, Some(&pw));
        let (x0, _, x1, _) = bbox(&px, w, PASSWORD_TEXT).expect("password drawn");
        assert!(x0 > 0 && x1 < w, "inside the screen");
        let rows = (0..h)
            .filter(|y| (0..w).any(|x| px[(y * w + x) as usize] == PASSWORD_TEXT))
            .count();
        // Several lines set at 32 pixels (about 23 lit rows each), not one line of tiny ones.
        assert!(rows >= 3 * 23, "several large lines ({rows} rows)");
    }
}
