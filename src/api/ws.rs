//! WebSocket chat, `/ws/chat/{session_id}` (the messages and decisions: docs/api.md, "Realtime").
//!
//! Each socket is a watcher of the session's live events plus a source of input. Outgoing frames
//! go through a bounded queue: a socket that cannot keep up is closed with 1013 instead of
//! silently losing events (the client then reloads the history over REST).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::http::StatusCode;
use axum::http::header::SEC_WEBSOCKET_PROTOCOL;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use super::auth::{Opener, caller, peer};
use super::error::ApiError;
use super::extract::{Params, QueryArgs};
use super::state::{AppState, blocking};
use super::statuses;
use super::streams::{Buffer, Streams};
use crate::engine::access::{Owner, Use};
use crate::engine::live::{AudioWanted, ErrorCode, Event, LiveSession};
use crate::engine::pcm;
use crate::engine::turn::TurnInput;
use crate::engine::{Engine, Error, SessionId};

/// Largest frame accepted from a client.
const FRAME_MAX: usize = 1 << 20;
/// Outgoing frames queued for one socket before it counts as too slow.
const SEND_QUEUE: usize = 256;
const PING_EVERY: Duration = Duration::from_secs(30);
const SILENCE_MAX: Duration = Duration::from_secs(90);
/// Longest utterance buffered from one `audio_start` (at 48 kHz stereo, ~60 s).
const UTTERANCE_MAX_BYTES: usize = 48_000 * 2 * 2 * 60;

const CLOSE_NORMAL: u16 = 1000;
const CLOSE_GOING_AWAY: u16 = 1001;
const CLOSE_TOO_BIG: u16 = 1009;
const CLOSE_TRY_LATER: u16 = 1013;
/// The credential that opened the socket was revoked, logged out or expired.
const CLOSE_POLICY: u16 = 1008;

pub fn routes() -> Router<AppState> {
    Router::new().route("/ws/chat/{id}", get(upgrade))
}

/// Subprotocol a browser offers beside `KEY_PROTOCOL_PREFIX<key>`; the answer names it, so
/// the key is never echoed back.
const PROTOCOL: &str = "docent";
/// A browser cannot set `Authorization` on a WebSocket: it offers the client key as the
/// subprotocol `docent-key.<key>` (or sends it as `?key=`).
const KEY_PROTOCOL_PREFIX: &str = "docent-key.";

#[derive(serde::Deserialize)]
struct KeyQuery {
    key: Option<String>,
}

#[utoipa::path(get, path = "/ws/chat/{id}", tag = "sessions",
    params(
        ("id" = String, Path, description = "Session id"),
        ("key" = Option<String>, Query, description = "A client key (browsers cannot set Authorization)"),
    ),
    security(("admin_session" = []), ("bearer" = []), ()),
    responses(
        (status = 101, description = "Switching to the WebSocket chat protocol"),
        statuses::NotClient,
        statuses::NotOwner,
        statuses::NoSuchResource,
        (
            status = 400,
            description = "Invalid parameter, or not a WebSocket upgrade request",
            body = crate::api::schema::ErrorBody,
        ),
        (
            status = 426,
            description = "An upgrade on a connection that cannot switch protocols (HTTP/1.0)",
            body = crate::api::schema::ErrorBody,
        ),
        (status = 503, description = "Too many live WebSockets", body = crate::api::schema::ErrorBody),
    ))]
async fn upgrade(
    State(s): State<AppState>,
    Params(id): Params<String>,
    QueryArgs(q): QueryArgs<KeyQuery>,
    request: Parts,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let offered = request
        .headers
        .get_all(SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .find_map(|p| p.trim().strip_prefix(KEY_PROTOCOL_PREFIX))
        .map(str::to_string);
    let key = offered.or(q.key);
    let caller = caller(&s.engine, &request.headers, peer(&request), key.as_deref())?;
    let opener = Opener::new(
        &request.headers,
        peer(&request),
        key.as_deref(),
        caller.clone(),
    );
    let opener_owner = caller.clone();
    // The owner (or an administrator) steers the session; an administrator on the kiosk's
    // visitor session only watches it.
    let (live, read_only) = blocking(&s, move |e| {
        let id = SessionId::parse(&id)?;
        match e.live_for(&id, &caller, Use::Steer) {
            Err(Error::Forbidden(_)) => e
                .live_for(&id, &caller, Use::Watch)
                .map(|live| (live, None)),
            other => other.map(|live| (live, Some(caller))),
        }
    })
    .await?;
    let ws = ws.map_err(|e| ApiError::new(e.status(), e.body_text()))?;
    let place = s.streams.websocket(&opener_owner).ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many live WebSockets; try again later",
        )
    })?;
    let engine = s.engine.clone();
    let streams = s.streams.clone();
    Ok(ws
        .protocols([PROTOCOL])
        .max_message_size(FRAME_MAX + 64 * 1024)
        .max_frame_size(FRAME_MAX + 64 * 1024)
        .on_upgrade(move |socket| async move {
            serve(engine, streams, live, read_only, opener, socket).await;
            drop(place);
        })
        .into_response())
}

/// One client's utterance in progress.
struct Utterance {
    rate: u32,
    channels: u16,
    bytes: Buffer,
}

async fn serve(
    engine: Arc<Engine>,
    streams: Arc<Streams>,
    live: Arc<LiveSession>,
    steer: Option<Owner>,
    opener: Opener,
    socket: WebSocket,
) {
    let (mut sink, mut stream) = socket.split();
    // Reply audio is queued with its turn number: audio of a turn that is no longer current
    // is dropped here, as late as possible, so an interrupt cuts off what is still queued.
    let (out, mut queue) = mpsc::channel::<(Option<u64>, Message)>(SEND_QUEUE);
    let current = live.clone();
    let writer = tokio::spawn(async move {
        while let Some((turn, msg)) = queue.recv().await {
            if turn.is_some_and(|t| t != current.turn_seq()) {
                continue;
            }
            let closing = matches!(msg, Message::Close(_));
            if sink.send(msg).await.is_err() || closing {
                break;
            }
        }
        let _ = sink.close().await;
    });
    let mut events = live.subscribe();
    let hello = json!({
        "type": "session",
        "session_id": live.id,
        "character_id": live.character_id,
        "turn_seq": live.turn_seq(),
    });
    let _ = out.try_send((None, text(hello)));
    let mut audio: Option<AudioWanted> = None;
    let mut utterance: Option<Utterance> = None;
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.tick().await;
    let mut last_heard = tokio::time::Instant::now();
    let revoked = opener.ended(&engine);
    tokio::pin!(revoked);
    let close = loop {
        tokio::select! {
            event = events.recv() => match event {
                Ok(Event::Closed) => break (CLOSE_GOING_AWAY, "session ended"),
                Ok(event) => {
                    if let Some(frame) = frame_of(&event, audio.is_some())
                        && out.try_send(frame).is_err()
                    {
                        break (CLOSE_TRY_LATER, "client too slow; reload the history");
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    break (CLOSE_TRY_LATER, "client too slow; reload the history")
                }
                Err(broadcast::error::RecvError::Closed) => break (CLOSE_GOING_AWAY, "session ended"),
            },
            incoming = stream.next() => {
                last_heard = tokio::time::Instant::now();
                match incoming {
                    None | Some(Err(_)) => break (CLOSE_NORMAL, ""),
                    Some(Ok(Message::Close(_))) => break (CLOSE_NORMAL, ""),
                    Some(Ok(Message::Text(t))) if t.len() > FRAME_MAX => break (CLOSE_TOO_BIG, "frame too large"),
                    Some(Ok(Message::Binary(b))) if b.len() > FRAME_MAX => break (CLOSE_TOO_BIG, "frame too large"),
                    Some(Ok(Message::Text(_) | Message::Binary(_))) if steer.is_none() => {
                        let refusal = error("this socket only watches the kiosk's session", ErrorCode::Forbidden);
                        let _ = out.try_send((None, text(refusal)));
                    }
                    Some(Ok(Message::Text(t))) => {
                        let caller = steer.as_ref().expect("watch-only sockets answered above");
                        if let Err(reply) = handle(&engine, &streams, &live, caller, &t, &mut audio, &mut utterance) {
                            let _ = out.try_send((None, text(reply)));
                        }
                    }
                    Some(Ok(Message::Binary(b))) => match &mut utterance {
                        Some(u) if u.bytes.len() + b.len() <= UTTERANCE_MAX_BYTES => {
                            if u.bytes.extend(&b).is_err() {
                                break (CLOSE_TRY_LATER, "server busy: too much audio buffered; try again later");
                            }
                        }
                        Some(_) => {
                            utterance = None;
                            let _ = out.try_send((None, text(error("utterance too long", ErrorCode::BadRequest))));
                        }
                        None => {
                            let refusal = error("send audio_start before audio", ErrorCode::BadRequest);
                            let _ = out.try_send((None, text(refusal)));
                        }
                    },
                    Some(Ok(_)) => {}
                }
            },
            () = &mut revoked => break (CLOSE_POLICY, "the credential that opened this socket has ended"),
            _ = ping.tick() => {
                if last_heard.elapsed() > SILENCE_MAX {
                    break (CLOSE_GOING_AWAY, "no activity");
                }
                let _ = out.try_send((None, Message::Ping(Default::default())));
            }
        }
    };
    drop(audio);
    let frame = CloseFrame {
        code: close.0,
        reason: Utf8Bytes::from_static(close.1),
    };
    let _ = out.send((None, Message::Close(Some(frame)))).await;
    drop(out);
    let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
}

fn text(v: Value) -> Message {
    Message::Text(Utf8Bytes::from(v.to_string()))
}

fn error(message: &str, code: ErrorCode) -> Value {
    json!({"type": "error", "message": message, "code": code})
}

/// A message a client sends on the socket, checked (docs/api.md, "Realtime").
#[derive(Debug, PartialEq)]
pub enum ClientMessage {
    /// A typed question, trimmed and not blank.
    TextInput(String),
    Interrupt,
    ClientMediaReady,
    /// Audio (`pcm_s16le`) follows in binary frames until `audio_end`.
    AudioStart {
        rate: u32,
        channels: u16,
    },
    AudioEnd,
    AudioOutput {
        enabled: bool,
    },
}

/// Parses one text frame; an `Err` is the error frame to answer with.
pub fn parse_client_message(raw: &str) -> Result<ClientMessage, Value> {
    let msg: Value = serde_json::from_str(raw)
        .map_err(|e| error(&format!("invalid JSON: {e}"), ErrorCode::BadRequest))?;
    Ok(match msg["type"].as_str().unwrap_or("") {
        "text_input" => {
            let t = msg["text"].as_str().unwrap_or("").trim();
            if t.is_empty() {
                return Err(error("text must not be blank", ErrorCode::BadRequest));
            }
            ClientMessage::TextInput(t.to_string())
        }
        "interrupt" => ClientMessage::Interrupt,
        "client_media_ready" => ClientMessage::ClientMediaReady,
        "audio_start" => {
            let rate = msg["sample_rate"].as_u64().unwrap_or(16_000);
            let channels = msg["channels"].as_u64().unwrap_or(1);
            let format = msg["format"].as_str().unwrap_or("pcm_s16le");
            if !(8_000..=48_000).contains(&rate)
                || !(1..=2).contains(&channels)
                || format != "pcm_s16le"
            {
                return Err(error(
                    "audio must be pcm_s16le, 8000 to 48000 Hz, mono or stereo",
                    ErrorCode::BadRequest,
                ));
            }
            ClientMessage::AudioStart {
                rate: rate as u32,
                channels: channels as u16,
            }
        }
        "audio_end" => ClientMessage::AudioEnd,
        "audio_output" => ClientMessage::AudioOutput {
            enabled: msg["enabled"].as_bool().unwrap_or(false),
        },
        other => {
            return Err(error(
                &format!("unknown message type {other:?}"),
                ErrorCode::BadRequest,
            ));
        }
    })
}

/// Acts on one client message; an `Err` is the error frame to answer with.
fn handle(
    engine: &Arc<Engine>,
    streams: &Streams,
    live: &Arc<LiveSession>,
    caller: &Owner,
    raw: &str,
    audio: &mut Option<AudioWanted>,
    utterance: &mut Option<Utterance>,
) -> Result<(), Value> {
    match parse_client_message(raw)? {
        ClientMessage::TextInput(text) => {
            spend(engine, caller)?;
            engine.start_turn(
                live,
                TurnInput::Text {
                    text,
                    stored: false,
                },
            );
        }
        ClientMessage::Interrupt => {
            engine.interrupt(live);
        }
        ClientMessage::ClientMediaReady => {
            if live.first_greeting() {
                engine.start_turn(live, TurnInput::Greeting);
            }
        }
        ClientMessage::AudioStart { rate, channels } => {
            *utterance = Some(Utterance {
                rate,
                channels,
                bytes: streams.buffer(),
            });
            engine.listen(live);
        }
        ClientMessage::AudioEnd => {
            let Some(u) = utterance.take() else {
                return Err(error(
                    "audio_end without audio_start",
                    ErrorCode::BadRequest,
                ));
            };
            spend(engine, caller)?;
            let pcm = pcm::to_recogniser(u.bytes.bytes(), u.rate, u.channels);
            engine.start_turn(live, TurnInput::Audio(pcm));
        }
        ClientMessage::AudioOutput { enabled } => {
            *audio = enabled.then(|| live.want_audio());
        }
    }
    Ok(())
}

/// Takes a message from the caller's budget; the error frame when it is used up.
fn spend(engine: &Engine, caller: &Owner) -> Result<(), Value> {
    engine
        .spend_message(caller)
        .map_err(|e| error(&e.to_string(), ErrorCode::RateLimited))
}

/// The frame a live event becomes on a socket, tagged with its turn when it is reply audio.
fn frame_of(event: &Event, wants_audio: bool) -> Option<(Option<u64>, Message)> {
    let v = match event {
        Event::Status { status, turn_seq } => {
            json!({"type": "avatar_status", "status": status, "turn_seq": turn_seq})
        }
        Event::Transcript {
            speaker,
            text,
            is_final,
            turn_seq,
        } => {
            json!({"type": "transcript", "speaker": speaker, "text": text, "is_final": is_final, "turn_seq": turn_seq})
        }
        Event::AssistantMessage { text, turn_seq } => {
            json!({"type": "assistant_message", "text": text, "turn_seq": turn_seq})
        }
        Event::AudioStart { turn_seq } if wants_audio => {
            json!({
                "type": "audio_start",
                "turn_seq": turn_seq,
                "sample_rate": pcm::OUTPUT_RATE,
                "channels": 1,
                "format": "pcm_s16le",
            })
        }
        Event::AudioEnd { turn_seq } if wants_audio => {
            json!({
                "type": "audio_end",
                "turn_seq": turn_seq,
                "sample_rate": pcm::OUTPUT_RATE,
                "channels": 1,
                "format": "pcm_s16le",
            })
        }
        Event::Audio { pcm, turn_seq } if wants_audio => {
            return Some((Some(*turn_seq), Message::Binary(pcm.clone())));
        }
        Event::Task { event, task } => json!({
            "type": "task_event", "task_id": event.task_id, "session_id": task.session_id, "seq": event.seq,
            "event_type": event.event_type, "status": event.status, "message": event.message,
            "progress": event.progress, "created_at": event.created_at, "task": task,
        }),
        Event::Error {
            message,
            code,
            turn_seq,
        } => json!({"type": "error", "message": message, "code": code, "turn_seq": turn_seq}),
        Event::AudioStart { .. }
        | Event::AudioEnd { .. }
        | Event::Audio { .. }
        | Event::UserSpeech { .. }
        | Event::Caption { .. }
        | Event::Closed => return None,
    };
    Some((None, text(v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_messages_are_checked_before_anything_acts_on_them() {
        assert_eq!(
            parse_client_message(r#"{"type":"text_input","text":"  Hi  "}"#),
            Ok(ClientMessage::TextInput("Hi".into()))
        );
        assert_eq!(
            parse_client_message(r#"{"type":"audio_start","sample_rate":48000,"channels":2}"#),
            Ok(ClientMessage::AudioStart {
                rate: 48_000,
                channels: 2
            })
        );
        assert_eq!(
            parse_client_message(r#"{"type":"audio_output","enabled":true}"#),
            Ok(ClientMessage::AudioOutput { enabled: true })
        );
        for refused in [
            "",
            "[]",
            r#"{"type":"text_input","text":" \n"}"#,
            r#"{"type":"audio_start","sample_rate":4294983296}"#,
            r#"{"type":"audio_start","channels":3}"#,
            r#"{"type":"audio_start","format":"opus"}"#,
            r#"{"type":"shutdown"}"#,
        ] {
            let e = parse_client_message(refused).expect_err(refused);
            assert_eq!(e["code"], "bad_request", "{refused}: {e}");
        }
    }
}
