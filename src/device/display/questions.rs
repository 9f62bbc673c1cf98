//! The question screen: for a visitor who cannot (or will not) speak, the character's questions
//! that staff put on the screen, a page at a time, chosen by touch or with the three buttons.
//!
//! One layout, in fractions of the screen, serves both sides: the display draws it and the
//! kiosk loop maps a touch through it (`hit`), so what is touched is what was drawn whatever the
//! screen's size. From the top: the title band, `ROWS` question rows, the bar of "Previous",
//! "Close" and "Next". Every target is a whole row or a third of the bar: at least a ninth of
//! the height, far above the 9 mm a finger needs on a kiosk's screen.

use super::text::{self, Canvas, Style, Weight};

/// Questions on one page.
pub const ROWS: usize = 4;
const TITLE_END: f32 = 0.16;
const BAR_START: f32 = 0.82;

pub const BG: u32 = 0x102A43;
pub const TITLE_TEXT: u32 = 0xFFC857;
pub const QUESTION_TEXT: u32 = 0xFFFFFF;
pub const ROW_BG: u32 = 0x1B3B5C;
/// The row the buttons point at.
pub const SELECTED_BG: u32 = 0x2F6690;
pub const BAR_TEXT: u32 = 0xE8EEF4;
pub const BAR_BG: u32 = 0x0B1E30;

/// What the question screen shows: a page of questions (or of languages) and the one the
/// buttons point at, with the words of its title and bar in the visit's language.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Page {
    pub title: String,
    /// The rows of this page, in staff's order.
    pub rows: Vec<String>,
    pub page: usize,
    pub pages: usize,
    pub selected: usize,
    /// "Previous", "Close", "Next".
    pub bar: [String; 3],
}

/// Where a touch landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hit {
    Row(usize),
    Previous,
    Close,
    Next,
    /// The title, or between targets.
    Nothing,
}

/// What a touch at (`x`, `y`), fractions of the picture from its top-left corner, chose.
pub fn hit(x: f32, y: f32, rows: usize) -> Hit {
    if y >= BAR_START {
        return match (x * 3.0) as usize {
            0 => Hit::Previous,
            1 => Hit::Close,
            _ => Hit::Next,
        };
    }
    if y < TITLE_END {
        return Hit::Nothing;
    }
    let row = ((y - TITLE_END) / row_height()) as usize;
    if row < rows.min(ROWS) {
        Hit::Row(row)
    } else {
        Hit::Nothing
    }
}

fn row_height() -> f32 {
    (BAR_START - TITLE_END) / ROWS as f32
}

/// The vertical middle of row `row`, as a fraction of the height (where a test touches).
pub fn row_centre(row: usize) -> f32 {
    TITLE_END + row_height() * (row as f32 + 0.5)
}

/// Draws `page` on a `w` x `h` screen.
pub fn draw(px: &mut [u32], (w, h): (u32, u32), page: &Page) {
    let mut c = Canvas { px, w, h };
    c.fill(BG);
    let at = |f: f32| (f * h as f32) as u32;
    let margin = w / 30;
    let room = w - 2 * margin;
    let title = &page.title;
    let title_size = text::fit_size(title, room, at(TITLE_END) * 5 / 10, Weight::Bold);
    let title_y = (at(TITLE_END) - text::line_height(title_size)) / 2;
    c.text(
        margin as i32,
        title_y as i32,
        title,
        Style::new(title_size, Weight::Bold, TITLE_TEXT),
    );
    let row_h = at(TITLE_END + row_height()) - at(TITLE_END);
    // Two lines per row at most, the same size on every row.
    let size = (row_h * 32 / 100).max(8);
    for (i, q) in page.rows.iter().enumerate().take(ROWS) {
        let top = at(TITLE_END) + i as u32 * row_h;
        let bg = if i == page.selected {
            SELECTED_BG
        } else {
            ROW_BG
        };
        c.fill_rect(
            (margin / 2) as i32,
            (top + row_h / 20) as i32,
            w - margin,
            row_h - row_h / 10,
            bg,
        );
        // The row pointed at is told by a mark too, not by its colour alone.
        let q = if i == page.selected {
            format!("› {q}")
        } else {
            q.clone()
        };
        let mut lines = text::wrap(&q, room, size, Weight::Regular);
        if lines.len() > 2 {
            lines.truncate(2);
            lines[1] = text::ellipsize(&format!("{}…", lines[1]), room, size, Weight::Regular);
        }
        let line_h = text::line_height(size);
        let y0 = top + (row_h - line_h * lines.len() as u32) / 2;
        for (j, l) in lines.iter().enumerate() {
            c.text(
                margin as i32,
                (y0 + j as u32 * line_h) as i32,
                l,
                Style::new(size, Weight::Regular, QUESTION_TEXT),
            );
        }
    }
    let bar = at(BAR_START);
    c.fill_rect(0, bar as i32, w, h - bar, BAR_BG);
    let bar_size = ((h - bar) * 35 / 100).max(8);
    for (i, label) in page.bar.iter().enumerate() {
        let third = w / 3;
        let lw = text::width(label, bar_size, Weight::Bold);
        let x = i as u32 * third + third.saturating_sub(lw) / 2;
        let y = bar + (h - bar - text::line_height(bar_size)) / 2;
        c.text(
            x as i32,
            y as i32,
            label,
            Style::new(bar_size, Weight::Bold, BAR_TEXT),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::display::text::contrast;

    #[test]
    fn a_touch_lands_on_what_is_drawn_there() {
        assert_eq!(hit(0.5, 0.05, 4), Hit::Nothing);
        for row in 0..ROWS {
            assert_eq!(hit(0.5, row_centre(row), ROWS), Hit::Row(row));
        }
        assert_eq!(
            hit(0.5, row_centre(3), 2),
            Hit::Nothing,
            "no question there"
        );
        assert_eq!(hit(0.1, 0.9, 4), Hit::Previous);
        assert_eq!(hit(0.5, 0.9, 4), Hit::Close);
        assert_eq!(hit(0.9, 0.99, 4), Hit::Next);
    }

    #[test]
    fn every_text_reads_against_its_background() {
        for (fg, bg) in [
            (TITLE_TEXT, BG),
            (QUESTION_TEXT, ROW_BG),
            (QUESTION_TEXT, SELECTED_BG),
            (BAR_TEXT, BAR_BG),
        ] {
            assert!(contrast(fg, bg) >= 4.5, "{fg:06x} on {bg:06x}");
        }
    }
}
