//! Fitting pictures to the screen: the letterbox rectangle (aspect kept, centred, black bars),
//! nearest-neighbour YUV 4:2:0 -> XRGB8888 for video frames (colour conversion and scaling in
//! one pass, the hot path), and bilinear RGB -> XRGB8888 for still images (drawn once).
//!
//! Colours follow BT.601 limited range (what H.264 encoders emit unless told otherwise).

use crate::engine::media::clip::YuvPlanes;

/// A rectangle on the screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rect {
    pub x: u32,
    pub y: u32,
    pub w: u32,
    pub h: u32,
}

/// The largest rectangle with `src`'s aspect ratio that fits in `dst`, centred.
pub fn letterbox(src: (u32, u32), dst: (u32, u32)) -> Rect {
    let (sw, sh) = (src.0.max(1) as u64, src.1.max(1) as u64);
    let (dw, dh) = (dst.0 as u64, dst.1 as u64);
    let (w, h) = if sw * dh >= sh * dw {
        // Width-limited: bars above and below.
        (dw, ((sh * dw + sw / 2) / sw).clamp(1, dh.max(1)))
    } else {
        (((sw * dh + sh / 2) / sh).clamp(1, dw.max(1)), dh)
    };
    Rect {
        x: ((dw - w) / 2) as u32,
        y: ((dh - h) / 2) as u32,
        w: w as u32,
        h: h as u32,
    }
}

/// For each of `n` destination positions, the source index whose centre is nearest (`src` > 0).
fn nearest_map(src: u32, n: u32) -> Vec<u32> {
    (0..n as u64)
        .map(|i| (((2 * i + 1) * src as u64) / (2 * n as u64)).min(src as u64 - 1) as u32)
        .collect()
}

/// One pixel from 16-bit terms: `l` = 75 * (Y - 16) + 32, `d` = U - 128, `e` = V - 128
/// (BT.601 limited range in 6-bit fixed point, within one level of exact).
#[inline(always)]
fn px(l: i16, d: i16, e: i16) -> u32 {
    let r = (l.saturating_add(102 * e) >> 6).clamp(0, 255) as u32;
    let g = (l.saturating_add(-25 * d - 52 * e) >> 6).clamp(0, 255) as u32;
    let b = (l.saturating_add(129 * d) >> 6).clamp(0, 255) as u32;
    (r << 16) | (g << 8) | b
}

#[inline(always)]
fn luma(y: u8) -> i16 {
    (y as i16 - 16) * 75 + 32
}

/// One YUV sample to `0x00RRGGBB`.
pub fn yuv_to_xrgb(y: u8, u: u8, v: u8) -> u32 {
    px(luma(y), u as i16 - 128, v as i16 - 128)
}

/// Pixels handled per step: fixed-size arrays the compiler keeps in SIMD registers.
const LANES: usize = 16;

/// A row at the picture's own width: `u` and `v` hold one sample per two pixels.
#[inline(always)]
fn row_420_impl(y: &[u8], u: &[u8], v: &[u8], out: &mut [u32]) {
    let n = out.len().min(y.len()).min(u.len() * 2).min(v.len() * 2);
    let mut i = 0;
    while i + LANES <= n {
        let yy: &[u8; LANES] = y[i..i + LANES].try_into().expect("lanes");
        let uu: &[u8; LANES / 2] = u[i / 2..i / 2 + LANES / 2].try_into().expect("lanes");
        let vv: &[u8; LANES / 2] = v[i / 2..i / 2 + LANES / 2].try_into().expect("lanes");
        let oo: &mut [u32; LANES] = (&mut out[i..i + LANES]).try_into().expect("lanes");
        let mut d = [0i16; LANES];
        let mut e = [0i16; LANES];
        for k in 0..LANES {
            d[k] = uu[k / 2] as i16 - 128;
            e[k] = vv[k / 2] as i16 - 128;
        }
        for k in 0..LANES {
            oo[k] = px(luma(yy[k]), d[k], e[k]);
        }
        i += LANES;
    }
    for k in i..n {
        out[k] = yuv_to_xrgb(y[k], u[k / 2], v[k / 2]);
    }
}

/// A row of per-pixel Y, U and V samples (after scaling).
#[inline(always)]
fn row_444_impl(y: &[u8], u: &[u8], v: &[u8], out: &mut [u32]) {
    let n = out.len().min(y.len()).min(u.len()).min(v.len());
    let mut i = 0;
    while i + LANES <= n {
        let yy: &[u8; LANES] = y[i..i + LANES].try_into().expect("lanes");
        let uu: &[u8; LANES] = u[i..i + LANES].try_into().expect("lanes");
        let vv: &[u8; LANES] = v[i..i + LANES].try_into().expect("lanes");
        let oo: &mut [u32; LANES] = (&mut out[i..i + LANES]).try_into().expect("lanes");
        for k in 0..LANES {
            oo[k] = px(luma(yy[k]), uu[k] as i16 - 128, vv[k] as i16 - 128);
        }
        i += LANES;
    }
    for k in i..n {
        out[k] = yuv_to_xrgb(y[k], u[k], v[k]);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn row_420_avx2(y: &[u8], u: &[u8], v: &[u8], out: &mut [u32]) {
    row_420_impl(y, u, v, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn row_444_avx2(y: &[u8], u: &[u8], v: &[u8], out: &mut [u32]) {
    row_444_impl(y, u, v, out)
}

/// [`row_420_impl`] with AVX2 where the CPU has it (x86-64 builds target SSE2 only; aarch64
/// always has NEON).
fn convert_row_420(y: &[u8], u: &[u8], v: &[u8], out: &mut [u32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { row_420_avx2(y, u, v, out) };
    }
    row_420_impl(y, u, v, out)
}

/// [`row_444_impl`], with AVX2 where the CPU has it.
fn convert_row(y: &[u8], u: &[u8], v: &[u8], out: &mut [u32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { row_444_avx2(y, u, v, out) };
    }
    row_444_impl(y, u, v, out)
}

/// Draws YUV 4:2:0 pictures of one size into frames of another, letterboxed. The index maps are
/// computed once, so a clip's frames cost only the per-pixel conversion.
#[derive(Debug, Clone)]
pub struct YuvScaler {
    src: (u32, u32),
    dst: (u32, u32),
    rect: Rect,
    /// Luma column for each destination column of the rectangle.
    xs: Vec<u32>,
    /// Chroma column for each destination column.
    cxs: Vec<u32>,
    /// Luma row for each destination row of the rectangle.
    ys: Vec<u32>,
}

impl YuvScaler {
    pub fn new(src: (u32, u32), dst: (u32, u32)) -> YuvScaler {
        let rect = letterbox(src, dst);
        let xs = nearest_map(src.0.max(1), rect.w);
        let cxs = xs.iter().map(|x| x / 2).collect();
        let ys = nearest_map(src.1.max(1), rect.h);
        YuvScaler {
            src,
            dst,
            rect,
            xs,
            cxs,
            ys,
        }
    }

    /// The source size this scaler was made for.
    pub fn source(&self) -> (u32, u32) {
        self.src
    }

    /// Where pictures land on the screen.
    pub fn rect(&self) -> Rect {
        self.rect
    }

    /// Draws `pic` into the rectangle of `out` (a `dst`-sized frame); pixels outside the
    /// rectangle are left alone. A picture of another size than `source()` is ignored.
    pub fn draw(&self, pic: &YuvPlanes<'_>, out: &mut [u32]) {
        if pic.size != self.src || out.len() != (self.dst.0 * self.dst.1) as usize {
            return;
        }
        let (ys_, us, vs) = pic.strides;
        let (sw, sh) = (self.src.0 as usize, self.src.1 as usize);
        let cw = sw.div_ceil(2);
        // Plane bounds checked once, so that the rows below cannot run past them.
        if pic.y.len() < ys_ * (sh - 1) + sw
            || pic.u.len() < us * (sh.div_ceil(2) - 1) + cw
            || pic.v.len() < vs * (sh.div_ceil(2) - 1) + cw
        {
            return;
        }
        let dw = self.dst.0 as usize;
        let (rx, rw) = (self.rect.x as usize, self.rect.w as usize);
        let same_width = rw == sw;
        // Per-pixel samples of one scaled output row.
        let scratch = if same_width { 0 } else { rw };
        let (mut yb, mut ub, mut vb) = (vec![0u8; scratch], vec![0u8; scratch], vec![0u8; scratch]);
        let mut prev: Option<(u32, usize)> = None;
        for (r, &sy) in self.ys.iter().enumerate() {
            let row = (self.rect.y as usize + r) * dw + rx;
            if let Some((psy, prow)) = prev
                && psy == sy
            {
                // Upscaling repeats source rows: copy the row just drawn.
                out.copy_within(prow..prow + rw, row);
                continue;
            }
            let y = sy as usize;
            let yrow = &pic.y[y * ys_..y * ys_ + sw];
            let urow = &pic.u[(y / 2) * us..(y / 2) * us + cw];
            let vrow = &pic.v[(y / 2) * vs..(y / 2) * vs + cw];
            let dst = &mut out[row..row + rw];
            if same_width {
                convert_row_420(yrow, urow, vrow, dst);
            } else {
                let samples = yb.iter_mut().zip(ub.iter_mut()).zip(vb.iter_mut());
                for (((y, u), v), (&x, &cx)) in samples.zip(self.xs.iter().zip(&self.cxs)) {
                    *y = yrow[x as usize];
                    *u = urow[cx as usize];
                    *v = vrow[cx as usize];
                }
                convert_row(&yb, &ub, &vb, dst);
            }
            prev = Some((sy, row));
        }
    }
}

/// A decoded still picture, 8-bit RGB.
#[derive(Debug, Clone)]
pub struct RgbImage {
    pub width: u32,
    pub height: u32,
    /// `width * height * 3` bytes.
    pub rgb: Vec<u8>,
}

/// Draws `img` letterboxed into `out` (a `dst`-sized frame) with bilinear filtering; pixels
/// outside the rectangle are left alone.
pub fn draw_rgb_bilinear(img: &RgbImage, dst: (u32, u32), out: &mut [u32]) {
    let (sw, sh) = (img.width as usize, img.height as usize);
    if sw == 0 || sh == 0 || img.rgb.len() < sw * sh * 3 || out.len() != (dst.0 * dst.1) as usize {
        return;
    }
    let rect = letterbox((img.width, img.height), dst);
    // Source coordinate (8.8 fixed point) of each destination column's centre.
    let coord = |i: usize, n: usize, s: usize| -> (usize, usize, u32) {
        let f = ((i as f32 + 0.5) * s as f32 / n as f32 - 0.5).clamp(0.0, (s - 1) as f32);
        let i0 = f as usize;
        let i1 = (i0 + 1).min(s - 1);
        (i0, i1, ((f - i0 as f32) * 256.0) as u32)
    };
    let cols: Vec<_> = (0..rect.w as usize)
        .map(|i| coord(i, rect.w as usize, sw))
        .collect();
    let px = |x: usize, y: usize, c: usize| img.rgb[(y * sw + x) * 3 + c] as u32;
    for r in 0..rect.h as usize {
        let (y0, y1, fy) = coord(r, rect.h as usize, sh);
        let row = (rect.y as usize + r) * dst.0 as usize + rect.x as usize;
        for (i, &(x0, x1, fx)) in cols.iter().enumerate() {
            let mut v = 0u32;
            for c in 0..3 {
                let top = px(x0, y0, c) * (256 - fx) + px(x1, y0, c) * fx;
                let bottom = px(x0, y1, c) * (256 - fx) + px(x1, y1, c) * fx;
                let mixed = (top * (256 - fy) + bottom * fy + (1 << 15)) >> 16;
                v = (v << 8) | mixed.min(255);
            }
            out[row + i] = v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letterbox_keeps_aspect_and_centres() {
        // 4:3 into 16:9: bars left and right.
        assert_eq!(
            letterbox((640, 480), (1280, 720)),
            Rect {
                x: 160,
                y: 0,
                w: 960,
                h: 720
            }
        );
        // 16:9 into 4:3: bars above and below.
        assert_eq!(
            letterbox((1280, 720), (800, 600)),
            Rect {
                x: 0,
                y: 75,
                w: 800,
                h: 450
            }
        );
        // Same aspect: the whole screen.
        assert_eq!(
            letterbox((640, 360), (1280, 720)),
            Rect {
                x: 0,
                y: 0,
                w: 1280,
                h: 720
            }
        );
        // Degenerate sizes do not divide by zero.
        let r = letterbox((0, 0), (10, 10));
        assert!(r.w >= 1 && r.h >= 1);
    }

    #[test]
    fn nearest_map_samples_centres() {
        assert_eq!(nearest_map(4, 8), vec![0, 0, 1, 1, 2, 2, 3, 3]);
        assert_eq!(nearest_map(8, 4), vec![1, 3, 5, 7]);
        assert_eq!(nearest_map(3, 3), vec![0, 1, 2]);
    }

    #[test]
    fn yuv_colours_convert() {
        // Limited-range black, white, and the BT.601 primaries.
        assert_eq!(yuv_to_xrgb(16, 128, 128), 0x000000);
        assert_eq!(yuv_to_xrgb(235, 128, 128), 0xFFFFFF);
        let red = yuv_to_xrgb(81, 90, 240);
        assert!(
            (red >> 16) & 0xFF >= 250 && (red >> 8) & 0xFF <= 5 && red & 0xFF <= 5,
            "{red:06x}"
        );
        let blue = yuv_to_xrgb(41, 240, 110);
        assert!(blue & 0xFF >= 250 && (blue >> 16) & 0xFF <= 5, "{blue:06x}");
    }

    /// A 4x2 picture whose left half is white and right half black, drawn 2x larger into a wider
    /// screen: bars stay untouched, halves land where they should.
    #[test]
    fn yuv_scaler_letterboxes_and_scales() {
        let y = [235, 235, 16, 16, 235, 235, 16, 16];
        let u = [128, 128];
        let v = [128, 128];
        let pic = YuvPlanes {
            y: &y,
            u: &u,
            v: &v,
            strides: (4, 2, 2),
            size: (4, 2),
        };
        let s = YuvScaler::new((4, 2), (12, 4));
        assert_eq!(
            s.rect(),
            Rect {
                x: 2,
                y: 0,
                w: 8,
                h: 4
            }
        );
        let mut out = vec![0x123456; 48];
        s.draw(&pic, &mut out);
        for row in 0..4 {
            let r = &out[row * 12..row * 12 + 12];
            assert_eq!(&r[..2], &[0x123456; 2], "left bar untouched");
            assert_eq!(&r[2..6], &[0xFFFFFF; 4]);
            assert_eq!(&r[6..10], &[0x000000; 4]);
            assert_eq!(&r[10..], &[0x123456; 2], "right bar untouched");
        }
        // Without scaling (the fast row path), odd widths included.
        let y3 = [235, 16, 235, 235, 16, 235];
        let pic3 = YuvPlanes {
            y: &y3,
            u: &[128, 128],
            v: &[128, 128],
            strides: (3, 2, 2),
            size: (3, 2),
        };
        let mut out3 = vec![0; 6];
        YuvScaler::new((3, 2), (3, 2)).draw(&pic3, &mut out3);
        assert_eq!(out3, vec![0xFFFFFF, 0, 0xFFFFFF, 0xFFFFFF, 0, 0xFFFFFF]);
        for (y, u, v) in [(81, 90, 240), (145, 54, 34), (41, 240, 110), (200, 17, 250)] {
            let mut o = [0u32; 2];
            convert_row(&[y, y], &[u, u], &[v, v], &mut o);
            let mut o2 = [0u32; 2];
            convert_row_420(&[y, y], &[u], &[v], &mut o2);
            assert_eq!(o, o2);
            assert_eq!(
                o,
                [yuv_to_xrgb(y, u, v); 2],
                "rows agree with single samples"
            );
        }
        // A picture of the wrong size is ignored.
        let mut out2 = vec![7; 48];
        YuvScaler::new((8, 2), (12, 4)).draw(&pic, &mut out2);
        assert_eq!(out2, vec![7; 48]);
    }

    /// The SIMD-shaped row loops agree with the one-pixel conversion, tails included.
    #[test]
    fn row_conversions_match_single_pixels() {
        let n = 16 * 3 + 5;
        let mut seed = 12345u32;
        let mut next = || {
            seed = seed.wrapping_mul(1103515245).wrapping_add(12345);
            (seed >> 16) as u8
        };
        let y: Vec<u8> = (0..n).map(|_| next()).collect();
        let u: Vec<u8> = (0..n).map(|_| next()).collect();
        let v: Vec<u8> = (0..n).map(|_| next()).collect();
        let mut out = vec![0; n];
        convert_row(&y, &u, &v, &mut out);
        for i in 0..n {
            assert_eq!(out[i], yuv_to_xrgb(y[i], u[i], v[i]), "444 pixel {i}");
        }
        let (uh, vh) = (&u[..n.div_ceil(2)], &v[..n.div_ceil(2)]);
        convert_row_420(&y, uh, vh, &mut out);
        for i in 0..n {
            assert_eq!(
                out[i],
                yuv_to_xrgb(y[i], uh[i / 2], vh[i / 2]),
                "420 pixel {i}"
            );
        }
    }

    #[test]
    fn bilinear_keeps_flat_colours_and_blends_edges() {
        let img = RgbImage {
            width: 2,
            height: 1,
            rgb: vec![255, 0, 0, 0, 0, 255],
        };
        let mut out = vec![0; 8 * 4];
        draw_rgb_bilinear(&img, (8, 4), &mut out);
        // 2:1 into 8x4: the rectangle is 8x4, rows identical; the ends keep the pure colours.
        for row in out.chunks(8) {
            assert_eq!(row[0], 0xFF0000);
            assert_eq!(row[7], 0x0000FF);
            // The middle is a blend of both.
            let mid = row[4];
            assert!(mid >> 16 > 0 && mid & 0xFF > 0, "{mid:06x}");
        }
    }
}
