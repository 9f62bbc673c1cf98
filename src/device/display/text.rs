//! Drawing on a frame: filled and darkened rectangles, and text in an embedded 8x8 bitmap font
//! (`font8x8`, MIT licensed, glyphs from a public-domain font; Basic Latin, Latin-1, Greek, box
//! drawing) scaled by whole numbers, with a shadow so it reads over video.

use font8x8::UnicodeFonts;

use super::scale::Rect;

/// A frame being drawn: `w * h` XRGB8888 pixels.
pub struct Canvas<'a> {
    pub px: &'a mut [u32],
    pub w: u32,
    pub h: u32,
}

/// Width and height of a glyph cell before scaling.
pub const GLYPH: u32 = 8;

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

    /// Draws one line of text with its top-left corner at (x, y), each font pixel `scale`
    /// screen pixels wide.
    pub fn text(&mut self, x: i32, y: i32, text: &str, scale: u32, color: u32) {
        let s = scale.max(1) as i32;
        for (i, c) in text.chars().enumerate() {
            let g = glyph(c);
            let gx = x + i as i32 * GLYPH as i32 * s;
            for (row, bits) in g.iter().enumerate() {
                let mut col = 0;
                while col < 8 {
                    if bits & (1 << col) == 0 {
                        col += 1;
                        continue;
                    }
                    // A run of set pixels becomes one rectangle.
                    let start = col;
                    while col < 8 && bits & (1 << col) != 0 {
                        col += 1;
                    }
                    self.fill_rect(
                        gx + start * s,
                        y + row as i32 * s,
                        ((col - start) * s) as u32,
                        s as u32,
                        color,
                    );
                }
            }
        }
    }

    /// Text with a dark shadow one font pixel down and right, for legibility over pictures.
    pub fn text_shadowed(&mut self, x: i32, y: i32, text: &str, scale: u32, color: u32) {
        let d = (scale / 2).max(1) as i32;
        self.text(x + d, y + d, text, scale, 0x000000);
        self.text(x, y, text, scale, color);
    }

    /// One line centred horizontally with its top at `y`.
    pub fn text_centered(&mut self, y: i32, text: &str, scale: u32, color: u32) {
        let x = (self.w as i32 - text_width(text, scale) as i32) / 2;
        self.text_shadowed(x, y, text, scale, color);
    }
}

/// The bitmap of a character (rows top to bottom, bit 0 leftmost); `?` when the font lacks it.
pub fn glyph(c: char) -> [u8; 8] {
    font8x8::BASIC_FONTS
        .get(c)
        .or_else(|| font8x8::LATIN_FONTS.get(c))
        .or_else(|| font8x8::GREEK_FONTS.get(c))
        .or_else(|| font8x8::BOX_FONTS.get(c))
        .or_else(|| font8x8::BLOCK_FONTS.get(c))
        .or_else(|| font8x8::BASIC_FONTS.get('?'))
        .unwrap_or([0; 8])
}

/// Width in pixels of one line at `scale`.
pub fn text_width(text: &str, scale: u32) -> u32 {
    text.chars().count() as u32 * GLYPH * scale.max(1)
}

/// The largest scale, at most `max`, at which `text` fits in `width` pixels (at least 1).
pub fn fit_scale(text: &str, width: u32, max: u32) -> u32 {
    let chars = text.chars().count().max(1) as u32;
    (width / (chars * GLYPH)).clamp(1, max.max(1))
}

/// Breaks text into lines of at most `max` characters, at spaces where possible.
pub fn wrap(text: &str, max: usize) -> Vec<String> {
    let max = max.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let mut word: Vec<char> = word.chars().collect();
        // A word longer than a line is cut.
        while word.len() > max {
            if !line.is_empty() {
                lines.push(std::mem::take(&mut line));
            }
            lines.push(word.drain(..max).collect());
        }
        let word: String = word.into_iter().collect();
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > max {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// Cuts a line to `max` characters, ending in `...` when cut.
pub fn ellipsize(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let keep = max.saturating_sub(3);
    text.chars()
        .take(keep)
        .chain("...".chars())
        .take(max)
        .collect()
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

/// The scale at which the pixels of `colour` are exactly `line` drawn centred by the text
/// module (at some height), if they are.
pub fn drawn_line(px: &[u32], (w, h): (u32, u32), line: &str, colour: u32) -> Option<u32> {
    let (_, y0, _, y1) = bbox(px, w, colour)?;
    (1..=h / GLYPH).find(|&scale| {
        let tw = text_width(line, scale);
        if tw > w {
            return false;
        }
        let band = GLYPH * scale;
        let mut want = vec![0u32; (w * band) as usize];
        Canvas {
            px: &mut want,
            w,
            h: band,
        }
        .text(((w - tw) / 2) as i32, 0, line, scale, colour);
        let Some((_, wy0, _, wy1)) = bbox(&want, w, colour) else {
            return false;
        };
        let Some(top) = y0.checked_sub(wy0) else {
            return false;
        };
        wy1 - wy0 == y1 - y0
            && px.iter().enumerate().all(|(i, p)| {
                let (x, y) = (i as u32 % w, i as u32 / w);
                let expected =
                    (top..top + band).contains(&y) && want[((y - top) * w + x) as usize] == colour;
                (*p == colour) == expected
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_draws_inside_its_box() {
        let mut px = vec![0u32; 64 * 16];
        let mut c = Canvas {
            px: &mut px,
            w: 64,
            h: 16,
        };
        c.text(0, 0, "Hi", 2, 0xFFFFFF);
        let lit: Vec<_> = (0..64 * 16).filter(|&i| px[i] != 0).collect();
        assert!(!lit.is_empty());
        // Two glyphs at scale 2: 32 pixels wide, 16 high.
        assert!(lit.iter().all(|&i| i % 64 < 32));
    }

    #[test]
    fn text_is_clipped_not_panicking() {
        let mut px = vec![0u32; 10 * 10];
        let mut c = Canvas {
            px: &mut px,
            w: 10,
            h: 10,
        };
        c.text(-5, -5, "Wide text", 3, 1);
        c.text(8, 8, "x", 5, 1);
        c.text_centered(4, "Very long centred text", 4, 1);
    }

    #[test]
    fn wrapping_and_fitting() {
        assert_eq!(
            wrap("open the address below to set up", 12),
            vec!["open the", "address", "below to set", "up"]
        );
        assert_eq!(wrap("abcdefghij", 4), vec!["abcd", "efgh", "ij"]);
        assert_eq!(fit_scale("abcd", 100, 10), 3);
        assert_eq!(fit_scale("abcd", 10, 10), 1);
        assert_eq!(ellipsize("Docent the guide", 10), "Docent ...");
        assert_eq!(ellipsize("short", 10), "short");
        assert_ne!(glyph('é'), glyph('?'));
        assert_eq!(glyph('\u{10FFFF}'), glyph('?'));
    }
}
