//! What the console watches that the public API does not offer to admins: the kiosk's live
//! state with its visitor's conversation (`GET /api/v1/kiosk/events`, Server-Sent Events) and
//! the kiosk's screen (`GET /api/v1/kiosk/snapshot`), both admin-only.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use tokio::sync::{Semaphore, broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;

use crate::api::auth::{Admin, Opener, peer};
use crate::api::error::{ApiError, ApiResult};
use crate::api::extract::JsonBody;
use crate::api::state::{AppState, blocking};
use crate::api::statuses;
use crate::device::KioskState;
use crate::engine::SessionId;
use crate::engine::access::Owner;
use crate::engine::live::Event;
use axum::http::request::Parts;

/// Event streams open at once (each holds a task and a subscription); more get 503.
const STREAMS_MAX: usize = 8;
/// Events queued for one stream; a client that falls this far behind is dropped (its
/// `EventSource` reconnects and starts from the current state).
const QUEUE: usize = 64;

pub fn routes() -> Router<AppState> {
    // One bound per server (per router), not per process.
    let streams = Arc::new(Semaphore::new(STREAMS_MAX));
    Router::new()
        .route(
            "/api/v1/kiosk/events",
            get(move |admin: Admin, s: State<AppState>, parts: Parts| {
                events(admin, s, parts, streams.clone())
            }),
        )
        .route("/api/v1/kiosk/snapshot", get(snapshot))
        .route("/api/v1/kiosk/test-sound", post(test_sound))
}

/// The volume to play the test sound at.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TestSound {
    /// 0-100, as `kiosk.volume`.
    volume: u8,
}

/// Plays a short chime on the kiosk's speaker at the given volume (when the kiosk is idle; a
/// visitor comes first), so staff hear a volume before saving it.
#[utoipa::path(post, path = "/api/v1/kiosk/test-sound", tag = "console",
    request_body(content = TestSound, description = "JSON body", content_type = "application/json"),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "Asked to play (`status: playing`)", body = Object),
        statuses::AdminJsonWrite,
        (status = 503, description = "The kiosk has no speaker", body = crate::api::schema::ErrorBody),
    ))]
async fn test_sound(
    _: Admin,
    State(s): State<AppState>,
    JsonBody(t): JsonBody<TestSound>,
) -> ApiResult<axum::Json<serde_json::Value>> {
    if t.volume > 100 {
        return Err(ApiError::bad("volume must be between 0 and 100"));
    }
    if !s.devices.test_sound(t.volume) {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the kiosk has no speaker",
        ));
    }
    Ok(axum::Json(json!({"status": "playing"})))
}

#[utoipa::path(get, path = "/api/v1/kiosk/snapshot", tag = "console",
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (
            status = 200,
            description = "The simulated screen",
            body = crate::api::schema::Binary,
            content_type = "image/png",
        ),
        statuses::NotAdmin,
        statuses::NotSimulated,
    ))]
async fn snapshot(_: Admin, State(s): State<AppState>) -> ApiResult<Response> {
    crate::api::device::screen_png(&s).await
}

/// `state` events (`{status, character_id, session_id, opening}`) whenever the kiosk's state changes,
/// the first at once; `transcript`, `assistant` and `turn_error` events of the visitor's session.
#[utoipa::path(get, path = "/api/v1/kiosk/events", tag = "console",
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (
            status = 200,
            description = "Server-Sent Events: state, transcript, assistant, turn_error",
            body = String,
            content_type = "text/event-stream",
        ),
        statuses::NotAdmin,
        (status = 503, description = "Too many event streams", body = crate::api::schema::ErrorBody),
    ))]
async fn events(
    _: Admin,
    State(s): State<AppState>,
    parts: Parts,
    streams: Arc<Semaphore>,
) -> ApiResult<Response> {
    // The stream ends with the administrator session that opened it.
    let opener = Opener::new(&parts.headers, peer(&parts), None, Owner::Admin);
    let permit = streams.try_acquire_owned().map_err(|_| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many console event streams are open",
        )
    })?;
    let (tx, rx) = mpsc::channel(QUEUE);
    let state = s.devices.state.clone();
    let stopping = s.stopping.clone();
    tokio::spawn(async move {
        let _permit = permit;
        // The stream ends with the server, or the graceful shutdown would wait for the client.
        let engine = s.engine.clone();
        tokio::select! {
            () = forward(s, state, tx) => {}
            () = stopping.cancelled() => {}
            () = opener.ended(&engine) => {}
        }
    });
    let stream = ReceiverStream::new(rx);
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

type Tx = mpsc::Sender<Result<SseEvent, Infallible>>;

/// Sends the kiosk's state and its session's events to `tx` until the client goes away, is too
/// slow, or the server stops.
async fn forward(s: AppState, mut state: tokio::sync::watch::Receiver<KioskState>, tx: Tx) {
    let mut watched: Option<(String, broadcast::Receiver<Event>)> = None;
    loop {
        let now = state.borrow_and_update().clone();
        let event = SseEvent::default().event("state").data(
            json!({
                "status": now.status,
                "character_id": now.character_id,
                "session_id": now.session_id,
                "opening": now.opening,
            })
            .to_string(),
        );
        if tx.try_send(Ok(event)).is_err() {
            return;
        }
        if watched.as_ref().map(|(id, _)| id.as_str()) != Some(now.session_id.as_str()) {
            watched = None;
            if !now.session_id.is_empty() {
                let id = now.session_id.clone();
                if let Ok(live) = blocking(&s, move |e| e.live(&SessionId::parse(&id)?)).await {
                    watched = Some((now.session_id.clone(), live.subscribe()));
                }
            }
        }
        loop {
            let session = async {
                match &mut watched {
                    Some((_, events)) => events.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                changed = state.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    break;
                }
                event = session => match event {
                    Ok(event) => {
                        if let Some(e) = sse_of(&event)
                            && tx.try_send(Ok(e)).is_err()
                        {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => return,
                    Err(broadcast::error::RecvError::Closed) => {
                        watched = None;
                    }
                },
                _ = tx.closed() => return,
            }
        }
    }
}

/// The console's view of one session event; audio and bookkeeping are not shown.
fn sse_of(event: &Event) -> Option<SseEvent> {
    let (name, data) = match event {
        Event::Transcript {
            speaker,
            text,
            is_final,
            turn_seq,
        } => (
            "transcript",
            json!({"speaker": speaker, "text": text, "is_final": is_final, "turn_seq": turn_seq}),
        ),
        Event::AssistantMessage { text, turn_seq } => {
            ("assistant", json!({"text": text, "turn_seq": turn_seq}))
        }
        Event::Error {
            message, turn_seq, ..
        } => (
            "turn_error",
            json!({"message": message, "turn_seq": turn_seq}),
        ),
        _ => return None,
    };
    Some(SseEvent::default().event(name).data(data.to_string()))
}
