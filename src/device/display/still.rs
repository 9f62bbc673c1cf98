//! Still images (the character's active avatar image) decoded to 8-bit RGB: PNG through `png`,
//! JPEG through `jpeg-decoder`, both pure Rust. Other stored types (GIF, WebP) are not shown;
//! the player then falls back to the name card.

use std::io::Cursor;

use anyhow::{Context, Result, bail};

use super::scale::RgbImage;

/// Memory one decoded image may take; larger ones are refused rather than risking the kiosk.
const MAX_DECODED_BYTES: usize = 96 << 20;
/// Largest picture a JPEG may declare (a 40-megapixel photo): decoding costs time in proportion
/// to it even when scaled down or truncated, and a 600-byte file declaring 32767x65535 kept the
/// decoder busy for minutes (found by fuzzing).
const MAX_JPEG_PIXELS: u64 = 40_000_000;

/// Decodes a PNG or JPEG file. `hint` is the screen size: large JPEGs are decoded at a reduced
/// scale (DCT scaling) no smaller than it.
pub fn decode(bytes: &[u8], hint: (u32, u32)) -> Result<RgbImage> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        decode_png(bytes)
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        // jpeg-decoder overflows its arithmetic on some crafted scans (a panic where overflow
        // is checked): an avatar must never take the display down.
        std::panic::catch_unwind(|| decode_jpeg(bytes, hint))
            .unwrap_or_else(|_| bail!("JPEG data the decoder cannot read"))
    } else {
        bail!("not a PNG or JPEG image")
    }
}

fn decode_png(bytes: &[u8]) -> Result<RgbImage> {
    let mut dec = png::Decoder::new_with_limits(
        Cursor::new(bytes),
        png::Limits {
            bytes: MAX_DECODED_BYTES,
        },
    );
    dec.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = dec.read_info().context("PNG header")?;
    let size = reader.output_buffer_size().context("PNG too large")?;
    if size > MAX_DECODED_BYTES {
        bail!("PNG too large");
    }
    let mut buf = vec![0; size];
    let info = reader.next_frame(&mut buf).context("PNG data")?;
    buf.truncate(info.buffer_size());
    let (w, h) = (info.width, info.height);
    let n = (w * h) as usize;
    let rgb = match info.color_type {
        png::ColorType::Rgb => buf,
        png::ColorType::Rgba => {
            // Transparent parts show the black screen behind them.
            let mut out = Vec::with_capacity(n * 3);
            for p in buf.chunks_exact(4) {
                let a = p[3] as u32;
                out.extend(p[..3].iter().map(|&c| ((c as u32 * a + 127) / 255) as u8));
            }
            out
        }
        png::ColorType::Grayscale => buf.iter().flat_map(|&g| [g, g, g]).collect(),
        png::ColorType::GrayscaleAlpha => buf
            .chunks_exact(2)
            .flat_map(|p| {
                let g = ((p[0] as u32 * p[1] as u32 + 127) / 255) as u8;
                [g, g, g]
            })
            .collect(),
        png::ColorType::Indexed => bail!("PNG palette was not expanded"),
    };
    if rgb.len() < n * 3 {
        bail!("PNG data too short");
    }
    Ok(RgbImage {
        width: w,
        height: h,
        rgb,
    })
}

fn decode_jpeg(bytes: &[u8], hint: (u32, u32)) -> Result<RgbImage> {
    let mut dec = jpeg_decoder::Decoder::new(Cursor::new(bytes));
    dec.set_max_decoding_buffer_size(MAX_DECODED_BYTES);
    dec.read_info().context("JPEG header")?;
    let declared = dec.info().context("JPEG info")?;
    if declared.width as u64 * declared.height as u64 > MAX_JPEG_PIXELS {
        bail!("JPEG too large: {}x{}", declared.width, declared.height);
    }
    let clamp = |v: u32| v.clamp(1, u16::MAX as u32) as u16;
    dec.scale(clamp(hint.0), clamp(hint.1))
        .context("JPEG scale")?;
    let data = dec.decode().context("JPEG data")?;
    let info = dec.info().context("JPEG info")?;
    let (w, h) = (info.width as u32, info.height as u32);
    let rgb = match info.pixel_format {
        jpeg_decoder::PixelFormat::RGB24 => data,
        jpeg_decoder::PixelFormat::L8 => data.iter().flat_map(|&g| [g, g, g]).collect(),
        jpeg_decoder::PixelFormat::L16 => data
            .chunks_exact(2)
            .flat_map(|p| [p[0], p[0], p[0]])
            .collect(),
        jpeg_decoder::PixelFormat::CMYK32 => data
            .chunks_exact(4)
            .flat_map(|p| {
                let k = 255 - p[3] as u32;
                p[..3]
                    .iter()
                    .map(move |&c| ((255 - c as u32) * k / 255) as u8)
                    .collect::<Vec<_>>()
            })
            .collect(),
    };
    if rgb.len() < (w * h * 3) as usize {
        bail!("JPEG data too short");
    }
    Ok(RgbImage {
        width: w,
        height: h,
        rgb,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fuzzer's input: a JPEG header declaring 32767x65535 pixels, and little data.
    #[test]
    fn a_jpeg_declaring_billions_of_pixels_is_refused_at_once() {
        let bytes = include_bytes!("../../../tests/fuzz/corpus/image/jpeg-2gpixel");
        let started = std::time::Instant::now();
        let e = decode(bytes, (320, 240)).expect_err("refused");
        assert!(e.to_string().contains("too large"), "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }

    /// The fuzzer's input: a JPEG whose scan overflows the decoder's arithmetic.
    #[test]
    fn a_jpeg_that_breaks_the_decoder_is_an_error_not_a_panic() {
        let bytes = include_bytes!("../../../tests/fuzz/corpus/image/jpeg-scan-overflow.jpg");
        assert!(decode(bytes, (320, 240)).is_err());
    }

    fn png_of(w: u32, h: u32, color: png::ColorType, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(color);
        enc.set_depth(png::BitDepth::Eight);
        let mut wr = enc.write_header().unwrap();
        wr.write_image_data(data).unwrap();
        wr.finish().unwrap();
        out
    }

    #[test]
    fn decodes_png_colour_types() {
        let rgb = decode(
            &png_of(2, 1, png::ColorType::Rgb, &[255, 0, 0, 0, 255, 0]),
            (8, 8),
        )
        .unwrap();
        assert_eq!((rgb.width, rgb.height), (2, 1));
        assert_eq!(rgb.rgb, vec![255, 0, 0, 0, 255, 0]);
        let rgba = decode(
            &png_of(1, 1, png::ColorType::Rgba, &[200, 100, 50, 0]),
            (8, 8),
        )
        .unwrap();
        assert_eq!(rgba.rgb, vec![0, 0, 0], "transparent over black");
        let grey = decode(&png_of(1, 1, png::ColorType::Grayscale, &[77]), (8, 8)).unwrap();
        assert_eq!(grey.rgb, vec![77, 77, 77]);
    }

    #[test]
    fn refuses_other_formats_and_garbage() {
        assert!(decode(b"GIF89a....", (8, 8)).is_err());
        assert!(decode(b"\x89PNG\r\n\x1a\ngarbage", (8, 8)).is_err());
        assert!(decode(&[0xFF, 0xD8, 0xFF, 0, 1, 2], (8, 8)).is_err());
    }
}
