//! PCM: WAV in and out, down-mixing and resampling of signed 16-bit little-endian audio, shared
//! by the providers, the turn and the device.

/// Sample rate of all reply audio the engine sends out.
pub const OUTPUT_RATE: u32 = 24_000;
/// Sample rate the speech recognisers are fed.
pub const RECOGNISER_RATE: u32 = 16_000;

/// Decodes little-endian 16-bit samples (a trailing odd byte is ignored).
pub fn samples_from_le(bytes: &[u8]) -> Vec<i16> {
    bytes
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect()
}

pub fn samples_to_le(samples: &[i16]) -> Vec<u8> {
    samples.iter().flat_map(|s| s.to_le_bytes()).collect()
}

/// Averages interleaved channels into one.
pub fn downmix(samples: &[i16], channels: u16) -> Vec<i16> {
    if channels <= 1 {
        return samples.to_vec();
    }
    samples
        .chunks_exact(channels as usize)
        .map(|frame| (frame.iter().map(|&s| s as i32).sum::<i32>() / channels as i32) as i16)
        .collect()
}

/// Resamples mono audio by linear interpolation: cheap, and clean enough for speech.
pub fn resample(samples: &[i16], from: u32, to: u32) -> Vec<i16> {
    if from == to || samples.is_empty() || from == 0 || to == 0 {
        return samples.to_vec();
    }
    let out_len = (samples.len() as u64 * to as u64 / from as u64) as usize;
    let step = from as f64 / to as f64;
    (0..out_len)
        .map(|i| {
            let pos = i as f64 * step;
            let idx = pos as usize;
            let frac = pos - idx as f64;
            let a = samples[idx.min(samples.len() - 1)] as f64;
            let b = samples[(idx + 1).min(samples.len() - 1)] as f64;
            (a + (b - a) * frac).round() as i16
        })
        .collect()
}

/// Client audio (`pcm_s16le` at any rate, mono or stereo) as the recognisers take it.
pub fn to_recogniser(bytes: &[u8], rate: u32, channels: u16) -> Vec<i16> {
    resample(
        &downmix(&samples_from_le(bytes), channels),
        rate,
        RECOGNISER_RATE,
    )
}

/// A decoded WAV file.
#[derive(Debug, PartialEq)]
pub struct Wav {
    pub samples: Vec<i16>,
    pub rate: u32,
    pub channels: u16,
}

/// Where the samples of a WAV file start and what they are.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WavHeader {
    pub rate: u32,
    pub channels: u16,
    /// Offset of the first sample.
    pub data_start: usize,
    /// Bytes of samples, or `None` for a stream (a size of 0 or 0xFFFFFFFF) that runs to the end.
    pub data_len: Option<usize>,
}

/// Reads the header of a PCM 16-bit WAV file (the only kind speech engines hand back) from its
/// first bytes: `None` while more bytes are needed to reach the samples.
pub fn parse_wav_header(bytes: &[u8]) -> Result<Option<WavHeader>, String> {
    let n = bytes.len().min(12);
    if bytes[..n.min(4)] != b"RIFF"[..n.min(4)] || (n > 8 && bytes[8..n] != b"WAVE"[..n - 8]) {
        return Err("not a WAV file".into());
    }
    let mut pos = 12;
    let mut format: Option<(u16, u16, u32, u16)> = None;
    while pos + 8 <= bytes.len() {
        let id = &bytes[pos..pos + 4];
        let size = u32::from_le_bytes(bytes[pos + 4..pos + 8].try_into().expect("4 bytes"));
        let body = pos + 8;
        if id == b"fmt " {
            if body + 16 > bytes.len() {
                return Ok(None);
            }
            let f = &bytes[body..body + 16];
            format = Some((
                u16::from_le_bytes([f[0], f[1]]),
                u16::from_le_bytes([f[2], f[3]]),
                u32::from_le_bytes([f[4], f[5], f[6], f[7]]),
                u16::from_le_bytes([f[14], f[15]]),
            ));
        } else if id == b"data" {
            let (tag, channels, rate, bits) = format.ok_or("WAV data before its format")?;
            if !(tag == 1 || tag == 0xFFFE) || bits != 16 || channels == 0 {
                return Err(format!("unsupported WAV format (tag {tag}, {bits} bits)"));
            }
            return Ok(Some(WavHeader {
                rate,
                channels,
                data_start: body,
                data_len: match size {
                    0 | u32::MAX => None,
                    n => Some(n as usize),
                },
            }));
        }
        pos = body + size as usize + (size as usize & 1);
    }
    Ok(None)
}

/// Parses a PCM 16-bit WAV file. A `data` chunk with a size of 0 or 0xFFFFFFFF (streamed
/// output) runs to the end of the file.
pub fn parse_wav(bytes: &[u8]) -> Result<Wav, String> {
    let Some(h) = parse_wav_header(bytes)? else {
        return Err(if bytes.len() < 12 {
            "not a WAV file".into()
        } else {
            "WAV file has no data".into()
        });
    };
    let end = h
        .data_len
        .map_or(bytes.len(), |n| (h.data_start + n).min(bytes.len()));
    Ok(Wav {
        samples: samples_from_le(&bytes[h.data_start..end]),
        rate: h.rate,
        channels: h.channels,
    })
}

/// `resample` for audio that arrives in pieces: the same samples, each as soon as the input
/// it depends on has arrived.
#[derive(Debug)]
pub struct Resampler {
    from: u32,
    to: u32,
    /// Input not needed any more is dropped; `held[0]` is input sample number `base`.
    held: Vec<i16>,
    base: u64,
    received: u64,
    /// Number of the next output sample.
    next: u64,
}

impl Resampler {
    pub fn new(from: u32, to: u32) -> Resampler {
        Resampler {
            from,
            to,
            held: Vec::new(),
            base: 0,
            received: 0,
            next: 0,
        }
    }

    fn passthrough(&self) -> bool {
        self.from == self.to || self.from == 0 || self.to == 0
    }

    /// Takes the next input and appends the output it completes to `out`.
    pub fn push(&mut self, input: &[i16], out: &mut Vec<i16>) {
        if self.passthrough() {
            out.extend_from_slice(input);
            return;
        }
        self.held.extend_from_slice(input);
        self.received += input.len() as u64;
        self.emit(false, out);
    }

    /// The end of the input: appends the last output samples to `out`.
    pub fn finish(&mut self, out: &mut Vec<i16>) {
        if !self.passthrough() {
            self.emit(true, out);
        }
    }

    fn emit(&mut self, last: bool, out: &mut Vec<i16>) {
        if self.received == 0 {
            return;
        }
        // The same arithmetic as `resample`, so that the output is identical.
        let step = self.from as f64 / self.to as f64;
        let len = self.received * self.to as u64 / self.from as u64;
        let end = self.received - 1;
        while self.next < len {
            let pos = self.next as f64 * step;
            let idx = pos as u64;
            if idx + 1 > end && !last {
                break;
            }
            let frac = pos - idx as f64;
            let a = self.held[(idx.min(end) - self.base) as usize] as f64;
            let b = self.held[((idx + 1).min(end) - self.base) as usize] as f64;
            out.push((a + (b - a) * frac).round() as i16);
            self.next += 1;
        }
        let needed = ((self.next as f64 * step) as u64).min(end);
        self.held.drain(..(needed - self.base) as usize);
        self.base = needed;
    }
}

/// Decodes a WAV file while its bytes arrive (a speech engine writing to a pipe): mono samples
/// at `rate`, the same as `parse_wav`, `downmix` and `resample` give for the whole file.
#[derive(Debug)]
pub struct WavStream {
    rate: u32,
    /// The bytes before the samples, until the header is complete.
    head: Vec<u8>,
    format: Option<(u16, Resampler)>,
    /// Bytes of samples still to come, for a file that says.
    left: Option<usize>,
    /// The start of an incomplete frame.
    carry: Vec<u8>,
}

impl WavStream {
    pub fn new(rate: u32) -> WavStream {
        WavStream {
            rate,
            head: Vec::new(),
            format: None,
            left: None,
            carry: Vec::new(),
        }
    }

    /// Takes the next bytes of the file; returns the samples they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<i16>, String> {
        if self.format.is_some() {
            return Ok(self.samples(bytes));
        }
        self.head.extend_from_slice(bytes);
        let Some(h) = parse_wav_header(&self.head)? else {
            return Ok(Vec::new());
        };
        self.format = Some((h.channels, Resampler::new(h.rate, self.rate)));
        self.left = h.data_len;
        let head = std::mem::take(&mut self.head);
        Ok(self.samples(&head[h.data_start.min(head.len())..]))
    }

    /// The end of the file: the last samples, or why it was not a WAV file.
    pub fn finish(mut self) -> Result<Vec<i16>, String> {
        let Some((_, resampler)) = &mut self.format else {
            return Err(if self.head.len() < 12 {
                "not a WAV file".into()
            } else {
                "WAV file has no data".into()
            });
        };
        let mut out = Vec::new();
        resampler.finish(&mut out);
        Ok(out)
    }

    fn samples(&mut self, bytes: &[u8]) -> Vec<i16> {
        let Some((channels, resampler)) = &mut self.format else {
            return Vec::new();
        };
        let bytes = match &mut self.left {
            Some(left) => {
                let take = bytes.len().min(*left);
                *left -= take;
                &bytes[..take]
            }
            None => bytes,
        };
        let frame = 2 * *channels as usize;
        self.carry.extend_from_slice(bytes);
        let whole = self.carry.len() / frame * frame;
        let mono = downmix(&samples_from_le(&self.carry[..whole]), *channels);
        self.carry.drain(..whole);
        let mut out = Vec::with_capacity(mono.len() * 2);
        resampler.push(&mono, &mut out);
        out
    }
}

/// Encodes mono 16-bit samples as a WAV file.
pub fn wav_bytes(samples: &[i16], rate: u32) -> Vec<u8> {
    let data_len = (samples.len() * 2) as u32;
    let mut out = Vec::with_capacity(44 + data_len as usize);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data_len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&rate.to_le_bytes());
    out.extend_from_slice(&(rate * 2).to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data_len.to_le_bytes());
    out.extend_from_slice(&samples_to_le(samples));
    out
}

/// Root-mean-square level of a block, for voice activity detection.
pub fn rms(samples: &[i16]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    (samples
        .iter()
        .map(|&s| (s as f64) * (s as f64))
        .sum::<f64>()
        / samples.len() as f64)
        .sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wav_round_trip() {
        let samples: Vec<i16> = (0..100).map(|i| (i * 300 - 15000) as i16).collect();
        let wav = parse_wav(&wav_bytes(&samples, 22_050)).unwrap();
        assert_eq!(
            wav,
            Wav {
                samples,
                rate: 22_050,
                channels: 1
            }
        );
        assert!(parse_wav(b"RIFF\0\0\0\0WAVE").is_err());
        assert!(parse_wav(b"hello").is_err());
    }

    #[test]
    fn resampling_keeps_duration_and_shape() {
        let one_second: Vec<i16> = (0..22_050)
            .map(|i| {
                ((i as f64 / 22_050.0 * 440.0 * std::f64::consts::TAU).sin() * 10_000.0) as i16
            })
            .collect();
        let out = resample(&one_second, 22_050, 24_000);
        assert_eq!(out.len(), 24_000);
        assert!((rms(&out) - rms(&one_second)).abs() < 200.0);
        assert_eq!(resample(&[1, 2, 3], 16_000, 16_000), [1, 2, 3]);
    }

    #[test]
    fn resampling_in_pieces_gives_the_same_samples() {
        let input: Vec<i16> = (0..5_000)
            .map(|i| ((i as f64 * 0.07).sin() * 12_000.0 + (i % 7) as f64 * 300.0) as i16)
            .collect();
        for (from, to) in [
            (22_050, 24_000),
            (24_000, 16_000),
            (16_000, 24_000),
            (8_000, 8_000),
        ] {
            let whole = resample(&input, from, to);
            for piece in [1, 2, 3, 317, 2_048, 5_000] {
                let mut r = Resampler::new(from, to);
                let mut out = Vec::new();
                for p in input.chunks(piece) {
                    r.push(p, &mut out);
                }
                r.finish(&mut out);
                assert_eq!(out, whole, "{from} -> {to} in pieces of {piece}");
            }
        }
        let mut r = Resampler::new(22_050, 24_000);
        let mut out = Vec::new();
        r.finish(&mut out);
        assert!(out.is_empty());
    }

    /// A WAV file as a speech engine writes it to a pipe: sizes it cannot know yet.
    fn streamed_wav(samples: &[i16], rate: u32, channels: u16, data_size: u32) -> Vec<u8> {
        let mut wav = wav_bytes(samples, rate);
        wav[4..8].copy_from_slice(&data_size.wrapping_add(36).to_le_bytes());
        wav[22..24].copy_from_slice(&channels.to_le_bytes());
        wav[40..44].copy_from_slice(&data_size.to_le_bytes());
        wav
    }

    #[test]
    fn wav_streams_decode_like_whole_files() {
        let samples: Vec<i16> = (0..9_000)
            .map(|i| ((i * 37) % 20_000 - 10_000) as i16)
            .collect();
        for (channels, size) in [(1, 0x7fff_f000), (1, u32::MAX), (1, 0), (2, 0x7fff_f000)] {
            let wav = streamed_wav(&samples, 22_050, channels, size);
            let parsed = parse_wav(&wav).unwrap();
            assert_eq!(parsed.channels, channels);
            let expected = resample(&downmix(&parsed.samples, channels), 22_050, OUTPUT_RATE);
            for piece in [1, 5, 44, 45, 4_096] {
                let mut stream = WavStream::new(OUTPUT_RATE);
                let mut out = Vec::new();
                for p in wav.chunks(piece) {
                    out.extend(stream.push(p).unwrap());
                }
                out.extend(stream.finish().unwrap());
                assert_eq!(out, expected, "{channels} channels, pieces of {piece}");
            }
        }
        // A sized data chunk ends where it says, whatever follows.
        let mut wav = wav_bytes(&samples[..100], 24_000);
        wav.extend_from_slice(b"LIST\x04\0\0\0abcd");
        let mut stream = WavStream::new(OUTPUT_RATE);
        let mut out = stream.push(&wav).unwrap();
        out.extend(stream.finish().unwrap());
        assert_eq!(out, &samples[..100]);
        // Samples arrive before the file ends.
        let mut stream = WavStream::new(OUTPUT_RATE);
        let wav = streamed_wav(&samples, 24_000, 1, u32::MAX);
        assert!(stream.push(&wav[..40]).unwrap().is_empty(), "header only");
        assert_eq!(stream.push(&wav[40..49]).unwrap(), &samples[..2]);
        assert_eq!(stream.push(&wav[49..52]).unwrap(), &samples[2..4]);
    }

    #[test]
    fn broken_wav_streams_are_refused() {
        let mut stream = WavStream::new(OUTPUT_RATE);
        assert!(stream.push(b"RIF").unwrap().is_empty());
        assert!(stream.push(b"X").is_err());
        assert!(
            WavStream::new(OUTPUT_RATE)
                .push(b"RIFF\0\0\0\0WAVX")
                .is_err()
        );
        assert!(WavStream::new(OUTPUT_RATE).finish().is_err());
        let mut stream = WavStream::new(OUTPUT_RATE);
        stream.push(b"RIFF\0\0\0\0WAVEfmt ").unwrap();
        assert!(stream.finish().is_err(), "no samples ever came");
        let mut wav = wav_bytes(&[1, 2, 3], 24_000);
        wav[34..36].copy_from_slice(&8u16.to_le_bytes());
        assert!(WavStream::new(OUTPUT_RATE).push(&wav).is_err(), "8-bit");
    }

    #[test]
    fn downmix_averages() {
        assert_eq!(downmix(&[100, 300, -50, 50], 2), [200, 0]);
        assert_eq!(downmix(&[1, 2], 1), [1, 2]);
    }
}
