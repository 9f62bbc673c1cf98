//! Idle clips: MP4 demuxing (`re_mp4`, pure Rust) and H.264 decoding (`openh264`, built from its
//! bundled source).
//!
//! A [`Clip`] is the parsed sample table of the file's first H.264 video track; samples are read
//! from the file when needed (clips are not held in memory). Its frames are shown for durations
//! taken from the presentation timestamps (`stts`/`ctts` against the media timescale), so a clip
//! plays at its own frame rate, constant or not. A [`ClipDecoder`] turns samples (AVCC,
//! length-prefixed NAL units) into Annex B for the decoder and hands out decoded pictures in
//! presentation order, looping forever.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufReader, Cursor, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use openh264::decoder::{DecodeOptions, Decoder, Flush};
use openh264::formats::YUVSource;

/// Bounds that keep a hostile or broken file from exhausting the kiosk.
const MAX_SAMPLE_BYTES: u64 = 16 << 20;
const MAX_DIMENSION: u32 = 4096;
/// Frame duration used when the file gives none (25 fps).
const DEFAULT_FRAME: Duration = Duration::from_millis(40);

enum Source {
    File(File),
    Bytes(Vec<u8>),
}

/// The reader `re_mp4` parses through, failing after a number of reads and seeks that no
/// well-formed file needs: inside a container, `re_mp4` reads a child box of size 0 again and
/// again without moving forward, so a 1 KB file (found by fuzzing) kept a thread busy forever.
/// Every read takes at least one byte and each box a few seeks, so a budget of a few calls per
/// byte of the file stops only a parser that no longer moves.
struct Bounded<R> {
    inner: R,
    calls_left: u64,
}

impl<R> Bounded<R> {
    fn new(inner: R, file_size: u64) -> Bounded<R> {
        Bounded {
            inner,
            calls_left: file_size.saturating_mul(4).saturating_add(1 << 16),
        }
    }

    fn spend(&mut self) -> std::io::Result<()> {
        self.calls_left = self.calls_left.checked_sub(1).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "the MP4 boxes go round in a loop",
            )
        })?;
        Ok(())
    }
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.spend()?;
        self.inner.read(buf)
    }
}

impl<R: Seek> Seek for Bounded<R> {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        self.spend()?;
        self.inner.seek(pos)
    }
}

/// The planes of one decoded picture.
#[derive(Debug, Clone, Copy)]
pub struct YuvPlanes<'a> {
    pub y: &'a [u8],
    pub u: &'a [u8],
    pub v: &'a [u8],
    /// Row strides of Y, U and V in bytes.
    pub strides: (usize, usize, usize),
    /// Picture width and height (luma samples).
    pub size: (u32, u32),
}

/// A demuxed H.264 clip.
pub struct Clip {
    source: Source,
    width: u32,
    height: u32,
    /// Bytes of each NAL unit's length prefix (1, 2 or 4).
    length_size: usize,
    /// SPS and PPS from the `avcC` box, in Annex B, sent before every sync sample.
    params: Vec<u8>,
    /// (offset, size, sync) of each sample, in decode order.
    samples: Vec<(u64, u64, bool)>,
    /// How long each frame stays on screen, in presentation order.
    durations: Vec<Duration>,
}

impl std::fmt::Debug for Clip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clip")
            .field("width", &self.width)
            .field("height", &self.height)
            .field("frames", &self.samples.len())
            .finish()
    }
}

impl Clip {
    /// Parses an MP4 file (its sample data stays on disk).
    pub fn open(file: File) -> Result<Clip> {
        let size = file.metadata()?.len();
        let mp4 = re_mp4::Mp4::read(Bounded::new(BufReader::new(&file), size), size)
            .map_err(|e| anyhow!("MP4: {e}"))?;
        Clip::from_mp4(&mp4, Source::File(file))
    }

    /// Parses an MP4 file held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Clip> {
        let size = bytes.len() as u64;
        let mp4 = re_mp4::Mp4::read(Bounded::new(Cursor::new(&bytes), size), size)
            .map_err(|e| anyhow!("MP4: {e}"))?;
        Clip::from_mp4(&mp4, Source::Bytes(bytes))
    }

    fn from_mp4(mp4: &re_mp4::Mp4, source: Source) -> Result<Clip> {
        let track = mp4
            .tracks()
            .values()
            .find(|t| {
                t.kind == Some(re_mp4::TrackKind::Video)
                    && matches!(
                        &t.trak(mp4).mdia.minf.stbl.stsd.contents,
                        re_mp4::StsdBoxContent::Avc1(_)
                    )
            })
            .or_else(|| {
                // `avc3` (parameter sets in band) is not parsed by the demuxer's sample entry
                // reader; its samples decode all the same.
                mp4.tracks().values().find(|t| {
                    matches!(&t.trak(mp4).mdia.minf.stbl.stsd.contents,
                        re_mp4::StsdBoxContent::Unknown(f) if f.value == *b"avc3")
                })
            })
            .context("no H.264 video track")?;
        let (mut length_size, mut params) = (4, Vec::new());
        if let re_mp4::StsdBoxContent::Avc1(avc1) = &track.trak(mp4).mdia.minf.stbl.stsd.contents {
            let avcc = &avc1.avcc.contents;
            length_size = avcc.length_size_minus_one as usize + 1;
            for nal in avcc
                .sequence_parameter_sets
                .iter()
                .chain(&avcc.picture_parameter_sets)
            {
                params.extend_from_slice(&[0, 0, 0, 1]);
                params.extend_from_slice(&nal.bytes);
            }
        }
        if length_size == 3 {
            bail!("invalid NAL length size");
        }
        let (width, height) = (track.width as u32, track.height as u32);
        if width == 0 || height == 0 || width > MAX_DIMENSION || height > MAX_DIMENSION {
            bail!("unsupported picture size {width}x{height}");
        }
        if track.samples.is_empty() {
            bail!("the video track has no samples");
        }
        let samples = track
            .samples
            .iter()
            .map(|s| {
                if s.size > MAX_SAMPLE_BYTES {
                    bail!("sample too large");
                }
                Ok((s.offset, s.size, s.is_sync))
            })
            .collect::<Result<Vec<_>>>()?;
        let pts: Vec<(i64, u64)> = track
            .samples
            .iter()
            .map(|s| (s.composition_timestamp, s.duration))
            .collect();
        let durations = presentation_durations(&pts, track.timescale);
        Ok(Clip {
            source,
            width,
            height,
            length_size,
            params,
            samples,
            durations,
        })
    }

    /// Picture width and height.
    pub fn size(&self) -> (u32, u32) {
        (self.width, self.height)
    }

    /// Number of frames (samples).
    pub fn frame_count(&self) -> usize {
        self.samples.len()
    }

    /// How long each frame is shown, in presentation order.
    pub fn frame_durations(&self) -> &[Duration] {
        &self.durations
    }

    /// The average frame rate.
    pub fn frames_per_second(&self) -> f64 {
        let total: Duration = self.durations.iter().sum();
        self.durations.len() as f64 / total.as_secs_f64().max(1e-9)
    }

    fn read_sample(&self, i: usize, buf: &mut Vec<u8>) -> Result<()> {
        let (offset, size, _) = self.samples[i];
        buf.resize(size as usize, 0);
        match &self.source {
            Source::File(f) => f.read_exact_at(buf, offset).context("reading a sample")?,
            Source::Bytes(b) => {
                let range = usize::try_from(offset)
                    .ok()
                    .and_then(|o| Some(o..o.checked_add(size as usize)?))
                    .filter(|r| r.end <= b.len())
                    .context("sample outside the file")?;
                buf.copy_from_slice(&b[range]);
            }
        }
        Ok(())
    }

    /// Sample `i` as Annex B (start codes), with the parameter sets before a sync sample.
    fn annex_b(&self, i: usize, raw: &[u8], out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        if self.samples[i].2 || i == 0 {
            out.extend_from_slice(&self.params);
        }
        avcc_to_annex_b(raw, self.length_size, out)
    }
}

/// How long each frame is shown, from (composition timestamp, duration) pairs in decode order:
/// the gaps between sorted presentation times, the last frame its own duration. Nonsense values
/// (zero, negative, over ten seconds) become 40 ms.
pub fn presentation_durations(samples: &[(i64, u64)], timescale: u64) -> Vec<Duration> {
    let timescale = timescale.max(1) as u128;
    let to_dur = |ticks: i128| -> Duration {
        if ticks <= 0 {
            return DEFAULT_FRAME;
        }
        let d = Duration::from_nanos(
            (ticks as u128 * 1_000_000_000 / timescale).min(u64::MAX as u128) as u64,
        );
        if d.is_zero() || d > Duration::from_secs(10) {
            DEFAULT_FRAME
        } else {
            d
        }
    };
    let mut order: Vec<usize> = (0..samples.len()).collect();
    order.sort_by_key(|&i| (samples[i].0, i));
    order
        .iter()
        .enumerate()
        .map(|(k, &i)| match order.get(k + 1) {
            Some(&next) => to_dur(samples[next].0 as i128 - samples[i].0 as i128),
            None => to_dur(samples[i].1 as i128),
        })
        .collect()
}

/// Rewrites length-prefixed NAL units as Annex B (each after a 4-byte start code).
pub fn avcc_to_annex_b(mut data: &[u8], length_size: usize, out: &mut Vec<u8>) -> Result<()> {
    while !data.is_empty() {
        if data.len() < length_size {
            bail!("truncated NAL length");
        }
        let len = data[..length_size]
            .iter()
            .fold(0usize, |n, &b| (n << 8) | b as usize);
        data = &data[length_size..];
        if len > data.len() {
            bail!("truncated NAL unit");
        }
        out.extend_from_slice(&[0, 0, 0, 1]);
        out.extend_from_slice(&data[..len]);
        data = &data[len..];
    }
    Ok(())
}

/// A decoded picture held by us (frames the decoder releases together at the end of a loop).
struct OwnedPicture {
    y: Vec<u8>,
    u: Vec<u8>,
    v: Vec<u8>,
    strides: (usize, usize, usize),
    size: (u32, u32),
}

/// Plays a clip's frames in presentation order, forever.
pub struct ClipDecoder {
    clip: Clip,
    decoder: Decoder,
    /// Next sample to feed.
    next_sample: usize,
    /// Frames handed out so far (modulo the frame count, indexes the durations).
    frames_out: usize,
    /// Frames the decoder released at the end of a loop, not yet handed out.
    pending: VecDeque<OwnedPicture>,
    /// Frames decoded since the start of the current pass; a pass without one is an error.
    decoded_this_pass: usize,
    raw: Vec<u8>,
    annex_b: Vec<u8>,
}

impl ClipDecoder {
    pub fn new(clip: Clip) -> Result<ClipDecoder> {
        Ok(ClipDecoder {
            clip,
            decoder: Decoder::new().map_err(|e| anyhow!("H.264 decoder: {e}"))?,
            next_sample: 0,
            frames_out: 0,
            pending: VecDeque::new(),
            decoded_this_pass: 0,
            raw: Vec::new(),
            annex_b: Vec::new(),
        })
    }

    pub fn clip(&self) -> &Clip {
        &self.clip
    }

    /// Decodes the next frame and passes it to `draw`; returns how long it should be shown.
    /// After the last frame the clip starts again. An error means the clip cannot be played:
    /// the file could not be read, or a whole pass over it gave no frame.
    pub fn next_frame(&mut self, draw: impl FnOnce(&YuvPlanes<'_>)) -> Result<Duration> {
        loop {
            if let Some(p) = self.pending.pop_front() {
                draw(&YuvPlanes {
                    y: &p.y,
                    u: &p.u,
                    v: &p.v,
                    strides: p.strides,
                    size: p.size,
                });
                return Ok(self.take_duration());
            }
            if self.next_sample >= self.clip.samples.len() {
                // End of the clip: release what the decoder still holds, then start over.
                if let Ok(frames) = self.decoder.flush_remaining() {
                    self.pending = frames.iter().map(own).collect();
                }
                self.decoded_this_pass += self.pending.len();
                if self.decoded_this_pass == 0 {
                    bail!("no frame could be decoded from the clip");
                }
                self.next_sample = 0;
                self.decoded_this_pass = 0;
                continue;
            }
            let i = self.next_sample;
            self.next_sample += 1;
            self.clip.read_sample(i, &mut self.raw)?;
            if self.clip.annex_b(i, &self.raw, &mut self.annex_b).is_err() {
                // A malformed sample is skipped like a damaged one.
                continue;
            }
            let decoded = self.decoder.decode_with_options(
                &self.annex_b,
                DecodeOptions::new().flush_after_decode(Flush::NoFlush),
            );
            // `None` needs more data (reordering); an error is a damaged sample: go on.
            if let Ok(Some(pic)) = decoded {
                let (w, h) = pic.dimensions();
                draw(&YuvPlanes {
                    y: pic.y(),
                    u: pic.u(),
                    v: pic.v(),
                    strides: pic.strides(),
                    size: (w as u32, h as u32),
                });
                self.decoded_this_pass += 1;
                return Ok(self.take_duration());
            }
        }
    }

    /// The duration of the frame just handed out.
    fn take_duration(&mut self) -> Duration {
        let d = &self.clip.durations;
        let k = self.frames_out % d.len();
        self.frames_out = self.frames_out.wrapping_add(1);
        d[k]
    }
}

fn own(f: &openh264::decoder::DecodedYUV<'_>) -> OwnedPicture {
    let (w, h) = f.dimensions();
    OwnedPicture {
        y: f.y().to_vec(),
        u: f.u().to_vec(),
        v: f.v().to_vec(),
        strides: f.strides(),
        size: (w as u32, h as u32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// Found by fuzzing: a child box of size 0 inside `moov` made the demuxer read the same
    /// header forever.
    #[test]
    fn a_box_that_does_not_move_forward_is_an_error_not_a_hang() {
        let bytes = include_bytes!("../../../tests/fuzz/corpus/clip/mp4-box-loop.mp4");
        let started = std::time::Instant::now();
        let err = Clip::from_bytes(bytes.to_vec()).expect_err("a looping file is refused");
        assert!(format!("{err:#}").contains("loop"), "{err:#}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        let path = std::env::temp_dir().join(format!("docent-loop-{}.mp4", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        let opened = Clip::open(File::open(&path).unwrap());
        std::fs::remove_file(&path).unwrap();
        assert!(opened.is_err(), "the same file from disk is refused too");
    }

    #[test]
    fn durations_follow_presentation_order() {
        // Constant 25 fps at a 90 kHz timescale.
        let cfr: Vec<_> = (0..4).map(|i| (i * 3600, 3600)).collect();
        assert_eq!(presentation_durations(&cfr, 90_000), vec![ms(40); 4]);
        // Reordered (B-frames): decode order I P B B, shown I B B P.
        let reordered = [(0, 1000), (3000, 1000), (1000, 1000), (2000, 1000)];
        assert_eq!(presentation_durations(&reordered, 10_000), vec![ms(100); 4]);
        // Variable durations; the last frame keeps its own.
        let vfr = [(0, 10), (10, 30), (40, 50)];
        assert_eq!(
            presentation_durations(&vfr, 100),
            vec![ms(100), ms(300), ms(500)]
        );
        // Nonsense durations fall back to 40 ms.
        assert_eq!(presentation_durations(&[(0, 0)], 1000), vec![ms(40)]);
        assert_eq!(
            presentation_durations(&[(0, 5), (0, 50)], 0),
            vec![ms(40), ms(40)]
        );
    }

    #[test]
    fn length_prefixed_to_annex_b() {
        let mut out = Vec::new();
        avcc_to_annex_b(&[0, 0, 0, 2, 0x65, 0xAA, 0, 0, 0, 1, 0x41], 4, &mut out).unwrap();
        assert_eq!(out, vec![0, 0, 0, 1, 0x65, 0xAA, 0, 0, 0, 1, 0x41]);
        out.clear();
        avcc_to_annex_b(&[0, 1, 0x09], 2, &mut out).unwrap();
        assert_eq!(out, vec![0, 0, 0, 1, 0x09]);
        assert!(avcc_to_annex_b(&[0, 0, 0, 9, 1], 4, &mut Vec::new()).is_err());
        assert!(avcc_to_annex_b(&[0, 0], 4, &mut Vec::new()).is_err());
    }
}
