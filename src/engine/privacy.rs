//! Visitors' privacy (docs/privacy.md): how long transcripts are kept, and forgetting a visit.
//!
//! A message that goes (too old, a visit too short to keep, a forgotten visit) is first counted
//! into the character's daily statistics (`DAILY`: counts, no text), so the statistics outlive
//! the transcripts. An hourly sweep applies the retention even when nobody writes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use redb::{ReadTransaction, ReadableTable, WriteTransaction};

use super::error::{Result, not_found};
use super::statistics::{Day, question_key};
use super::{Engine, SessionId};
use crate::engine::CharacterId;
use crate::store;
use crate::store::records::Message;
use crate::store::tables::{DAILY, MESSAGES, SESSIONS};

/// How often the retention sweep runs when nothing wakes it: a message goes at most this long
/// after its time is up.
pub const SWEEP_EVERY: Duration = Duration::from_secs(3600);

/// The retention sweep's clock and its wake-up.
#[derive(Default)]
pub struct Retention {
    /// Test hook (`test.hooks`): seconds the sweep's clock runs ahead of the system's.
    ahead_secs: AtomicU64,
    /// Wakes the sweep before its hour is up (a visit ended, the clock moved).
    pub wake: Arc<tokio::sync::Notify>,
}

impl Engine {
    /// Now, as the retention reads it.
    fn retention_now(&self) -> SystemTime {
        SystemTime::now() + Duration::from_secs(self.retention.ahead_secs.load(Ordering::Relaxed))
    }

    /// Test hook (`test.hooks`): moves the retention's clock `secs` ahead and wakes the sweep,
    /// so a test sees a month pass in a second.
    pub fn advance_clock_for_test(&self, secs: u64) {
        self.retention.ahead_secs.fetch_add(secs, Ordering::Relaxed);
        self.retention.wake.notify_one();
    }

    /// Removes what the retention no longer keeps: messages older than `history.max_days`, and
    /// every message of an ended visit when the days are 0 or the visit lasted less than
    /// `history.min_visit_secs`. Their counts go to the daily statistics first. Returns how
    /// many messages went.
    pub fn sweep_transcripts(&self) -> Result<usize> {
        let days = self.config.history.max_days.get();
        let short = self.config.history.min_visit_secs;
        let cutoff = (days > 0)
            .then(|| self.retention_now() - Duration::from_secs(days.saturating_mul(86_400)));
        let tx = self.store.write()?;
        let open: HashSet<String> = {
            let sessions = tx.open_table(SESSIONS)?;
            let mut open = HashSet::new();
            for item in sessions.iter()? {
                open.insert(item?.0.value().to_string());
            }
            open
        };
        // Each ended visit's messages, with its first and last time.
        struct Visit {
            keys: Vec<(String, u64)>,
            first: SystemTime,
            last: SystemTime,
        }
        let mut gone: Vec<(String, u64)> = Vec::new();
        let mut ended: HashMap<String, Visit> = HashMap::new();
        for item in tx.open_table(MESSAGES)?.iter()? {
            let (k, v) = item?;
            let (character, seq) = k.value();
            let key = (character.to_string(), seq);
            let m = store::from_json::<Message>(v.value()).ok();
            let at = m
                .as_ref()
                .and_then(|m| humantime::parse_rfc3339(&m.timestamp).ok());
            match (m, at) {
                (Some(_), Some(at)) if cutoff.is_some_and(|c| at < c) => gone.push(key),
                (Some(m), Some(at)) if !open.contains(&m.session_id) => {
                    let visit = ended.entry(m.session_id).or_insert(Visit {
                        keys: Vec::new(),
                        first: at,
                        last: at,
                    });
                    visit.keys.push(key);
                    visit.first = visit.first.min(at);
                    visit.last = visit.last.max(at);
                }
                (Some(_), Some(_)) => {}
                // Unreadable: nothing says it may stay.
                _ => gone.push(key),
            }
        }
        for visit in ended.into_values() {
            let lasted = visit.last.duration_since(visit.first).unwrap_or_default();
            if days == 0 || lasted < Duration::from_secs(short) {
                gone.extend(visit.keys);
            }
        }
        let removed = retire(&tx, &gone)?;
        if removed > 0 {
            tx.commit()?;
            tracing::info!(removed, "retention: transcripts removed, their counts kept");
        }
        Ok(removed)
    }

    /// Forgets one visit at once: its messages leave the history, the unanswered list and the
    /// exports, their counts stay in the statistics; the visit ends if it is still open.
    /// Returns how many messages went; 404 when the character has no such visit.
    pub fn forget_visit(
        &self,
        character_id: &CharacterId,
        session_id: &SessionId,
    ) -> Result<usize> {
        self.character_record(character_id)?;
        let tx = self.store.write()?;
        let mut keys = Vec::new();
        for item in tx
            .open_table(MESSAGES)?
            .range((character_id.as_str(), 0)..=(character_id.as_str(), u64::MAX))?
        {
            let (k, v) = item?;
            if store::from_json::<Message>(v.value())
                .is_ok_and(|m| m.session_id == session_id.as_str())
            {
                keys.push((character_id.to_string(), k.value().1));
            }
        }
        let open = {
            let mut sessions = tx.open_table(SESSIONS)?;
            let ours = store::get::<crate::store::records::Session>(&sessions, session_id)?
                .is_some_and(|s| s.character_id == character_id.as_str());
            if ours {
                sessions.remove(session_id.as_str())?;
            }
            ours
        };
        if keys.is_empty() && !open {
            return Err(not_found("this character has no such visit"));
        }
        let removed = retire(&tx, &keys)?;
        tx.commit()?;
        if open {
            self.session_ended(session_id);
        }
        tracing::info!(session = %session_id, removed, "a visit was forgotten");
        Ok(removed)
    }
}

/// Counts the messages at `keys` into the daily statistics, then removes them.
fn retire(tx: &WriteTransaction, keys: &[(String, u64)]) -> Result<usize> {
    if keys.is_empty() {
        return Ok(0);
    }
    let mut messages = tx.open_table(MESSAGES)?;
    let mut by_character: BTreeMap<String, Vec<Message>> = BTreeMap::new();
    for (character, seq) in keys {
        if let Some(v) = messages.remove((character.as_str(), *seq))?
            && let Ok(m) = store::from_json::<Message>(v.value())
        {
            by_character.entry(character.clone()).or_default().push(m);
        }
    }
    let mut daily = tx.open_table(DAILY)?;
    for (character, said) in by_character {
        for (day, counts) in tally(&said) {
            let mut total = match daily.get((character.as_str(), day.as_str()))? {
                Some(v) => store::from_json::<Day>(v.value())?,
                None => Day {
                    day: day.clone(),
                    ..Day::default()
                },
            };
            add(&mut total, &counts);
            daily.insert(
                (character.as_str(), day.as_str()),
                store::to_json(&total).as_slice(),
            )?;
        }
    }
    Ok(keys.len())
}

/// The counts of `said` per day (UTC), as the statistics count them; staff tests left out.
fn tally(said: &[Message]) -> BTreeMap<String, Day> {
    let mut days: BTreeMap<String, Day> = BTreeMap::new();
    let mut visits: HashSet<(String, String)> = HashSet::new();
    let mut asked: HashSet<(String, String)> = HashSet::new();
    let replies: HashMap<(&str, u64), bool> = said
        .iter()
        .filter(|m| m.role != "user")
        .map(|m| ((m.session_id.as_str(), m.turn_seq), m.unmatched))
        .collect();
    for m in said.iter().filter(|m| !m.staff) {
        let day = m.timestamp.get(..10).unwrap_or("").to_string();
        let d = days.entry(day.clone()).or_insert_with(|| Day {
            day: day.clone(),
            ..Day::default()
        });
        if visits.insert((day, m.session_id.clone())) {
            d.visits += 1;
        }
        if m.role != "user" {
            continue;
        }
        d.questions += 1;
        d.by_touch += usize::from(m.touch);
        *d.by_language.entry(m.language.clone()).or_default() += 1;
        if !asked.insert((m.session_id.clone(), question_key(&m.content))) {
            d.asked_again += 1;
        }
        match replies.get(&(m.session_id.as_str(), m.turn_seq)) {
            Some(true) => d.unanswered += 1,
            Some(false) => d.answered += 1,
            None => {}
        }
    }
    days
}

fn add(total: &mut Day, more: &Day) {
    total.visits += more.visits;
    total.questions += more.questions;
    total.answered += more.answered;
    total.unanswered += more.unanswered;
    total.asked_again += more.asked_again;
    total.by_touch += more.by_touch;
    for (language, n) in &more.by_language {
        *total.by_language.entry(language.clone()).or_default() += n;
    }
}

/// Adds the kept daily counts of `character_id` to the days counted from its transcripts
/// (`days` oldest first, and so it stays).
pub(super) fn with_kept_counts(
    tx: &ReadTransaction,
    character_id: &str,
    days: &mut Vec<Day>,
) -> Result<()> {
    let table = tx.open_table(DAILY)?;
    for item in table.range((character_id, "")..=(character_id, "~"))? {
        let kept: Day = store::from_json(item?.1.value())?;
        match days.binary_search_by(|d| d.day.cmp(&kept.day)) {
            Ok(i) => add(&mut days[i], &kept),
            Err(i) => days.insert(i, kept),
        }
    }
    Ok(())
}

impl Engine {
    /// The age bound within a write of `character_id`'s history (see `retain_history`): its
    /// messages older than `history.max_days`, oldest first up to the first young one, counted
    /// and removed.
    pub(super) fn retire_old(&self, tx: &WriteTransaction, character_id: &str) -> Result<()> {
        let days = self.config.history.max_days.get();
        if days == 0 {
            return Ok(());
        }
        let cutoff = self.retention_now() - Duration::from_secs(days.saturating_mul(86_400));
        let mut old = Vec::new();
        for item in tx
            .open_table(MESSAGES)?
            .range((character_id, 0)..=(character_id, u64::MAX))?
        {
            let (k, v) = item?;
            let young = store::from_json::<Message>(v.value())
                .ok()
                .and_then(|m| humantime::parse_rfc3339(&m.timestamp).ok())
                .is_some_and(|at| at >= cutoff);
            if young {
                break;
            }
            old.push((character_id.to_string(), k.value().1));
        }
        retire(tx, &old)?;
        Ok(())
    }
}

/// What a provider receives of a visit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Receives {
    /// The visitor's voice.
    VoiceAudio,
    /// What the visitor said, as text, or the reply to be spoken.
    Transcripts,
    /// The character's persona and knowledge passages.
    Knowledge,
}

/// Where one stage of a visitor's turn goes.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct Flow {
    /// `asr`, `llm` or `tts` (an omni provider, chosen as `llm`, does all three).
    pub stage: &'static str,
    pub provider: crate::engine::providers::Provider,
    /// The host it is reached at ("" for the offline engine, which runs in the kiosk).
    pub host: String,
    pub receives: Vec<Receives>,
    /// The host is neither the kiosk nor on the museum's network (a private, link-local or
    /// `.local` address): what it receives leaves the building.
    pub leaves_building: bool,
}

/// What leaves the kiosk under the settings in force (docs/privacy.md).
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct Disclosure {
    pub flows: Vec<Flow>,
    /// Some visitor's voice goes to a host outside the building.
    pub voices_leave: bool,
}

/// The host of a provider address (`https://host/v1`, `tcp://host:port`, `host:port`).
fn host_of(address: &str) -> String {
    let with_scheme = if address.contains("://") {
        address.to_string()
    } else {
        format!("http://{address}")
    };
    with_scheme
        .parse::<axum::http::Uri>()
        .ok()
        .and_then(|u| {
            u.host()
                .map(|h| h.trim_matches(['[', ']']).to_ascii_lowercase())
        })
        .unwrap_or_default()
}

/// Whether `host` is in the building: the kiosk itself, a private or link-local address, or a
/// `.local` name (mDNS answers only on the local network) or a bare name.
fn in_building(host: &str) -> bool {
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => ip.is_loopback() || ip.is_private() || ip.is_link_local(),
        Ok(std::net::IpAddr::V6(ip)) => {
            ip.is_loopback() || ip.is_unique_local() || ip.is_unicast_link_local()
        }
        Err(_) => host == "localhost" || host.ends_with(".local") || !host.contains('.'),
    }
}

impl Engine {
    /// Per stage of a turn under the settings in force, which provider receives what, and
    /// where. Characters that choose their own components are not shown.
    pub fn disclosure(&self) -> Disclosure {
        use crate::engine::providers::{Choice, Provider, Stage};
        use Receives::{Knowledge, Transcripts, VoiceAudio};
        let settings = self.settings();
        let llm = settings.provider(Stage::Llm);
        let omni = matches!(llm, Choice::Kiosk(p) if p.is_omni());
        let mut flows = Vec::new();
        for stage in Stage::ALL {
            let Choice::Kiosk(provider) = settings.provider(stage) else {
                continue;
            };
            if omni && stage != Stage::Llm || !provider.serves(stage) {
                continue;
            }
            let receives = match (stage, provider) {
                (_, Provider::OpenaiRealtime) => vec![VoiceAudio, Transcripts, Knowledge],
                (_, Provider::Remote) => vec![VoiceAudio, Transcripts],
                (Stage::Asr, _) => vec![VoiceAudio],
                (Stage::Llm, _) => vec![Transcripts, Knowledge],
                (Stage::Tts, _) => vec![Transcripts],
            };
            let host = provider
                .service(stage)
                .and_then(|s| settings.endpoint(s).ok().map(|e| host_of(e.address)))
                .unwrap_or_default();
            let leaves_building = !host.is_empty() && !in_building(&host);
            flows.push(Flow {
                stage: stage.name(),
                provider,
                host,
                receives,
                leaves_building,
            });
        }
        let voices_leave = flows
            .iter()
            .any(|f| f.leaves_building && f.receives.contains(&VoiceAudio));
        Disclosure {
            flows,
            voices_leave,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{host_of, in_building};

    #[test]
    fn hosts_in_and_out_of_the_building() {
        assert_eq!(host_of("https://api.openai.com/v1"), "api.openai.com");
        assert_eq!(host_of("tcp://192.168.1.10:10300"), "192.168.1.10");
        assert_eq!(host_of("10.0.0.5:50051"), "10.0.0.5");
        for inside in [
            "127.0.0.1",
            "192.168.1.10",
            "10.0.0.5",
            "fd00::1",
            "gpu-box",
            "whisper.local",
        ] {
            assert!(in_building(inside), "{inside}");
        }
        for outside in ["api.openai.com", "8.8.8.8", "2001:db8::1"] {
            assert!(!in_building(outside), "{outside}");
        }
    }
}
