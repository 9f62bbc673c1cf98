//! DRM/KMS output through the `drm` crate: the first connected connector, its preferred mode, a
//! CRTC its encoders can drive, and two XRGB8888 dumb buffers mapped once. Each frame is copied
//! into the buffer not on screen and shown with a page flip at the next vertical blank (no
//! tearing); a driver without page flips gets the frame copied into the visible buffer. The CRTC
//! that was there before is restored on drop.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};

use drm::buffer::{Buffer, DrmFourcc};
use drm::control::dumbbuffer::DumbBuffer;
use drm::control::{
    Device as ControlDevice, Event, Mode, ModeTypeFlags, PageFlipFlags, connector, crtc,
    framebuffer,
};

use super::screen::{Screen, copy_xrgb_le};

struct Card(File);

impl AsFd for Card {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl drm::Device for Card {}
impl ControlDevice for Card {}

/// One scan-out buffer, mapped for the life of the screen.
struct Scanout {
    buffer: Option<DumbBuffer>,
    fb: framebuffer::Handle,
    map: *mut u8,
    len: usize,
    pitch: usize,
}

/// A DRM/KMS screen.
pub struct DrmScreen {
    card: Card,
    crtc: crtc::Handle,
    connector: connector::Handle,
    saved: Option<crtc::Info>,
    buffers: Vec<Scanout>,
    /// Index of the buffer on screen.
    front: usize,
    flip_pending: bool,
    flips: bool,
    width: u32,
    height: u32,
    name: String,
}

// The mappings are owned by this value alone and only touched through `&mut self`.
unsafe impl Send for DrmScreen {}

/// The DRM cards to try, in order: `/dev/dri/card0` ... `card7` that exist.
pub fn cards() -> Vec<PathBuf> {
    (0..8)
        .map(|i| PathBuf::from(format!("/dev/dri/card{i}")))
        .filter(|p| p.exists())
        .collect()
}

impl DrmScreen {
    /// Opens `path`, finds a connected output and sets its preferred mode.
    pub fn open(path: &Path) -> io::Result<DrmScreen> {
        let card = Card(OpenOptions::new().read(true).write(true).open(path)?);
        let res = card.resource_handles()?;
        let con = res
            .connectors()
            .iter()
            .filter_map(|&h| card.get_connector(h, true).ok())
            .find(|c| c.state() == connector::State::Connected && !c.modes().is_empty())
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no connected output"))?;
        let mode: Mode = *con
            .modes()
            .iter()
            .find(|m| m.mode_type().contains(ModeTypeFlags::PREFERRED))
            .unwrap_or(&con.modes()[0]);
        // The CRTC already driving the connector, else any its encoders can use.
        let current = con
            .current_encoder()
            .and_then(|e| card.get_encoder(e).ok())
            .and_then(|e| e.crtc());
        let crtc = current
            .or_else(|| {
                con.encoders()
                    .iter()
                    .filter_map(|&e| card.get_encoder(e).ok())
                    .flat_map(|e| res.filter_crtcs(e.possible_crtcs()))
                    .next()
            })
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no CRTC for the output"))?;
        let saved = card.get_crtc(crtc).ok();
        let (w, h) = mode.size();
        let (w, h) = (w as u32, h as u32);
        let mut screen = DrmScreen {
            crtc,
            connector: con.handle(),
            saved,
            buffers: Vec::new(),
            front: 0,
            flip_pending: false,
            flips: true,
            width: w,
            height: h,
            name: format!(
                "drm {} {}-{} {}x{}@{}",
                path.display(),
                con.interface().as_str(),
                con.interface_id(),
                w,
                h,
                mode.vrefresh()
            ),
            card,
        };
        for _ in 0..2 {
            let scanout = screen.scanout()?;
            screen.buffers.push(scanout);
        }
        screen.card.set_crtc(
            crtc,
            Some(screen.buffers[0].fb),
            (0, 0),
            &[screen.connector],
            Some(mode),
        )?;
        Ok(screen)
    }

    fn scanout(&self) -> io::Result<Scanout> {
        let buffer =
            self.card
                .create_dumb_buffer((self.width, self.height), DrmFourcc::Xrgb8888, 32)?;
        let fb = match self.card.add_framebuffer(&buffer, 24, 32) {
            Ok(fb) => fb,
            Err(e) => {
                let _ = self.card.destroy_dumb_buffer(buffer);
                return Err(e);
            }
        };
        let pitch = buffer.pitch() as usize;
        let len = pitch * self.height as usize;
        let info = drm_ffi::mode::dumbbuffer::map(self.card.as_fd(), buffer.handle().into(), 0, 0)?;
        // SAFETY: a shared mapping of the dumb buffer (at least pitch * height bytes), unmapped in
        // Drop before the buffer is destroyed.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                self.card.0.as_raw_fd(),
                info.offset as libc::off_t,
            )
        };
        if map == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            let _ = self.card.destroy_framebuffer(fb);
            let _ = self.card.destroy_dumb_buffer(buffer);
            return Err(e);
        }
        // Start black rather than with whatever the memory held.
        // SAFETY: `map` is `len` writable bytes.
        unsafe { std::ptr::write_bytes(map.cast::<u8>(), 0, len) };
        Ok(Scanout {
            buffer: Some(buffer),
            fb,
            map: map.cast(),
            len,
            pitch,
        })
    }

    /// A description for health and logs.
    pub fn describe(&self) -> &str {
        &self.name
    }

    /// Waits (at most 100 ms) for the page flip in flight to finish.
    fn wait_flip(&mut self) {
        if !self.flip_pending {
            return;
        }
        let mut pfd = libc::pollfd {
            fd: self.card.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut pfd, 1, 100) };
        if ready > 0
            && let Ok(events) = self.card.receive_events()
        {
            for e in events {
                if let Event::PageFlip(_) = e {
                    self.flip_pending = false;
                }
            }
        } else {
            // No event in time: assume it happened (a frame late at worst).
            self.flip_pending = false;
        }
    }

    fn copy_into(&mut self, index: usize, frame: &[u32]) {
        let (w, h) = (self.width as usize, self.height as usize);
        let s = &self.buffers[index];
        // SAFETY: the mapping is `len` = pitch * height bytes, pitch >= width * 4.
        let mem = unsafe { std::slice::from_raw_parts_mut(s.map, s.len) };
        for (y, row) in frame.chunks_exact(w).take(h).enumerate() {
            copy_xrgb_le(row, &mut mem[y * s.pitch..y * s.pitch + w * 4]);
        }
    }
}

impl Screen for DrmScreen {
    fn size(&self) -> (u32, u32) {
        (self.width, self.height)
    }

    fn present(&mut self, frame: &[u32]) -> io::Result<()> {
        if frame.len() != (self.width * self.height) as usize {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "frame size"));
        }
        if !self.flips {
            self.copy_into(self.front, frame);
            return Ok(());
        }
        self.wait_flip();
        let back = 1 - self.front;
        self.copy_into(back, frame);
        match self
            .card
            .page_flip(self.crtc, self.buffers[back].fb, PageFlipFlags::EVENT, None)
        {
            Ok(()) => {
                self.front = back;
                self.flip_pending = true;
            }
            Err(e) => {
                tracing::info!("display: page flips failed ({e}); drawing into the visible buffer");
                self.flips = false;
                self.copy_into(self.front, frame);
            }
        }
        Ok(())
    }
}

impl Drop for DrmScreen {
    fn drop(&mut self) {
        self.wait_flip();
        if let Some(saved) = &self.saved {
            let _ = self.card.set_crtc(
                self.crtc,
                saved.framebuffer(),
                saved.position(),
                &[self.connector],
                saved.mode(),
            );
        }
        for s in &mut self.buffers {
            // SAFETY: the mapping made in `scanout`, not used after this.
            unsafe { libc::munmap(s.map.cast(), s.len) };
            let _ = self.card.destroy_framebuffer(s.fb);
            if let Some(b) = s.buffer.take() {
                let _ = self.card.destroy_dumb_buffer(b);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_card_is_an_error() {
        assert!(DrmScreen::open(Path::new("/nonexistent/card9")).is_err());
    }
}
