//! Display benchmarks, run by `cargo bench --bench display` (release profile).
//!
//! 1. Decode + scale + draw, ms per frame: moving clips (a drifting gradient and a moving bar,
//!    "calm"; the same with per-pixel noise in every frame, "noisy", a worst case; encoded here
//!    with openh264's encoder at 25 fps) of 480p and 720p, decoded with the kiosk's
//!    `ClipDecoder`, converted and letterboxed by `YuvScaler`, and presented to an in-memory
//!    screen (a copy of the whole frame, as the fbdev/DRM back ends do). Decode alone is shown
//!    too. Target: <= 4 ms/frame at 720p.
//!    Times are the thread's CPU time (wall time alongside): on a shared, busy machine the
//!    wall clock also counts waiting for a core.
//! 2. CPU share while idling: the real player thread loops a 25 fps clip on an in-memory
//!    screen for a few seconds; the process's CPU time (getrusage) over the wall time.
//! 3. The upload's flash check (`engine::media::flash::check`, docs/clips-flash.md) of a calm
//!    10 s clip at 25 fps, 480p to 1080p: thread CPU and wall time, beside decoding the same
//!    frames alone. `cargo bench --bench display -- flash` runs only this part.
//! 4. Captions (`display::captions::draw`): one caption frame (a question heard and a sentence
//!    of two lines being said) drawn at 800x480 and 1920x1080, cold (a new thread: every glyph
//!    rasterised) and warm (the player's case: glyphs cached), and the copy of the panel under
//!    each video frame. Target: <= 5 ms a caption frame at 1920x1080.
//!    `cargo bench --bench display -- captions` runs only this part.

use std::sync::Arc;
use std::time::{Duration, Instant};

use docent::config::{AccessConfig, Config};
use docent::device::KioskState;
use docent::device::display::scale::YuvScaler;
use docent::device::display::{self, MemoryScreen};
use docent::engine::Engine;
use docent::engine::characters::{CharacterInput, image_base};
use docent::engine::live::Status;
use docent::engine::media::clip::{Clip, ClipDecoder};
use docent::engine::media::flash;
use docent_test_support::bench as support;
use docent_test_support::testclip;

const FRAMES: usize = 50;
const PASSES: usize = 4;
const IDLE_SECS: u64 = 5;

/// CPU time of the calling thread: frame costs measured this way hold up on a busy machine,
/// where wall-clock times also count the time the thread waited for a core.
fn thread_cpu() -> Duration {
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() - 1) as f64 * p).round() as usize]
}

struct Figure {
    what: String,
    /// Thread CPU time per frame, ms.
    mean: f64,
    p95: f64,
    /// Wall-clock time per frame, ms.
    wall: f64,
}

fn decode_figures(clip_size: (u16, u16), screen: (u32, u32), mp4: &[u8]) -> Vec<Figure> {
    let mut out = Vec::new();
    // Decode only.
    let mut dec = ClipDecoder::new(Clip::from_bytes(mp4.to_vec()).unwrap()).unwrap();
    let (mut times, wall) = (Vec::new(), Instant::now());
    for _ in 0..FRAMES * PASSES {
        let t = thread_cpu();
        dec.next_frame(|pic| {
            std::hint::black_box(pic.y[0]);
        })
        .unwrap();
        times.push((thread_cpu() - t).as_secs_f64() * 1000.0);
    }
    let wall = wall.elapsed().as_secs_f64() * 1000.0 / times.len() as f64;
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    out.push(Figure {
        what: format!("decode {}p", clip_size.1),
        mean,
        p95: percentile(&mut times, 0.95),
        wall,
    });
    // Decode + scale + draw.
    let mem = Arc::new(MemoryScreen::new(screen.0, screen.1));
    let mut frame = vec![0u32; (screen.0 * screen.1) as usize];
    let scaler = YuvScaler::new((clip_size.0 as u32, clip_size.1 as u32), screen);
    let mut dec = ClipDecoder::new(Clip::from_bytes(mp4.to_vec()).unwrap()).unwrap();
    let (mut times, wall) = (Vec::new(), Instant::now());
    let (mut scale_t, mut show_t) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..FRAMES * PASSES {
        let t = thread_cpu();
        dec.next_frame(|pic| {
            let s = thread_cpu();
            scaler.draw(pic, &mut frame);
            scale_t += thread_cpu() - s;
        })
        .unwrap();
        let s = thread_cpu();
        mem.show(&frame);
        show_t += thread_cpu() - s;
        times.push((thread_cpu() - t).as_secs_f64() * 1000.0);
    }
    let n = times.len() as f64;
    println!(
        "  (of which scale {:.2} ms, present {:.2} ms)",
        scale_t.as_secs_f64() * 1000.0 / n,
        show_t.as_secs_f64() * 1000.0 / n
    );
    let wall = wall.elapsed().as_secs_f64() * 1000.0 / times.len() as f64;
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    out.push(Figure {
        what: format!(
            "decode+scale+draw {}p -> {}x{}",
            clip_size.1, screen.0, screen.1
        ),
        mean,
        p95: percentile(&mut times, 0.95),
        wall,
    });
    out
}

fn idle_cpu(clip_size: (u16, u16), screen: (u32, u32), mp4: &[u8]) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(Config {
        data_dir: dir.path().to_path_buf(),
        access: AccessConfig {
            admin_password: Some("bench".into()),
            ..AccessConfig::default()
        },
        ..Config::default()
    })
    .unwrap();
    let id = engine
        .create_character(CharacterInput {
            name: "Bench".into(),
            ..Default::default()
        })
        .unwrap()
        .id;
    let mut png = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut png, 2, 2);
        enc.set_color(png::ColorType::Rgb);
        let mut w = enc.write_header().unwrap();
        w.write_image_data(&[0; 12]).unwrap();
    }
    let cid = docent::engine::CharacterId::parse(&id).unwrap();
    let img = engine.add_image(&cid, "a.png", &png).unwrap();
    engine
        .put_clip(&id, image_base(&img.filename), "idle", "idle.mp4", mp4)
        .unwrap();
    let mem = Arc::new(MemoryScreen::new(screen.0, screen.1));
    let (tx, rx) = tokio::sync::watch::channel(KioskState {
        status: Status::Idle,
        character_id: id,
        session_id: String::new(),
        password_shown: false,
        ..KioskState::idle()
    });
    let player = display::play(
        &engine,
        Box::new(mem.clone()),
        display::Console {
            listen: "127.0.0.1:8080".parse().unwrap(),
            fingerprint: String::new(),
        },
        rx,
    )
    .unwrap();
    // Let it settle, then measure.
    std::thread::sleep(Duration::from_millis(500));
    let (c0, t0, f0) = (support::own_cpu_time(), Instant::now(), mem.frame_count());
    std::thread::sleep(Duration::from_secs(IDLE_SECS));
    let (c1, t1, f1) = (support::own_cpu_time(), Instant::now(), mem.frame_count());
    drop(tx);
    let _ = player.join();
    let share = (c1 - c0).as_secs_f64() / (t1 - t0).as_secs_f64() * 100.0;
    let fps = (f1 - f0) as f64 / (t1 - t0).as_secs_f64();
    println!(
        "idle {}p clip at 25 fps on {}x{}: {share:.1} % of one core ({fps:.1} frames/s shown)",
        clip_size.1, screen.0, screen.1
    );
    share
}

/// The flash check of a 10 s, 25 fps clip at each size: (size, check CPU s, check wall s,
/// decode-only CPU s).
fn flash_check_figures() {
    println!(
        "\n| flash check, calm 10 s clip at 25 fps | check CPU s | wall s | decode alone CPU s |"
    );
    println!("|---|---|---|---|");
    for size in [(854u16, 480u16), (1280, 720), (1920, 1080)] {
        let mp4 = testclip::moving_clip(size.0, size.1, 25, 250, false).unwrap();
        let (cpu, wall) = (thread_cpu(), Instant::now());
        let verdict = flash::check(Clip::from_bytes(mp4.clone()).unwrap());
        let (cpu, wall) = (thread_cpu() - cpu, wall.elapsed());
        assert_eq!(verdict, Ok(()), "the calm clip passes");
        // The check decodes the clip and its first second again: 275 frames.
        let mut dec = ClipDecoder::new(Clip::from_bytes(mp4).unwrap()).unwrap();
        let decode = thread_cpu();
        for _ in 0..275 {
            dec.next_frame(|_| {}).unwrap();
        }
        let decode = thread_cpu() - decode;
        println!(
            "| {}x{} | {:.2} | {:.2} | {:.2} |",
            size.0,
            size.1,
            cpu.as_secs_f64(),
            wall.as_secs_f64(),
            decode.as_secs_f64()
        );
    }
}

/// A caption frame: the question heard and a sentence of the reply being said.
fn caption_view(n: usize) -> display::captions::View {
    display::captions::View {
        status: Status::Speaking,
        name: "Harbour guide".into(),
        captions: docent::device::Captions {
            level: 0,
            heard: "where is the cafe".into(),
            said: vec![format!(
                "The cafe is on the ground floor, next to the main entrance, and it serves \
                 coffee, cake and soup until five ({n})."
            )],
        },
        can_choose: false,
        words: Default::default(),
    }
}

fn caption_figures() {
    for size in [(800u32, 480u32), (1920, 1080)] {
        // Cold: a thread of its own, whose glyph cache starts empty.
        let cold = std::thread::spawn(move || {
            let t = thread_cpu();
            let panel = display::captions::draw(&caption_view(0), size, 20);
            (thread_cpu() - t, panel.px.len())
        })
        .join()
        .unwrap();
        let mut warm = Vec::new();
        let mut frame = vec![0u32; (size.0 * size.1) as usize];
        let mut cover = Vec::new();
        for n in 0..200 {
            let t = thread_cpu();
            let panel = display::captions::draw(&caption_view(n % 10), size, 20);
            warm.push((thread_cpu() - t).as_secs_f64() * 1000.0);
            let t = thread_cpu();
            panel.cover(&mut frame, size.0);
            cover.push((thread_cpu() - t).as_secs_f64() * 1000.0);
        }
        println!(
            "captions {}x{}: panel {} px; cold {:.2} ms; warm mean {:.2} ms, p95 {:.2} ms; \
             copy under a frame p95 {:.3} ms",
            size.0,
            size.1,
            cold.1,
            cold.0.as_secs_f64() * 1000.0,
            warm.iter().sum::<f64>() / warm.len() as f64,
            percentile(&mut warm, 0.95),
            percentile(&mut cover, 0.95),
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `flash` runs only the flash check's figures.
    if std::env::args().any(|a| a == "flash") {
        flash_check_figures();
        return;
    }
    if std::env::args().any(|a| a == "captions") {
        caption_figures();
        return;
    }
    let cases = [
        ((854u16, 480u16), (800u32, 480u32)),
        ((854, 480), (1280, 720)),
        ((1280, 720), (1280, 720)),
        ((1280, 720), (1920, 1080)),
    ];
    let mut figures = Vec::new();
    let mut idle = Vec::new();
    for (kind, noisy) in [("calm", false), ("noisy", true)] {
        let mut clips = Vec::new();
        for size in [(854u16, 480u16), (1280, 720)] {
            let t = Instant::now();
            let mp4 = testclip::moving_clip(size.0, size.1, 25, FRAMES, noisy).unwrap();
            println!(
                "encoded a {kind} {}x{} clip: {FRAMES} frames, {} KiB, in {:.1} s",
                size.0,
                size.1,
                mp4.len() / 1024,
                t.elapsed().as_secs_f64()
            );
            clips.push((size, mp4));
        }
        let clip_for = |s: (u16, u16)| &clips.iter().find(|c| c.0 == s).unwrap().1;
        let mut decoded_only = std::collections::HashSet::new();
        for (size, screen) in cases {
            for mut f in decode_figures(size, screen, clip_for(size)) {
                if f.what.starts_with("decode ") && !decoded_only.insert(f.what.clone()) {
                    continue;
                }
                f.what = format!("{kind}: {}", f.what);
                println!(
                    "{:<48} {:>6.2} ms/frame CPU (p95 {:.2}; wall {:.2})",
                    f.what, f.mean, f.p95, f.wall
                );
                figures.push(f);
            }
        }
        for (size, screen) in [
            ((854u16, 480u16), (800u32, 480u32)),
            ((1280, 720), (1280, 720)),
        ] {
            let share = idle_cpu(size, screen, clip_for(size));
            idle.push((kind, size, screen, share));
        }
    }

    println!("\n| figure | CPU ms/frame | p95 | wall ms/frame | target |");
    println!("|---|---|---|---|---|");
    for f in &figures {
        let target = if f.what.ends_with("decode+scale+draw 720p -> 1280x720") {
            "<= 4"
        } else {
            ""
        };
        println!(
            "| {} | {:.2} | {:.2} | {:.2} | {target} |",
            f.what, f.mean, f.p95, f.wall
        );
    }
    println!("\n| idle CPU, 25 fps clip | share of one core |");
    println!("|---|---|");
    for (kind, clip, screen, share) in idle {
        println!(
            "| {kind} {}p clip on {}x{} | {share:.1} % |",
            clip.1, screen.0, screen.1
        );
    }
    flash_check_figures();
    caption_figures();
}
