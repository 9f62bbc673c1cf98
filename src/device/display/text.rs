//! Drawing on a frame: filled and darkened rectangles, and antialiased text set from an outline
//! font (DejaVu Sans, bundled in `fonts/`: Latin, Greek and Cyrillic), rasterised by `fontdue`
//! (pure Rust, no shaping engine, which these scripts do not need) and broken into lines by
//! width. Rasterised glyphs are kept per thread (the player's), so a caption costs blits, not
//! outlines.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::LazyLock;

use fontdue::{Font, FontSettings};

use super::scale::Rect;

static REGULAR: &[u8] = include_bytes!("fonts/DejaVuSans.ttf");
static BOLD: &[u8] = include_bytes!("fonts/DejaVuSans-Bold.ttf");

/// The two faces, parsed once on first use.
static FACES: LazyLock<[Font; 2]> = LazyLock::new(|| {
    let load = |bytes: &'static [u8]| {
        Font::from_bytes(bytes, FontSettings::default()).expect("the bundled font parses")
    };
    [load(REGULAR), load(BOLD)]
});

/// Glyphs kept per thread before the cache starts again (a screen uses a few hundred).
const GLYPH_CACHE: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Weight {
    Regular,
    Bold,
}

impl Weight {
    fn font(self) -> &'static Font {
        &FACES[self as usize]
    }
}

/// How a run of text is set: its size (pixels per em), weight and colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    pub size: u32,
    pub weight: Weight,
    pub colour: u32,
}

impl Style {
    pub fn new(size: u32, weight: Weight, colour: u32) -> Style {
        Style {
            size: size.max(1),
            weight,
            colour,
        }
    }
}

/// One rasterised glyph: coverage rows, and where they sit from the pen on the baseline.
struct Glyph {
    left: i32,
    /// From the baseline up to the top row (positive up).
    top: i32,
    width: usize,
    height: usize,
    coverage: Vec<u8>,
    advance: f32,
}

type GlyphKey = (Weight, char, u32);

thread_local! {
    static GLYPHS: RefCell<HashMap<GlyphKey, Rc<Glyph>>> = RefCell::new(HashMap::new());
}

/// The glyph of `c` (U+FFFD's, else `?`'s, when the font lacks it).
fn glyph(c: char, size: u32, weight: Weight) -> Rc<Glyph> {
    let font = weight.font();
    let c = [c, '\u{FFFD}', '?']
        .into_iter()
        .find(|&c| font.has_glyph(c))
        .unwrap_or('?');
    GLYPHS.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some(g) = cache.get(&(weight, c, size)) {
            return g.clone();
        }
        if cache.len() >= GLYPH_CACHE {
            cache.clear();
        }
        let (m, coverage) = font.rasterize(c, size as f32);
        let g = Rc::new(Glyph {
            left: m.xmin,
            top: m.ymin + m.height as i32,
            width: m.width,
            height: m.height,
            coverage,
            advance: m.advance_width,
        });
        cache.insert((weight, c, size), g.clone());
        g
    })
}

/// Ascent (above the baseline) and the height of a line box at `size`.
fn line_metrics(size: u32, weight: Weight) -> (f32, f32) {
    let m = weight
        .font()
        .horizontal_line_metrics(size as f32)
        .expect("the bundled font has horizontal metrics");
    (m.ascent, m.new_line_size)
}

/// Height in pixels of one line box at `size` (ascent, descent and the font's line gap).
pub fn line_height(size: u32) -> u32 {
    line_metrics(size.max(1), Weight::Regular).1.ceil() as u32
}

/// The pen positions of each character of a line, from 0, and the line's advance.
fn layout(text: &str, size: u32, weight: Weight) -> (Vec<(char, f32)>, f32) {
    let font = weight.font();
    let mut pen = 0.0f32;
    let mut prev: Option<char> = None;
    let mut placed = Vec::with_capacity(text.len());
    for c in text.chars() {
        if let Some(p) = prev {
            pen += font.horizontal_kern(p, c, size as f32).unwrap_or(0.0);
        }
        placed.push((c, pen));
        pen += glyph(c, size, weight).advance;
        prev = Some(c);
    }
    (placed, pen)
}

/// Width in pixels of one line.
pub fn width(text: &str, size: u32, weight: Weight) -> u32 {
    layout(text, size.max(1), weight).1.ceil() as u32
}

/// The largest size, at most `max`, at which `text` fits in `room` pixels (at least 1).
pub fn fit_size(text: &str, room: u32, max: u32, weight: Weight) -> u32 {
    let max = max.max(1);
    let at_max = width(text, max, weight);
    if at_max <= room {
        return max;
    }
    // Width grows about linearly with size: start from the estimate, then step down.
    let mut size = ((max as u64 * room as u64) / at_max.max(1) as u64).clamp(1, max as u64) as u32;
    while size > 1 && width(text, size, weight) > room {
        size -= 1;
    }
    size
}

/// Breaks `text` into lines at most `room` pixels wide, at spaces; a word wider than a line is
/// cut between characters.
pub fn wrap(text: &str, room: u32, size: u32, weight: Weight) -> Vec<String> {
    let fits = |s: &str| width(s, size, weight) <= room;
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let candidate = if line.is_empty() {
            word.to_string()
        } else {
            format!("{line} {word}")
        };
        if fits(&candidate) {
            line = candidate;
            continue;
        }
        if !line.is_empty() {
            lines.push(std::mem::take(&mut line));
        }
        // The word alone: cut it while it is too wide.
        let mut rest: Vec<char> = word.chars().collect();
        while !fits(&rest.iter().collect::<String>()) && rest.len() > 1 {
            let mut n = rest.len() - 1;
            while n > 1 && !fits(&rest[..n].iter().collect::<String>()) {
                n -= 1;
            }
            lines.push(rest.drain(..n).collect());
        }
        line = rest.into_iter().collect();
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// Cuts a line to `room` pixels, ending in an ellipsis when cut.
pub fn ellipsize(text: &str, room: u32, size: u32, weight: Weight) -> String {
    if width(text, size, weight) <= room {
        return text.to_string();
    }
    let chars: Vec<char> = text.chars().collect();
    let mut n = chars.len();
    loop {
        let cut: String = chars[..n].iter().collect::<String>().trim_end().to_string() + "…";
        if n == 0 || width(&cut, size, weight) <= room {
            return cut;
        }
        n -= 1;
    }
}

/// A frame being drawn: `w * h` XRGB8888 pixels.
pub struct Canvas<'a> {
    pub px: &'a mut [u32],
    pub w: u32,
    pub h: u32,
}

impl Canvas<'_> {
    pub fn fill(&mut self, color: u32) {
        self.px.fill(color);
    }

    /// Fills a rectangle (clipped to the canvas).
    pub fn fill_rect(&mut self, x: i32, y: i32, w: u32, h: u32, color: u32) {
        let x0 = x.clamp(0, self.w as i32) as usize;
        let y0 = y.clamp(0, self.h as i32) as usize;
        let x1 = (x + w as i32).clamp(0, self.w as i32) as usize;
        let y1 = (y + h as i32).clamp(0, self.h as i32) as usize;
        for row in y0..y1 {
            let base = row * self.w as usize;
            self.px[base + x0..base + x1].fill(color);
        }
    }

    /// Halves the brightness of a rectangle (a translucent black band under text).
    pub fn darken(&mut self, r: Rect) {
        let x1 = (r.x + r.w).min(self.w) as usize;
        let y1 = (r.y + r.h).min(self.h) as usize;
        for row in r.y as usize..y1 {
            let base = row * self.w as usize;
            for p in &mut self.px[base + r.x as usize..base + x1] {
                *p = (*p >> 1) & 0x7F7F7F;
            }
        }
    }

    /// Draws one line with the top of its line box at `y`, starting at `x`: each pixel blends
    /// the colour over what is there by the glyph's coverage (a fully covered pixel is exactly
    /// the colour).
    pub fn text(&mut self, x: i32, y: i32, text: &str, style: Style) {
        let (ascent, _) = line_metrics(style.size, style.weight);
        let baseline = y + ascent.round() as i32;
        let (placed, _) = layout(text, style.size, style.weight);
        for (c, pen) in placed {
            let g = glyph(c, style.size, style.weight);
            self.blit(
                x + pen.round() as i32 + g.left,
                baseline - g.top,
                &g,
                style.colour,
            );
        }
    }

    fn blit(&mut self, gx: i32, gy: i32, g: &Glyph, colour: u32) {
        for row in 0..g.height {
            let y = gy + row as i32;
            if y < 0 || y >= self.h as i32 {
                continue;
            }
            let base = y as usize * self.w as usize;
            let cov = &g.coverage[row * g.width..(row + 1) * g.width];
            for (col, &a) in cov.iter().enumerate() {
                let x = gx + col as i32;
                if a == 0 || x < 0 || x >= self.w as i32 {
                    continue;
                }
                let p = &mut self.px[base + x as usize];
                *p = blend(*p, colour, a);
            }
        }
    }

    /// Text with a dark shadow down and right (a twelfth of the size), for legibility over
    /// pictures.
    pub fn text_shadowed(&mut self, x: i32, y: i32, text: &str, style: Style) {
        let d = (style.size / 12).max(1) as i32;
        let shadow = Style {
            colour: 0x000000,
            ..style
        };
        self.text(x + d, y + d, text, shadow);
        self.text(x, y, text, style);
    }

    /// One line centred horizontally with its line box's top at `y`.
    pub fn text_centered(&mut self, y: i32, text: &str, style: Style) {
        let x = (self.w as i32 - width(text, style.size, style.weight) as i32) / 2;
        self.text_shadowed(x, y, text, style);
    }
}

/// `over` laid on `under` at coverage `a` (0-255), channel by channel.
fn blend(under: u32, over: u32, a: u8) -> u32 {
    if a == 255 {
        return over;
    }
    let a = a as u32;
    let mix = |shift: u32| {
        let u = (under >> shift) & 0xFF;
        let o = (over >> shift) & 0xFF;
        ((o * a + u * (255 - a) + 127) / 255) << shift
    };
    mix(16) | mix(8) | mix(0)
}

/// Relative luminance of an XRGB colour (WCAG 2).
pub fn luminance(c: u32) -> f64 {
    let channel = |shift: u32| {
        let v = ((c >> shift) & 0xFF) as f64 / 255.0;
        if v <= 0.04045 {
            v / 12.92
        } else {
            ((v + 0.055) / 1.055).powf(2.4)
        }
    };
    0.2126 * channel(16) + 0.7152 * channel(8) + 0.0722 * channel(0)
}

/// WCAG 2 contrast ratio of two colours (1 to 21).
pub fn contrast(a: u32, b: u32) -> f64 {
    let (la, lb) = (luminance(a), luminance(b));
    (la.max(lb) + 0.05) / (la.min(lb) + 0.05)
}

// Reading a frame's text back: what tests use to check what a screen says (the firmware only
// draws).

/// Bounding box (x0, y0, x1, y1), exclusive ends, of the pixels of `colour`.
pub fn bbox(px: &[u32], w: u32, colour: u32) -> Option<(u32, u32, u32, u32)> {
    let mut b: Option<(u32, u32, u32, u32)> = None;
    for (i, _) in px.iter().enumerate().filter(|(_, p)| **p == colour) {
        let (x, y) = (i as u32 % w, i as u32 / w);
        b = Some(match b {
            None => (x, y, x + 1, y + 1),
            Some((x0, y0, x1, y1)) => (x0.min(x), y0.min(y), x1.max(x + 1), y1.max(y + 1)),
        });
    }
    b
}

/// The fully covered pixels of `line` set at `style` with its box's top-left at (0, 0), on a
/// canvas `w` wide: (x, y) of each.
fn solid_pixels(line: &str, style: Style, w: u32, x: i32) -> Vec<(u32, u32)> {
    let h = line_height(style.size) + style.size;
    let mut px = vec![0u32; (w * h) as usize];
    let marker = Style {
        colour: 0xFFFFFF,
        ..style
    };
    Canvas { px: &mut px, w, h }.text(x, 0, line, marker);
    px.iter()
        .enumerate()
        .filter(|(_, p)| **p == 0xFFFFFF)
        .map(|(i, _)| (i as u32 % w, i as u32 / w))
        .collect()
}

/// The size at which the pixels of `colour` are exactly the fully covered pixels of `line`
/// set centred by this module (at some height, either weight), if they are.
pub fn drawn_line(px: &[u32], (w, _h): (u32, u32), line: &str, colour: u32) -> Option<u32> {
    drawn_line_at(px, w, line, colour, None)
}

/// Like [`drawn_line`], for a line set from `x` rather than centred.
pub fn drawn_line_from(px: &[u32], w: u32, x: i32, line: &str, colour: u32) -> Option<u32> {
    drawn_line_at(px, w, line, colour, Some(x))
}

fn drawn_line_at(px: &[u32], w: u32, line: &str, colour: u32, x: Option<i32>) -> Option<u32> {
    let (bx0, by0, bx1, by1) = bbox(px, w, colour)?;
    let ink: Vec<(u32, u32)> = px
        .iter()
        .enumerate()
        .filter(|(_, p)| **p == colour)
        .map(|(i, _)| (i as u32 % w, i as u32 / w))
        .collect();
    // The solid ink's height grows with the size: estimate from a reference size, then try
    // the sizes around it.
    const REFERENCE: u32 = 100;
    [Weight::Regular, Weight::Bold]
        .into_iter()
        .find_map(|weight| {
            let reference = solid_pixels(line, Style::new(REFERENCE, weight, 0), w.max(4096), 0);
            let (ry0, ry1) = reference
                .iter()
                .fold((u32::MAX, 0), |(a, b), &(_, y)| (a.min(y), b.max(y + 1)));
            let estimate =
                ((by1 - by0) as f64 * REFERENCE as f64 / (ry1 - ry0).max(1) as f64).round() as u32;
            let spread = 3 + estimate / 40;
            (estimate.saturating_sub(spread).max(1)..=estimate + spread).find(|&size| {
                let style = Style::new(size, weight, 0);
                let lw = width(line, size, weight);
                let at = x.unwrap_or((w as i32 - lw as i32) / 2);
                let want = solid_pixels(line, style, w, at);
                let Some(&(_, wy0)) = want.iter().min_by_key(|p| p.1) else {
                    return false;
                };
                let (wx0, wx1) = want
                    .iter()
                    .fold((u32::MAX, 0), |(a, b), &(x, _)| (a.min(x), b.max(x + 1)));
                if want.len() != ink.len() || wx0 != bx0 || wx1 != bx1 {
                    return false;
                }
                let Some(top) = by0.checked_sub(wy0) else {
                    return false;
                };
                want.iter()
                    .zip(&ink)
                    .all(|(&(x, y), &(ix, iy))| x == ix && y + top == iy)
            })
        })
}

/// Where the pixels of `colour` are exactly the fully covered pixels of `lines` set from `x` at
/// `style`'s size and weight, one line every `pitch` pixels: the top of the first line's box.
pub fn drawn_lines(
    px: &[u32],
    w: u32,
    x: i32,
    lines: &[String],
    style: Style,
    pitch: u32,
) -> Option<u32> {
    let mut want: Vec<(u32, u32)> = lines
        .iter()
        .enumerate()
        .flat_map(|(i, l)| {
            solid_pixels(l, style, w, x)
                .into_iter()
                .map(move |(px, py)| (px, py + i as u32 * pitch))
        })
        .collect();
    want.sort_by_key(|&(x, y)| (y, x));
    want.dedup();
    let ink: Vec<(u32, u32)> = px
        .iter()
        .enumerate()
        .filter(|(_, p)| **p == style.colour)
        .map(|(i, _)| (i as u32 % w, i as u32 / w))
        .collect();
    let (&(_, wy0), &(_, iy0)) = (want.first()?, ink.first()?);
    let top = iy0.checked_sub(wy0)?;
    (want.len() == ink.len()
        && want
            .iter()
            .zip(&ink)
            .all(|(&(x, y), &(ix, iy))| x == ix && y + top == iy))
    .then_some(top)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canvas(w: u32, h: u32) -> Vec<u32> {
        vec![0u32; (w * h) as usize]
    }

    #[test]
    fn text_draws_antialiased_inside_its_box() {
        let (w, h) = (200, 60);
        let mut px = canvas(w, h);
        let style = Style::new(32, Weight::Regular, 0xFFFFFF);
        Canvas { px: &mut px, w, h }.text(0, 0, "Hi", style);
        let lit: Vec<_> = (0..w * h).filter(|&i| px[i as usize] != 0).collect();
        assert!(!lit.is_empty());
        assert!(
            lit.iter()
                .all(|&i| i % w <= width("Hi", 32, Weight::Regular))
        );
        assert!(lit.iter().all(|&i| i / w < line_height(32)));
        // Edges are blended, not only on and off.
        assert!(px.iter().any(|&p| p != 0 && p != 0xFFFFFF));
    }

    #[test]
    fn text_is_clipped_not_panicking() {
        let mut px = canvas(10, 10);
        let mut c = Canvas {
            px: &mut px,
            w: 10,
            h: 10,
        };
        c.text(-5, -5, "Wide text", Style::new(30, Weight::Bold, 1));
        c.text(8, 8, "x", Style::new(50, Weight::Regular, 1));
        c.text_centered(
            4,
            "Very long centred text",
            Style::new(40, Weight::Regular, 1),
        );
    }

    #[test]
    fn lines_break_by_width_and_sizes_fit() {
        let size = 20;
        let room = width("open the address", size, Weight::Regular);
        let lines = wrap(
            "open the address below to set up",
            room,
            size,
            Weight::Regular,
        );
        assert_eq!(lines, vec!["open the address", "below to set up"]);
        assert!(
            lines
                .iter()
                .all(|l| width(l, size, Weight::Regular) <= room)
        );
        let long = wrap("abcdefghijklmnop", 40, size, Weight::Regular);
        assert!(long.len() > 1 && long.concat() == "abcdefghijklmnop");
        let fit = fit_size("abcd", 100, 200, Weight::Regular);
        assert!(width("abcd", fit, Weight::Regular) <= 100);
        assert!(width("abcd", fit + 1, Weight::Regular) > 100);
        assert_eq!(fit_size("abcd", 10_000, 40, Weight::Regular), 40);
        let cut = ellipsize("Docent the guide of the museum", 120, size, Weight::Regular);
        assert!(cut.ends_with('…') && width(&cut, size, Weight::Regular) <= 120);
        assert_eq!(ellipsize("short", 200, size, Weight::Regular), "short");
    }

    #[test]
    fn latin_greek_and_cyrillic_have_glyphs() {
        let missing = glyph('\u{FFFD}', 20, Weight::Regular).coverage.clone();
        for c in ['é', 'ß', 'ñ', 'Ω', 'λ', 'Ж', 'я', 'ő', '€'] {
            assert_ne!(glyph(c, 20, Weight::Regular).coverage, missing, "{c}");
        }
        assert_eq!(glyph('\u{4E2D}', 20, Weight::Regular).coverage, missing);
    }

    #[test]
    fn a_drawn_line_is_read_back_at_its_size() {
        let (w, h) = (640, 200);
        for (line, size, weight) in [
            ("Closed", 60, Weight::Bold),
            ("Open again on Tuesday at 09:00.", 22, Weight::Regular),
        ] {
            let mut px = canvas(w, h);
            px.fill(0x102030);
            let colour = 0xF2F2F2;
            Canvas { px: &mut px, w, h }.text_centered(40, line, Style::new(size, weight, colour));
            assert_eq!(drawn_line(&px, (w, h), line, colour), Some(size), "{line}");
            assert_eq!(drawn_line(&px, (w, h), "Something else", colour), None);
        }
    }

    #[test]
    fn contrast_follows_wcag() {
        assert!((contrast(0xFFFFFF, 0x000000) - 21.0).abs() < 1e-9);
        assert!((contrast(0x777777, 0xFFFFFF) - 4.48).abs() < 0.01);
    }
}
