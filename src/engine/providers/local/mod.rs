//! The offline engine, which works with no network at all.
//!
//! - Speech: espeak-ng, run as a separate process (it is GPL; it is never linked in).
//! - Recognition: PocketSphinx (`pocketsphinx_continuous` with Debian's en-us model), with a
//!   dictionary of the words the character's visitors use and a trigram language model of the
//!   questions they ask (`lm`): on an open vocabulary it does poorly, on a model of its own
//!   domain it hears most questions well enough to find the right passage. A second, closed
//!   pass over the same speech listens only for the questions the knowledge answers (a grammar,
//!   `lm::jsgf`), scored against a free search so that its question is believed only when it
//!   fits the speech (see `closed_pass`).
//! - Answers: no language model. The topic of the character's knowledge the question is about,
//!   and its one or two sentences that answer it (`answer`); with no topic a clear winner, a
//!   fallback line in the character's voice says so. It does not pretend to be more than that.

pub mod answer;
pub mod lm;
mod turns;

pub use turns::{CLOSED_FIT, Clarifying, SOUNDS_ALIKE, Weighing};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::ProviderError;
use crate::engine::pcm;
use crate::engine::voice::Voice;

const MODEL_DIR: &str = "/usr/share/pocketsphinx/model/en-us";
/// Words a visitor uses around any topic, always in the dictionary.
const QUESTION_WORDS: &str = "what when where who why how which is are was were do does did can could \
    will would the a an of to in on at for from about tell me you your i we it this that there \
    open opens close closes closed time today tomorrow price cost ticket tickets much many long \
    hello hi thanks thank please yes no more again who made painted built year old museum";

/// Synthesises `text` with espeak-ng, handing the speech to `out` (24 kHz mono) as espeak-ng
/// writes it: it works clause by clause, so a long sentence starts sounding long before it is
/// all synthesised. When `out` answers false, espeak-ng is stopped and nothing more is handed;
/// dropping the future stops it as well.
///
/// The voice is a checked [`Voice`]: one espeak-ng lists, never a string a client chose.
pub async fn speak(
    text: &str,
    voice: &Voice,
    timeout: Duration,
    out: impl FnMut(&[i16]) -> bool,
) -> Result<(), ProviderError> {
    let program = super::find_program("espeak-ng")
        .ok_or_else(|| ProviderError::Unavailable("espeak-ng is not installed".into()))?;
    stream_wav(
        &program,
        &["--stdout", "-v", voice.offline_name(), "--", text],
        timeout,
        out,
    )
    .await
}

/// Runs a program that writes a WAV file to its standard output and hands the samples to `out`
/// as they arrive (see `speak`); the whole run is bounded by `timeout`.
async fn stream_wav(
    program: &Path,
    args: &[&str],
    timeout: Duration,
    mut out: impl FnMut(&[i16]) -> bool,
) -> Result<(), ProviderError> {
    use tokio::io::AsyncReadExt;

    let name = program.file_name().map_or_else(
        || program.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| ProviderError::Unavailable(format!("cannot run {name}: {e}")))?;
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let run = async {
        let mut wav = pcm::WavStream::new(pcm::OUTPUT_RATE);
        let mut buf = vec![0u8; 16 * 1024];
        let mut errors = Vec::new();
        let read = async {
            loop {
                let n = stdout.read(&mut buf).await.map_err(|e| {
                    ProviderError::Failed(format!("cannot read the speech of {name}: {e}"))
                })?;
                if n == 0 {
                    return Ok(true);
                }
                let samples = wav.push(&buf[..n]).map_err(ProviderError::Garbage)?;
                if !samples.is_empty() && !out(&samples) {
                    return Ok(false);
                }
            }
        };
        // Its messages are read meanwhile, so that it cannot block on a full pipe.
        let messages = async {
            let _ = stderr.read_to_end(&mut errors).await;
            std::future::pending::<std::convert::Infallible>().await
        };
        let completed = tokio::select! {
            r = read => r,
            never = messages => match never {},
        };
        // Stopped early (or garbled): returning drops the child, which kills it.
        if !completed? {
            return Ok(());
        }
        let status = child
            .wait()
            .await
            .map_err(|e| ProviderError::Failed(format!("cannot wait for {name}: {e}")))?;
        if !status.success() {
            // Its messages are logged, never passed on: they may quote anything it read.
            let _ = stderr.read_to_end(&mut errors).await;
            log_stderr(&name, &errors);
            return Err(ProviderError::Failed(format!("{name} failed ({status})")));
        }
        let rest = wav.finish().map_err(ProviderError::Garbage)?;
        if !rest.is_empty() {
            out(&rest);
        }
        Ok(())
    };
    tokio::time::timeout(timeout, run)
        .await
        .map_err(|_| ProviderError::Timeout(format!("{name} did not finish in time")))?
}

/// Logs what a helper wrote to its standard error (the last lines, bounded): for the
/// administrator's log only, never for a client.
fn log_stderr(name: &str, stderr: &[u8]) {
    let text = String::from_utf8_lossy(stderr);
    let text = text.trim();
    let mut start = text.len().saturating_sub(1000);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let tail = &text[start..];
    tracing::warn!("{name} failed: {tail}");
}

/// Whether the recogniser and its model are installed.
pub fn recogniser_available() -> bool {
    super::find_program("pocketsphinx_continuous").is_some()
        && acoustic_model().join("mdef").is_file()
}

/// The acoustic model directory: Debian's pocketsphinx-en-us puts it in `en-us/en-us`, next to
/// the dictionary; older layouts have it directly in `en-us`.
fn acoustic_model() -> PathBuf {
    let nested = Path::new(MODEL_DIR).join("en-us");
    if nested.join("mdef").is_file() {
        nested
    } else {
        PathBuf::from(MODEL_DIR)
    }
}

/// What the recogniser listens for: a dictionary limited to the words a character's visitors
/// use, a trigram language model of how they put them together, and a grammar of the questions
/// the knowledge can answer (see `lm`), written under `dir`.
pub struct Model {
    pub dict: PathBuf,
    pub lm: PathBuf,
    pub grammar: PathBuf,
    /// The grammar's whole questions (the others are a form around a topic word).
    questions: BTreeSet<String>,
    /// Each dictionary word's pronunciations (phones), for matching words by sound.
    sounds: BTreeMap<String, Vec<Vec<String>>>,
}

impl Model {
    /// The words heard, each with the dictionary's words that sound like it (at least
    /// `least` alike, see `alike`), those counted as sure as the word heard times how alike
    /// they are: "coat" heard may have been "code". Filler words find no others.
    pub fn sounding_like(&self, heard: &[(String, f64)], least: f64) -> Vec<(String, f64)> {
        use crate::engine::knowledge::tokenize::is_stopword;
        let mut out: Vec<(String, f64)> = heard.to_vec();
        for (word, sure) in heard {
            let Some(said) = self.sounds.get(word) else {
                continue;
            };
            if is_stopword(word) {
                continue;
            }
            for (other, sounds) in &self.sounds {
                if other == word || is_stopword(other) {
                    continue;
                }
                let like = said
                    .iter()
                    .flat_map(|a| sounds.iter().map(move |b| alike(a, b)))
                    .fold(0.0, f64::max);
                if like >= least {
                    out.push((other.clone(), sure * like));
                }
            }
        }
        out
    }
}

/// How alike two pronunciations are: 1 less their phone edit distance over the longer's
/// length (0 to 1).
fn alike(a: &[String], b: &[String]) -> f64 {
    let longest = a.len().max(b.len());
    if longest == 0 {
        return 0.0;
    }
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, pa) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, pb) in b.iter().enumerate() {
            let substituted = diagonal + usize::from(pa != pb);
            diagonal = row[j + 1];
            row[j + 1] = substituted.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    1.0 - row[b.len()] as f64 / longest as f64
}

/// How the recogniser listens in a scored pass.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Search {
    /// With the language model, one pass with no lattice: the acoustic score of the best free
    /// sentence, which the closed pass's is measured against.
    Open,
    /// With the grammar: only the closed set's questions.
    Closed,
}

/// What the closed pass heard: one of the closed set's questions (it always hears one), and
/// how well it fits the speech: the acoustic score per frame (10 ms) of the question less that
/// of the best free sentence (0 when the question is what a free search hears too; the more
/// negative, the more the grammar forced it onto sounds that say something else).
#[derive(Debug, Clone, PartialEq)]
pub struct Closed {
    pub words: Vec<String>,
    pub fit: f64,
    /// The frames of the question's words (its silences and fillers left out).
    pub speech_frames: u64,
    /// All frames of the utterance.
    pub frames: u64,
    /// Whether it is one of the knowledge's own questions (an FAQ's, a permission's), not a
    /// question form around a topic word.
    pub whole: bool,
}

/// Builds (or reuses) the recogniser's model for a character's texts (knowledge, site). Words
/// the pronouncing dictionary does not know are left out.
pub fn model(dir: &Path, texts: &[String]) -> Result<Model, ProviderError> {
    use sha2::{Digest, Sha256};
    let sentences = lm::corpus(texts);
    let mut words: BTreeSet<String> = QUESTION_WORDS
        .split_whitespace()
        .map(str::to_string)
        .collect();
    words.extend(sentences.iter().flatten().cloned());
    let fail = |e: std::io::Error| {
        ProviderError::Failed(format!("cannot write the recogniser's model: {e}"))
    };
    let full = std::fs::read_to_string(
        Path::new(MODEL_DIR)
            .parent()
            .expect("model dir")
            .join("en-us/cmudict-en-us.dict"),
    )
    .or_else(|_| {
        std::fs::read_to_string(
            Path::new(MODEL_DIR)
                .parent()
                .expect("model dir")
                .join("cmudict-en-us.dict"),
        )
    })
    .map_err(|e| {
        ProviderError::Unavailable(format!("the recogniser's dictionary is missing: {e}"))
    })?;
    let mut dict = String::new();
    let mut known = BTreeSet::new();
    let mut sounds: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
    for line in full.lines() {
        let mut fields = line.split_whitespace();
        let head = fields.next().unwrap_or("");
        let base = head.split('(').next().unwrap_or(head);
        if words.contains(base) {
            dict.push_str(line);
            dict.push('\n');
            known.insert(base.to_string());
            sounds
                .entry(base.to_string())
                .or_default()
                .push(fields.map(str::to_string).collect());
        }
    }
    if known.is_empty() {
        return Err(ProviderError::Failed(
            "no word of the vocabulary is in the dictionary".into(),
        ));
    }
    let mut sentences = sentences;
    // Every known word can be said on its own, so none is unreachable.
    sentences.extend(known.iter().map(|w| vec![w.clone()]));
    let arpa = lm::arpa(&sentences, &known);
    let (grammar, questions) = lm::jsgf(&lm::closed_set(texts), &known);
    let key = crate::store::blobs::hex(&Sha256::digest(format!("{dict}{arpa}{grammar}")))[..16]
        .to_string();
    // The names are ours (a hash), in the data directory's `asr`.
    let m = Model {
        dict: dir.join(format!("{key}.dict")),
        lm: dir.join(format!("{key}.lm")),
        grammar: dir.join(format!("{key}.gram")),
        questions,
        sounds,
    };
    if m.dict.exists() && m.lm.exists() && m.grammar.exists() {
        return Ok(m);
    }
    std::fs::create_dir_all(dir).map_err(fail)?;
    write_atomic(&m.dict, dict.as_bytes()).map_err(fail)?;
    write_atomic(&m.lm, arpa.as_bytes()).map_err(fail)?;
    write_atomic(&m.grammar, grammar.as_bytes()).map_err(fail)?;
    Ok(m)
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(tmp, path)
}

/// Recognises 16 kHz mono speech with a character's model: the words heard, each with how
/// sure PocketSphinx is of it (its posterior, 0 to 1; always 1 in the closed pass, which has
/// no lattice to tell).
pub async fn transcribe(
    pcm: &[i16],
    model: &Model,
    scratch: &Path,
    timeout: Duration,
) -> Result<Vec<(String, f64)>, ProviderError> {
    let program = super::find_program("pocketsphinx_continuous")
        .ok_or_else(|| ProviderError::Unavailable("PocketSphinx is not installed".into()))?;
    let wav_path = scratch.join(format!("utterance-{}.wav", uuid::Uuid::new_v4().simple()));
    tokio::fs::write(&wav_path, pcm::wav_bytes(pcm, pcm::RECOGNISER_RATE))
        .await
        .map_err(|e| ProviderError::Failed(format!("cannot stage the utterance: {e}")))?;
    let run = tokio::process::Command::new(program)
        .arg("-infile")
        .arg(&wav_path)
        .arg("-hmm")
        .arg(acoustic_model())
        .arg("-dict")
        .arg(&model.dict)
        .arg("-lm")
        .arg(&model.lm)
        .args(["-time", "yes"])
        // Spectral noise subtraction eats into quiet consonants of clean and synthetic speech
        // more than it helps with a kiosk's background (measured: more questions heard right).
        .args(["-remove_noise", "no"])
        .args(["-logfn", "/dev/null"])
        .kill_on_drop(true)
        .output();
    let result = tokio::time::timeout(timeout, run).await;
    let _ = tokio::fs::remove_file(&wav_path).await;
    let out = result
        .map_err(|_| ProviderError::Timeout("speech recognition did not finish in time".into()))?
        .map_err(|e| ProviderError::Unavailable(format!("cannot run PocketSphinx: {e}")))?;
    if !out.status.success() {
        // Not "nothing heard": a broken model must show as a failure. Its messages are
        // logged, never passed on.
        log_stderr("pocketsphinx_continuous", &out.stderr);
        return Err(ProviderError::Failed(format!(
            "PocketSphinx failed ({})",
            out.status
        )));
    }
    Ok(heard_words(&String::from_utf8_lossy(&out.stdout)))
}

/// The closed pass over 16 kHz mono speech (see [`Closed`]): the grammar's question and the
/// free search's score at once (two processes of `pocketsphinx_batch`, which tells scores);
/// `None` when the grammar heard nothing.
pub async fn closed_pass(
    pcm: &[i16],
    model: &Model,
    scratch: &Path,
    timeout: Duration,
) -> Result<Option<Closed>, ProviderError> {
    let program = super::find_program("pocketsphinx_batch")
        .ok_or_else(|| ProviderError::Unavailable("PocketSphinx is not installed".into()))?;
    // Our own names in our scratch directory: the utterance, its control file and the outputs.
    let id = format!("utterance-{}", uuid::Uuid::new_v4().simple());
    let wav = scratch.join(format!("{id}.wav"));
    let ctl = scratch.join(format!("{id}.ctl"));
    let outputs = [Search::Open, Search::Closed].map(|s| scratch.join(format!("{id}.{s:?}.seg")));
    let staged = async {
        tokio::fs::write(&wav, pcm::wav_bytes(pcm, pcm::RECOGNISER_RATE)).await?;
        tokio::fs::write(&ctl, format!("{id}\n")).await
    };
    let run = async {
        staged
            .await
            .map_err(|e| ProviderError::Failed(format!("cannot stage the utterance: {e}")))?;
        let search = |search: Search, out: &Path| {
            let mut cmd = tokio::process::Command::new(&program);
            cmd.arg("-ctl")
                .arg(&ctl)
                .arg("-cepdir")
                .arg(scratch)
                .args(["-cepext", ".wav", "-adcin", "yes", "-adchdr", "44"])
                .arg("-hmm")
                .arg(acoustic_model())
                .arg("-dict")
                .arg(&model.dict)
                .arg("-hypseg")
                .arg(out)
                .args(["-remove_noise", "no"])
                .args(["-logfn", "/dev/null"])
                .kill_on_drop(true);
            match search {
                // One pass, as the grammar's: scores of the same kind.
                Search::Open => {
                    cmd.arg("-lm")
                        .arg(&model.lm)
                        .args(["-fwdflat", "no", "-bestpath", "no"])
                }
                Search::Closed => cmd.arg("-jsgf").arg(&model.grammar),
            };
            cmd.output()
        };
        let (open, closed) = tokio::join!(
            search(Search::Open, &outputs[0]),
            search(Search::Closed, &outputs[1])
        );
        for out in [open, closed] {
            let out = out
                .map_err(|e| ProviderError::Unavailable(format!("cannot run PocketSphinx: {e}")))?;
            if !out.status.success() {
                log_stderr("pocketsphinx_batch", &out.stderr);
                return Err(ProviderError::Failed(format!(
                    "PocketSphinx failed ({})",
                    out.status
                )));
            }
        }
        let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
        let open = hypseg(&read(&outputs[0]));
        let closed = hypseg(&read(&outputs[1]));
        Ok(match (open, closed) {
            (Some(open), Some(closed)) if !closed.words.is_empty() && closed.frames > 0 => {
                Some(Closed {
                    fit: (closed.acoustic - open.acoustic) as f64 / closed.frames as f64,
                    whole: model.questions.contains(&closed.words.join(" ")),
                    words: closed.words,
                    speech_frames: closed.speech_frames,
                    frames: closed.frames,
                })
            }
            _ => None,
        })
    };
    let result = tokio::time::timeout(timeout, run).await;
    for path in [&wav, &ctl].into_iter().chain(&outputs) {
        let _ = tokio::fs::remove_file(path).await;
    }
    result
        .map_err(|_| ProviderError::Timeout("speech recognition did not finish in time".into()))?
}

/// A scored hypothesis of `pocketsphinx_batch`.
struct Scored {
    words: Vec<String>,
    acoustic: i64,
    frames: u64,
    /// The frames of its words, without silences and fillers.
    speech_frames: u64,
}

/// The words and acoustic score of a `-hypseg` line: `id S scale T total A acoustic L lm`, then
/// per word `start-frame acoustic lm word`, then the end frame.
fn hypseg(output: &str) -> Option<Scored> {
    let f: Vec<&str> = output.lines().next()?.split_whitespace().collect();
    if f.len() < 9 || f[5] != "A" {
        return None;
    }
    let acoustic = f[6].parse().ok()?;
    let frames: u64 = f.last()?.parse().ok()?;
    let segments: Vec<&[&str]> = f
        .get(9..f.len() - 1)
        .unwrap_or_default()
        .chunks_exact(4)
        .collect();
    let mut words = Vec::new();
    let mut speech_frames = 0;
    for (i, seg) in segments.iter().enumerate() {
        let word = seg[3];
        if word.starts_with(['<', '[', '+']) {
            continue;
        }
        let start: u64 = seg[0].parse().ok()?;
        let end = match segments.get(i + 1) {
            Some(next) => next[0].parse().ok()?,
            None => frames,
        };
        speech_frames += end.saturating_sub(start);
        words.push(word.split('(').next().unwrap_or(word).to_string());
    }
    Some(Scored {
        words,
        acoustic,
        frames,
        speech_frames,
    })
}

/// The words of PocketSphinx's `-time yes` output (a line `word start end posterior` per word,
/// after the hypothesis line) with their posteriors, without silences and fillers. Every word
/// is kept, however unsure: on synthetic and accented voices posteriors are low even for words
/// heard right, and dropping them loses more questions than it saves; how much an unsure word
/// counts is for the answer to weigh (see `answer`).
fn heard_words(output: &str) -> Vec<(String, f64)> {
    let mut words = Vec::new();
    for line in output.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [word, _, _, posterior] = f[..] else {
            continue;
        };
        let Ok(p) = posterior.parse::<f64>() else {
            continue;
        };
        if word.starts_with(['<', '[', '+']) {
            continue;
        }
        // "what(2)" is the second pronunciation of "what".
        let word = word.split('(').next().unwrap_or(word);
        words.push((word.to_string(), p.clamp(0.0, 1.0)));
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scored_hypothesis_is_read_from_its_segments() {
        let line = "utt S 0 T -3715 A -3378 L -337 0 -450 0 how 16 -565 0 much 42 -334 0 is \
                    53 -192 0 a 61 -1580 0 ticket(2) 107 -257 -337 <sil> 135\n";
        let s = hypseg(line).unwrap();
        assert_eq!(s.words, ["how", "much", "is", "a", "ticket"]);
        assert_eq!((s.acoustic, s.frames), (-3378, 135));
        assert_eq!(s.speech_frames, 107, "the words' frames, not the silence's");
        let nothing = hypseg("utt S 0 T 0 A 0 L 0 0\n").unwrap();
        assert!(nothing.words.is_empty());
        assert!(hypseg("").is_none());
        assert!(hypseg("garbage line\n").is_none());
    }

    #[test]
    fn pronunciations_are_compared_phone_by_phone() {
        let p = |s: &str| -> Vec<String> { s.split_whitespace().map(str::to_string).collect() };
        assert_eq!(alike(&p("K OW T"), &p("K OW T")), 1.0);
        assert!((alike(&p("K OW T"), &p("K OW D")) - 2.0 / 3.0).abs() < 1e-9);
        assert!((alike(&p("P AA R K"), &p("P AA R K IH NG")) - 4.0 / 6.0).abs() < 1e-9);
        assert_eq!(alike(&p("K AE F EY"), &p("D AO G")), 0.0);
        assert_eq!(alike(&[], &[]), 0.0);
    }

    #[test]
    fn heard_words_are_the_timed_words_without_fillers() {
        let out = "where are the toilets\n<s> 0.0 0.1 0.99\nwhere 0.1 0.3 0.95\nare 0.3 0.4 0.9\n\
                   the 0.4 0.5 0.8\n<sil> 0.5 0.6 0.9\n[NOISE] 0.6 0.6 0.9\n\
                   toilets(2) 0.6 0.9 0.05\n</s> 0.9 1.0 1.0\n";
        let heard = heard_words(out);
        let text: Vec<&str> = heard.iter().map(|(w, _)| w.as_str()).collect();
        assert_eq!(text, ["where", "are", "the", "toilets"]);
        assert_eq!(
            heard[3].1, 0.05,
            "an unsure word is kept, with its posterior"
        );
        assert!(
            heard_words("one two three four\n").is_empty(),
            "a hypothesis line is no word"
        );
        assert!(heard_words("").is_empty());
    }

    /// A stand-in for espeak-ng: writes the start of a WAV stream, waits until `go` exists,
    /// writes the rest (a shell script, so its pid file tells whether it still runs).
    struct Slow {
        dir: tempfile::TempDir,
        head: Vec<i16>,
        tail: Vec<i16>,
    }

    impl Slow {
        fn new() -> Slow {
            let dir = tempfile::tempdir().unwrap();
            let head: Vec<i16> = (0..6_000).map(|i| (i % 300) as i16).collect();
            let tail: Vec<i16> = (0..9_000).map(|i| -((i % 200) as i16)).collect();
            let mut wav = pcm::wav_bytes(&head, 24_000);
            // As espeak-ng writes it: sizes not known yet.
            wav[40..44].copy_from_slice(&0x7fff_f000u32.to_le_bytes());
            std::fs::write(dir.path().join("head"), wav).unwrap();
            std::fs::write(dir.path().join("tail"), pcm::samples_to_le(&tail)).unwrap();
            std::fs::write(
                dir.path().join("speak.sh"),
                "echo $$ > \"$1/pid\"; cat \"$1/head\"\n\
                 while [ ! -e \"$1/go\" ]; do sleep 0.01; done\n\
                 cat \"$1/tail\"\n",
            )
            .unwrap();
            Slow { dir, head, tail }
        }

        fn path(&self, name: &str) -> PathBuf {
            self.dir.path().join(name)
        }

        async fn run(
            &self,
            timeout: Duration,
            out: impl FnMut(&[i16]) -> bool,
        ) -> Result<(), ProviderError> {
            let script = self.path("speak.sh");
            let dir = self.dir.path().to_str().unwrap();
            stream_wav(
                Path::new("/bin/sh"),
                &[script.to_str().unwrap(), dir],
                timeout,
                out,
            )
            .await
        }

        /// Whether the script has ended (gone, or a zombie waiting to be reaped).
        async fn ended(&self) -> bool {
            let pid = std::fs::read_to_string(self.path("pid")).unwrap();
            for _ in 0..200 {
                match std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())) {
                    Err(_) => return true,
                    Ok(stat) if stat.rsplit(')').next().unwrap().trim().starts_with('Z') => {
                        return true;
                    }
                    Ok(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                }
            }
            false
        }
    }

    #[tokio::test]
    async fn speech_is_handed_on_while_it_is_synthesised() {
        let slow = Slow::new();
        let mut got: Vec<i16> = Vec::new();
        let mut before_go = 0;
        // The program writes its tail only once the head has come out: were the output read
        // whole, this would time out.
        slow.run(Duration::from_secs(10), |pcm| {
            if !slow.path("go").exists() {
                before_go += pcm.len();
                std::fs::write(slow.path("go"), b"").unwrap();
            }
            got.extend_from_slice(pcm);
            true
        })
        .await
        .unwrap();
        assert!(before_go > 0 && before_go <= slow.head.len());
        let all: Vec<i16> = slow.head.iter().chain(&slow.tail).copied().collect();
        assert_eq!(got, all, "every sample, once, in order");
    }

    #[tokio::test]
    async fn stopping_or_dropping_the_speech_ends_the_program() {
        // The receiver wants no more: the program is killed, the call returns at once.
        let slow = Slow::new();
        let mut calls = 0;
        let started = std::time::Instant::now();
        slow.run(Duration::from_secs(10), |_| {
            calls += 1;
            false
        })
        .await
        .unwrap();
        assert_eq!(calls, 1);
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(slow.ended().await, "the program is stopped");

        // The turn is cancelled (its future dropped) while the program still runs.
        let slow = Slow::new();
        let (first_tx, first_rx) = tokio::sync::oneshot::channel();
        let mut first_tx = Some(first_tx);
        let speaking = slow.run(Duration::from_secs(30), |_| {
            if let Some(tx) = first_tx.take() {
                let _ = tx.send(());
            }
            true
        });
        tokio::select! {
            r = speaking => panic!("the program cannot finish before `go`: {r:?}"),
            _ = first_rx => {}
        }
        assert!(slow.ended().await, "dropping the future kills the program");

        // A program that does not finish in time.
        let slow = Slow::new();
        let r = slow.run(Duration::from_millis(300), |_| true).await;
        assert!(matches!(r, Err(ProviderError::Timeout(_))), "{r:?}");
        assert!(slow.ended().await);
    }

    #[tokio::test]
    async fn failing_or_garbled_programs_are_errors() {
        let r = stream_wav(
            Path::new("/bin/sh"),
            &["-c", "echo broken >&2; exit 3"],
            Duration::from_secs(5),
            |_| true,
        )
        .await;
        let Err(ProviderError::Failed(m)) = r else {
            panic!("a failure: {r:?}")
        };
        assert!(m.starts_with("sh failed (exit status: 3"), "{m}");
        assert!(
            !m.contains("broken"),
            "its messages are logged, not passed on: {m}"
        );
        let r = stream_wav(
            Path::new("/bin/sh"),
            &["-c", "echo hello there"],
            Duration::from_secs(5),
            |_| true,
        )
        .await;
        assert!(matches!(r, Err(ProviderError::Garbage(_))), "{r:?}");
        let r = stream_wav(
            Path::new("/nonexistent/espeak-ng"),
            &[],
            Duration::from_secs(5),
            |_| true,
        )
        .await;
        assert!(matches!(r, Err(ProviderError::Unavailable(_))), "{r:?}");
    }

    #[tokio::test]
    async fn espeak_ng_speech_streams_as_24k_mono() {
        if super::super::find_program("espeak-ng").is_none() {
            eprintln!("note: espeak-ng is not installed; skipped");
            return;
        }
        let text = "Tickets cost 12 euros for adults, 8 euros for students and 6 euros for \
            seniors, and children under twelve enter free of charge on every day of the week.";
        let mut pieces = 0;
        let mut streamed = Vec::new();
        let voice = Voice::parse(crate::engine::providers::Provider::Local, "en-us").unwrap();
        speak(text, &voice, Duration::from_secs(20), |pcm| {
            pieces += 1;
            streamed.extend_from_slice(pcm);
            true
        })
        .await
        .unwrap();
        let out = tokio::process::Command::new("espeak-ng")
            .args(["--stdout", "-v", "en-us", "--", text])
            .output()
            .await
            .unwrap();
        let wav = pcm::parse_wav(&out.stdout).unwrap();
        let whole = pcm::resample(&pcm::downmix(&wav.samples, wav.channels), wav.rate, 24_000);
        assert!(pieces > 1, "handed on in pieces, got {pieces}");
        assert_eq!(streamed, whole, "the same speech as a whole run gives");
    }
}
