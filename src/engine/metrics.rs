//! The engine's instruments for `GET /metrics`: visits, questions and how they were answered,
//! the turn's timings, the providers' calls and the recogniser's confidence. One set per engine
//! (per run, never a process global: tests run many kiosks in one process). Each labelled series
//! is resolved once here, so counting is an atomic add, not a label lookup (the engine counts;
//! `benches/metrics.rs` calls the same methods to weigh a turn's share). The front door that
//! writes them out lives in the api; nothing here knows HTTP.

use prometheus::{Histogram, HistogramOpts, IntCounter, IntCounterVec, Opts, Registry};

use super::Engine;
use super::providers::Stage;

/// How a visitor asked a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// Said into the microphone (recognised speech).
    Voice,
    /// Chosen on the kiosk's screen (touch or buttons).
    Touch,
    /// Typed by a client (HTTP, WebSocket, gRPC).
    Text,
}

impl Via {
    const ALL: [Via; 3] = [Via::Voice, Via::Touch, Via::Text];

    fn label(self) -> &'static str {
        match self {
            Via::Voice => "voice",
            Via::Touch => "touch",
            Via::Text => "text",
        }
    }
}

/// Whether the knowledge answered a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Answered,
    Unanswered,
}

/// The engine's instruments, registered in its own [`Registry`].
pub struct Metrics {
    pub registry: Registry,
    visits: IntCounter,
    questions: [IntCounter; 3],
    outcomes: [IntCounter; 2],
    asked_again: IntCounter,
    first_audio: Histogram,
    recognition: Histogram,
    confidence: Histogram,
    calls: [IntCounter; 3],
    failures: [IntCounter; 3],
}

/// Seconds from the end of a spoken question to the reply's first audio.
const FIRST_AUDIO_BUCKETS: &[f64] = &[0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0];
/// Seconds the recogniser takes for one utterance.
const RECOGNITION_BUCKETS: &[f64] = &[0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0];
/// The recogniser's confidence, 0 to 1.
const CONFIDENCE_BUCKETS: &[f64] = &[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];

impl Default for Metrics {
    fn default() -> Metrics {
        let registry = Registry::new();
        let counters = |name: &str, help: &str, label: &str| {
            let v = IntCounterVec::new(Opts::new(name, help), &[label]).expect("valid metric");
            registry
                .register(Box::new(v.clone()))
                .expect("registers once");
            v
        };
        let counter = |name: &str, help: &str| {
            let c = IntCounter::new(name, help).expect("valid metric");
            registry
                .register(Box::new(c.clone()))
                .expect("registers once");
            c
        };
        let histogram = |name: &str, help: &str, buckets: &[f64]| {
            let opts = HistogramOpts::new(name, help).buckets(buckets.to_vec());
            let h = Histogram::with_opts(opts).expect("valid metric");
            registry
                .register(Box::new(h.clone()))
                .expect("registers once");
            h
        };
        let questions = counters(
            "docent_questions_total",
            "Visitors' questions, by how they were asked.",
            "via",
        );
        let outcomes = counters(
            "docent_answers_total",
            "Replies to visitors' questions, by whether the knowledge answered.",
            "outcome",
        );
        let calls = counters(
            "docent_provider_calls_total",
            "Real calls to the providers, by stage.",
            "stage",
        );
        let failures = counters(
            "docent_provider_failures_total",
            "Real calls to the providers that failed, by stage.",
            "stage",
        );
        let stage = |v: &IntCounterVec| Stage::ALL.map(|s| v.with_label_values(&[s.name()]));
        Metrics {
            visits: counter(
                "docent_visits_total",
                "Visits opened (sessions other than staff tests).",
            ),
            questions: Via::ALL.map(|v| questions.with_label_values(&[v.label()])),
            outcomes: ["answered", "unanswered"].map(|o| outcomes.with_label_values(&[o])),
            asked_again: counter(
                "docent_questions_asked_again_total",
                "Questions a visitor had already asked in the same visit.",
            ),
            first_audio: histogram(
                "docent_first_audio_seconds",
                "Time from the end of a spoken question to the reply's first audio.",
                FIRST_AUDIO_BUCKETS,
            ),
            recognition: histogram(
                "docent_recognition_seconds",
                "Time the recogniser took for one utterance.",
                RECOGNITION_BUCKETS,
            ),
            confidence: histogram(
                "docent_recognition_confidence",
                "How sure the recogniser was of an utterance (the mean over its words, 0 to 1).",
                CONFIDENCE_BUCKETS,
            ),
            calls: stage(&calls),
            failures: stage(&failures),
            registry,
        }
    }
}

fn stage_index(stage: Stage) -> usize {
    match stage {
        Stage::Llm => 0,
        Stage::Asr => 1,
        Stage::Tts => 2,
    }
}

impl Metrics {
    pub fn visit(&self) {
        self.visits.inc();
    }

    /// A visitor's question; `again`: the same words earlier in the visit.
    pub fn question(&self, via: Via, again: bool) {
        self.questions[via as usize].inc();
        if again {
            self.asked_again.inc();
        }
    }

    pub fn answer(&self, outcome: Outcome) {
        self.outcomes[outcome as usize].inc();
    }

    pub fn first_audio(&self, after: std::time::Duration) {
        self.first_audio.observe(after.as_secs_f64());
    }

    /// One recognition: how long it took and, when the recogniser says, how sure it was of
    /// each word.
    pub fn recognised(&self, took: std::time::Duration, sure: &[(String, f64)]) {
        self.recognition.observe(took.as_secs_f64());
        if !sure.is_empty() {
            let mean = sure.iter().map(|(_, p)| p).sum::<f64>() / sure.len() as f64;
            self.confidence.observe(mean.clamp(0.0, 1.0));
        }
    }

    pub fn provider_call(&self, stage: Stage, ok: bool) {
        let i = stage_index(stage);
        self.calls[i].inc();
        if !ok {
            self.failures[i].inc();
        }
    }
}

impl Engine {
    /// Free bytes on the data partition (statvfs of the data directory).
    pub fn data_free_bytes(&self) -> Result<u64, std::io::Error> {
        crate::store::free_bytes(&self.config.data_dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_engine_counts_its_own() {
        let (a, b) = (Metrics::default(), Metrics::default());
        a.question(Via::Touch, true);
        a.answer(Outcome::Unanswered);
        a.provider_call(Stage::Asr, false);
        let text = |m: &Metrics| {
            let mut out = String::new();
            prometheus::TextEncoder::new()
                .encode_utf8(&m.registry.gather(), &mut out)
                .unwrap();
            out
        };
        let (a, b) = (text(&a), text(&b));
        assert!(a.contains("docent_questions_total{via=\"touch\"} 1"), "{a}");
        assert!(a.contains("docent_questions_asked_again_total 1"), "{a}");
        assert!(
            a.contains("docent_answers_total{outcome=\"unanswered\"} 1"),
            "{a}"
        );
        assert!(
            a.contains("docent_provider_failures_total{stage=\"asr\"} 1"),
            "{a}"
        );
        assert!(b.contains("docent_questions_total{via=\"touch\"} 0"), "{b}");
    }
}
