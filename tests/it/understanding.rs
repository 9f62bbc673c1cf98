//! The kiosk understands spoken questions: a smaller run of the understanding benchmark
//! (`benches/understanding`: a third of its questions, one espeak-ng and one flite voice), through
//! the simulated microphone and button of a real kiosk with the offline engine. It fails when
//! accuracy drops below what the offline engine reaches today.

// The captions are read through the same rig's kiosk.
mod captions;

use docent_test_support::understanding as rig;

use std::time::Duration;

use rig::{HEADER, Rig, Tally, VOICES, Verdict};

/// Right answers at least, wrong answers at most (percent of the questions asked). Runs of the
/// final engine gave 89, 89, 82 and 79 % right (the press timing moves a question or two; one
/// question is 3.6 %), so the floor sits a question below the lowest: 75 %, still well above
/// the 50 % it was before the closed pass.
const MIN_RIGHT: f64 = 75.0;
const MAX_WRONG: f64 = 11.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spoken_questions_are_understood() {
    let questions = rig::questions();
    // espeak-ng en-us and flite slt.
    let voices = [VOICES[0], VOICES[2]];
    let mut rig = Rig::start().await;
    let mut all = Tally::default();
    println!("{HEADER}");
    for voice in voices {
        let mut tally = Tally::default();
        for q in questions.iter().step_by(3) {
            let outcome = rig.ask(voice, q).await;
            tally.add(&outcome);
            all.add(&outcome);
        }
        println!("{}", tally.row(&voice.label()));
    }
    let summary = all.row("all");
    println!("{summary}");
    rig.stop().await;
    assert!(
        all.percent(Verdict::Right) >= MIN_RIGHT && all.percent(Verdict::Wrong) <= MAX_WRONG,
        "understanding dropped: {summary} (at least {MIN_RIGHT} % right, at most {MAX_WRONG} % wrong)"
    );
}

/// The closed-set second pass, through the kiosk: a question whose open pass answers nothing
/// (checked first on the same recording) is heard as the knowledge's own question and answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_closed_pass_hears_what_the_open_pass_misses() {
    use docent::engine::providers::local;
    let voice = rig::Voice::Espeak("en-gb-x-rp+f3");
    let q = rig::Question {
        text: "Can I eat my own food?".into(),
        expect: vec!["picnic room".into()],
    };
    let mut rig = Rig::start().await;
    let engine = rig.engine();
    let id = docent::engine::CharacterId::parse(&rig.character).unwrap();
    let pcm: Vec<i16> = rig::spoken(voice, &q.text, rig::Variation::Clean)
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect();
    let scratch = tempfile::tempdir().unwrap();
    let model = {
        let (engine, id) = (engine.clone(), id.clone());
        tokio::task::spawn_blocking(move || engine.recogniser_model(&id))
            .await
            .unwrap()
            .unwrap()
    };
    let open = local::transcribe(&pcm, &model, scratch.path(), Duration::from_secs(30))
        .await
        .unwrap();
    let open_text: Vec<&str> = open.iter().map(|(w, _)| w.as_str()).collect();
    let open_text = open_text.join(" ");
    assert_eq!(
        engine.offline_answer(&id, &open_text, &open),
        None,
        "the open pass alone answers nothing (it heard {open_text:?})"
    );
    let asked = rig.ask_as(voice, &q, rig::Variation::Clean).await;
    rig.stop().await;
    assert_eq!(
        asked.heard, "can i eat my own food",
        "the kiosk heard the knowledge's question (the reply: {:?})",
        asked.reply
    );
    assert_eq!(asked.outcome.verdict, Verdict::Right, "{:?}", asked.reply);
}

/// The clarifying question, through the kiosk: a question two topics answer alike is answered
/// with "Do you mean ...?", the next press chooses, and the topic chosen answers the question
/// first asked; a reply that chooses neither is never asked about again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_close_topics_are_asked_about_once() {
    let voice = rig::Voice::Flite("slt");
    let say = |text: &str| rig::Question {
        text: text.into(),
        expect: vec!["ticket desk".into()],
    };
    // Four topics say where the ticket desk is, none more than another.
    let unclear = say("Where is the ticket desk?");
    let mut rig = Rig::start().await;
    let clean = rig::Variation::Clean;
    let first = rig.ask_as(voice, &unclear, clean).await;
    assert!(
        first.reply.starts_with("Do you mean"),
        "heard {:?} -> {:?}",
        first.heard,
        first.reply
    );
    let chosen = rig.ask_as(voice, &say("Yes."), clean).await;
    assert_eq!(chosen.heard, "yes");
    assert!(
        !chosen.reply.contains("Do you mean") && !chosen.reply.contains("don't know"),
        "the first topic offered answers: {:?}",
        chosen.reply
    );
    assert_eq!(
        chosen.outcome.verdict,
        Verdict::Right,
        "the question first asked is answered: {:?}",
        chosen.reply
    );
    // Asked again and answered with neither: no second clarifying question in a row.
    let again = rig.ask_as(voice, &unclear, clean).await;
    assert!(again.reply.starts_with("Do you mean"), "{:?}", again.reply);
    let neither = rig.ask_as(voice, &unclear, clean).await;
    rig.stop().await;
    assert!(
        !neither.reply.contains("Do you mean"),
        "never asked twice in a row: {:?}",
        neither.reply
    );
}

/// The one-topic question and the closed pass: when the open pass heard one unsure word of a
/// topic and would ask about it ("Do you mean toilets?"), the closed pass's question is
/// believed only if it is about that topic, however well it fits. The weighing itself, on the
/// words the two passes heard in the run that made this rule ("where are the coin", the
/// lockers, for "Where are the toilets?"), with no speech: which of the two a press's timing
/// gives is not this test's business.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_asked_about_is_not_overruled_by_a_question_about_another() {
    use docent::engine::providers::local::Closed;
    let rig = Rig::start().await;
    let engine = rig.engine();
    let id = docent::engine::CharacterId::parse(&rig.character).unwrap();
    let open: Vec<(String, f64)> = [("where", 0.9), ("are", 0.9), ("the", 0.9), ("toilets", 0.5)]
        .into_iter()
        .map(|(w, p)| (w.to_string(), p))
        .collect();
    let closed = |words: &str| Closed {
        words: words.split(' ').map(str::to_string).collect(),
        fit: 4.2,
        speech_frames: 100,
        frames: 150,
        whole: false,
    };
    let weigh = |said: &str| {
        let (engine, id, open, closed) = (engine.clone(), id.clone(), open.clone(), closed(said));
        tokio::task::spawn_blocking(move || {
            let asked = engine.offline_reply("toilets", &id, "where are the toilets", &open);
            (asked, engine.offline_weigh(&id, &open, Some(&closed)))
        })
    };
    let (asked, coin) = weigh("where are the coin").await.unwrap();
    assert_eq!(
        asked.as_deref(),
        Some("Do you mean toilets?"),
        "the open pass alone asks about the toilets"
    );
    assert!(
        coin.closed_answers && !coin.believed,
        "a question about the lockers does not overrule it: {coin:?}"
    );
    let (_, toilets) = weigh("where are the toilets").await.unwrap();
    assert!(toilets.believed, "one about the toilets does: {toilets:?}");
    rig.stop().await;
}
