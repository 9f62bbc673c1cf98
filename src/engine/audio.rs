//! PCM helpers shared by the providers and the device: WAV in and out, down-mixing and
//! resampling of signed 16-bit little-endian audio.

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

/// Parses a PCM 16-bit WAV file (the only kind speech engines hand back). A `data` chunk with a
/// size of 0 or 0xFFFFFFFF (streamed output) runs to the end of the file.
pub fn parse_wav(bytes: &[u8]) -> Result<Wav, String> {
    if bytes.len() < 12 || &bytes[..4] != b"RIFF" || &bytes[8..12] != b"WAVE" {
        return Err("not a WAV file".into());
    }
    let mut pos = 12;
    let mut format: Option<(u16, u16, u32, u16)> = None;
    while pos + 8 <= bytes.len() {
        let id = &bytes[pos..pos + 4];
        let size = u32::from_le_bytes(bytes[pos + 4..pos + 8].try_into().expect("4 bytes"));
        let body = pos + 8;
        if id == b"fmt " && body + 16 <= bytes.len() {
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
            let end = match size {
                0 | u32::MAX => bytes.len(),
                n => (body + n as usize).min(bytes.len()),
            };
            return Ok(Wav {
                samples: samples_from_le(&bytes[body..end]),
                rate,
                channels,
            });
        }
        pos = body + size as usize + (size as usize & 1);
    }
    Err("WAV file has no data".into())
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
    fn downmix_averages() {
        assert_eq!(downmix(&[100, 300, -50, 50], 2), [200, 0]);
        assert_eq!(downmix(&[1, 2], 1), [1, 2]);
    }
}
