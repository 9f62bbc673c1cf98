//! The admin console from a real browser, run by `cargo bench --bench console`: its weight
//! (every HTML, CSS and JavaScript byte, uncompressed) and the dashboard's load times in headless
//! Chromium (driven over the DevTools protocol, as the console's tests drive it).
//!
//! Printed: the bytes the dashboard loads, the heaviest page with what it loads, and all pages
//! and files together (budget 150 KB); then over `LOADS` loads of the dashboard, p50 and p95 of
//! the first contentful paint (the browser's paint timing) and of the first live state (the mark
//! `docent-live` that `dashboard.js` sets when the kiosk's first `state` event arrives), both
//! from the start of the navigation.
//!
//! By default it spawns the release binary natively on 127.0.0.1. The aarch64 figure: boot the
//! simulated board (`board/sim/boot.sh` or the appliance test's QEMU, with docent's port 8080
//! forwarded to the host, e.g. `FWD=18080:8080`), then run this bench with
//! `DOCENT_CONSOLE_URL=https://127.0.0.1:18080 DOCENT_CONSOLE_PASSWORD=<its admin password>`:
//! the browser stays on the host (as an administrator's would), the board serves under emulation.

use std::time::Duration;

use docent_test_support::bench as support;
use docent_test_support::browser::Browser;
use serde_json::json;
use support::Docent;

const LOADS: usize = 20;
const PASSWORD: &str = "console-bench-password";
const WEIGHT_MAX: u64 = 150 * 1024;

fn main() {
    support::block_on(run());
}

async fn run() {
    let remote = std::env::var("DOCENT_CONSOLE_URL").ok();
    let (base, password, _server, _dir) = match remote {
        Some(url) => {
            let password = std::env::var("DOCENT_CONSOLE_PASSWORD")
                .expect("DOCENT_CONSOLE_PASSWORD goes with DOCENT_CONSOLE_URL");
            (url.trim_end_matches('/').to_string(), password, None, None)
        }
        None => {
            let dir = tempfile::tempdir().expect("temp dir");
            let server = Docent::start(dir.path(), Some(PASSWORD)).await;
            (server.base(), PASSWORD.to_string(), Some(server), Some(dir))
        }
    };
    let where_ = if _server.is_some() {
        "native release binary"
    } else {
        base.as_str()
    };
    // A board's certificate is its own self-signed one.
    let mut b = Browser::launch_with(&["--ignore-certificate-errors".into()]).await;
    b.goto(&format!("{base}/console/login")).await;
    b.type_into("password", &password).await;
    b.press_enter().await;
    b.wait_for_page("/console/").await;

    let w = b.eval(WEIGHT).await;
    println!("\nconsole weight ({where_}), uncompressed:");
    let bytes = |v: &serde_json::Value| v["bytes"].as_u64().unwrap_or(0);
    println!(
        "  dashboard loads {:>7} bytes ({} files)",
        bytes(&w["dashboard"]),
        w["dashboard"]["files"]
    );
    println!(
        "  heaviest page   {:>7} bytes ({} with what it loads)",
        bytes(&w["largest"]),
        w["largest"]["page"].as_str().unwrap_or("?")
    );
    let total = bytes(&w["total"]);
    println!(
        "  all together    {total:>7} bytes ({} pages and files; budget {WEIGHT_MAX})",
        w["total"]["files"]
    );

    let mut paint = Vec::new();
    let mut live = Vec::new();
    for i in 0..=LOADS {
        b.goto("about:blank").await;
        b.goto(&format!("{base}/console/")).await;
        b.wait_within(
            "performance.getEntriesByName('docent-live').length > 0 && performance.getEntriesByName('first-contentful-paint').length > 0",
            json!(true),
            Duration::from_secs(30),
        )
        .await;
        let t = b.eval("[performance.getEntriesByName('first-contentful-paint')[0].startTime, performance.getEntriesByName('docent-live')[0].startTime]").await;
        // The first load warms the browser and the server up.
        if i > 0 {
            paint.push(t[0].as_f64().unwrap());
            live.push(t[1].as_f64().unwrap());
        }
    }
    println!("\ndashboard ({where_}, {LOADS} loads, headless Chromium on this machine):");
    println!("  {:<28}{:>9}{:>9}", "", "p50 ms", "p95 ms");
    for (name, mut v) in [
        ("first contentful paint", paint),
        ("first live state (SSE)", live),
    ] {
        v.sort_by(f64::total_cmp);
        println!(
            "  {name:<28}{:>9.1}{:>9.1}",
            percentile(&v, 50.0),
            percentile(&v, 95.0)
        );
    }
    assert!(total <= WEIGHT_MAX, "over the console's budget");
    assert!(b.errors.is_empty(), "script errors: {:?}", b.errors);
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let at = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[at]
}

/// Run in the signed-in page: every console page (the sign-in page signed out) and, followed
/// through their references, every style sheet and script, with their sizes in bytes.
const WEIGHT: &str = r#"(async () => {
  const pages = ['/console/', '/console/login', '/console/characters', '/console/knowledge',
    '/console/conversations', '/console/settings', '/console/try', '/console/system'];
  const sizes = new Map();
  const refs = new Map();
  async function get(path) {
    if (sizes.has(path)) return;
    const r = await fetch(path, { credentials: path === '/console/login' ? 'omit' : 'same-origin', redirect: 'manual' });
    if (!r.ok) throw new Error(`${path}: ${r.status}`);
    const text = await r.text();
    sizes.set(path, new TextEncoder().encode(text).length);
    const found = [...new Set(text.match(/\/console\/[\w.-]+\.(?:js|css)/g) || [])];
    refs.set(path, found);
    for (const f of found) await get(f);
  }
  function closure(path, seen = new Set()) {
    if (seen.has(path)) return seen;
    seen.add(path);
    for (const f of refs.get(path) || []) closure(f, seen);
    return seen;
  }
  const weigh = (set) => [...set].reduce((n, p) => n + sizes.get(p), 0);
  for (const p of pages) await get(p);
  const dash = closure('/console/');
  let largest = { page: '', bytes: 0 };
  for (const p of pages) {
    const bytes = weigh(closure(p));
    if (bytes > largest.bytes) largest = { page: p, bytes };
  }
  return {
    dashboard: { bytes: weigh(dash), files: dash.size },
    largest,
    total: { bytes: weigh(new Set(sizes.keys())), files: sizes.size },
  };
})()"#;
