//! The caption panel: the band at the bottom of the screen that writes what the kiosk hears and
//! says, for a visitor who cannot hear it (or cannot hear it over the hall).
//!
//! It is opaque and dark whatever plays behind it, so every line keeps its contrast (white on
//! the panel is 18:1, the accent 12:1; WCAG AA asks 4.5:1) over any clip; it covers at most
//! `MAX_SHARE` of the height from the bottom, below a character's face. Each line box is
//! `1/caption_lines` of the screen's height (a twentieth by default: 24 pixels on 480 lines, 54 on
//! 1080). The panel is drawn once per change into its own pixels and copied under every frame.

use super::text::{self, Canvas, Style, Weight};
use crate::device::Captions;
use crate::engine::language::{Phrase, Words};
use crate::engine::live::Status;

pub const PANEL_BG: u32 = 0x0E1116;
/// The reply being said, and the last reply after it.
pub const SAID_TEXT: u32 = 0xFFFFFF;
/// What the kiosk heard the visitor ask.
pub const HEARD_TEXT: u32 = 0x9AD1FF;
/// The state line: "Listening", "Thinking", what to do.
pub const STATE_TEXT: u32 = 0xFFC857;
pub const NAME_TEXT: u32 = 0xF2F2F2;
/// The microphone's level meter: its empty part, and the part the level lights (its own
/// colour, so the state line's text is told apart from it).
pub const METER_TRACK: u32 = 0x3A4350;
pub const METER_LIT: u32 = 0x7BD389;

/// The largest part of the screen's height the panel takes.
const MAX_SHARE: f32 = 0.45;
/// Lines of the question at most (the rest is cut with an ellipsis).
const HEARD_LINES: usize = 2;

/// What the panel shows: the kiosk's state, the character's name and the captions.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct View {
    pub status: Status,
    pub name: String,
    pub captions: Captions,
    /// The visitor can choose a question on the screen instead of speaking.
    pub can_choose: bool,
    /// The kiosk's lines ("Listening…") in the visit's language.
    pub words: std::sync::Arc<Words>,
}

/// One line of the panel.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub text: String,
    pub style: Style,
}

/// The panel, drawn: its top row on the screen and its pixels (`w` by `h - top`).
#[derive(Debug, Clone, Default)]
pub struct Panel {
    pub top: u32,
    pub px: Vec<u32>,
    pub lines: Vec<Line>,
}

/// The line box and the text size for a screen `h` pixels high with `lines` lines to its
/// height (clamped to 8-40).
pub fn metrics(h: u32, lines: u32) -> (u32, u32) {
    let line = (h / lines.clamp(8, 40)).max(10);
    let mut size = line;
    while size > 6 && text::line_height(size) > line {
        size -= 1;
    }
    (line, size)
}

/// The panel's lines for `view` on a screen `w` wide, at most `max` of them.
pub fn lines(view: &View, w: u32, size: u32, max: usize) -> Vec<Line> {
    let room = w - 2 * margin(size);
    let style = |weight, colour| Style::new(size, weight, colour);
    let wrap = |t: &str, weight| text::wrap(t, room, size, weight);
    let say = |p: Phrase| view.words.get(p).to_string();
    let heard = || -> Vec<Line> {
        let c = &view.captions;
        if c.heard.is_empty() {
            return Vec::new();
        }
        let mut l = wrap(
            &format!("{} {}", say(Phrase::YouAsked), c.heard),
            Weight::Regular,
        );
        if l.len() > HEARD_LINES {
            l.truncate(HEARD_LINES);
            let last = format!("{}…", l[HEARD_LINES - 1]);
            l[HEARD_LINES - 1] = text::ellipsize(&last, room, size, Weight::Regular);
        }
        l.into_iter()
            .map(|text| Line {
                text,
                style: style(Weight::Regular, HEARD_TEXT),
            })
            .collect()
    };
    let state = |p: Phrase| Line {
        text: say(p),
        style: style(Weight::Bold, STATE_TEXT),
    };
    // The reply's lines in the room left: the first ones while it is said (the sentence being
    // spoken), the last ones after (the end of the answer, where the visitor's eyes are).
    let reply = |t: &str, room_lines: usize, tail: bool| -> Vec<Line> {
        let mut l = wrap(t, Weight::Regular);
        if l.len() > room_lines {
            if tail {
                l.drain(..l.len() - room_lines);
                l[0] = format!("…{}", l[0]);
            } else {
                l.truncate(room_lines);
                let last = format!("{}…", l[room_lines - 1]);
                l[room_lines - 1] = text::ellipsize(&last, w, size, Weight::Regular);
            }
        }
        l.into_iter()
            .map(|text| Line {
                text,
                style: style(Weight::Regular, SAID_TEXT),
            })
            .collect()
    };
    let c = &view.captions;
    let mut out = Vec::new();
    match view.status {
        Status::Listening => out.push(state(Phrase::Listening)),
        Status::Processing => {
            out.extend(heard());
            out.push(state(Phrase::Thinking));
        }
        Status::Speaking => {
            out.extend(heard());
            let room_lines = max.saturating_sub(out.len()).max(1);
            match c.said.last() {
                Some(sentence) => out.extend(reply(sentence, room_lines, false)),
                None => out.push(state(Phrase::Speaking)),
            }
        }
        Status::Idle if !c.said.is_empty() => {
            out.extend(heard());
            let room_lines = max.saturating_sub(out.len() + 1).max(1);
            out.extend(reply(&c.said.join(" "), room_lines, true));
            out.push(state(if view.can_choose {
                Phrase::HoldOrTouchToAskMore
            } else {
                Phrase::HoldToAskMore
            }));
        }
        Status::Idle => {
            if !view.name.is_empty() {
                out.push(Line {
                    text: text::ellipsize(&view.name, room, size, Weight::Bold),
                    style: style(Weight::Bold, NAME_TEXT),
                });
            }
            out.push(state(Phrase::HoldToTalk));
            if view.can_choose {
                out.push(state(Phrase::TouchToChoose));
            }
        }
    }
    out.truncate(max);
    out
}

/// The panel's left margin for text of `size`.
pub fn margin(size: u32) -> u32 {
    (size * 2 / 3).max(4)
}

/// Draws the panel for `view` on a `w` x `h` screen.
pub fn draw(view: &View, (w, h): (u32, u32), caption_lines: u32) -> Panel {
    let (line, size) = metrics(h, caption_lines);
    let pad = line / 3;
    let max = ((h as f32 * MAX_SHARE) as u32).saturating_sub(2 * pad) / line;
    let lines = lines(view, w, size, max.max(1) as usize);
    let panel_h = (line * lines.len() as u32 + 2 * pad).min(h);
    let top = h - panel_h;
    let mut px = vec![PANEL_BG; (w * panel_h) as usize];
    let mut c = Canvas {
        px: &mut px,
        w,
        h: panel_h,
    };
    let x = margin(size) as i32;
    for (i, l) in lines.iter().enumerate() {
        let y = (pad + i as u32 * line) as i32;
        c.text(x, y, &l.text, l.style);
        if view.status == Status::Listening && i == 0 {
            meter(&mut c, &l.text, l.style, y, line, view.captions.level);
        }
    }
    Panel { top, px, lines }
}

/// The level meter after the "Listening" line: a bar whose lit part follows the microphone.
fn meter(c: &mut Canvas, after: &str, style: Style, y: i32, line: u32, level: u8) {
    let x = margin(style.size) * 2 + text::width(after, style.size, style.weight);
    let width = (c.w.saturating_sub(x + margin(style.size))).min(c.w / 3);
    let height = (line / 3).max(4);
    let top = y + ((line - height) / 2) as i32;
    c.fill_rect(x as i32, top, width, height, METER_TRACK);
    let lit = width * level.min(100) as u32 / 100;
    c.fill_rect(x as i32, top, lit, height, METER_LIT);
}

impl Panel {
    /// Copies the panel over the bottom of `frame` (`w` wide).
    pub fn cover(&self, frame: &mut [u32], w: u32) {
        let start = (self.top * w) as usize;
        let end = (start + self.px.len()).min(frame.len());
        frame[start..end].copy_from_slice(&self.px[..end - start]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::display::text::contrast;

    #[test]
    fn every_colour_of_the_panel_reads_against_it() {
        for c in [SAID_TEXT, HEARD_TEXT, STATE_TEXT, NAME_TEXT] {
            assert!(contrast(c, PANEL_BG) >= 7.0, "{c:06x}");
        }
        // A part of the interface, not text: 3:1 (WCAG 1.4.11).
        assert!(contrast(METER_LIT, METER_TRACK) >= 3.0 || contrast(METER_LIT, PANEL_BG) >= 3.0);
    }

    #[test]
    fn a_line_is_a_twentieth_of_the_height() {
        for h in [480, 720, 1080] {
            let (line, size) = metrics(h, 20);
            assert_eq!(line, h / 20);
            assert!(text::line_height(size) <= line && text::line_height(size + 1) > line - 2);
        }
    }

    #[test]
    fn a_long_answer_keeps_its_end_after_it_is_said() {
        let long = "This sentence is long enough to take several lines. ".repeat(12);
        let view = View {
            status: Status::Idle,
            name: "Ada".into(),
            captions: Captions {
                level: 0,
                heard: "who are you".into(),
                said: vec![long.trim().to_string()],
            },
            can_choose: false,
            words: Default::default(),
        };
        let panel = draw(&view, (800, 480), 20);
        assert!(panel.top >= 480 - (480.0 * MAX_SHARE) as u32);
        let texts: Vec<&str> = panel.lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts[0], "You asked: who are you");
        assert!(texts[1].starts_with('…'), "{texts:?}");
        assert_eq!(*texts.last().unwrap(), "Hold the button to ask more");
        let said = &texts[texts.len() - 2];
        assert!(said.ends_with("several lines."), "{said}");
    }
}
