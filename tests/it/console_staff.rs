//! The console as front-of-house staff use it, in a real browser (headless Chromium): every page
//! and every section on a desktop and on a phone passes the checks a person makes by eye (no
//! `[object`, `undefined`, `null` or `NaN`, every text readable at WCAG AA contrast, no sideways
//! scroll, no script error, no missing file), with a screenshot of each; and the defects staff found
//! (issue 26), each shown fixed the way they would see it.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use fake_openai::{Chat, Failure, FakeOpenAi};
use serde_json::{Value, json};

use crate::support::browser::Browser;
use crate::support::{Server, furnished, references, sign_in};

const PASSWORD: &str = "staff-console-password";
/// Every page's budget: the page and every file it loads, uncompressed.
const PAGE_MAX: usize = 60 * 1024;

/// A server guarded by a password, whose `http` client is its signed-in administrator (from
/// its own origin).
pub(crate) async fn kiosk() -> Server {
    let mut s = Server::start_with(|c| {
        c.access.admin_password = Some(PASSWORD.into());
        c.devices = docent::config::DeviceMode::Sim;
        // One visit's question is listed (the rule of three visits: privacy.rs).
        c.history.questions_min_visits = 1;
    })
    .await;
    let cookie = sign_in(&s, PASSWORD).await;
    s.as_admin(&cookie);
    s
}

/// A browser window of `width` (a phone's when 390) signed in to `s`.
pub(crate) async fn signed_in(s: &Server, width: u32) -> Browser {
    let mut b = Browser::launch().await;
    window(&mut b, width).await;
    b.call("Network.enable", json!({})).await;
    b.sign_in_page(&s.base, PASSWORD).await;
    b
}

pub(crate) async fn window(b: &mut Browser, width: u32) {
    let phone = width < 600;
    let height = if phone { 844 } else { 900 };
    b.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": phone}),
    )
    .await;
}

/// The checks of a page as it is shown now: what is wrong, as sentences (none when all is well).
const AUDIT: &str = r#"(() => {
  const problems = [];
  const rgba = (c) => {
    const m = /rgba?\(([^)]*)\)/.exec(c);
    if (!m) return null;
    const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const over = (top, under) => [0, 1, 2].map((i) => top[i] * top[3] + under[i] * (1 - top[3]));
  const background = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = rgba(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
    }
    let bg = [255, 255, 255];
    for (const c of layers.reverse()) bg = over(c, bg);
    return bg;
  };
  const lum = (c) => {
    const [r, g, b] = c.map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const seen = new Set();
  let checked = 0;
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    const el = n.parentElement;
    if (!n.textContent.trim() || seen.has(el)) continue;
    seen.add(el);
    if (el.closest('option, datalist, script, :disabled')) continue;
    if (!el.checkVisibility({ opacityProperty: true, visibilityProperty: true })) continue;
    const range = document.createRange();
    range.selectNodeContents(n);
    const r = range.getBoundingClientRect();
    if (r.width === 0 || r.height === 0 || r.right <= 0) continue;
    const st = getComputedStyle(el);
    const bg = background(el);
    const fg = over(rgba(st.color), bg);
    const size = parseFloat(st.fontSize);
    const large = size >= 24 || (Number(st.fontWeight) >= 700 && size >= 18.66);
    const need = large ? 3 : 4.5;
    const got = ratio(fg, bg);
    checked += 1;
    if (got < need) problems.push(`contrast ${got.toFixed(2)}:1 (needs ${need}) of "${n.textContent.trim().slice(0, 50)}": ${st.color} on rgb(${bg.map(Math.round)})`);
  }
  const text = document.body.innerText;
  for (const bad of [/\[object/, /\bundefined\b/, /\bNaN\b/, /\bnull\b/]) {
    const m = bad.exec(text);
    if (m) problems.push(`the page says ${m[0]}: "${text.slice(Math.max(0, m.index - 60), m.index + 40)}"`);
  }
  const d = document.documentElement;
  if (d.scrollWidth > d.clientWidth) problems.push(`the page scrolls sideways: ${d.scrollWidth} px in a ${d.clientWidth} px window`);
  return { problems, checked };
})()"#;

/// Runs the checks on the page shown, saves its screenshot as `name`, and returns what is
/// wrong (prefixed by `name`), script errors and missing files included.
pub(crate) async fn audit(b: &mut Browser, name: &str) -> Vec<String> {
    // Let the page's own requests settle (its lists are filled from the API).
    tokio::time::sleep(Duration::from_millis(700)).await;
    let report = b.eval(AUDIT).await;
    b.screenshot_page(name).await;
    let mut problems: Vec<String> = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| format!("{name}: {}", p.as_str().unwrap()))
        .collect();
    assert!(
        report["checked"].as_u64().unwrap() > 3,
        "{name}: the contrast check looked at almost nothing: {report}"
    );
    problems.extend(
        b.errors
            .drain(..)
            .map(|e| format!("{name}: script error {e}")),
    );
    problems.extend(
        b.failed_files
            .drain(..)
            .map(|f| format!("{name}: file not loaded: {f}")),
    );
    problems
}

/// The visits a kiosk has when staff look at it: a visitor's (asked over the API from the
/// kiosk's own machine, without credentials, as a local client would) with a question the
/// knowledge answers and one it does not, on Ada (made the kiosk's character).
async fn furnish_visits(s: &Server) -> String {
    let ada = furnished(s).await;
    s.put_json(
        "/api/v1/settings",
        json!({"kiosk": {"character_id": ada}}),
        200,
    )
    .await;
    let visitor = Visitor::open(s).await;
    for (i, q) in [
        "Who designed the Analytical Engine?",
        "Where is the cloakroom?",
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(visitor.ask(q).await, 202, "{q}");
        wait_messages(s, &ada, 2 * (i + 1)).await;
    }
    ada
}

/// A visitor at the kiosk: a client without credentials (so not the administrator) and the
/// session it opened with the kiosk's character.
struct Visitor {
    http: reqwest::Client,
    messages: String,
}

impl Visitor {
    async fn open(s: &Server) -> Visitor {
        let http = reqwest::Client::new();
        let res = http.post(s.url("/api/v1/sessions")).json(&json!({})).send();
        let session: Value = res.await.unwrap().json().await.unwrap();
        let sid = session["session_id"].as_str().unwrap();
        let messages = s.url(&format!("/api/v1/sessions/{sid}/message"));
        Visitor { http, messages }
    }

    /// Asks `question`; the status of the answer.
    async fn ask(&self, question: &str) -> u16 {
        let res = self
            .http
            .post(&self.messages)
            .json(&json!({"text": question}));
        res.send().await.unwrap().status().as_u16()
    }
}

/// Waits until `character` has `n` messages in its history.
async fn wait_messages(s: &Server, character: &str, n: usize) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let page = s
            .get_json(
                &format!("/api/v1/characters/{character}/conversations/messages?limit=200"),
                200,
            )
            .await;
        let messages = page["messages"].as_array().unwrap().clone();
        if messages.len() >= n {
            return messages;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{} of {n} messages: {page}",
            messages.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The weight of `page`: its HTML and every file it loads (scripts' imports too), in bytes;
/// adds each file's weight to `files`.
async fn weigh(
    s: &Server,
    page: &str,
    files: &mut std::collections::BTreeMap<String, usize>,
) -> usize {
    // The sign-in page is seen signed out (signed in, it sends to the dashboard).
    let http = if page == "/console/login" {
        reqwest::Client::new()
    } else {
        s.http.clone()
    };
    let html = http.get(s.url(page)).send().await.unwrap();
    assert_eq!(html.status(), 200, "{page}");
    let html = html.text().await.unwrap();
    let mut total = html.len();
    let mut todo = references(&html, &[".js", ".css", ".svg"]);
    let mut seen = BTreeSet::new();
    while let Some(path) = todo.pop() {
        if !seen.insert(path.clone()) {
            continue;
        }
        let res = http.get(s.url(&path)).send().await.unwrap();
        assert_eq!(res.status(), 200, "{path} of {page}");
        let body = res.text().await.unwrap();
        total += body.len();
        files.insert(path, body.len());
        todo.extend(references(&body, &[".js", ".css", ".svg"]));
    }
    total
}

const PAGES: [(&str, &str); 9] = [
    ("dashboard", "/console/"),
    ("characters", "/console/characters"),
    ("knowledge", "/console/knowledge"),
    ("conversations", "/console/conversations"),
    ("statistics", "/console/statistics"),
    ("site", "/console/site"),
    ("settings", "/console/settings"),
    ("try", "/console/try"),
    ("system", "/console/system"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_and_section_reads_well_on_a_desktop_and_a_phone() {
    let s = kiosk().await;
    let ada = furnish_visits(&s).await;
    let mut problems = Vec::new();
    for width in [1280, 390] {
        let device = if width < 600 { "phone" } else { "desktop" };
        // Signed out: the sign-in page, and its error.
        let mut b = Browser::launch().await;
        window(&mut b, width).await;
        b.call("Network.enable", json!({})).await;
        b.goto(&s.url("/console/login")).await;
        problems.extend(audit(&mut b, &format!("login-{device}")).await);
        b.type_into("password", "not-the-password").await;
        b.press_enter().await;
        b.wait_for("document.getElementById('error').hidden", json!(false))
            .await;
        problems.extend(audit(&mut b, &format!("login-error-{device}")).await);
        drop(b);

        let mut b = signed_in(&s, width).await;
        for (name, path) in PAGES {
            b.goto(&s.url(path)).await;
            problems.extend(audit(&mut b, &format!("{name}-{device}")).await);
            // The page names its icon, and the icon is there.
            let icon = b
                .eval("(() => { const l = document.querySelector('link[rel=icon]'); return l ? fetch(l.href).then((r) => `${r.status} ${r.headers.get('content-type')}`) : 'no icon named'; })()")
                .await;
            if icon != json!("200 image/svg+xml") {
                problems.push(format!("{name}-{device}: the icon: {icon}"));
            }
        }
        // The sections behind a button: a character's form, a knowledge answer, one visit.
        b.goto(&s.url("/console/characters")).await;
        b.wait_until("document.querySelectorAll('#list li').length >= 3")
            .await;
        b.click("#list li button").await;
        b.wait_until("document.getElementById('edit').open").await;
        problems.extend(audit(&mut b, &format!("characters-edit-{device}")).await);
        b.goto(&s.url("/console/knowledge")).await;
        // Asked once the page knows its character (its sources are listed).
        b.wait_until("document.querySelectorAll('#sources li').length > 0")
            .await;
        b.type_into("question", "Who designed the Analytical Engine?")
            .await;
        b.press_enter().await;
        b.wait_until("!!document.getElementById('answer-text')")
            .await;
        problems.extend(audit(&mut b, &format!("knowledge-answer-{device}")).await);
        b.goto(&s.url(&format!("/console/conversations?character={ada}")))
            .await;
        b.wait_for("document.querySelectorAll('li.visit').length", json!(1))
            .await;
        b.click("li.visit button").await;
        b.wait_for("document.getElementById('filter').hidden", json!(false))
            .await;
        problems.extend(audit(&mut b, &format!("conversations-visit-{device}")).await);
        // Every settings section has its fields (none is a dump of `[object ...]`).
        b.goto(&s.url("/console/settings")).await;
        b.wait_until("document.querySelectorAll('#launch fieldset').length > 3")
            .await;
        let empty = b
            .eval("[...document.querySelectorAll('fieldset')].filter((f) => !f.querySelector('input, select, textarea')).map((f) => f.querySelector('legend').textContent)")
            .await;
        if empty != json!([]) {
            problems.push(format!(
                "settings-{device}: sections without a field: {empty}"
            ));
        }
        // The System page shows the certificate's fingerprint, to compare with the screen's.
        let certificate = s.get_json("/api/v1/tls/certificate", 200).await;
        b.goto(&s.url("/console/system")).await;
        b.wait_for(
            "document.getElementById('system-fingerprint').textContent",
            certificate["fingerprint"].clone(),
        )
        .await;
        if width < 600 {
            // The phone's navigation leaves the screen to the page.
            let header = b
                .eval("document.querySelector('header').getBoundingClientRect().height")
                .await;
            if header.as_f64().unwrap() > 100.0 {
                problems.push(format!("phone: the navigation takes {header} px of 844"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // The weights: each page with everything it loads, and all the files together.
    let mut files = std::collections::BTreeMap::new();
    let mut report = Vec::new();
    for (name, path) in PAGES.into_iter().chain([("login", "/console/login")]) {
        let weight = weigh(&s, path, &mut files).await;
        report.push(format!("{name} {weight} B"));
        assert!(
            weight <= PAGE_MAX,
            "{name} weighs {weight} bytes, over {PAGE_MAX}"
        );
    }
    let all: usize = files.values().sum();
    println!(
        "console page weights: {}; all files {all} B",
        report.join(", ")
    );
    assert!(all <= 150 * 1024, "the console's files weigh {all} bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_launch_settings_are_fields_that_save() {
    let s = kiosk().await;
    let mut b = signed_in(&s, 1280).await;
    b.goto(&s.url("/console/settings")).await;
    b.wait_until("!!document.getElementById('l-audio.volume')")
        .await;
    let text = b.eval("document.getElementById('launch').innerText").await;
    assert!(!text.as_str().unwrap().contains("[object"), "{text}");
    assert!(
        text.as_str().unwrap().contains("Speaker volume (0-100)"),
        "{text}"
    );
    b.eval("document.getElementById('l-audio.volume').value = '35'")
        .await;
    b.click("#launch button[type=submit]").await;
    b.wait_until("!!document.getElementById('launch-result').textContent || !document.getElementById('error').hidden").await;
    let said = b
        .eval("document.getElementById('launch-result').textContent + document.getElementById('error').textContent")
        .await;
    assert!(said.as_str().unwrap().starts_with("Saved"), "{said}");
    assert_eq!(
        s.get_json("/api/v1/settings", 200).await["kiosk"]["volume"],
        35
    );
    assert!(b.errors.is_empty(), "{:?}", b.errors);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversations_read_as_visits_and_staff_tests_stay_apart() {
    let s = kiosk().await;
    let ada = furnish_visits(&s).await;
    let mut b = signed_in(&s, 1280).await;

    // A staff member tries Ada out: the question she cannot answer is theirs, not a visitor's.
    b.goto(&s.url("/console/try")).await;
    b.type_into("text", "Is there a staff canteen?").await;
    b.press_enter().await;
    wait_messages(&s, &ada, 6).await;
    let unmatched = s
        .get_json(
            &format!("/api/v1/characters/{ada}/conversations/unmatched"),
            200,
        )
        .await;
    let asked: Vec<&str> = unmatched["questions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["question"].as_str().unwrap())
        .collect();
    assert_eq!(asked, ["Where is the cloakroom?"], "{unmatched}");

    // Knowledge and Conversations open on the kiosk's character (Ada, not the oldest).
    b.goto(&s.url("/console/knowledge")).await;
    b.wait_for("document.getElementById('character').value", json!(ada))
        .await;
    b.wait_until(
        "document.getElementById('unmatched').innerText.includes('Where is the cloakroom?')",
    )
    .await;
    let staff_question = b
        .eval("document.getElementById('unmatched').innerText.includes('staff canteen')")
        .await;
    assert_eq!(staff_question, json!(false));
    b.goto(&s.url("/console/conversations")).await;
    b.wait_for("document.getElementById('character').value", json!(ada))
        .await;
    b.wait_for("document.querySelectorAll('li.visit').length", json!(2))
        .await;
    // Newest visit first; each reads from its question down; labelled for people, not by id.
    let visits = b
        .eval(
            "[...document.querySelectorAll('li.visit')].map((v) => ({
                heading: v.querySelector('h2').textContent,
                staff: v.classList.contains('staff'),
                lines: [...v.querySelectorAll('ol li')].map((li) => [li.className, li.firstChild.textContent]),
            }))",
        )
        .await;
    let visits = visits.as_array().unwrap();
    assert_eq!(visits[0]["staff"], true, "{visits:?}");
    assert!(
        visits[0]["heading"]
            .as_str()
            .unwrap()
            .starts_with("Staff test (Try it), "),
        "{visits:?}"
    );
    assert_eq!(visits[1]["staff"], false, "{visits:?}");
    let heading = visits[1]["heading"].as_str().unwrap();
    assert!(
        heading.starts_with("Visitor, ") && heading.ends_with("· 4 messages"),
        "{heading}"
    );
    let lines = visits[1]["lines"].as_array().unwrap();
    assert_eq!(
        lines[0],
        json!(["user", "Who designed the Analytical Engine?"])
    );
    assert_eq!(lines[1][0], "assistant");
    assert_eq!(lines[2], json!(["user", "Where is the cloakroom?"]));
    let sid = s.history(&ada).await["messages"][0]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let text = b
        .eval("document.getElementById('messages').innerText")
        .await;
    assert!(!text.as_str().unwrap().contains(&sid[..8]), "{text}");
    // The "one visit" switch shows only when one visit is shown.
    let filter = b
        .eval("document.getElementById('filter').checkVisibility()")
        .await;
    assert_eq!(filter, json!(false));
    b.eval("document.querySelectorAll('li.visit button.only')[1].click()")
        .await;
    b.wait_until("document.getElementById('filter').checkVisibility()")
        .await;
    b.wait_for("document.querySelectorAll('li.visit').length", json!(1))
        .await;
    // The CSV is named after the character and the day.
    let href = b.eval("document.getElementById('csv').href").await;
    let res = s.http.get(href.as_str().unwrap()).send().await.unwrap();
    let disposition = res.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .to_string();
    let today = &docent::store::now()[..10];
    assert_eq!(
        disposition,
        format!("attachment; filename=\"conversations-ada-lovelace-{today}.csv\"")
    );
    let csv = res.text().await.unwrap();
    assert!(
        csv.starts_with("timestamp,session_id,turn_seq,role,content,unmatched,staff\r\n"),
        "{csv}"
    );
    assert!(b.errors.is_empty(), "{:?}", b.errors);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_says_when_the_language_model_fails_and_since_when() {
    let s = kiosk().await;
    let ada = furnished(&s).await;
    s.put_json(
        "/api/v1/settings",
        json!({"kiosk": {"character_id": ada}}),
        200,
    )
    .await;
    // The server is up (its probe connects) but every answer is an error.
    let fake = FakeOpenAi::start().await;
    fake.set_chat(Chat::failing(Failure::Status(500, "model crashed".into())));
    s.put_json(
        "/api/v1/settings",
        json!({"llm": {"provider": "openai", "base_url": fake.base_url(), "api_key": "sk-test"}}),
        200,
    )
    .await;
    let health = s.get_json("/api/v1/health", 200).await;
    assert_eq!(health["providers"]["llm"]["ok"], true, "{health}");

    // Staff try it: one error, one apology (not two), as visitors would hear it.
    let mut b = signed_in(&s, 1280).await;
    b.goto(&s.url("/console/try")).await;
    b.type_into("text", "Who designed the Analytical Engine?")
        .await;
    b.press_enter().await;
    b.wait_for("document.querySelectorAll('#chat li.err').length", json!(1))
        .await;
    b.wait_for(
        "[...document.querySelectorAll('#chat li.assistant')].map((li) => li.textContent)",
        json!(["I'm sorry, I can't answer that right now. Please try again in a moment."]),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let replies = b
        .eval("document.querySelectorAll('#chat li.assistant').length")
        .await;
    assert_eq!(replies, json!(1));

    // Health: the language model is not ok, since its first failed call.
    let health = s.get_json("/api/v1/health", 200).await;
    let llm = &health["providers"]["llm"];
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(llm["ok"], false, "{health}");
    assert!(
        llm["error"].as_str().unwrap().contains("last call failed"),
        "{health}"
    );
    assert_eq!(llm["last_call"]["ok"], false, "{health}");
    let since = llm["last_call"]["since"].as_str().unwrap().to_string();
    // The dashboard says so, with since when and what visitors hear.
    b.goto(&s.url("/console/")).await;
    b.wait_until("document.getElementById('health').innerText.includes('failing since')")
        .await;
    let text = b.eval("document.getElementById('health').innerText").await;
    assert!(
        text.as_str().unwrap().contains("visitors hear an apology"),
        "{text}"
    );
    // A second failure keeps the first one's time; an answer makes it healthy again.
    let visitor = Visitor::open(&s).await;
    let first = llm["last_call"]["at"].clone();
    assert_eq!(visitor.ask("Anything?").await, 202);
    let health = health_until(&s, |h| h["providers"]["llm"]["last_call"]["at"] != first).await;
    assert_eq!(
        health["providers"]["llm"]["last_call"]["ok"], false,
        "{health}"
    );
    assert_eq!(
        health["providers"]["llm"]["last_call"]["since"],
        since.as_str()
    );
    fake.set_chat(Chat::reply("Charles Babbage designed it."));
    assert_eq!(visitor.ask("And now?").await, 202);
    let health = health_until(&s, |h| h["providers"]["llm"]["last_call"]["ok"] == true).await;
    assert_eq!(health["providers"]["llm"]["ok"], true, "{health}");
    assert_eq!(
        health["providers"]["llm"]["last_call"]["ok"], true,
        "{health}"
    );
    assert!(b.errors.is_empty(), "{:?}", b.errors);
}

/// The health report once `done` holds for it (within 20 s).
async fn health_until(s: &Server, done: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let health = s.get_json("/api/v1/health", 200).await;
        if done(&health) {
            return health;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{health}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_checks_what_is_in_the_form_without_saving_it() {
    let s = kiosk().await;
    let fake = FakeOpenAi::start().await;
    s.put_json(
        "/api/v1/settings",
        json!({"llm": {"provider": "openai", "base_url": fake.base_url()}}),
        200,
    )
    .await;
    let closed = fake_openai::closed_base_url().await;
    let mut b = signed_in(&s, 1280).await;
    b.goto(&s.url("/console/settings")).await;
    b.wait_until("!!document.getElementById('s-llm-base_url')")
        .await;
    b.type_into("s-llm-base_url", &closed).await;
    b.eval("document.getElementById('test-llm').click()").await;
    b.wait_until("document.getElementById('result-llm').textContent.includes('failed')")
        .await;
    let port = closed.rsplit(':').next().unwrap().trim_end_matches("/v1");
    let said = b
        .eval("document.getElementById('result-llm').textContent")
        .await;
    assert!(said.as_str().unwrap().contains(port), "{said}");
    // Nothing was saved: the kiosk still uses the server that answers.
    let settings = s.get_json("/api/v1/settings", 200).await;
    assert_eq!(settings["llm"]["base_url"], fake.base_url().as_str());
    // The form's own, saved server passes.
    b.type_into("s-llm-base_url", &fake.base_url()).await;
    b.eval("document.getElementById('test-llm').click()").await;
    b.wait_until("document.getElementById('result-llm').textContent.startsWith('llm:openai: ok')")
        .await;
    assert!(b.errors.is_empty(), "{:?}", b.errors);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_is_picked_from_the_engine_s_voices() {
    if docent::engine::providers::speech::espeak_voices().is_none() {
        println!("espeak-ng is not installed: no offline voices to pick from");
        return;
    }
    let s = kiosk().await;
    let ada = furnished(&s).await;
    // An unknown voice of the offline engine is refused on save, a listed one kept.
    let refused = s
        .put(&format!("/api/v1/characters/{ada}"))
        .json(&json!({"name": "Ada Lovelace", "voice_provider": "local", "voice_type": "zz-no-such-voice"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let list = s
        .get_json("/api/v1/characters/voices?provider=local", 200)
        .await;
    assert_eq!(list["closed"], true);
    let voices = list["voices"].as_array().unwrap();
    assert!(voices.iter().any(|v| v["id"] == "en-us"), "{list}");

    let mut b = signed_in(&s, 1280).await;
    b.goto(&s.url("/console/characters")).await;
    b.wait_for(
        &format!("!!document.querySelector('#list li[data-id=\"{ada}\"] button')"),
        json!(true),
    )
    .await;
    b.eval(&format!(
        "document.querySelector('#list li[data-id=\"{ada}\"] button').click()"
    ))
    .await;
    b.eval("{ const p = document.getElementById('f-voice_provider'); p.value = 'local'; p.dispatchEvent(new Event('change')); }")
        .await;
    b.wait_for(
        "document.getElementById('f-voice_pick').hidden",
        json!(false),
    )
    .await;
    let options = b
        .eval("document.getElementById('f-voice_pick').options.length")
        .await;
    assert_eq!(options.as_u64().unwrap() as usize, voices.len() + 1);
    let label = b
        .eval("document.getElementById('voice-label').htmlFor")
        .await;
    assert_eq!(label, json!("f-voice_pick"));
    let pick = voices.iter().find(|v| v["id"] != "en-us").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    b.eval(&format!(
        "{{ const p = document.getElementById('f-voice_pick'); p.value = '{pick}'; p.dispatchEvent(new Event('change')); }}"
    ))
    .await;
    b.click("#form button[type=submit]").await;
    b.wait_for("document.getElementById('edit').open", json!(false))
        .await;
    let saved = s.get_json(&format!("/api/v1/characters/{ada}"), 200).await;
    assert_eq!(saved["voice_type"], pick.as_str());
    assert!(b.errors.is_empty(), "{:?}", b.errors);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_offline_engine_says_who_the_character_is() {
    let s = kiosk().await;
    let ada = furnished(&s).await;
    s.put_json(
        &format!("/api/v1/characters/{ada}"),
        json!({"name": "Ada Lovelace", "description": "I wrote the first program, for Babbage's engine.",
            "welcome_message": "Welcome to the engine room!"}),
        200,
    )
    .await;
    s.put_json(
        "/api/v1/settings",
        json!({"kiosk": {"character_id": ada}}),
        200,
    )
    .await;
    let mut b = signed_in(&s, 1280).await;
    b.goto(&s.url("/console/try")).await;
    // Each answered in turn (a new question would cut the answer being given).
    let intro = "I'm Ada Lovelace. I wrote the first program, for Babbage's engine.";
    for (i, q) in ["Who are you?", "What's your name?"]
        .into_iter()
        .enumerate()
    {
        b.type_into("text", q).await;
        b.press_enter().await;
        b.wait_for(
            &format!("(document.querySelectorAll('#chat li.assistant')[{i}] || {{}}).textContent"),
            json!(intro),
        )
        .await;
        b.wait_text("chat-state", "idle").await;
    }
    // The character's form says which fields the offline engine uses.
    b.goto(&s.url("/console/characters")).await;
    b.wait_until("document.querySelectorAll('#list li').length >= 3")
        .await;
    b.click("#list li button").await;
    let form = b.eval("document.getElementById('form').innerText").await;
    let form = form.as_str().unwrap();
    assert!(
        form.contains("The offline engine (no language model) uses the name, the description, the welcome message and the voice"),
        "{form}"
    );
    assert!(form.contains("Personality language model only"), "{form}");

    // A visitor taps the button to start a visit (a press, not a question): the character
    // greets them with its welcome message.
    let before = wait_messages(&s, &ada, 4).await.len();
    for pressed in [true, false] {
        let res = s
            .http
            .post(s.url("/api/v1/internal/device/ptt"))
            .json(&json!({ "pressed": pressed }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        // Released as soon as the kiosk listens: well within a tap's 300 ms.
        while pressed && s.get_json("/api/v1/internal/device", 200).await["status"] != "listening" {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let said = wait_messages(&s, &ada, before + 1).await;
    let greeting = said.last().unwrap();
    assert_eq!(greeting["role"], "assistant", "{said:?}");
    assert_eq!(greeting["content"], "Welcome to the engine room!");
    assert!(
        greeting.get("staff").is_none(),
        "a visitor's visit: {greeting}"
    );
    assert!(b.errors.is_empty(), "{:?}", b.errors);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_follows_a_visit_and_sign_in_errors_are_sentences() {
    let s = kiosk().await;
    let mut b = Browser::launch().await;
    window(&mut b, 1280).await;
    b.goto(&s.url("/console/login")).await;
    b.submit_wrong_password("not-the-password").await;
    b.submit_password(PASSWORD).await;
    b.wait_text("state", "idle").await;

    // A visitor presses the button: the dashboard counts the visit while it is open.
    let press = |pressed: bool| {
        s.http
            .post(s.url("/api/v1/internal/device/ptt"))
            .json(&json!({ "pressed": pressed }))
            .send()
    };
    assert_eq!(press(true).await.unwrap().status(), 200);
    b.wait_text("visitor-h", "Current visitor").await;
    b.wait_within(
        "document.getElementById('health').innerText.includes('Open conversations\\t1') || document.getElementById('health').innerText.includes('Open conversations\\n1')",
        json!(true),
        Duration::from_secs(10),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(press(false).await.unwrap().status(), 200);
    // Once the kiosk is idle again, the visit is the last one, not a current one.
    b.wait_within(
        "document.getElementById('transcript').children.length > 0 && document.getElementById('state').textContent === 'idle'",
        json!(true),
        Duration::from_secs(30),
    )
    .await;
    b.wait_text("visitor-h", "Last visitor").await;
    let hint = b
        .eval("document.getElementById('no-visitor').checkVisibility()")
        .await;
    assert_eq!(hint, json!(true));
    assert!(b.errors.is_empty(), "{:?}", b.errors);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_read_as_staff_think_of_them() {
    let s = kiosk().await;
    let ada = furnished(&s).await;
    s.put_json(
        "/api/v1/settings",
        json!({"kiosk": {"character_id": ada}, "llm": {"api_key": "sk-staff-secret-9876"}}),
        200,
    )
    .await;
    let mut b = signed_in(&s, 1280).await;
    b.goto(&s.url("/console/settings")).await;
    b.wait_until("!!document.getElementById('s-kiosk-character_id')")
        .await;
    // The sections in the order staff think of them, labelled in words, not keys.
    let legends = b
        .eval("[...document.querySelectorAll('#providers legend')].slice(0, 4).map((l) => l.textContent)")
        .await;
    assert_eq!(legends, json!(["The kiosk", "Voice", "Answers", "Hearing"]));
    let text = b
        .eval("document.getElementById('providers').innerText")
        .await;
    for key in [
        "api_key",
        "dashscope",
        "model_providers",
        "character_id",
        "base_url",
    ] {
        assert!(!text.as_str().unwrap().contains(key), "{key} shown: {text}");
    }
    // The kiosk's character by name; every field has its line of help.
    let chosen = b
        .eval("(() => { const c = document.getElementById('s-kiosk-character_id'); return c.options[c.selectedIndex].text; })()")
        .await;
    assert_eq!(chosen, json!("Ada Lovelace"));
    let unhelped = b
        .eval("[...document.querySelectorAll('#providers [data-key]')].filter((e) => !document.getElementById(e.getAttribute('aria-describedby'))).length")
        .await;
    assert_eq!(unhelped, json!(0));
    // A key shows as set, never as itself; "Replace" takes a new one, which is saved.
    assert!(text.as_str().unwrap().contains("Set (sk-…9876)"), "{text}");
    assert!(!text.as_str().unwrap().contains("staff-secret"), "{text}");
    b.eval("document.getElementById('s-llm-api_key-replace').click()")
        .await;
    b.type_into("s-llm-api_key", "sk-replaced-key-1234").await;
    b.click("#providers button[type=submit]").await;
    b.wait_text("settings-result", "Saved: llm.").await;
    let saved = s.get_json("/api/v1/settings", 200).await;
    assert_eq!(saved["llm"]["api_key"], "sk-…1234");
    assert!(b.errors.is_empty(), "{:?}", b.errors);
}

/// The id of the field labelled `label` in the site editor's group `group` (a legend).
fn site_field(group: &str, label: &str) -> String {
    format!(
        "(() => {{ const g = [...document.querySelectorAll('#fields fieldset')].find((f) => f.querySelector('legend').textContent.startsWith('{group}')); \
         return [...g.querySelectorAll('label')].find((l) => l.textContent === '{label}').htmlFor; }})()"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_site_document_and_its_images_are_edited_as_a_form() {
    let s = kiosk().await;
    let mut b = signed_in(&s, 1280).await;
    b.goto(&s.url("/console/site")).await;
    b.wait_until("document.querySelectorAll('#fields fieldset').length > 3")
        .await;
    // The hero's title, and a fourth work with its own image.
    let hero = b.eval(&site_field("Hero", "Title")).await;
    b.type_into(hero.as_str().unwrap(), "Voices of the Harbour")
        .await;
    b.eval("[...document.querySelectorAll('#fields button')].find((x) => x.textContent === 'Add to works').click()")
        .await;
    b.wait_for(
        "document.querySelectorAll('fieldset[data-list=works] > ol > li').length",
        json!(4),
    )
    .await;
    let id = b
        .eval(
            "document.querySelector('fieldset[data-list=works] > ol > li:last-child input').value",
        )
        .await;
    assert_eq!(id, json!("work-4"), "a new entry gets the next id");
    let labels = b
        .eval("[...document.querySelectorAll('fieldset[data-list=works] > ol > li:last-child label')].map((l) => [l.textContent, l.htmlFor])")
        .await;
    let title_id = labels
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l[0] == "Title")
        .unwrap()[1]
        .as_str()
        .unwrap()
        .to_string();
    b.type_into(&title_id, "The Lighthouse Keeper").await;
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("keeper.png");
    std::fs::write(&png, crate::support::PNG).unwrap();
    b.choose_files(
        "fieldset[data-list=works] > ol > li:last-child input[type=file]",
        &[png.as_path()],
    )
    .await;
    b.wait_until(
        "!!document.querySelector('fieldset[data-list=works] > ol > li:last-child img.site-image')",
    )
    .await;
    b.click("#site button[type=submit]").await;
    b.wait_text("site-result", "Saved: 4 works, 2 exhibitions.")
        .await;
    let site = s.get_json("/api/data", 200).await;
    assert_eq!(site["hero"]["title"], "Voices of the Harbour");
    let work = &site["works"][3];
    assert_eq!(work["id"], "work-4");
    assert_eq!(work["title"], "The Lighthouse Keeper");
    let key = work["image"].as_str().unwrap().to_string();
    assert!(key.starts_with("work-4-") && key.ends_with(".png"), "{key}");
    let img = reqwest::get(s.url(&format!("/api/img/{key}")))
        .await
        .unwrap();
    assert_eq!(img.status(), 200);
    assert_eq!(img.bytes().await.unwrap().as_ref(), crate::support::PNG);

    // The image taken away is deleted from the store; the list loses an entry.
    b.eval("[...document.querySelectorAll('#fields button')].find((x) => x.textContent === 'Remove the image').click()")
        .await;
    b.wait_for(
        "!!document.querySelector('fieldset[data-list=works] > ol > li:last-child img.site-image')",
        json!(false),
    )
    .await;
    let gone = reqwest::get(s.url(&format!("/api/img/{key}")))
        .await
        .unwrap();
    assert_eq!(gone.status(), 404);
    b.click("button[aria-label=\"Remove Works 1\"]").await;
    b.click("#site button[type=submit]").await;
    b.wait_text("site-result", "Saved: 3 works, 2 exhibitions.")
        .await;
    let site = s.get_json("/api/data", 200).await;
    assert_eq!(site["works"][2]["title"], "The Lighthouse Keeper");
    assert_eq!(site["works"][2]["image"], "");

    // Reset to the example, after a confirmation.
    b.eval("document.getElementById('reset').click()").await;
    b.wait_text("site-result", "The example is back.").await;
    assert_eq!(b.dialogs, ["Replace the whole site with the example?"]);
    let site = s.get_json("/api/data", 200).await;
    assert_eq!(site["hero"]["title"], "Voices of the Collection");
    let hero = b.eval(&site_field("Hero", "Title")).await;
    let shown = b
        .eval(&format!(
            "document.getElementById('{}').value",
            hero.as_str().unwrap()
        ))
        .await;
    assert_eq!(shown, json!("Voices of the Collection"));
    assert!(b.errors.is_empty(), "{:?}", b.errors);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statistics_count_visits_and_questions_and_draw_them() {
    let s = kiosk().await;
    let ada = furnish_visits(&s).await;
    // The visitor asks the unanswered question again; a staff test is not counted.
    let sid = wait_messages(&s, &ada, 4).await[0]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let res = reqwest::Client::new()
        .post(s.url(&format!("/api/v1/sessions/{sid}/message")))
        .json(&json!({"text": "Where is the cloakroom?"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    wait_messages(&s, &ada, 6).await;
    let mut b = signed_in(&s, 1280).await;
    b.goto(&s.url("/console/try")).await;
    b.type_into("text", "Is there a staff canteen?").await;
    b.press_enter().await;
    wait_messages(&s, &ada, 8).await;

    let stats = s
        .get_json(&format!("/api/v1/characters/{ada}/statistics"), 200)
        .await;
    let today = &docent::store::now()[..10];
    assert_eq!(
        stats["days"],
        json!([{"day": today, "visits": 1, "questions": 3, "answered": 1, "unanswered": 2, "asked_again": 1, "by_touch": 0, "by_language": {"en": 3}}]),
        "{stats}"
    );
    assert_eq!(
        stats["most_asked"][0],
        json!({"question": "Where is the cloakroom?", "count": 2, "answered": 0})
    );

    // The page draws it (inline SVG), says the shares, lists the most asked, exports the days.
    b.goto(&s.url("/console/statistics")).await;
    b.wait_for("document.getElementById('character').value", json!(ada))
        .await;
    b.wait_for(
        "document.querySelectorAll('#chart svg rect.visits').length",
        json!(1),
    )
    .await;
    let shares = b
        .eval("document.getElementById('shares').textContent")
        .await;
    assert_eq!(
        shares,
        json!(
            "1 visit, 3 questions: answered 1 (33 %), asked again 1 (33 %), unanswered 2 (67 %)."
        )
    );
    let top = b
        .eval("document.querySelector('#top li').textContent")
        .await;
    assert_eq!(top, json!("Where is the cloakroom? ×2, answered 0"));
    b.eval("{ const p = document.getElementById('period'); p.value = 'week'; p.dispatchEvent(new Event('change')); }")
        .await;
    b.wait_until("document.querySelector('#chart svg').getAttribute('aria-label').startsWith('Visits and questions per week')").await;
    let href = b.eval("document.getElementById('csv').href").await;
    let res = s.http.get(href.as_str().unwrap()).send().await.unwrap();
    assert_eq!(
        res.headers()["content-disposition"].to_str().unwrap(),
        format!("attachment; filename=\"statistics-ada-lovelace-{today}.csv\"")
    );
    assert_eq!(
        res.text().await.unwrap(),
        format!(
            "day,visits,questions,answered,unanswered,asked_again,by_touch\r\n\"{today}\",\"1\",\"3\",\"1\",\"2\",\"1\",\"0\"\r\n"
        )
    );
    assert!(b.errors.is_empty(), "{:?}", b.errors);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opening_hours_are_edited_in_settings_and_the_dashboard_shows_them() {
    let s = kiosk().await;
    let mut b = signed_in(&s, 1280).await;
    b.goto(&s.url("/console/")).await;
    // No schedule: always open.
    b.wait_text("opening", "Open").await;
    b.goto(&s.url("/console/settings")).await;
    b.wait_until("!!document.getElementById('h-closed')").await;
    let legend = b
        .eval("document.querySelector('#section-hours legend').textContent")
        .await;
    assert_eq!(legend, json!("Opening hours"));
    // Every day open all day, but today (the kiosk's local date, the browser's here) closed.
    b.eval(
        "(() => { document.getElementById('s-hours-enabled').value = 'true'; \
         for (let i = 0; i < 7; i++) { document.getElementById(`h-day-${i}`).checked = true; \
           document.getElementById(`h-open-${i}`).value = '00:00'; document.getElementById(`h-close-${i}`).value = '24:00'; } \
         const d = new Date(); const p = (n) => String(n).padStart(2, '0'); \
         document.getElementById('h-closed').value = `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}`; \
         document.querySelector('#providers button[type=submit]').click(); })()",
    )
    .await;
    b.wait_text("settings-result", "Saved: hours.").await;
    let saved = s.get_json("/api/v1/settings", 200).await;
    assert_eq!(saved["hours"]["enabled"], true);
    assert_eq!(
        saved["hours"]["week"][3],
        json!({"open": "00:00", "close": "24:00"})
    );
    assert_eq!(saved["hours"]["closed_days"].as_array().unwrap().len(), 1);
    // A bad time is refused with a sentence, and nothing is saved.
    b.eval("document.getElementById('h-open-0').value = '9 am'; document.querySelector('#providers button[type=submit]').click()")
        .await;
    b.wait_until("document.body.innerText.includes(\"Monday's times must be HH:MM\")")
        .await;
    b.errors.clear();
    // The dashboard: closed until tomorrow, and the kiosk's screen says closed.
    b.goto(&s.url("/console/")).await;
    b.wait_text("opening", "Closed until tomorrow at 00:00")
        .await;
    let problems = audit(&mut b, "dashboard-closed").await;
    assert!(problems.is_empty(), "{problems:#?}");
    // Today no longer closed: open.
    s.put_json(
        "/api/v1/settings",
        json!({"hours": {"closed_days": []}}),
        200,
    )
    .await;
    b.wait_until("document.getElementById('opening').textContent.startsWith('Open until')")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_volume_is_a_slider_with_a_test_sound_that_saves_its_value() {
    let s = kiosk().await;
    let mut b = signed_in(&s, 390).await;
    b.goto(&s.url("/console/settings")).await;
    b.wait_until("!!document.getElementById('s-kiosk-volume')")
        .await;
    assert_eq!(
        b.eval("document.getElementById('s-kiosk-volume').type")
            .await,
        json!("range")
    );
    assert_eq!(
        b.eval("document.getElementById('s-kiosk-volume-shown').textContent")
            .await,
        json!("80%")
    );
    b.eval("(() => { const v = document.getElementById('s-kiosk-volume'); v.value = '42'; v.dispatchEvent(new Event('input')); })()")
        .await;
    assert_eq!(
        b.eval("document.getElementById('s-kiosk-volume-shown').textContent")
            .await,
        json!("42%")
    );
    // "Test sound" plays a chime on the kiosk's (simulated) speaker, without saving.
    let device = s.get_json("/api/v1/internal/device", 200).await;
    let speaker = std::path::PathBuf::from(device["sim_audio"]["speaker"].as_str().unwrap());
    let len = || std::fs::metadata(&speaker).map(|m| m.len()).unwrap_or(0);
    let before = len();
    b.eval("document.getElementById('s-kiosk-volume-test').click()")
        .await;
    b.wait_text(
        "s-kiosk-volume-result",
        "Playing on the kiosk at 42% (not saved).",
    )
    .await;
    let start = Instant::now();
    while len() < before + 24_000 {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the chime reaches the speaker: {} bytes",
            len() - before
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        s.get_json("/api/v1/settings", 200).await["kiosk"]["volume"],
        80,
        "a test saves nothing"
    );
    // The assistive speaker's volume (issue 31: a hearing loop, headphones) is a slider too,
    // saved with the form.
    assert_eq!(
        b.eval("document.getElementById('s-kiosk-assistive_volume').type")
            .await,
        json!("range")
    );
    b.eval("(() => { const v = document.getElementById('s-kiosk-assistive_volume'); v.value = '30'; v.dispatchEvent(new Event('input')); })()")
        .await;
    assert_eq!(
        b.eval("document.getElementById('s-kiosk-assistive_volume-shown').textContent")
            .await,
        json!("30%")
    );
    b.click("#providers button[type=submit]").await;
    b.wait_text("settings-result", "Saved: kiosk.").await;
    let kiosk = &s.get_json("/api/v1/settings", 200).await["kiosk"];
    assert_eq!(
        (&kiosk["volume"], &kiosk["assistive_volume"]),
        (&json!(42), &json!(30))
    );
    // Only an administrator may make the kiosk play.
    let anyone = reqwest::Client::new()
        .post(s.url("/api/v1/kiosk/test-sound"))
        .json(&json!({"volume": 50}))
        .send()
        .await
        .unwrap();
    assert_eq!(anyone.status(), 401);
    let problems = audit(&mut b, "settings-volume-phone").await;
    assert!(problems.is_empty(), "{problems:#?}");
}
