//! The Linux framebuffer device (`/dev/fbN`): the screen's geometry from the
//! `FBIOGET_VSCREENINFO`/`FBIOGET_FSCREENINFO` ioctls, the pixel memory mapped with `mmap`
//! (writes through write(2) do not show under DRM's fbdev emulation). 32 bpp XRGB is copied row
//! by row; any other packed RGB layout (BGR, RGB565, 24 bpp) is converted pixel by pixel.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

use super::screen::{Screen, copy_xrgb_le};

const FBIOGET_VSCREENINFO: libc::c_ulong = 0x4600;
const FBIOGET_FSCREENINFO: libc::c_ulong = 0x4602;
const FBIOBLANK: libc::c_ulong = 0x4611;
const FB_BLANK_UNBLANK: libc::c_ulong = 0;

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct Bitfield {
    offset: u32,
    length: u32,
    msb_right: u32,
}

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct VarScreenInfo {
    xres: u32,
    yres: u32,
    xres_virtual: u32,
    yres_virtual: u32,
    xoffset: u32,
    yoffset: u32,
    bits_per_pixel: u32,
    grayscale: u32,
    red: Bitfield,
    green: Bitfield,
    blue: Bitfield,
    transp: Bitfield,
    nonstd: u32,
    activate: u32,
    height: u32,
    width: u32,
    accel_flags: u32,
    pixclock: u32,
    left_margin: u32,
    right_margin: u32,
    upper_margin: u32,
    lower_margin: u32,
    hsync_len: u32,
    vsync_len: u32,
    sync: u32,
    vmode: u32,
    rotate: u32,
    colorspace: u32,
    reserved: [u32; 4],
}

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct FixScreenInfo {
    id: [u8; 16],
    smem_start: libc::c_ulong,
    smem_len: u32,
    kind: u32,
    type_aux: u32,
    visual: u32,
    xpanstep: u16,
    ypanstep: u16,
    ywrapstep: u16,
    line_length: u32,
    mmio_start: libc::c_ulong,
    mmio_len: u32,
    accel: u32,
    capabilities: u16,
    reserved: [u16; 2],
}

/// How XRGB8888 pixels become the device's pixels.
#[derive(Debug, Clone, Copy)]
enum Layout {
    /// 32 bpp with red at bit 16, green at 8, blue at 0: rows are copied as they are.
    Xrgb,
    /// Any packed true-colour layout of 16, 24 or 32 bits.
    Packed {
        bytes: usize,
        fields: [(u32, u32); 3],
    },
}

/// A mapped framebuffer device.
pub struct FbScreen {
    _file: File,
    map: *mut u8,
    map_len: usize,
    width: u32,
    height: u32,
    /// Byte offset of the visible area's first pixel.
    origin: usize,
    pitch: usize,
    layout: Layout,
    name: String,
}

// The mapping is owned by this value alone and only touched through `&mut self`.
unsafe impl Send for FbScreen {}

impl FbScreen {
    /// Opens and maps `path` (e.g. `/dev/fb0`).
    pub fn open(path: &Path) -> io::Result<FbScreen> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let fd = file.as_raw_fd();
        let mut var = VarScreenInfo::default();
        let mut fix = FixScreenInfo::default();
        // SAFETY: the structs match the kernel's layouts and outlive the calls.
        unsafe {
            if libc::ioctl(fd, FBIOGET_VSCREENINFO as _, &mut var as *mut VarScreenInfo) < 0
                || libc::ioctl(fd, FBIOGET_FSCREENINFO as _, &mut fix as *mut FixScreenInfo) < 0
            {
                return Err(io::Error::last_os_error());
            }
            // Wake a blanked screen; not every driver supports it.
            libc::ioctl(fd, FBIOBLANK as _, FB_BLANK_UNBLANK);
        }
        let layout = match (
            var.bits_per_pixel,
            var.red.offset,
            var.green.offset,
            var.blue.offset,
        ) {
            (32, 16, 8, 0)
                if var.red.length == 8 && var.green.length == 8 && var.blue.length == 8 =>
            {
                Layout::Xrgb
            }
            (bpp @ (16 | 24 | 32), ..) => Layout::Packed {
                bytes: bpp as usize / 8,
                fields: [
                    (var.red.offset, var.red.length),
                    (var.green.offset, var.green.length),
                    (var.blue.offset, var.blue.length),
                ],
            },
            (bpp, ..) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("{bpp} bits per pixel is not supported"),
                ));
            }
        };
        let bytes_pp = var.bits_per_pixel as usize / 8;
        let pitch = fix.line_length as usize;
        let origin = var.yoffset as usize * pitch + var.xoffset as usize * bytes_pp;
        let needed =
            origin + (var.yres as usize).saturating_sub(1) * pitch + var.xres as usize * bytes_pp;
        let map_len = fix.smem_len as usize;
        if var.xres == 0
            || var.yres == 0
            || pitch < var.xres as usize * bytes_pp
            || needed > map_len
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "framebuffer geometry does not fit its memory",
            ));
        }
        // SAFETY: a shared mapping of the device's whole memory; unmapped in Drop.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let id_len = fix.id.iter().position(|&b| b == 0).unwrap_or(16);
        let name = format!(
            "fbdev {} {}x{} {}bpp ({})",
            path.display(),
            var.xres,
            var.yres,
            var.bits_per_pixel,
            String::from_utf8_lossy(&fix.id[..id_len])
        );
        Ok(FbScreen {
            _file: file,
            map: map.cast(),
            map_len,
            width: var.xres,
            height: var.yres,
            origin,
            pitch,
            layout,
            name,
        })
    }

    /// A description for health and logs.
    pub fn describe(&self) -> &str {
        &self.name
    }
}

impl Drop for FbScreen {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `open`, not used after this.
        unsafe {
            libc::munmap(self.map.cast(), self.map_len);
        }
    }
}

/// Packs an XRGB8888 pixel into a field layout.
fn pack(p: u32, fields: &[(u32, u32); 3]) -> u32 {
    let channels = [(p >> 16) & 0xFF, (p >> 8) & 0xFF, p & 0xFF];
    channels
        .iter()
        .zip(fields)
        .fold(0, |v, (&c, &(offset, length))| {
            let length = length.min(8);
            v | ((c >> (8 - length)) << offset)
        })
}

impl Screen for FbScreen {
    fn size(&self) -> (u32, u32) {
        (self.width, self.height)
    }

    fn present(&mut self, frame: &[u32]) -> io::Result<()> {
        let (w, h) = (self.width as usize, self.height as usize);
        if frame.len() != w * h {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "frame size"));
        }
        // SAFETY: `open` checked that every visible row lies inside the mapping.
        let mem = unsafe { std::slice::from_raw_parts_mut(self.map, self.map_len) };
        for (y, row) in frame.chunks_exact(w).enumerate() {
            let start = self.origin + y * self.pitch;
            match self.layout {
                Layout::Xrgb => {
                    copy_xrgb_le(row, &mut mem[start..start + w * 4]);
                }
                Layout::Packed { bytes, fields } => {
                    let dst = &mut mem[start..start + w * bytes];
                    for (d, &p) in dst.chunks_exact_mut(bytes).zip(row) {
                        d.copy_from_slice(&pack(p, &fields).to_le_bytes()[..bytes]);
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_rgb565_and_bgr() {
        let rgb565 = [(11, 5), (5, 6), (0, 5)];
        assert_eq!(pack(0xFF0000, &rgb565), 0xF800);
        assert_eq!(pack(0x00FF00, &rgb565), 0x07E0);
        assert_eq!(pack(0x0000FF, &rgb565), 0x001F);
        let bgr = [(0, 8), (8, 8), (16, 8)];
        assert_eq!(pack(0x123456, &bgr), 0x563412);
    }

    #[test]
    fn kernel_struct_sizes() {
        assert_eq!(std::mem::size_of::<VarScreenInfo>(), 160);
        #[cfg(target_pointer_width = "64")]
        assert_eq!(std::mem::size_of::<FixScreenInfo>(), 80);
    }

    #[test]
    fn missing_device_is_an_error() {
        assert!(FbScreen::open(Path::new("/nonexistent/fb9")).is_err());
    }
}
