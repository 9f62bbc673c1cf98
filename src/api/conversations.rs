//! A character's conversation history (admin): pages of it, per character or per visit, the
//! questions the knowledge did not answer, an export as CSV or JSON streamed in batches, the
//! purge, forgetting one visit, and the statistics of visits and questions.

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::Value;

use super::auth::Admin;
use super::error::ApiResult;
use super::extract::{Params, QueryArgs};
use super::state::{AppState, blocking};
use super::statuses;
use crate::engine::error::not_found;
use crate::engine::history::{HistoryPage, Purge};
use crate::engine::statistics::{Statistics, Unmatched};
use crate::engine::{CharacterId, Message, SessionId};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/api/v1/characters/{id}/conversations/messages",
            get(history).delete(purge_history),
        )
        .route("/api/v1/characters/{id}/conversations/export", get(export))
        .route(
            "/api/v1/characters/{id}/conversations/unmatched",
            get(unmatched),
        )
        .route(
            "/api/v1/characters/{id}/conversations/visits/{session_id}",
            delete(forget_visit),
        )
        .route("/api/v1/characters/{id}/statistics", get(statistics))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct HistoryQuery {
    /// Messages per page (default 50, at most 200).
    #[param(minimum = 1)]
    limit: Option<usize>,
    /// The `next_cursor` of the previous page.
    before: Option<String>,
    /// Only this visit's messages.
    session_id: Option<String>,
}

/// A page of the history, newest first.
#[utoipa::path(get, path = "/api/v1/characters/{id}/conversations/messages", tag = "conversations",
    params(("id" = String, Path, description = "Character id"), HistoryQuery),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "A page of messages, newest first", body = HistoryPage),
        statuses::AdminCharacterRead,
    ))]
async fn history(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
    QueryArgs(q): QueryArgs<HistoryQuery>,
) -> ApiResult<Json<HistoryPage>> {
    Ok(Json(s.engine.history(
        &id,
        q.limit,
        q.before.as_deref(),
        q.session_id.as_deref().filter(|s| !s.is_empty()),
    )?))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct UnmatchedQuery {
    /// How many questions (default 50, at most 200).
    #[param(minimum = 1)]
    limit: Option<usize>,
}

/// The questions the knowledge did not answer.
#[derive(serde::Serialize, utoipa::ToSchema)]
struct UnmatchedList {
    questions: Vec<Unmatched>,
}

#[utoipa::path(get, path = "/api/v1/characters/{id}/conversations/unmatched", tag = "conversations",
    params(("id" = String, Path, description = "Character id"), UnmatchedQuery),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "Unanswered questions, most recently asked first", body = UnmatchedList),
        statuses::AdminCharacterRead,
    ))]
async fn unmatched(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
    QueryArgs(q): QueryArgs<UnmatchedQuery>,
) -> ApiResult<Json<UnmatchedList>> {
    let questions = blocking(&s, move |e| {
        e.unmatched_questions(&CharacterId::parse(&id)?, q.limit)
    })
    .await?;
    Ok(Json(UnmatchedList { questions }))
}

/// The formats of an export.
#[derive(Deserialize, Clone, Copy, Default, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
enum Format {
    #[default]
    Csv,
    Json,
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ExportQuery {
    /// `csv` (default) or `json`.
    #[serde(default)]
    #[param(inline)]
    format: Format,
    /// Only this visit's messages.
    session_id: Option<String>,
}

/// Where an export stands: the next message number to read after, and what is left to write.
enum Step {
    Start,
    After(Option<u64>),
    Done,
}

/// The history (or one visit's), oldest first, as a download. It is read one batch per short
/// read transaction while the response streams, so a long history never sits in memory.
#[utoipa::path(get, path = "/api/v1/characters/{id}/conversations/export", tag = "conversations",
    params(("id" = String, Path, description = "Character id"), ExportQuery),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (
            status = 200,
            description = "The history as a download (`Content-Disposition: attachment`): CSV with a header row, \
                or JSON `{character_id, messages}`",
            content((String = "text/csv"), (Object = "application/json")),
        ),
        statuses::AdminCharacterRead,
    ))]
async fn export(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
    QueryArgs(q): QueryArgs<ExportQuery>,
) -> ApiResult<Response> {
    let id = CharacterId::parse(&id)?;
    let character = s.engine.character(&id)?;
    let session = q.session_id.filter(|s| !s.is_empty());
    let format = q.format;
    let name = file_name(&character.name);
    let (kind, ext) = match format {
        Format::Csv => ("text/csv; charset=utf-8", "csv"),
        Format::Json => ("application/json", "json"),
    };
    let today = &crate::engine::now()[..10];
    let disposition = format!("attachment; filename=\"conversations-{name}-{today}.{ext}\"");
    let state = s.clone();
    let body = futures_util::stream::unfold(Step::Start, move |step| {
        let s = state.clone();
        let id = id.clone();
        let session = session.clone();
        async move {
            let (after, mut out) = match step {
                Step::Done => return None,
                Step::Start => (None, head(format, &id)),
                Step::After(after) => (after, String::new()),
            };
            let read = blocking(&s, move |e| e.history_batch(&id, after, session.as_deref())).await;
            let (batch, next) = match read {
                Ok(r) => r,
                // The download ends short: a client sees a broken transfer, not a whole file.
                Err(_) => {
                    let e = std::io::Error::other("cannot read the history");
                    return Some((Err(e), Step::Done));
                }
            };
            for (i, m) in batch.iter().enumerate() {
                let first = after.is_none() && i == 0;
                write_message(format, &mut out, m, first);
            }
            let step = match next {
                Some(n) => Step::After(Some(n)),
                None => {
                    if let Format::Json = format {
                        out.push_str("\n]}\n");
                    }
                    Step::Done
                }
            };
            Some((Ok::<_, std::io::Error>(Bytes::from(out)), step))
        }
    });
    Ok((
        [
            (CONTENT_TYPE, kind.to_string()),
            (CONTENT_DISPOSITION, disposition),
        ],
        Body::from_stream(body),
    )
        .into_response())
}

/// A character's name as part of a file name staff recognise: lower-case ASCII letters and
/// digits, words joined by `-` ("Ada Lovelace" -> "ada-lovelace"); "character" when nothing is
/// left.
fn file_name(name: &str) -> String {
    let words: Vec<String> = name
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let joined = words.join("-");
    if joined.is_empty() {
        "character".into()
    } else {
        joined.chars().take(60).collect()
    }
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct StatisticsQuery {
    /// `json` (default) or `csv` (the days, as a download).
    #[param(inline)]
    format: Option<Format>,
}

/// Visits and questions per day, answered, asked again and unanswered, and the most asked
/// questions, over the kept history; staff tests left out.
#[utoipa::path(get, path = "/api/v1/characters/{id}/statistics", tag = "conversations",
    params(("id" = String, Path, description = "Character id"), StatisticsQuery),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (
            status = 200,
            description = "The statistics, or with `format=csv` the days as a download \
                (`Content-Disposition: attachment`)",
            content((Statistics = "application/json"), (String = "text/csv")),
        ),
        statuses::AdminCharacterRead,
    ))]
async fn statistics(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
    QueryArgs(q): QueryArgs<StatisticsQuery>,
) -> ApiResult<Response> {
    let id = CharacterId::parse(&id)?;
    let character = s.engine.character(&id)?;
    let stats = blocking(&s, move |e| e.statistics(&id)).await?;
    let Some(Format::Csv) = q.format else {
        return Ok(Json(stats).into_response());
    };
    let mut out = String::from("day,visits,questions,answered,unanswered,asked_again,by_touch\r\n");
    for d in &stats.days {
        let row = [
            d.day.clone(),
            d.visits.to_string(),
            d.questions.to_string(),
            d.answered.to_string(),
            d.unanswered.to_string(),
            d.asked_again.to_string(),
            d.by_touch.to_string(),
        ];
        for (i, field) in row.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            csv_field(&mut out, field);
        }
        out.push_str("\r\n");
    }
    let today = &crate::engine::now()[..10];
    let name = file_name(&character.name);
    Ok((
        [
            (CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
            (
                CONTENT_DISPOSITION,
                format!("attachment; filename=\"statistics-{name}-{today}.csv\""),
            ),
        ],
        out,
    )
        .into_response())
}

/// What comes before the first message.
fn head(format: Format, character_id: &str) -> String {
    match format {
        Format::Csv => "timestamp,session_id,turn_seq,role,content,unmatched,staff\r\n".into(),
        Format::Json => format!(
            "{{\"character_id\":{},\"messages\":[",
            Value::from(character_id)
        ),
    }
}

fn write_message(format: Format, out: &mut String, m: &Message, first: bool) {
    match format {
        Format::Csv => {
            for (i, field) in [
                m.timestamp.as_str(),
                &m.session_id,
                &m.turn_seq.to_string(),
                &m.role,
                &m.content,
                if m.unmatched { "true" } else { "false" },
                if m.staff { "true" } else { "false" },
            ]
            .into_iter()
            .enumerate()
            {
                if i > 0 {
                    out.push(',');
                }
                csv_field(out, field);
            }
            out.push_str("\r\n");
        }
        Format::Json => {
            out.push_str(if first { "\n" } else { ",\n" });
            out.push_str(&serde_json::to_string(m).expect("a message serialises"));
        }
    }
}

/// One CSV field, always quoted (RFC 4180: quotes doubled, line breaks kept inside). A
/// visitor's words starting with `=`, `+`, `-`, `@` or a tab are prefixed with `'`, so that a
/// spreadsheet opening the file shows them as text instead of running them as a formula.
fn csv_field(out: &mut String, field: &str) {
    out.push('"');
    if field.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        out.push('\'');
    }
    out.push_str(&field.replace('"', "\"\""));
    out.push('"');
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct PurgeQuery {
    /// Only this visit's messages.
    session_id: Option<String>,
    /// Only messages before this date (`YYYY-MM-DD` or RFC 3339).
    before_date: Option<String>,
}

/// What a purge removed.
#[derive(serde::Serialize, utoipa::ToSchema)]
struct Purged {
    deleted: usize,
}

/// Removes the whole history of a character, one session's messages, or those before a date.
#[utoipa::path(delete, path = "/api/v1/characters/{id}/conversations/messages", tag = "conversations",
    params(("id" = String, Path, description = "Character id"), PurgeQuery),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "Removed; how many messages", body = Purged),
        statuses::AdminAction,
        statuses::NoSuchCharacter,
        (status = 400, description = "Invalid parameter or date", body = crate::api::schema::ErrorBody),
        (status = 507, description = "The data partition is full", body = crate::api::schema::ErrorBody),
    ))]
async fn purge_history(
    _: Admin,
    State(s): State<AppState>,
    Params(id): Params<String>,
    QueryArgs(q): QueryArgs<PurgeQuery>,
) -> ApiResult<Json<Purged>> {
    let purge = Purge::parse(q.session_id.as_deref(), q.before_date.as_deref())?;
    let deleted = blocking(&s, move |e| {
        e.purge_history(&CharacterId::parse(&id)?, &purge)
    })
    .await?;
    Ok(Json(Purged { deleted }))
}

/// What forgetting a visit removed.
#[derive(serde::Serialize, utoipa::ToSchema)]
struct Forgotten {
    /// Messages removed from the history.
    deleted: usize,
}

/// Forgets one visit at once, as a visitor may ask (docs/privacy.md): its messages leave the
/// history, the unanswered list and the exports, their counts stay in the statistics, and the
/// visit ends if it is still open.
#[utoipa::path(delete, path = "/api/v1/characters/{id}/conversations/visits/{session_id}",
    tag = "conversations",
    params(
        ("id" = String, Path, description = "Character id"),
        ("session_id" = String, Path, description = "The visit (session) id"),
    ),
    security(("admin_session" = []), ("bearer" = [])),
    responses(
        (status = 200, description = "Forgotten; how many messages went", body = Forgotten),
        statuses::AdminAction,
        (status = 404, description = "No such character, or it has no such visit",
            body = crate::api::schema::ErrorBody),
        (status = 507, description = "The data partition is full", body = crate::api::schema::ErrorBody),
    ))]
async fn forget_visit(
    _: Admin,
    State(s): State<AppState>,
    Params((id, session_id)): Params<(String, String)>,
) -> ApiResult<Json<Forgotten>> {
    let deleted = blocking(&s, move |e| {
        let id = CharacterId::parse(&id)?;
        // An id that is not one is a visit this character never had, as before.
        let session_id = SessionId::parse(&session_id)
            .map_err(|_| not_found("this character has no such visit"))?;
        e.forget_visit(&id, &session_id)
    })
    .await?;
    Ok(Json(Forgotten { deleted }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_and_formulas_defused() {
        let mut out = String::new();
        csv_field(&mut out, "say \"hi\",\nthen go");
        assert_eq!(out, "\"say \"\"hi\"\",\nthen go\"");
        out.clear();
        csv_field(&mut out, "=HYPERLINK(\"x\")");
        assert_eq!(out, "\"'=HYPERLINK(\"\"x\"\")\"");
    }
}
