//! How well the offline kiosk understands spoken questions, run by `cargo bench --bench
//! understanding` (`-- --quick` for a quarter of the questions and two voices). See
//! `docent_test_support::understanding` for what is asked and how; printed per voice: right /
//! say again / wrong, and button release -> first reply audio p50/p95.
//!
//! `-- --experiment` runs the tuning loop of `experiment.rs` instead (with `--quick`,
//! `--pad-ms N` and `--voice NAME`); `./x bench` never does.

mod experiment;

use docent_test_support::bench as support;
use docent_test_support::understanding as rig;

use rig::{HEADER, Rig, Tally, VOICES, Voice};

fn main() {
    // `cargo bench` adds `--bench`; every other argument is this bench's.
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let (mut experiment, mut options) = (false, experiment::Options::default());
    while let Some(arg) = args.next() {
        let mut value = |what: &str| args.next().unwrap_or_else(|| panic!("{arg} takes {what}"));
        match arg.as_str() {
            "--experiment" => experiment = true,
            "--quick" => options.quick = true,
            "--pad-ms" => options.pad_ms = value("milliseconds").parse().expect("--pad-ms in ms"),
            "--voice" => options.voice = Some(value("a voice's name")),
            _ => {
                panic!("unknown argument {arg}: --quick, --experiment [--pad-ms N] [--voice NAME]")
            }
        }
    }
    if experiment {
        support::block_on(experiment::run(options));
    } else {
        assert!(
            options.pad_ms == 0 && options.voice.is_none(),
            "--pad-ms and --voice go with --experiment"
        );
        support::block_on(run(options.quick));
    }
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
