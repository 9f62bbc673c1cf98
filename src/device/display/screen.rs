//! Where frames go: the [`Screen`] trait and the in-memory screen of the simulated display.
//!
//! A frame is always `width * height` XRGB8888 pixels (`0x00RRGGBB`), rows top to bottom without
//! padding; each back end converts to its own layout (pitch, RGB565, ...) in `present`.

use std::io;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A display the player draws on.
pub trait Screen: Send {
    /// Width and height in pixels.
    fn size(&self) -> (u32, u32);
    /// Shows a whole frame (`width * height` XRGB8888 pixels).
    fn present(&mut self, frame: &[u32]) -> io::Result<()>;
}

/// An in-memory framebuffer (XRGB8888), the simulated display. Tests and the snapshot route read
/// it; every `present` bumps a frame counter that [`MemoryScreen::wait_for_frame`] waits on.
#[derive(Debug)]
pub struct MemoryScreen {
    pub width: u32,
    pub height: u32,
    pub pixels: Mutex<Vec<u32>>,
    presented: Mutex<Presented>,
    changed: Condvar,
}

#[derive(Debug, Clone, Copy)]
struct Presented {
    count: u64,
    at: Option<Instant>,
}

/// One presented frame, as [`MemoryScreen::wait_for_frame`] saw it.
#[derive(Debug, Clone)]
pub struct SeenFrame {
    /// How many frames had been presented, this one included.
    pub count: u64,
    /// When it was presented.
    pub at: Instant,
    pub pixels: Vec<u32>,
}

impl MemoryScreen {
    pub fn new(width: u32, height: u32) -> MemoryScreen {
        MemoryScreen {
            width,
            height,
            pixels: Mutex::new(vec![0; (width * height) as usize]),
            presented: Mutex::new(Presented { count: 0, at: None }),
            changed: Condvar::new(),
        }
    }

    /// Copies a frame in (a frame of another size is ignored) and counts it.
    pub fn show(&self, frame: &[u32]) {
        let mut pixels = self.pixels.lock().expect("screen lock");
        if frame.len() != pixels.len() {
            return;
        }
        pixels.copy_from_slice(frame);
        // The counter moves while the pixels are still locked, so a reader that sees count N
        // after locking the pixels sees frame N's pixels or a later frame's.
        let mut p = self.presented.lock().expect("screen lock");
        p.count += 1;
        p.at = Some(Instant::now());
        drop(p);
        drop(pixels);
        self.changed.notify_all();
    }

    /// Frames presented so far.
    pub fn frame_count(&self) -> u64 {
        self.presented.lock().expect("screen lock").count
    }

    /// Waits until a frame after the `after`-th has been presented and returns the newest one,
    /// or `None` after `timeout`.
    pub fn wait_for_frame(&self, after: u64, timeout: Duration) -> Option<SeenFrame> {
        let deadline = Instant::now() + timeout;
        let mut p = self.presented.lock().expect("screen lock");
        while p.count <= after {
            let left = deadline.checked_duration_since(Instant::now())?;
            p = self.changed.wait_timeout(p, left).expect("screen lock").0;
        }
        drop(p);
        // Pixels first, then the count (the order `show` holds them in).
        let pixels = self.pixels.lock().expect("screen lock");
        let p = *self.presented.lock().expect("screen lock");
        let frame = SeenFrame {
            count: p.count,
            at: p.at.unwrap_or_else(Instant::now),
            pixels: pixels.clone(),
        };
        Some(frame)
    }

    /// The pixel at (x, y), `0x00RRGGBB`.
    pub fn pixel(&self, x: u32, y: u32) -> u32 {
        self.pixels.lock().expect("screen lock")[(y * self.width + x) as usize]
    }

    /// The current picture as a PNG file (8-bit RGB).
    pub fn to_png(&self) -> Vec<u8> {
        let pixels = self.pixels.lock().expect("screen lock").clone();
        encode_png(self.width, self.height, &pixels)
    }
}

/// Copies XRGB8888 pixels into device memory laid out as little-endian 32-bit words (what
/// DRM's `XR24` and 32 bpp fbdev use).
pub fn copy_xrgb_le(src: &[u32], dst: &mut [u8]) {
    if cfg!(target_endian = "little") {
        // SAFETY: any u32 slice is also a valid byte slice of four times the length; on a
        // little-endian CPU its bytes are the little-endian words.
        let bytes = unsafe { std::slice::from_raw_parts(src.as_ptr().cast::<u8>(), src.len() * 4) };
        let n = bytes.len().min(dst.len());
        dst[..n].copy_from_slice(&bytes[..n]);
    } else {
        for (d, p) in dst.chunks_exact_mut(4).zip(src) {
            d.copy_from_slice(&p.to_le_bytes());
        }
    }
}

/// Encodes XRGB8888 pixels as an 8-bit RGB PNG.
pub fn encode_png(width: u32, height: u32, pixels: &[u32]) -> Vec<u8> {
    let mut rgb = Vec::with_capacity(pixels.len() * 3);
    for p in pixels {
        rgb.extend_from_slice(&[(p >> 16) as u8, (p >> 8) as u8, *p as u8]);
    }
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, width, height);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    enc.set_compression(png::Compression::Fast);
    // Writing into a Vec cannot fail, and the sizes match by construction.
    let mut writer = enc.write_header().expect("png header");
    writer.write_image_data(&rgb).expect("png data");
    writer.finish().expect("png end");
    out
}

impl Screen for Arc<MemoryScreen> {
    fn size(&self) -> (u32, u32) {
        (self.width, self.height)
    }

    fn present(&mut self, frame: &[u32]) -> io::Result<()> {
        self.show(frame);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xrgb_words_are_little_endian_bytes() {
        let mut dst = [0u8; 8];
        copy_xrgb_le(&[0x00112233, 0x00AABBCC], &mut dst);
        assert_eq!(dst, [0x33, 0x22, 0x11, 0, 0xCC, 0xBB, 0xAA, 0]);
    }

    #[test]
    fn memory_screen_counts_frames_and_encodes_png() {
        let s = MemoryScreen::new(2, 1);
        assert!(s.wait_for_frame(0, Duration::from_millis(10)).is_none());
        s.show(&[0xFF0000, 0x0000FF]);
        s.show(&[1, 2, 3]); // wrong size: ignored
        let f = s.wait_for_frame(0, Duration::from_secs(1)).unwrap();
        assert_eq!((f.count, f.pixels.clone()), (1, vec![0xFF0000, 0x0000FF]));
        assert_eq!(s.pixel(1, 0), 0x0000FF);
        let png = s.to_png();
        assert!(png.starts_with(b"\x89PNG"));
    }
}
