//! Recorded answers as a curator uploads them: WAV (PCM or float), FLAC, Ogg Vorbis or MP3,
//! recognised by their content and decoded by pure-Rust decoders (claxon, lewton, nanomp3; Ogg
//! Opus has none that is kept up, see docs/languages.md), mixed down to mono, resampled to the
//! speaker's 24 kHz and brought to the loudness of the kiosk's synthesised speech, so that a
//! recorded answer is neither louder nor quieter than the sentence before it.

use std::io::Cursor;

use crate::engine::pcm::{OUTPUT_RATE, downmix, parse_wav, resample};

/// The audio kinds a recorded answer may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Wav,
    Flac,
    OggVorbis,
    Mp3,
}

/// What an uploaded file is, by its first bytes.
pub fn sniff(bytes: &[u8]) -> Option<Kind> {
    if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WAVE" {
        Some(Kind::Wav)
    } else if bytes.starts_with(b"fLaC") {
        Some(Kind::Flac)
    } else if bytes.starts_with(b"OggS") {
        Some(Kind::OggVorbis)
    } else if nanomp3::detect(bytes) {
        Some(Kind::Mp3)
    } else {
        None
    }
}

/// Decodes `bytes` to mono samples at `OUTPUT_RATE`; refuses a file longer than `max_secs`
/// before decoding more of it.
pub fn decode(bytes: &[u8], max_secs: u32) -> Result<Vec<i16>, String> {
    let kind = sniff(bytes)
        .ok_or("not a recording the kiosk can read: WAV (PCM or float), FLAC, Ogg Vorbis or MP3")?;
    let too_long = || format!("longer than {max_secs} seconds");
    let (samples, rate, channels) = match kind {
        Kind::Wav => {
            let (samples, rate, channels) = wav_any(bytes)?;
            let frames = samples.len() as u64 / u64::from(channels.max(1));
            if frames > u64::from(max_secs) * u64::from(rate) {
                return Err(too_long());
            }
            (samples, rate, channels)
        }
        Kind::Flac => {
            let mut reader = claxon::FlacReader::new(Cursor::new(bytes))
                .map_err(|e| format!("not a FLAC file the kiosk can read: {e}"))?;
            let info = reader.streaminfo();
            let (rate, channels, bits) = (info.sample_rate, info.channels, info.bits_per_sample);
            let limit = u64::from(max_secs) * u64::from(rate) * u64::from(channels);
            let mut out = Vec::new();
            for s in reader.samples() {
                let s = s.map_err(|e| format!("a damaged FLAC file: {e}"))?;
                out.push(if bits >= 16 {
                    s >> (bits - 16)
                } else {
                    s << (16 - bits)
                } as i16);
                if out.len() as u64 > limit {
                    return Err(too_long());
                }
            }
            (out, rate, channels as u16)
        }
        Kind::OggVorbis => {
            let mut reader = lewton::inside_ogg::OggStreamReader::new(Cursor::new(bytes))
                .map_err(|e| format!("not an Ogg Vorbis file the kiosk can read: {e}"))?;
            let (rate, channels) = (
                reader.ident_hdr.audio_sample_rate,
                u16::from(reader.ident_hdr.audio_channels),
            );
            let limit = u64::from(max_secs) * u64::from(rate) * u64::from(channels);
            let mut out = Vec::new();
            while let Some(packet) = reader
                .read_dec_packet_itl()
                .map_err(|e| format!("a damaged Ogg Vorbis file: {e}"))?
            {
                out.extend_from_slice(&packet);
                if out.len() as u64 > limit {
                    return Err(too_long());
                }
            }
            (out, rate, channels)
        }
        Kind::Mp3 => {
            let mut frames = 0u64;
            for f in nanomp3::frames(bytes) {
                frames += f.samples as u64;
                if f.sample_rate > 0 && frames > u64::from(max_secs) * u64::from(f.sample_rate) {
                    return Err(too_long());
                }
            }
            let decoded = nanomp3::decode_all::<i16>(bytes);
            let channels = decoded.channels.map_or(1, |c| u16::from(c.num()));
            (decoded.samples, decoded.sample_rate, channels)
        }
    };
    if samples.is_empty() || rate == 0 || channels == 0 {
        return Err("the recording holds no sound".into());
    }
    Ok(resample(&downmix(&samples, channels), rate, OUTPUT_RATE))
}

/// A WAV file as recorders write it: integer PCM of 8, 16, 24 or 32 bits, or 32-bit float
/// (format tag 1, 3, or the extensible form of either), as 16-bit samples with its rate and
/// channels.
fn wav_any(bytes: &[u8]) -> Result<(Vec<i16>, u32, u16), String> {
    let mut pos = 12;
    let mut format: Option<(u16, u16, u32, u16)> = None;
    while pos + 8 <= bytes.len() {
        let id = &bytes[pos..pos + 4];
        let size =
            u32::from_le_bytes(bytes[pos + 4..pos + 8].try_into().expect("4 bytes")) as usize;
        let body = pos + 8;
        let end = body.saturating_add(size).min(bytes.len());
        if id == b"fmt " && end >= body + 16 {
            let f = &bytes[body..end];
            let word = |i: usize| u16::from_le_bytes([f[i], f[i + 1]]);
            let mut tag = word(0);
            // WAVE_FORMAT_EXTENSIBLE: the real tag opens the sub-format GUID.
            if tag == 0xFFFE && f.len() >= 26 {
                tag = word(24);
            }
            let rate = u32::from_le_bytes([f[4], f[5], f[6], f[7]]);
            format = Some((tag, word(2), rate, word(14)));
        } else if id == b"data" {
            let (tag, channels, rate, bits) = format.ok_or("a WAV file without its format")?;
            let data = &bytes[body..end];
            let samples: Vec<i16> = match (tag, bits) {
                (1, 8) => data.iter().map(|&b| (i16::from(b) - 128) << 8).collect(),
                (1, 16) => return Ok((parse_wav(bytes)?.samples, rate, channels)),
                (1, 24) => data
                    .chunks_exact(3)
                    .map(|c| i16::from_le_bytes([c[1], c[2]]))
                    .collect(),
                (1, 32) => data
                    .chunks_exact(4)
                    .map(|c| i16::from_le_bytes([c[2], c[3]]))
                    .collect(),
                (3, 32) => data
                    .chunks_exact(4)
                    .map(|c| {
                        let v = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                        (v.clamp(-1.0, 1.0) * 32767.0) as i16
                    })
                    .collect(),
                _ => {
                    return Err(format!(
                        "a WAV file the kiosk cannot read (format {tag}, {bits} bits): \
                         save it as PCM or float"
                    ));
                }
            };
            return Ok((samples, rate, channels.max(1)));
        }
        pos = body.saturating_add(size).saturating_add(size & 1);
    }
    Err("a WAV file without sound".into())
}

/// The loudness every answer is brought to, in dB of full scale over the gated blocks (see
/// `loudness`): espeak-ng's speech measures about -21 dBFS this way.
pub const TARGET_LOUDNESS: f64 = -21.0;

/// Loudness as ITU-R BS.1770 gates it, without its K-weighting filter (speech needs none to
/// be compared with speech): the mean power of 400 ms blocks (75 % overlap) above -70 dBFS,
/// then of those within 10 dB of that mean. `None` for silence.
pub fn loudness(samples: &[i16]) -> Option<f64> {
    let block = OUTPUT_RATE as usize * 4 / 10;
    let step = block / 4;
    let power = |s: &[i16]| {
        s.iter()
            .map(|&v| (f64::from(v) / 32768.0).powi(2))
            .sum::<f64>()
            / s.len() as f64
    };
    let mut blocks: Vec<f64> = if samples.len() < block {
        vec![power(samples)]
    } else {
        (0..=(samples.len() - block) / step)
            .map(|i| power(&samples[i * step..i * step + block]))
            .collect()
    };
    let db = |p: f64| 10.0 * p.log10();
    blocks.retain(|&p| p > 0.0 && db(p) > -70.0);
    let mean = |b: &[f64]| b.iter().sum::<f64>() / b.len() as f64;
    if blocks.is_empty() {
        return None;
    }
    let relative = db(mean(&blocks)) - 10.0;
    blocks.retain(|&p| db(p) > relative);
    Some(db(mean(&blocks)))
}

/// Brings `samples` to `TARGET_LOUDNESS`, but never so loud that a peak clips; returns the
/// gain applied in dB.
pub fn normalise(samples: &mut [i16]) -> f64 {
    let Some(level) = loudness(samples) else {
        return 0.0;
    };
    let peak = samples
        .iter()
        .map(|&v| f64::from(v).abs())
        .fold(1.0, f64::max);
    let wanted = 10f64.powf((TARGET_LOUDNESS - level) / 20.0);
    let gain = wanted.min(32_000.0 / peak);
    for s in samples.iter_mut() {
        *s = (f64::from(*s) * gain).round().clamp(-32768.0, 32767.0) as i16;
    }
    20.0 * gain.log10()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::pcm::wav_bytes;

    fn tone(seconds: f64, rate: u32, amplitude: f64) -> Vec<i16> {
        (0..(seconds * rate as f64) as usize)
            .map(|i| {
                let t = i as f64 / rate as f64;
                ((t * 330.0 * std::f64::consts::TAU).sin() * amplitude) as i16
            })
            .collect()
    }

    #[test]
    fn a_wav_at_any_rate_becomes_mono_24_khz_and_a_long_one_is_refused() {
        let stereo: Vec<i16> = tone(1.0, 44_100, 8_000.0)
            .into_iter()
            .flat_map(|s| [s, s])
            .collect();
        let mut wav = wav_bytes(&stereo, 44_100);
        wav[22] = 2; // two channels
        assert_eq!(sniff(&wav), Some(Kind::Wav));
        let out = decode(&wav, 5).unwrap();
        assert!((out.len() as i64 - 24_000).abs() < 10, "{}", out.len());
        assert!(decode(&wav_bytes(&tone(3.0, 16_000, 8_000.0), 16_000), 2).is_err());
        let err = decode(b"<html>not audio</html>", 5).unwrap_err();
        assert!(
            err.contains("WAV (PCM or float), FLAC, Ogg Vorbis or MP3"),
            "{err}"
        );
    }

    /// sox writes what recorders write: 8, 24 and 32-bit integer and 32-bit float WAVs (its
    /// default for a float source is 32 bits, WAVE_FORMAT_EXTENSIBLE).
    #[test]
    fn wavs_of_every_common_sample_format_are_read() {
        let dir = tempfile::tempdir().unwrap();
        for args in [
            &["-b", "8", "-e", "unsigned-integer"][..],
            &["-b", "24"],
            &["-b", "32"],
            &["-b", "32", "-e", "floating-point"],
        ] {
            let path = dir.path().join("t.wav");
            let ok = std::process::Command::new("sox")
                .args(["-n", "-r", "48000", "-c", "2"])
                .args(args)
                .arg(&path)
                .args(["synth", "1", "sine", "330", "vol", "0.5"])
                .status()
                .unwrap();
            assert!(ok.success());
            let out = decode(&std::fs::read(&path).unwrap(), 5)
                .unwrap_or_else(|e| panic!("{args:?}: {e}"));
            assert!(
                (out.len() as i64 - 24_000).abs() < 10,
                "{args:?}: {}",
                out.len()
            );
            let level = loudness(&out).unwrap();
            // A sine at half scale is -9 dBFS by power.
            assert!((level + 9.0).abs() < 0.5, "{args:?}: {level}");
        }
    }

    #[test]
    fn a_quiet_and_a_loud_recording_come_out_at_the_same_loudness_unclipped() {
        let mut quiet = tone(2.0, OUTPUT_RATE, 1_000.0);
        let mut loud = tone(2.0, OUTPUT_RATE, 30_000.0);
        normalise(&mut quiet);
        normalise(&mut loud);
        let (q, l) = (loudness(&quiet).unwrap(), loudness(&loud).unwrap());
        assert!((q - TARGET_LOUDNESS).abs() < 0.5, "{q}");
        assert!((l - TARGET_LOUDNESS).abs() < 0.5, "{l}");
        // A tone at -21 dBFS RMS peaks at -18 dBFS: room left. Silence stays silence.
        assert!(quiet.iter().all(|&s| s.abs() < 32_000));
        let mut silence = vec![0i16; 24_000];
        assert_eq!(normalise(&mut silence), 0.0);
        assert_eq!(loudness(&silence), None);
    }

    /// The target is the kiosk's own voice: espeak-ng's speech, resampled as the engine does,
    /// measures within 2 dB of it.
    #[test]
    fn the_target_is_the_loudness_of_espeak_ngs_speech() {
        for (voice, text) in [
            (
                "en-us",
                "The cafe is on the ground floor, next to the main entrance.",
            ),
            (
                "de",
                "Die Garderobe ist links vom Haupteingang, gleich neben der Kasse.",
            ),
        ] {
            let out = std::process::Command::new("espeak-ng")
                .args(["-v", voice, "--stdout", text])
                .output()
                .expect("espeak-ng runs");
            let wav = parse_wav(&out.stdout).unwrap();
            let speech = resample(&wav.samples, wav.rate, OUTPUT_RATE);
            let level = loudness(&speech).unwrap();
            eprintln!("{voice}: {level:.1} dBFS");
            assert!((level - TARGET_LOUDNESS).abs() < 2.0, "{voice}: {level}");
        }
    }
}
