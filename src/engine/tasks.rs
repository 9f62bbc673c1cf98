//! Agent tasks of a session, their events and artifacts. Tasks are driven from outside (internal
//! routes); the engine keeps their rules: final states are final and progress never goes back.

use redb::{ReadableTable, WriteTransaction};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::access::{Owner, Use};
use super::error::{Error, Result, bad, not_found};
use super::live::Event;
use super::{Engine, SessionId, is_id, new_id};
use crate::store::records::{Artifact, Session, Task, TaskEvent, artifact_fields, task_fields};
use crate::store::tables::{ARTIFACTS, SESSION_TASKS, SESSIONS, TASK_EVENTS, TASKS};
use crate::store::{self, BlobRef, blobs};

pub const STATUSES: &[&str] = &[
    "queued",
    "running",
    "waiting_user",
    "completed",
    "failed",
    "cancelled",
];
const FINAL: &[&str] = &["completed", "failed", "cancelled"];
const TEXT_MAX_CHARS: usize = 10_000;

/// An event posted by an internal component; it may create the task.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct EventInput {
    pub event_type: Option<String>,
    pub status: Option<String>,
    pub message: Option<String>,
    pub progress: Option<f64>,
    pub payload: Option<Value>,
    pub session_id: Option<String>,
    pub title: Option<String>,
    pub user_request: Option<String>,
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct ArtifactInput {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub title: Option<String>,
    pub mime_type: Option<String>,
    pub content: String,
    pub metadata: Option<Value>,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Posted {
    pub event: TaskEvent,
    pub task: TaskView,
}

task_fields! {
    /// A task as the API shows it (without its bookkeeping fields).
    #[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
    pub struct TaskView {}
}

impl From<Task> for TaskView {
    fn from(t: Task) -> Self {
        TaskView {
            id: t.id,
            session_id: t.session_id,
            character_id: t.character_id,
            kind: t.kind,
            title: t.title,
            user_request: t.user_request,
            status: t.status,
            progress: t.progress,
            result_summary: t.result_summary,
            created_at: t.created_at,
            updated_at: t.updated_at,
            finished_at: t.finished_at,
        }
    }
}

artifact_fields! {
    /// An artifact as the API shows it.
    #[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
    pub struct ArtifactView {}
}

fn text_field(name: &str, value: Option<String>) -> Result<Option<String>> {
    match value {
        Some(v) if v.chars().count() > TEXT_MAX_CHARS => Err(bad(format!(
            "{name} is longer than {TEXT_MAX_CHARS} characters"
        ))),
        v => Ok(v),
    }
}

fn mime_of(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "markdown" => "text/markdown; charset=utf-8",
        "html" => "text/html; charset=utf-8",
        "text" => "text/plain; charset=utf-8",
        "json" => "application/json",
        _ => return None,
    })
}

impl Engine {
    pub fn task(&self, id: &str) -> Result<TaskView> {
        let tx = self.store.read()?;
        Ok(load(&tx.open_table(TASKS)?, id)?.into())
    }

    /// A session's tasks, newest first; still readable after the session ended. While the
    /// session is open, only a caller who may watch it reads them.
    pub fn session_tasks(
        &self,
        session_id: &str,
        limit: Option<usize>,
        caller: &Owner,
    ) -> Result<Vec<TaskView>> {
        match SessionId::parse(session_id).and_then(|id| self.session_for(&id, caller, Use::Watch))
        {
            Ok(_) | Err(Error::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
        let limit = limit.unwrap_or(50).clamp(1, 200);
        let tx = self.store.read()?;
        let index = tx.open_table(SESSION_TASKS)?;
        let tasks = tx.open_table(TASKS)?;
        let mut out = Vec::new();
        for item in index
            .range((session_id, 0)..=(session_id, u64::MAX))?
            .rev()
            .take(limit)
        {
            let (_, id) = item?;
            out.push(load(&tasks, id.value())?.into());
        }
        Ok(out)
    }

    pub fn task_events(
        &self,
        id: &str,
        after_seq: Option<u64>,
        limit: Option<usize>,
    ) -> Result<Vec<TaskEvent>> {
        let limit = limit.unwrap_or(200).clamp(1, 500);
        let tx = self.store.read()?;
        load(&tx.open_table(TASKS)?, id)?;
        let events = tx.open_table(TASK_EVENTS)?;
        let from = after_seq.unwrap_or(0).saturating_add(1);
        let mut out = Vec::new();
        for item in events.range((id, from)..=(id, u64::MAX))?.take(limit) {
            out.push(store::from_json(item?.1.value())?);
        }
        Ok(out)
    }

    /// Records an event, creating the task when it is unknown and the event says which session
    /// and request it belongs to.
    pub fn post_task_event(&self, task_id: &str, input: EventInput) -> Result<Posted> {
        if !is_id(task_id) {
            return Err(bad("task_id must be a UUID"));
        }
        if let Some(s) = &input.status
            && !STATUSES.contains(&s.as_str())
        {
            return Err(bad(format!(
                "status must be one of {}",
                STATUSES.join(", ")
            )));
        }
        let progress = match input.progress {
            Some(p) if !(0.0..=100.0).contains(&p) => {
                return Err(bad("progress must be between 0 and 100"));
            }
            p => p.map(|p| p.round() as u8),
        };
        let payload = match input.payload {
            None | Some(Value::Null) => Value::Object(Default::default()),
            Some(v @ Value::Object(_)) => v,
            Some(_) => return Err(bad("payload must be a JSON object")),
        };
        let event_type = input.event_type.filter(|s| !s.trim().is_empty());
        if event_type.as_ref().is_some_and(|e| e.len() > 100) {
            return Err(bad("event_type is longer than 100 bytes"));
        }
        let message = text_field("message", input.message)?.unwrap_or_default();
        let title = text_field("title", input.title)?;
        let user_request = text_field("user_request", input.user_request)?;

        let tx = self.store.write()?;
        let existing = store::get::<Task>(&tx.open_table(TASKS)?, task_id)?;
        let mut task = match existing {
            Some(t) => t,
            None => {
                let (Some(sid), Some(request)) =
                    (input.session_id.as_deref(), user_request.as_deref())
                else {
                    return Err(not_found(
                        "no such task (give session_id and user_request to create it)",
                    ));
                };
                create_task(&tx, task_id, sid, request, title.as_deref().unwrap_or(""))?
            }
        };
        if FINAL.contains(&task.status.as_str()) {
            return Err(Error::Conflict(format!("task is already {}", task.status)));
        }
        if let Some(s) = &input.status {
            task.status = s.clone();
        }
        if let Some(t) = title {
            task.title = t;
        }
        task.progress = task.progress.max(progress.unwrap_or(0));
        if task.status == "completed" {
            task.progress = 100;
            if !message.is_empty() {
                task.result_summary = message.clone();
            }
        }
        let event = append_event(
            &tx,
            &mut task,
            event_type.as_deref().unwrap_or("task.updated"),
            message,
            payload,
        )?;
        tx.commit()?;
        let posted = Posted {
            event,
            task: task.into(),
        };
        self.announce(&posted);
        Ok(posted)
    }

    /// Stores an artifact of a running task and records an `artifact.created` event.
    pub fn post_artifact(
        &self,
        task_id: &str,
        input: ArtifactInput,
    ) -> Result<(ArtifactView, Posted)> {
        if input.content.trim().is_empty() {
            return Err(bad("content must not be blank"));
        }
        let kind = input
            .kind
            .filter(|k| !k.is_empty())
            .unwrap_or_else(|| "markdown".into());
        let mime =
            mime_of(&kind).ok_or_else(|| bad("type must be markdown, html, text or json"))?;
        if let Some(m) = input.mime_type.as_deref().filter(|m| !m.is_empty())
            && !mime.starts_with(m.split(';').next().unwrap_or("").trim())
        {
            return Err(bad(format!("mime_type of a {kind} artifact is {mime}")));
        }
        if kind == "json" && serde_json::from_str::<Value>(&input.content).is_err() {
            return Err(bad("content of a json artifact must be valid JSON"));
        }
        let metadata = match input.metadata {
            None | Some(Value::Null) => Value::Object(Default::default()),
            Some(v @ Value::Object(_)) => v,
            Some(_) => return Err(bad("metadata must be a JSON object")),
        };
        let title = text_field("title", input.title)?.unwrap_or_default();
        self.task(task_id)?;
        let blob = self.store.blobs().put(input.content.as_bytes(), mime)?;
        let stored = (|| {
            let tx = self.store.write()?;
            let mut task = load(&tx.open_table(TASKS)?, task_id)?;
            if FINAL.contains(&task.status.as_str()) {
                return Err(Error::Conflict(format!("task is already {}", task.status)));
            }
            let artifact = Artifact {
                id: new_id(),
                task_id: task_id.into(),
                kind,
                title,
                mime_type: mime.into(),
                metadata,
                created_at: store::now(),
                blob: Some(blob.clone()),
            };
            tx.open_table(ARTIFACTS)?.insert(
                store::key(&[task_id, &artifact.id]).as_str(),
                store::to_json(&artifact).as_slice(),
            )?;
            blobs::register(&tx, &blob)?;
            let payload = serde_json::json!({
                "artifact_id": artifact.id, "type": artifact.kind, "title": artifact.title,
            });
            let event = append_event(&tx, &mut task, "artifact.created", String::new(), payload)?;
            tx.commit()?;
            let posted = Posted {
                event,
                task: task.into(),
            };
            self.announce(&posted);
            Ok((artifact, posted))
        })();
        let (artifact, posted) = stored.inspect_err(|_| {
            self.store.blobs().remove_all(std::slice::from_ref(&blob));
        })?;
        Ok((
            ArtifactView {
                id: artifact.id,
                task_id: artifact.task_id,
                kind: artifact.kind,
                title: artifact.title,
                mime_type: artifact.mime_type,
                metadata: artifact.metadata,
                created_at: artifact.created_at,
            },
            posted,
        ))
    }

    /// Pushes a task event to the watchers of its session, if anyone is watching.
    fn announce(&self, posted: &Posted) {
        if let Some(live) = self.live_if_active(&posted.task.session_id) {
            live.publish_any(Event::Task {
                event: Box::new(posted.event.clone()),
                task: Box::new(posted.task.clone()),
            });
        }
    }

    /// An artifact's bytes and MIME type.
    pub fn artifact(&self, task_id: &str, artifact_id: &str) -> Result<(BlobRef, Vec<u8>)> {
        if !is_id(task_id) || !is_id(artifact_id) {
            return Err(not_found("no such artifact"));
        }
        let tx = self.store.read()?;
        let a: Artifact = store::get(
            &tx.open_table(ARTIFACTS)?,
            &store::key(&[task_id, artifact_id]),
        )?
        .ok_or_else(|| not_found("no such artifact"))?;
        let blob = a
            .blob
            .ok_or_else(|| Error::Internal("artifact without content".into()))?;
        let bytes = self.store.blobs().read(&blob)?;
        Ok((blob, bytes))
    }
}

fn load(table: &impl ReadableTable<&'static str, &'static [u8]>, id: &str) -> Result<Task> {
    if !is_id(id) {
        return Err(not_found("no such task"));
    }
    store::get(table, id)?.ok_or_else(|| not_found("no such task"))
}

fn create_task(
    tx: &WriteTransaction,
    id: &str,
    session_id: &str,
    request: &str,
    title: &str,
) -> Result<Task> {
    if !is_id(session_id) {
        return Err(not_found("no such session"));
    }
    let session: Session = store::get(&tx.open_table(SESSIONS)?, session_id)?
        .ok_or_else(|| not_found("no such session"))?;
    if request.trim().is_empty() {
        return Err(bad("user_request must not be blank"));
    }
    let now = store::now();
    let task = Task {
        id: id.into(),
        session_id: session_id.into(),
        character_id: session.character_id,
        kind: "research".into(),
        title: if title.is_empty() {
            request.chars().take(80).collect()
        } else {
            title.into()
        },
        user_request: request.into(),
        status: "queued".into(),
        progress: 0,
        result_summary: String::new(),
        created_at: now.clone(),
        updated_at: now,
        finished_at: None,
        last_seq: 0,
    };
    let n = store::next_counter(tx, "task_seq")?;
    tx.open_table(SESSION_TASKS)?.insert((session_id, n), id)?;
    Ok(task)
}

/// Appends the task's next event and saves the task with it.
fn append_event(
    tx: &WriteTransaction,
    task: &mut Task,
    event_type: &str,
    message: String,
    payload: Value,
) -> Result<TaskEvent> {
    let now = store::now();
    task.last_seq += 1;
    task.updated_at = now.clone();
    if FINAL.contains(&task.status.as_str()) && task.finished_at.is_none() {
        task.finished_at = Some(now.clone());
    }
    let event = TaskEvent {
        task_id: task.id.clone(),
        seq: task.last_seq,
        event_type: event_type.into(),
        status: task.status.clone(),
        message,
        progress: task.progress,
        payload,
        created_at: now,
    };
    tx.open_table(TASK_EVENTS)?.insert(
        (task.id.as_str(), event.seq),
        store::to_json(&event).as_slice(),
    )?;
    tx.open_table(TASKS)?
        .insert(task.id.as_str(), store::to_json(task).as_slice())?;
    Ok(event)
}
