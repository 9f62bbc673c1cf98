//! The Wyoming protocol of Home Assistant's voice stack (wyoming-faster-whisper recognises,
//! wyoming-piper speaks) over TCP, one connection per request. An event is one JSON header line
//! (`type`, and optionally `data`, `data_length`, `payload_length`), then `data_length` bytes of
//! JSON merged into `data`, then `payload_length` bytes of payload (PCM for audio). Recognition
//! is `transcribe`, `audio-start`, `audio-chunk`s, `audio-stop`, answered by `transcript`;
//! speech is `synthesize`, answered by `audio-start`, `audio-chunk`s, `audio-stop`; `describe` is
//! answered by `info`. Every read is bounded in size and in time: the server is whatever answers
//! at an address on the LAN.

use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::{ProviderError, Speech};
use crate::engine::pcm;

/// Longest header line accepted (piper's and whisper's are well under 1 KiB).
const HEADER_MAX: u64 = 16 * 1024;
/// Longest `data` section: piper's `info` lists every voice it can download.
const DATA_MAX: u64 = 4 << 20;
/// Longest payload of one event (an audio chunk; piper sends 1024 samples).
const PAYLOAD_MAX: u64 = 1 << 20;
/// Most audio bytes one synthesis may return (some six minutes at 48 kHz stereo).
const AUDIO_MAX: usize = 64 << 20;
/// Events that are no part of the answer (pings, streaming transcript pieces) skipped before
/// the server counts as misbehaving.
const SKIPPED_MAX: usize = 10_000;
/// Speech goes up in pieces of this many samples (0.1 s at 16 kHz).
const CHUNK_SAMPLES: usize = 1_600;
/// Longest server error message passed on (its first line only).
const MESSAGE_MAX: usize = 120;

/// Host and port of a `tcp://host:port` address.
pub fn address(url: &str) -> Result<(String, u16), ProviderError> {
    let bad = || {
        ProviderError::Unavailable(
            "a Wyoming server's address must be tcp://host:port, such as tcp://192.168.1.10:10300"
                .into(),
        )
    };
    let uri: axum::http::Uri = url.parse().map_err(|_| bad())?;
    if uri.scheme_str() != Some("tcp") || !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(bad());
    }
    let auth = uri.authority().ok_or_else(bad)?;
    let port = auth.port_u16().filter(|p| *p != 0).ok_or_else(bad)?;
    let host = auth.host().trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host.to_string(), port))
}

/// One event as read.
struct Event {
    kind: String,
    data: Map<String, Value>,
    payload: Vec<u8>,
}

/// A connection to a Wyoming server; `idle` bounds every write and every read of an event.
struct Connection {
    stream: BufReader<TcpStream>,
    idle: Duration,
    skipped: usize,
}

impl Connection {
    /// Connects within `idle`.
    async fn open(url: &str, idle: Duration) -> Result<Connection, ProviderError> {
        let (host, port) = address(url)?;
        let stream = tokio::time::timeout(idle, TcpStream::connect((host.as_str(), port)))
            .await
            .map_err(|_| {
                ProviderError::Timeout(format!(
                    "no answer from {host}:{port} within {} ms",
                    idle.as_millis()
                ))
            })?
            .map_err(|e| {
                ProviderError::Unavailable(format!("cannot connect to {host}:{port}: {e}"))
            })?;
        // Small events (a request, the end of the audio) go out at once.
        let _ = stream.set_nodelay(true);
        Ok(Connection {
            stream: BufReader::new(stream),
            idle,
            skipped: 0,
        })
    }

    /// Sends one event; `data` is left out when it is an empty object.
    async fn send(
        &mut self,
        kind: &str,
        data: &Value,
        payload: &[u8],
    ) -> Result<(), ProviderError> {
        let data = match data.as_object() {
            Some(o) if o.is_empty() => Vec::new(),
            _ => serde_json::to_vec(data).expect("JSON serialises"),
        };
        let mut header = json!({ "type": kind });
        if !data.is_empty() {
            header["data_length"] = data.len().into();
        }
        if !payload.is_empty() {
            header["payload_length"] = payload.len().into();
        }
        let mut bytes = serde_json::to_vec(&header).expect("JSON serialises");
        bytes.push(b'\n');
        bytes.extend_from_slice(&data);
        bytes.extend_from_slice(payload);
        tokio::time::timeout(self.idle, self.stream.get_mut().write_all(&bytes))
            .await
            .map_err(|_| self.late())?
            .map_err(|e| ProviderError::Unavailable(format!("the Wyoming server went away: {e}")))
    }

    fn late(&self) -> ProviderError {
        ProviderError::Timeout(format!(
            "the Wyoming server did not answer within {} ms",
            self.idle.as_millis()
        ))
    }

    /// The next event, within `idle`.
    async fn next(&mut self) -> Result<Event, ProviderError> {
        tokio::time::timeout(self.idle, self.read_event())
            .await
            .map_err(|_| self.late())?
    }

    /// Counts an event that is no part of the answer.
    fn skip(&mut self, event: &Event) -> Result<(), ProviderError> {
        self.skipped += 1;
        if self.skipped > SKIPPED_MAX {
            return Err(ProviderError::Garbage(format!(
                "the Wyoming server sent more than {SKIPPED_MAX} events that answer nothing (last: {:?})",
                short(&event.kind)
            )));
        }
        Ok(())
    }

    async fn read_event(&mut self) -> Result<Event, ProviderError> {
        let lost =
            |e: std::io::Error| ProviderError::Failed(format!("the Wyoming server went away: {e}"));
        let mut line = Vec::new();
        (&mut self.stream)
            .take(HEADER_MAX + 1)
            .read_until(b'\n', &mut line)
            .await
            .map_err(lost)?;
        if line.last() != Some(&b'\n') {
            return Err(if line.len() as u64 > HEADER_MAX {
                ProviderError::Garbage(format!(
                    "the Wyoming server sent an event header longer than {HEADER_MAX} bytes"
                ))
            } else {
                ProviderError::Failed("the Wyoming server closed the connection".into())
            });
        }
        let garbage = || ProviderError::Garbage("the server does not speak Wyoming".into());
        let header: Value = serde_json::from_slice(&line).map_err(|_| garbage())?;
        let kind = header
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(garbage)?
            .to_string();
        let mut data = match header.get("data") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(o)) => o.clone(),
            Some(_) => return Err(garbage()),
        };
        let data_length = length(&header, "data_length", DATA_MAX)?;
        if data_length > 0 {
            let mut bytes = vec![0; data_length];
            self.stream.read_exact(&mut bytes).await.map_err(lost)?;
            match serde_json::from_slice(&bytes).map_err(|_| garbage())? {
                Value::Object(more) => data.extend(more),
                _ => return Err(garbage()),
            }
        }
        let mut payload = vec![0; length(&header, "payload_length", PAYLOAD_MAX)?];
        self.stream.read_exact(&mut payload).await.map_err(lost)?;
        Ok(Event {
            kind,
            data,
            payload,
        })
    }
}

/// A length field of a header, at most `max`.
fn length(header: &Value, key: &str, max: u64) -> Result<usize, ProviderError> {
    match header.get(key) {
        None | Some(Value::Null) => Ok(0),
        Some(v) => v
            .as_u64()
            .filter(|n| *n <= max)
            .map(|n| n as usize)
            .ok_or_else(|| {
                ProviderError::Garbage(format!(
                    "the Wyoming server announced a {key} over {max} bytes"
                ))
            }),
    }
}

/// The first line of a server's text, shortened.
fn short(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(MESSAGE_MAX)
        .collect()
}

/// An `error` event as a provider error.
fn server_error(event: &Event) -> ProviderError {
    let text = event.data.get("text").and_then(Value::as_str).unwrap_or("");
    ProviderError::Failed(format!(
        "the Wyoming server answered an error: {}",
        short(text)
    ))
}

/// Recognises mono 16 kHz speech. `model` and `language` are sent when set. Returns the text
/// and the language heard, when the server says (a transcript's `language`).
pub async fn transcribe(
    url: &str,
    model: &str,
    language: &str,
    pcm: &[i16],
    timeout: Duration,
) -> Result<(String, Option<String>), ProviderError> {
    let mut c = Connection::open(url, timeout).await?;
    let mut request = Map::new();
    if !model.is_empty() {
        request.insert("name".into(), model.into());
    }
    if !language.is_empty() {
        request.insert("language".into(), language.into());
    }
    c.send("transcribe", &Value::Object(request), &[]).await?;
    let format = json!({ "rate": pcm::RECOGNISER_RATE, "width": 2, "channels": 1 });
    c.send("audio-start", &format, &[]).await?;
    for chunk in pcm.chunks(CHUNK_SAMPLES) {
        c.send("audio-chunk", &format, &pcm::samples_to_le(chunk))
            .await?;
    }
    c.send("audio-stop", &json!({}), &[]).await?;
    loop {
        let event = c.next().await?;
        match event.kind.as_str() {
            "transcript" => {
                let text = event
                    .data
                    .get("text")
                    .and_then(Value::as_str)
                    .map(|t| t.trim().to_string())
                    .ok_or_else(|| ProviderError::Garbage("a transcript without text".into()))?;
                let heard = event.data.get("language").and_then(Value::as_str);
                return Ok((text, heard.map(str::to_string)));
            }
            "error" => return Err(server_error(&event)),
            _ => c.skip(&event)?,
        }
    }
}

/// The format of synthesised audio, as `audio-start` (or the first chunk) says.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
struct Format {
    rate: u32,
    channels: u16,
}

impl Format {
    /// Reads `rate`, `width` and `channels`; only 16-bit samples are taken.
    fn of(data: &Map<String, Value>) -> Result<Format, ProviderError> {
        let field = |k: &str| data.get(k).and_then(Value::as_u64);
        match (field("rate"), field("width"), field("channels")) {
            (Some(rate @ 1..=192_000), Some(2), Some(channels @ 1..=8)) => Ok(Format {
                rate: rate as u32,
                channels: channels as u16,
            }),
            _ => Err(ProviderError::Garbage(
                "the Wyoming server's audio is not 16-bit PCM at a rate up to 192 kHz".into(),
            )),
        }
    }
}

/// Synthesised audio on its way to 24 kHz mono, piece by piece.
struct Decoder {
    format: Format,
    resampler: pcm::Resampler,
    /// The start of a frame cut by the end of a chunk.
    carry: Vec<u8>,
    total: usize,
}

impl Decoder {
    fn new(format: Format) -> Decoder {
        Decoder {
            format,
            resampler: pcm::Resampler::new(format.rate, pcm::OUTPUT_RATE),
            carry: Vec::new(),
            total: 0,
        }
    }

    /// The output samples that `bytes` complete.
    fn push(&mut self, bytes: &[u8]) -> Result<Vec<i16>, ProviderError> {
        self.total += bytes.len();
        if self.total > AUDIO_MAX {
            return Err(ProviderError::Garbage(format!(
                "the Wyoming server sent more than {} MiB of audio",
                AUDIO_MAX >> 20
            )));
        }
        self.carry.extend_from_slice(bytes);
        let frame = 2 * self.format.channels as usize;
        let whole = self.carry.len() / frame * frame;
        let samples = pcm::samples_from_le(&self.carry[..whole]);
        self.carry.drain(..whole);
        let mono = pcm::downmix(&samples, self.format.channels);
        let mut out = Vec::with_capacity(mono.len() * 2);
        self.resampler.push(&mono, &mut out);
        Ok(out)
    }

    fn finish(&mut self) -> Vec<i16> {
        let mut out = Vec::new();
        self.resampler.finish(&mut out);
        out
    }
}

/// Speaks `text` in `voice` (a voice the server lists; empty: its default) into `out`, each
/// chunk passed on as it arrives.
pub async fn speak(
    url: &str,
    text: &str,
    voice: &str,
    timeout: Duration,
    out: &mut impl Speech,
) -> Result<(), ProviderError> {
    let mut c = Connection::open(url, timeout).await?;
    let mut request = json!({ "text": text });
    if !voice.is_empty() {
        request["voice"] = json!({ "name": voice });
    }
    c.send("synthesize", &request, &[]).await?;
    let mut decoder: Option<Decoder> = None;
    let mut begun = false;
    loop {
        let event = c.next().await?;
        match event.kind.as_str() {
            "audio-start" => decoder = Some(Decoder::new(Format::of(&event.data)?)),
            "audio-chunk" => {
                let format = Format::of(&event.data)?;
                let d = decoder.get_or_insert_with(|| Decoder::new(format));
                if d.format != format {
                    return Err(ProviderError::Garbage(
                        "the Wyoming server changed the audio format mid-stream".into(),
                    ));
                }
                let samples = d.push(&event.payload)?;
                if samples.is_empty() {
                    continue;
                }
                if !begun {
                    begun = true;
                    out.begin(text);
                }
                if !out.push(&samples) {
                    return Ok(());
                }
            }
            "audio-stop" => {
                if let Some(d) = &mut decoder {
                    let last = d.finish();
                    if !last.is_empty() {
                        if !begun {
                            out.begin(text);
                        }
                        out.push(&last);
                    }
                }
                out.flush();
                return Ok(());
            }
            "error" => return Err(server_error(&event)),
            _ => c.skip(&event)?,
        }
    }
}

/// What a Wyoming server offers, from its `info`.
#[derive(Debug, Default, PartialEq)]
pub struct Info {
    /// Names of its speech recognition programs.
    pub asr: Vec<String>,
    /// Names of its speech synthesis programs.
    pub tts: Vec<String>,
    /// Names of the voices of its synthesis programs.
    pub voices: Vec<String>,
}

/// Asks the server what it offers (`describe` → `info`).
pub async fn describe(url: &str, timeout: Duration) -> Result<Info, ProviderError> {
    let mut c = Connection::open(url, timeout).await?;
    c.send("describe", &json!({}), &[]).await?;
    loop {
        let event = c.next().await?;
        match event.kind.as_str() {
            "info" => return Ok(info(&event.data)),
            "error" => return Err(server_error(&event)),
            _ => c.skip(&event)?,
        }
    }
}

fn info(data: &Map<String, Value>) -> Info {
    let programs = |key: &str| -> Vec<&Map<String, Value>> {
        data.get(key)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_object).collect())
            .unwrap_or_default()
    };
    let name = |o: &Map<String, Value>| o.get("name").and_then(Value::as_str).map(short);
    let tts = programs("tts");
    Info {
        asr: programs("asr").into_iter().filter_map(name).collect(),
        tts: tts.iter().copied().filter_map(name).collect(),
        voices: tts
            .iter()
            .filter_map(|p| p.get("voices").and_then(Value::as_array))
            .flatten()
            .filter_map(Value::as_object)
            .filter_map(name)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::{Format, address};
    use serde_json::json;

    #[test]
    fn addresses_are_tcp_with_a_port() {
        assert_eq!(
            address("tcp://192.168.1.10:10300"),
            Ok(("192.168.1.10".into(), 10300))
        );
        assert_eq!(address("tcp://[::1]:10200"), Ok(("::1".into(), 10200)));
        for bad in [
            "http://host:10300",
            "tcp://host",
            "tcp://:10300",
            "tcp://host:0",
            "tcp://host:10300/x",
            "host:10300",
            "",
        ] {
            assert!(address(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_16_bit_audio_is_taken() {
        let of = |v: serde_json::Value| Format::of(v.as_object().unwrap());
        assert_eq!(
            of(json!({"rate": 22050, "width": 2, "channels": 1})),
            Ok(Format {
                rate: 22050,
                channels: 1
            })
        );
        assert!(of(json!({"rate": 22050, "width": 4, "channels": 1})).is_err());
        assert!(of(json!({"rate": 0, "width": 2, "channels": 1})).is_err());
        assert!(of(json!({"width": 2, "channels": 1})).is_err());
    }
}
