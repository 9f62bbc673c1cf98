//! `docent audio play|record`: plays a file to an ALSA device or records one to a WAV file.
//!
//! The installer's check of a new sound card (does the speaker sound, does the microphone
//! hear), and the simulated board's visitor: the appliance test plays a spoken question into the
//! loopback microphone and records the loopback speaker with it. Both print the wall-clock time
//! of their first frame, so a recording can be lined up with events logged elsewhere (a button
//! release) on the same machine.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use alsa::Direction;

use super::audio::{Setup, configure, open_pcm, why};
use crate::engine::pcm as pcm_util;

/// Period and buffer of the check, in frames: the values known good under emulation.
const PERIOD: u32 = 800;
const BUFFER: u32 = 8000;

/// Plays raw S16_LE mono samples at `rate` (or a WAV file of that format) to `device`, and
/// returns when the device has played them. Prints the time of the first frame.
pub fn play(file: &Path, device: &str, rate: u32) -> Result<(), String> {
    let bytes = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let samples = pcm_samples(&bytes, rate).map_err(|e| format!("{}: {e}", file.display()))?;
    let pcm = open_pcm(device, Direction::Playback, false, false)?;
    let setup = configure(&pcm, rate, PERIOD, BUFFER).map_err(|e| why(&e))?;
    exact_rate(&setup, rate, device)?;
    let io = pcm.io_i16().map_err(|e| why(&e))?;
    let interleaved: Vec<i16> = samples
        .iter()
        .flat_map(|&s| std::iter::repeat_n(s, setup.channels as usize))
        .collect();
    let started = now_unix();
    let mut at = 0;
    while at < interleaved.len() {
        match io.writei(&interleaved[at..]) {
            Ok(frames) => at += frames * setup.channels as usize,
            Err(e) => pcm.try_recover(e, true).map_err(|e| why(&e))?,
        }
    }
    pcm.drain().map_err(|e| why(&e))?;
    println!(
        "played {} frames at {rate} Hz to {device}; first frame at unix {started:.6}",
        samples.len()
    );
    Ok(())
}

/// Records `seconds` of `device` at `rate` into a mono WAV file. Prints the time of the first
/// frame (the end of the first period read, less its length).
pub fn record(file: &Path, device: &str, rate: u32, seconds: f64) -> Result<(), String> {
    let pcm = open_pcm(device, Direction::Capture, false, false)?;
    let setup = configure(&pcm, rate, PERIOD, BUFFER).map_err(|e| why(&e))?;
    exact_rate(&setup, rate, device)?;
    let io = pcm.io_i16().map_err(|e| why(&e))?;
    pcm.start().map_err(|e| why(&e))?;
    let want = (seconds * rate as f64) as usize;
    let channels = setup.channels as usize;
    let mut period = vec![0i16; setup.period as usize * channels];
    let mut mono = Vec::with_capacity(want);
    let mut first_frame = None;
    let deadline = Instant::now() + Duration::from_secs_f64(seconds + 10.0);
    while mono.len() < want && Instant::now() < deadline {
        match io.readi(&mut period) {
            Ok(frames) => {
                first_frame
                    .get_or_insert_with(|| now_unix() - frames as f64 / f64::from(setup.rate));
                mono.extend(period[..frames * channels].chunks(channels).map(|c| c[0]));
            }
            Err(e) => pcm.try_recover(e, true).map_err(|e| why(&e))?,
        }
    }
    mono.truncate(want);
    std::fs::write(file, pcm_util::wav_bytes(&mono, rate))
        .map_err(|e| format!("{}: {e}", file.display()))?;
    println!(
        "recorded {} frames at {rate} Hz from {device}; first frame at unix {:.6}",
        mono.len(),
        first_frame.unwrap_or_default()
    );
    Ok(())
}

/// The check compares recordings sample for sample, so the device must take the rate itself
/// (a `plug` PCM converts).
fn exact_rate(setup: &Setup, rate: u32, device: &str) -> Result<(), String> {
    if setup.rate == rate {
        Ok(())
    } else {
        Err(format!(
            "{device} runs at {} Hz, not {rate} Hz (use a plug PCM)",
            setup.rate
        ))
    }
}

/// The samples of a raw S16_LE mono file, or of a mono 16-bit WAV file at `rate`.
fn pcm_samples(bytes: &[u8], rate: u32) -> Result<Vec<i16>, String> {
    if !bytes.starts_with(b"RIFF") {
        return Ok(pcm_util::samples_from_le(bytes));
    }
    let wav = pcm_util::parse_wav(bytes)?;
    if wav.rate != rate || wav.channels != 1 {
        return Err(format!(
            "the WAV file is {} Hz with {} channels, not {rate} Hz mono",
            wav.rate, wav.channels
        ));
    }
    Ok(wav.samples)
}

fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wav_and_raw_give_the_same_samples() {
        let samples = [0i16, 1000, -1000, i16::MAX, i16::MIN];
        let raw = pcm_util::samples_to_le(&samples);
        let wav = pcm_util::wav_bytes(&samples, 16000);
        assert_eq!(pcm_samples(&raw, 16000).unwrap(), samples);
        assert_eq!(pcm_samples(&wav, 16000).unwrap(), samples);
        assert!(pcm_samples(&wav, 24000).unwrap_err().contains("16000 Hz"));
    }
}
