//! How well the offline kiosk understands spoken questions, run by `cargo bench --bench
//! understanding` (`-- --quick` for a quarter of the questions and two voices). See
//! `rig.rs` for what is asked and how; printed per voice: right / say again /
//! wrong, and button release -> first reply audio p50/p95.

mod rig;
#[path = "../support/mod.rs"]
mod support;

use rig::{HEADER, Rig, Tally, VOICES, Voice};

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    support::block_on(run(quick));
}

async fn run(quick: bool) {
    let questions = rig::questions();
    let voices: &[Voice] = if quick { &VOICES[..2] } else { VOICES };
    let step = if quick { 4 } else { 1 };
    let mut rig = Rig::start().await;
    println!(
        "\nunderstanding: {} questions x {} voices, offline engine, simulated microphone and button",
        questions.iter().step_by(step).count(),
        voices.len()
    );
    println!("{HEADER}");
    let mut all = Tally::default();
    for voice in voices {
        let mut tally = Tally::default();
        for q in questions.iter().step_by(step) {
            let outcome = rig.ask(*voice, q).await;
            tally.add(&outcome);
            all.add(&outcome);
        }
        println!("{}", tally.row(&voice.label()));
    }
    println!(
        "{}   (targets: right >= 80 %, wrong <= 5 %)",
        all.row("all")
    );
    rig.stop().await;
}
