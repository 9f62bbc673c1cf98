//! The fast inner loop for tuning the offline engine, run by `cargo bench --bench understanding
//! -- --experiment` (never by `./x bench`): every question of the benchmark, in each voice,
//! synthesised once into `target/understanding-wavs/<voice>/<n>.raw` (16 kHz mono, the
//! benchmark's variation of that question and voice), recognised and answered as a turn does,
//! without the button's real time. Prints right / say again / wrong per voice, and a line
//! `weigh` per question with how its two passes were weighed (for choosing the rule of
//! `offline_weigh`); each question the kiosk got wrong, or got otherwise than its open pass alone
//! (every question with `UNDERSTANDING_VERBOSE` set).
//!
//! Flags after `--experiment`: `--quick`, only the quick benchmark's questions, in its two voices
//! and with its variations (`target/understanding-wavs/quick`); `--pad-ms N`, N ms of digital
//! silence after each recording, as the kiosk's release after the speech adds; `--voice NAME`,
//! only the voices whose directory name holds NAME (such as `flite` or `en-us`).

use std::time::{Duration, Instant};

use docent::engine::providers::local::{self, SOUNDS_ALIKE};

use super::rig::{
    HEADER, Outcome, Tally, VARIATIONS, VOICES, Variation, Verdict, Voice, judge, make_character,
    questions, spoken,
};
use super::support::Kiosk;

/// What the command line asks of the experiment.
#[derive(Default)]
pub struct Options {
    pub quick: bool,
    /// Silence added after each recording, in ms.
    pub pad_ms: usize,
    /// Only the voices whose directory name holds this.
    pub voice: Option<String>,
}

pub async fn run(options: Options) {
    let Options {
        quick,
        pad_ms,
        voice: only,
    } = options;
    let pad = pad_ms * 16;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/understanding-wavs");
    let wavs = if quick {
        root.join("quick")
    } else {
        root.clone()
    };
    let questions = questions();
    std::fs::create_dir_all(&wavs).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kiosk = Kiosk::start(dir.path(), |c| {
        c.devices = docent::config::DeviceMode::None;
    })
    .await;
    let site = kiosk.site();
    let id = make_character(&reqwest::Client::new(), &site).await;
    let id = docent::engine::CharacterId::parse(&id).unwrap();
    let engine = kiosk.ready.engine.clone();
    let model = engine.recogniser_model(&id).unwrap();
    // Kept for experiments with PocketSphinx's own settings.
    std::fs::copy(&model.dict, root.join("model.dict")).unwrap();
    std::fs::copy(&model.lm, root.join("model.lm")).unwrap();
    std::fs::copy(&model.grammar, root.join("model.gram")).unwrap();
    let corpus =
        docent::engine::providers::local::lm::corpus(&engine.knowledge_texts(&id).unwrap());
    let lines: Vec<String> = corpus.iter().map(|s| s.join(" ")).collect();
    std::fs::write(root.join("corpus.txt"), lines.join("\n")).unwrap();
    // The questions asked in each voice, with the variation the benchmark gives them.
    let (voices, step) = if quick {
        (&VOICES[..2], 4)
    } else {
        (VOICES, 1)
    };
    let n = questions.len();
    let asked: Vec<(usize, Variation)> = (0..voices.len())
        .flat_map(|v| {
            (0..n).step_by(step).enumerate().map(move |(k, i)| {
                // As the benchmark's `Rig::ask` counts the questions it asked.
                let nth = v * n.div_ceil(step) + k;
                (i, VARIATIONS[nth % VARIATIONS.len()])
            })
        })
        .collect();
    let per_voice = asked.len() / voices.len();
    // The recordings are made once.
    for (v, voice) in voices.iter().enumerate() {
        let at = wavs.join(experiment_name(voice));
        std::fs::create_dir_all(&at).unwrap();
        for &(i, variation) in &asked[v * per_voice..(v + 1) * per_voice] {
            let raw = at.join(format!("{i:02}.raw"));
            if !raw.exists() {
                std::fs::write(&raw, spoken(*voice, &questions[i].text, variation)).unwrap();
            }
        }
    }
    let mut all = Tally::default();
    let mut open_all = Tally::default();
    let mut sound_all = Tally::default();
    println!("{HEADER}");
    for (v, voice) in voices.iter().map(experiment_name).enumerate() {
        let voice = voice.as_str();
        if only.as_deref().is_some_and(|o| !voice.contains(o)) {
            continue;
        }
        let mut tally = Tally::default();
        let mut open_tally = Tally::default();
        let mut sound_tally = Tally::default();
        for &(i, variation) in &asked[v * per_voice..(v + 1) * per_voice] {
            let q = &questions[i];
            let raw = std::fs::read(wavs.join(voice).join(format!("{i:02}.raw"))).unwrap();
            let mut pcm: Vec<i16> = raw
                .chunks_exact(2)
                .map(|b| i16::from_le_bytes([b[0], b[1]]))
                .collect();
            pcm.resize(pcm.len() + pad, 0);
            let started = Instant::now();
            let timeout = Duration::from_secs(30);
            let (open, closed) = tokio::join!(
                local::transcribe(&pcm, &model, dir.path(), timeout),
                local::closed_pass(&pcm, &model, dir.path(), timeout)
            );
            let (open, closed) = (open.unwrap(), closed.unwrap());
            let text = |w: &[(String, f64)]| {
                w.iter()
                    .map(|(w, _)| w.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            // The open pass alone (as before the closed pass), and the whole as a turn does it,
            // each question in a session of its own, as the benchmark's first ask.
            let reply_to = |heard: &str, sure: &[(String, f64)], session: Option<&str>| {
                if heard.trim().is_empty() {
                    return "say it again".to_string();
                }
                match session {
                    Some(session) => engine.offline_reply(session, &id, heard, sure),
                    None => engine.offline_answer(&id, heard, sure),
                }
                .unwrap_or_else(|| "I don't know".into())
            };
            let open_text = text(&open);
            let closed_text = closed
                .as_ref()
                .map(|c| c.words.join(" "))
                .unwrap_or_default();
            let open_verdict = judge(&reply_to(&open_text, &open, None), &q.expect);
            let closed_verdict = closed
                .as_ref()
                .and_then(|_| engine.offline_answer(&id, &closed_text, &[]))
                .map(|r| judge(&r, &q.expect));
            // Matching by sound: the open pass's words and the dictionary's words like them.
            let like = model.sounding_like(&open, SOUNDS_ALIKE);
            let sound_verdict = judge(&reply_to(&text(&like), &like, None), &q.expect);
            let weighed = engine.offline_weigh(&id, &open, closed.as_ref());
            let heard = engine.offline_heard(&id, open, closed.clone());
            let reply = reply_to(&heard.text, &heard.sure, Some(&format!("{voice}-{i}")));
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            let verdict = judge(&reply, &q.expect);
            if verdict != Verdict::Right
                || verdict != open_verdict
                || std::env::var_os("UNDERSTANDING_VERBOSE").is_some()
            {
                println!(
                    "  {verdict:?} (open {open_verdict:?}) {voice} {variation:?} {:?} heard \
                     {open_text:?} / {closed_text:?} -> {reply:?}",
                    q.text
                );
            }
            // One line per question for choosing the rule: the verdicts of the open pass, of
            // the closed pass's question, of matching by sound, and the weighing.
            let (fit, frames, speech) = closed
                .as_ref()
                .map_or((f64::NAN, 0, 0), |c| (c.fit, c.frames, c.speech_frames));
            let support = |s: Option<docent::engine::providers::local::answer::Support>| {
                s.map_or("- -".to_string(), |s| {
                    format!("{:.3} {:.3}", s.score, s.shared)
                })
            };
            println!(
                "weigh\t{voice}\t{i}\t{variation:?}\t{open_verdict:?}\t{closed_verdict:?}\t\
                 {sound_verdict:?}\t{verdict:?}\t{fit:.3}\t{:.3}\t{frames}\t{speech}\t{}\t{}\t\
                 {}\t{open_text}\t{closed_text}",
                weighed.speech_fit,
                support(weighed.support),
                support(weighed.sound_support),
                closed.as_ref().is_some_and(|c| c.whole),
            );
            let o = Outcome {
                verdict,
                latency_ms: Some(ms),
            };
            tally.add(&o);
            all.add(&o);
            for (verdict, tally, all) in [
                (open_verdict, &mut open_tally, &mut open_all),
                (sound_verdict, &mut sound_tally, &mut sound_all),
            ] {
                let o = Outcome {
                    verdict,
                    latency_ms: None,
                };
                tally.add(&o);
                all.add(&o);
            }
        }
        println!("{}", open_tally.row(&format!("{voice} open")));
        println!("{}", sound_tally.row(&format!("{voice} by sound")));
        println!("{}", tally.row(voice));
    }
    println!("{}", open_all.row("all open"));
    println!("{}", sound_all.row("all by sound"));
    println!("{}", all.row("all"));
    kiosk.stop().await;
}

/// The directory of a voice's recordings in `target/understanding-wavs`.
fn experiment_name(voice: &Voice) -> String {
    match voice {
        Voice::Espeak(v) => format!("espeak-{v}"),
        Voice::Flite(v) => format!("flite-{v}"),
    }
}
