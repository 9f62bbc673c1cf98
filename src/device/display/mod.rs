//! Idle clips and text drawn straight to the display.

use std::sync::Mutex;

/// An in-memory framebuffer (XRGB8888), the simulated display.
#[derive(Debug)]
pub struct MemoryScreen {
    pub width: u32,
    pub height: u32,
    pub pixels: Mutex<Vec<u32>>,
}

impl MemoryScreen {
    pub fn new(width: u32, height: u32) -> MemoryScreen {
        MemoryScreen {
            width,
            height,
            pixels: Mutex::new(vec![0; (width * height) as usize]),
        }
    }
}
