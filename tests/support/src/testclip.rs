//! Making clips for tests and benchmarks: H.264 encoding with openh264's encoder and a minimal
//! MP4 muxer (one video track, one chunk, `avc1` with `avcC`). The kiosk itself only reads clips;
//! nothing here runs in the firmware.

use anyhow::{Result, anyhow, bail};
use openh264::OpenH264API;
use openh264::encoder::{Encoder, EncoderConfig, FrameRate, RateControlMode};
use openh264::formats::YUVBuffer;

/// BT.601 limited-range YUV of an RGB colour.
pub fn rgb_to_yuv(r: u8, g: u8, b: u8) -> (u8, u8, u8) {
    let (r, g, b) = (r as i32, g as i32, b as i32);
    let y = ((66 * r + 129 * g + 25 * b + 128) >> 8) + 16;
    let u = ((-38 * r - 74 * g + 112 * b + 128) >> 8) + 128;
    let v = ((112 * r - 94 * g - 18 * b + 128) >> 8) + 128;
    (y as u8, u as u8, v as u8)
}

/// A YUV 4:2:0 picture (Y plane, then U, then V) of one colour.
pub fn solid_yuv(w: usize, h: usize, rgb: (u8, u8, u8)) -> Vec<u8> {
    let (y, u, v) = rgb_to_yuv(rgb.0, rgb.1, rgb.2);
    let mut out = vec![y; w * h];
    out.resize(w * h + w * h / 4, u);
    out.resize(w * h * 3 / 2, v);
    out
}

/// A moving picture for decode figures: a drifting gradient and a moving bar, with per-pixel
/// noise when `noisy` (a worst case: nothing predicts it).
pub fn moving_yuv(w: usize, h: usize, t: usize, noisy: bool) -> Vec<u8> {
    let mut out = vec![0u8; w * h * 3 / 2];
    let mut seed = (t as u32).wrapping_mul(2654435761) | 1;
    for y in 0..h {
        for x in 0..w {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            let bar = ((x + 4 * t) % w) < w / 8;
            let base = ((x + y + 3 * t) % 220) as u8 + 16;
            let noise = if noisy { (seed & 7) as u8 } else { 0 };
            out[y * w + x] = if bar { 200 } else { base.saturating_add(noise) };
        }
    }
    let c = w * h;
    for y in 0..h / 2 {
        for x in 0..w / 2 {
            out[c + y * (w / 2) + x] = (64 + (x + t) % 128) as u8;
            out[c + c / 4 + y * (w / 2) + x] = (64 + (y + 2 * t) % 128) as u8;
        }
    }
    out
}

/// Encodes YUV 4:2:0 pictures (even sizes) to H.264 access units (Annex B), one per picture.
pub fn encode(
    w: usize,
    h: usize,
    fps: f32,
    pictures: impl IntoIterator<Item = Vec<u8>>,
) -> Result<Vec<Vec<u8>>> {
    let config = EncoderConfig::new()
        .max_frame_rate(FrameRate::from_hz(fps))
        .rate_control_mode(RateControlMode::Off)
        .skip_frames(false);
    let mut enc = Encoder::with_api_config(OpenH264API::from_source(), config)
        .map_err(|e| anyhow!("encoder: {e}"))?;
    let mut out = Vec::new();
    for pic in pictures {
        let yuv = YUVBuffer::from_vec(pic, w, h);
        let bs = enc.encode(&yuv).map_err(|e| anyhow!("encode: {e}"))?;
        let au = bs.to_vec();
        if au.is_empty() {
            bail!("the encoder skipped a frame");
        }
        out.push(au);
    }
    Ok(out)
}

/// The NAL units of an Annex B stream, without start codes.
pub fn split_annex_b(data: &[u8]) -> Vec<&[u8]> {
    let mut starts = Vec::new();
    let mut i = 0;
    while i + 3 <= data.len() {
        if data[i] == 0 && data[i + 1] == 0 && data[i + 2] == 1 {
            starts.push(i + 3);
            i += 3;
        } else {
            i += 1;
        }
    }
    starts
        .iter()
        .enumerate()
        .map(|(k, &s)| {
            let mut end = starts.get(k + 1).map_or(data.len(), |&n| n - 3);
            // A 4-byte start code leaves a zero before the next one.
            while end > s && data[end - 1] == 0 && k + 1 < starts.len() {
                end -= 1;
            }
            &data[s..end]
        })
        .collect()
}

fn bx(kind: &[u8; 4], parts: &[&[u8]]) -> Vec<u8> {
    let len: usize = 8 + parts.iter().map(|p| p.len()).sum::<usize>();
    let mut b = Vec::with_capacity(len);
    b.extend_from_slice(&(len as u32).to_be_bytes());
    b.extend_from_slice(kind);
    for p in parts {
        b.extend_from_slice(p);
    }
    b
}

fn full(kind: &[u8; 4], version_flags: u32, parts: &[&[u8]]) -> Vec<u8> {
    let vf = version_flags.to_be_bytes();
    let mut all: Vec<&[u8]> = vec![&vf];
    all.extend_from_slice(parts);
    bx(kind, &all)
}

fn be32(v: u32) -> [u8; 4] {
    v.to_be_bytes()
}

const MATRIX: [u32; 9] = [0x10000, 0, 0, 0, 0x10000, 0, 0, 0, 0x4000_0000];

/// Muxes H.264 access units (Annex B, as [`encode`] gives them) into an MP4 file: `samples` are
/// (access unit, duration in `timescale` units). SPS and PPS go into `avcC`.
pub fn mux(w: u16, h: u16, timescale: u32, samples: &[(Vec<u8>, u32)]) -> Result<Vec<u8>> {
    let (mut sps, mut pps) = (None, None);
    let mut data = Vec::new();
    let mut sizes = Vec::new();
    let mut syncs = Vec::new();
    for (n, (au, _)) in samples.iter().enumerate() {
        let start = data.len();
        let mut sync = false;
        for nal in split_annex_b(au) {
            match nal.first().map(|b| b & 0x1F) {
                Some(7) => sps = sps.or(Some(nal.to_vec())),
                Some(8) => pps = pps.or(Some(nal.to_vec())),
                Some(t) => {
                    sync |= t == 5;
                    data.extend_from_slice(&be32(nal.len() as u32));
                    data.extend_from_slice(nal);
                }
                None => {}
            }
        }
        sizes.push((data.len() - start) as u32);
        if sync {
            syncs.push(n as u32 + 1);
        }
    }
    let (Some(sps), Some(pps)) = (sps, pps) else {
        bail!("no SPS/PPS in the stream");
    };
    if sps.len() < 4 {
        bail!("short SPS");
    }
    let ftyp = bx(b"ftyp", &[b"isom", &be32(512), b"isomiso2avc1mp41"]);
    let mdat_offset = ftyp.len() as u32 + 8;
    let mdat = bx(b"mdat", &[&data]);

    let total: u64 = samples.iter().map(|s| s.1 as u64).sum();
    let movie_ts = 1000u32;
    let movie_dur = (total * movie_ts as u64 / timescale.max(1) as u64) as u32;
    let matrix: Vec<u8> = MATRIX.iter().flat_map(|v| be32(*v)).collect();
    let mvhd = full(
        b"mvhd",
        0,
        &[
            &be32(0),
            &be32(0),
            &be32(movie_ts),
            &be32(movie_dur),
            &be32(0x10000),
            &[1, 0],
            &[0; 10],
            &matrix,
            &[0; 24],
            &be32(2),
        ],
    );
    let tkhd = full(
        b"tkhd",
        3,
        &[
            &be32(0),
            &be32(0),
            &be32(1),
            &be32(0),
            &be32(movie_dur),
            &[0; 8],
            &[0; 4], // layer, alternate group
            &[0; 4], // volume, reserved
            &matrix,
            &be32((w as u32) << 16),
            &be32((h as u32) << 16),
        ],
    );
    let mdhd = full(
        b"mdhd",
        0,
        &[
            &be32(0),
            &be32(0),
            &be32(timescale),
            &be32(total as u32),
            &[0x55, 0xC4, 0, 0],
        ],
    );
    let hdlr = full(
        b"hdlr",
        0,
        &[&be32(0), b"vide", &[0; 12], b"VideoHandler\0"],
    );
    let vmhd = full(b"vmhd", 1, &[&[0; 8]]);
    let url = full(b"url ", 1, &[]);
    let dref = full(b"dref", 0, &[&be32(1), &url]);
    let dinf = bx(b"dinf", &[&dref]);

    let mut avcc = vec![1, sps[1], sps[2], sps[3], 0xFF, 0xE1];
    avcc.extend_from_slice(&(sps.len() as u16).to_be_bytes());
    avcc.extend_from_slice(&sps);
    avcc.push(1);
    avcc.extend_from_slice(&(pps.len() as u16).to_be_bytes());
    avcc.extend_from_slice(&pps);
    let avcc = bx(b"avcC", &[&avcc]);
    let mut compressor = [0u8; 32];
    compressor[..7].copy_from_slice(b"\x06docent");
    let avc1 = bx(
        b"avc1",
        &[
            &[0; 6],
            &[0, 1],
            &[0; 16],
            &w.to_be_bytes(),
            &h.to_be_bytes(),
            &be32(0x480000),
            &be32(0x480000),
            &be32(0),
            &[0, 1],
            &compressor,
            &[0, 0x18, 0xFF, 0xFF],
            &avcc,
        ],
    );
    let stsd = full(b"stsd", 0, &[&be32(1), &avc1]);
    // stts: runs of equal durations.
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for (_, d) in samples {
        match runs.last_mut() {
            Some((n, last)) if *last == *d => *n += 1,
            _ => runs.push((1, *d)),
        }
    }
    let mut stts_body = be32(runs.len() as u32).to_vec();
    for (n, d) in runs {
        stts_body.extend_from_slice(&be32(n));
        stts_body.extend_from_slice(&be32(d));
    }
    let stts = full(b"stts", 0, &[&stts_body]);
    let mut stss_body = be32(syncs.len() as u32).to_vec();
    syncs
        .iter()
        .for_each(|s| stss_body.extend_from_slice(&be32(*s)));
    let stss = full(b"stss", 0, &[&stss_body]);
    let stsc = full(
        b"stsc",
        0,
        &[&be32(1), &be32(1), &be32(samples.len() as u32), &be32(1)],
    );
    let mut stsz_body = [be32(0), be32(sizes.len() as u32)].concat();
    sizes
        .iter()
        .for_each(|s| stsz_body.extend_from_slice(&be32(*s)));
    let stsz = full(b"stsz", 0, &[&stsz_body]);
    let stco = full(b"stco", 0, &[&be32(1), &be32(mdat_offset)]);
    let stbl = bx(b"stbl", &[&stsd, &stts, &stss, &stsc, &stsz, &stco]);
    let minf = bx(b"minf", &[&vmhd, &dinf, &stbl]);
    let mdia = bx(b"mdia", &[&mdhd, &hdlr, &minf]);
    let trak = bx(b"trak", &[&tkhd, &mdia]);
    let moov = bx(b"moov", &[&mvhd, &trak]);
    Ok([ftyp, mdat, moov].concat())
}

/// A clip of solid-colour frames, each shown for `frame_ms` milliseconds.
pub fn solid_clip(w: u16, h: u16, frame_ms: u32, colours: &[(u8, u8, u8)]) -> Result<Vec<u8>> {
    let (wu, hu) = (w as usize, h as usize);
    let aus = encode(
        wu,
        hu,
        1000.0 / frame_ms as f32,
        colours.iter().map(|&c| solid_yuv(wu, hu, c)),
    )?;
    let samples: Vec<_> = aus.into_iter().map(|au| (au, frame_ms)).collect();
    mux(w, h, 1000, &samples)
}

/// A clip of `frames` moving frames (see [`moving_yuv`]) at `fps` (timescale 90 kHz).
pub fn moving_clip(w: u16, h: u16, fps: u32, frames: usize, noisy: bool) -> Result<Vec<u8>> {
    let (wu, hu) = (w as usize, h as usize);
    let aus = encode(
        wu,
        hu,
        fps as f32,
        (0..frames).map(|t| moving_yuv(wu, hu, t, noisy)),
    )?;
    let samples: Vec<_> = aus.into_iter().map(|au| (au, 90_000 / fps)).collect();
    mux(w, h, 90_000, &samples)
}

/// Clips made here, read back by the decoder the display uses.
#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::time::Duration;

    use docent::device::display::scale::{YuvScaler, yuv_to_xrgb};
    use docent::engine::media::clip::{Clip, ClipDecoder};

    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn close(a: u32, b: u32) -> bool {
        (0..3)
            .all(|i| (((a >> (8 * i)) & 0xFF) as i32 - ((b >> (8 * i)) & 0xFF) as i32).abs() <= 24)
    }

    /// Encodes red, green and blue frames at 10 fps, muxes them, and reads them back: the
    /// sample timing comes from the MP4 and the colours survive, in order, looping.
    #[test]
    fn encoded_clip_round_trips() {
        let colours = [(255, 0, 0), (0, 255, 0), (0, 0, 255)];
        let mp4 = solid_clip(64, 48, 100, &colours).unwrap();
        let clip = Clip::from_bytes(mp4.clone()).unwrap();
        assert_eq!(clip.size(), (64, 48));
        assert_eq!(clip.frame_count(), 3);
        assert_eq!(clip.frame_durations(), &[ms(100); 3]);
        assert!((clip.frames_per_second() - 10.0).abs() < 1e-6);
        let expect: Vec<u32> = colours
            .iter()
            .map(|&(r, g, b)| {
                let (y, u, v) = rgb_to_yuv(r, g, b);
                yuv_to_xrgb(y, u, v)
            })
            .collect();
        let scaler = YuvScaler::new((64, 48), (32, 24));
        let mut dec = ClipDecoder::new(clip).unwrap();
        for round in 0..2 {
            for (i, want) in expect.iter().enumerate() {
                let mut frame = vec![0u32; 32 * 24];
                let d = dec.next_frame(|pic| scaler.draw(pic, &mut frame)).unwrap();
                assert_eq!(d, ms(100));
                let got = frame[12 * 32 + 16];
                assert!(
                    close(got, *want),
                    "round {round} frame {i}: {got:06x} vs {want:06x}"
                );
            }
        }
        // The same file read from disk.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("clip.mp4");
        std::fs::write(&path, &mp4).unwrap();
        let clip = Clip::open(File::open(&path).unwrap()).unwrap();
        let mut dec = ClipDecoder::new(clip).unwrap();
        let mut frame = vec![0u32; 32 * 24];
        dec.next_frame(|pic| scaler.draw(pic, &mut frame)).unwrap();
        assert!(close(frame[0], expect[0]));
    }

    #[test]
    fn broken_files_are_errors() {
        assert!(Clip::from_bytes(b"not an mp4 at all".to_vec()).is_err());
        let mp4 = solid_clip(32, 32, 40, &[(9, 9, 9)]).unwrap();
        // Cut inside the sample data: the header parses, decoding finds nothing.
        let mut cut = mp4.clone();
        let mdat = cut.windows(4).position(|w| w == b"mdat").unwrap();
        for b in &mut cut[mdat + 4..mdat + 40] {
            *b = 0xFF;
        }
        if let Ok(clip) = Clip::from_bytes(cut) {
            let mut dec = ClipDecoder::new(clip).unwrap();
            let mut got = Ok(Duration::ZERO);
            for _ in 0..3 {
                got = dec.next_frame(|_| {});
                if got.is_err() {
                    break;
                }
            }
            // Either error concealment produced frames or the clip was declared unplayable;
            // neither panics nor loops forever.
            let _ = got;
        }
    }
}
