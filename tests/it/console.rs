//! The admin console: its security headers, its weight, and a real browser (headless Chromium
//! over the DevTools protocol) signing in and watching the kiosk.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use docent::config::DeviceMode;
use fake_openai::{Chat, FakeOpenAi};
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::support::browser::Browser;
use crate::support::{
    PNG, Process, Running, Server, furnished, hash_tree, header, references, sign_in,
};

const PASSWORD: &str = "console-test-password";
const LLM_KEY: &str = "sk-console-test-llm-key-1234";
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; media-src 'self' blob:; connect-src 'self'; frame-ancestors 'none'";
const PAGES: [&str; 10] = [
    "/console/",
    "/console/login",
    "/console/characters",
    "/console/knowledge",
    "/console/conversations",
    "/console/statistics",
    "/console/site",
    "/console/settings",
    "/console/try",
    "/console/system",
];
/// The console's budget: every page, style sheet and script together, uncompressed.
const WEIGHT_MAX: usize = 150 * 1024;

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

fn assert_secure(res: &reqwest::Response, what: &str) {
    assert_eq!(header(res, "content-security-policy"), CSP, "CSP of {what}");
    assert_eq!(header(res, "x-frame-options"), "DENY", "{what}");
    assert_eq!(header(res, "referrer-policy"), "no-referrer", "{what}");
    assert_eq!(header(res, "x-content-type-options"), "nosniff", "{what}");
}

#[tokio::test]
async fn console_pages_carry_the_security_headers_and_need_a_sign_in() {
    let s = Server::start_with(|c| c.access.admin_password = Some(PASSWORD.into())).await;
    let http = no_redirects();
    // Signed out: every page but the sign-in page sends to it; `/` sends to the console.
    let root = http.get(s.url("/")).send().await.unwrap();
    assert_eq!(root.status(), 303);
    assert_eq!(root.headers()["location"], "/console/");
    assert_secure(&root, "/");
    for page in PAGES {
        let res = http.get(s.url(page)).send().await.unwrap();
        assert_secure(&res, page);
        if page == "/console/login" {
            assert_eq!(res.status(), 200, "{page}");
            assert_forms_post(&res.text().await.unwrap(), page);
        } else {
            assert_eq!(res.status(), 303, "{page}");
            assert_eq!(res.headers()["location"], "/console/login", "{page}");
        }
    }
    // The console's own admin routes refuse a caller that is not signed in.
    for route in ["/api/v1/kiosk/events", "/api/v1/kiosk/snapshot"] {
        assert_eq!(http.get(s.url(route)).send().await.unwrap().status(), 401);
    }
    // Signed in: the pages and every file they use, with the headers and no inline code.
    let cookie = sign_in(&s, PASSWORD).await;
    let mut files = BTreeSet::new();
    for page in PAGES {
        let res = http
            .get(s.url(page))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap();
        assert_secure(&res, page);
        let expected = if page == "/console/login" { 303 } else { 200 };
        assert_eq!(res.status(), expected, "{page}");
        let body = res.text().await.unwrap();
        assert!(
            !body.contains("<script>") && !body.contains("style="),
            "{page}"
        );
        assert_forms_post(&body, page);
        files.extend(references(&body, &[".js", ".css"]));
    }
    assert!(files.contains("/console/app.css"), "{files:?}");
    for file in &files {
        let res = http.get(s.url(file)).send().await.unwrap();
        assert_eq!(res.status(), 200, "{file}");
        assert_secure(&res, file);
    }
    let missing = http.get(s.url("/console/nope.js")).send().await.unwrap();
    assert_eq!(missing.status(), 404);
    assert_secure(&missing, "a missing file");
}

/// Every form of a page says `method="post"`: one sent before the page's script took it over
/// (a fast Enter) must not put a password into a URL, its history and the logs.
fn assert_forms_post(body: &str, page: &str) {
    for form in body.split("<form").skip(1) {
        let tag = &form[..form.find('>').unwrap()];
        assert!(tag.contains(r#"method="post""#), "{page}: <form{tag}>");
    }
}

#[tokio::test]
async fn console_weighs_under_its_budget() {
    let s = Server::start_with(|c| c.access.admin_password = Some(PASSWORD.into())).await;
    let cookie = sign_in(&s, PASSWORD).await;
    let http = no_redirects();
    let mut todo: Vec<String> = PAGES.iter().map(|p| p.to_string()).collect();
    let mut seen = BTreeSet::new();
    let mut total = 0;
    while let Some(path) = todo.pop() {
        if !seen.insert(path.clone()) {
            continue;
        }
        let res = http
            .get(s.url(&path))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap();
        // The sign-in page redirects a signed-in caller: fetch it signed out.
        let res = if res.status() == 303 {
            http.get(s.url(&path)).send().await.unwrap()
        } else {
            res
        };
        assert_eq!(res.status(), 200, "{path}");
        let body = res.text().await.unwrap();
        total += body.len();
        todo.extend(references(&body, &[".js", ".css"]));
    }
    // The pages, the style sheet, one script per page and the shared module.
    let files = 2 * PAGES.len() + 2;
    assert!(seen.len() >= files, "{seen:?}");
    println!("console weight: {total} bytes in {} files", seen.len());
    assert!(
        total <= WEIGHT_MAX,
        "the console weighs {total} bytes, over {WEIGHT_MAX}"
    );
}

#[tokio::test]
async fn a_browser_signs_in_and_sees_the_kiosk_live() {
    let s = Server::start_with(|c| {
        c.access.admin_password = Some(PASSWORD.into());
        c.devices = DeviceMode::Sim;
        // Two wrong passwords lock the sign-in for a few seconds.
        c.access.login_max_failures = 2;
        c.access.login_window_secs = 3;
    })
    .await;
    let mut b = Browser::launch().await;
    b.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 1200, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
    )
    .await;

    // `/` leads to the sign-in page; a wrong password's error is shown on the page.
    b.goto(&s.url("/")).await;
    b.wait_for_page("/console/login").await;
    b.submit_wrong_password("not-the-password").await;
    // Once locked out, the page says how long to wait and the button waits it out.
    b.type_into("password", "still-not-it").await;
    b.press_enter().await;
    b.wait_until("document.getElementById('error').textContent.startsWith('Wrong password')")
        .await;
    b.wait_for(
        "document.querySelector('#login button').disabled",
        json!(false),
    )
    .await;
    b.type_into("password", "third-try").await;
    b.press_enter().await;
    b.wait_until("/^Too many login attempts\\. Try again in [1-3] seconds\\.$/.test(document.getElementById('error').textContent)").await;
    b.wait_until("document.querySelector('#login button').textContent.startsWith('Sign in (wait')")
        .await;
    b.screenshot("login-error").await;
    b.wait_for(
        "document.querySelector('#login button').disabled",
        json!(false),
    )
    .await;

    // The right password leads to the dashboard, which shows the kiosk's live state.
    b.submit_password(PASSWORD).await;
    b.wait_text("state", "idle").await;
    b.wait_until("document.getElementById('health').textContent.includes('Uptime')")
        .await;
    b.wait_until("!document.getElementById('screen').hidden")
        .await;

    // A press of the kiosk's button shows up at once, pushed by the server.
    s.post_json("/api/v1/internal/device/ptt", json!({"pressed": true}), 200)
        .await;
    b.wait_text("state", "listening").await;
    b.screenshot("dashboard").await;
    s.post_json(
        "/api/v1/internal/device/ptt",
        json!({"pressed": false}),
        200,
    )
    .await;

    // On a phone the same page lays out in one column.
    b.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": true}),
    )
    .await;
    b.screenshot("dashboard-phone").await;

    // The characters page lists the kiosk's character.
    b.goto(&s.url("/console/characters")).await;
    b.wait_until("document.querySelectorAll('#list > li').length > 0")
        .await;
    b.screenshot("characters-phone").await;

    // Upload an image: it becomes the character's active image, shown on its card.
    let png = tempfile::Builder::new().suffix(".png").tempfile().unwrap();
    std::fs::write(png.path(), PNG).unwrap();
    let doc = b.call("DOM.getDocument", json!({})).await;
    let input = b
        .call(
            "DOM.querySelector",
            json!({"nodeId": doc["root"]["nodeId"], "selector": "#list > li input[type=file]"}),
        )
        .await;
    b.call(
        "DOM.setFileInputFiles",
        json!({"nodeId": input["nodeId"], "files": [png.path()]}),
    )
    .await;
    b.wait_for(
        "document.querySelectorAll('#list > li .thumbs button[aria-pressed=true]').length",
        json!(1),
    )
    .await;
    let docent = s.get_json("/api/v1/characters", 200).await;
    assert_eq!(docent[0]["images"].as_array().unwrap().len(), 1);

    // Upload the idle clip of the active image (with progress): the page previews it.
    let mp4 = tempfile::Builder::new().suffix(".mp4").tempfile().unwrap();
    std::fs::write(mp4.path(), crate::support::mp4_h264()).unwrap();
    let doc = b.call("DOM.getDocument", json!({})).await;
    let input = b
        .call(
            "DOM.querySelector",
            json!({"nodeId": doc["root"]["nodeId"], "selector": "#list > li input[data-state=idle]"}),
        )
        .await;
    b.call(
        "DOM.setFileInputFiles",
        json!({"nodeId": input["nodeId"], "files": [mp4.path()]}),
    )
    .await;
    b.wait_for(
        "(document.querySelector('#list > li .clip video') || {}).getAttribute?.('src') || ''",
        json!(format!(
            "/api/v1/characters/{}/idle-videos/img_001/idle/idle.mp4",
            docent[0]["id"].as_str().unwrap()
        )),
    )
    .await;
    // The preview's source is the stored clip, served to the page's session as MP4.
    b.eval("window.clipType = ''; fetch(document.querySelector('#list > li .clip video').src).then((r) => r.ok && r.headers.get('content-type')).then((t) => { window.clipType = t; })").await;
    b.wait_for("window.clipType", json!("video/mp4")).await;
    let docent = s.get_json("/api/v1/characters", 200).await;
    assert_eq!(docent[0]["idle_video_urls"].as_array().unwrap().len(), 1);

    // "Play a sample" in the dialog plays the voice from a blob URL; then the dialog closes.
    b.click("#list > li button").await;
    b.wait_until("document.getElementById('edit').open").await;
    b.eval("document.getElementById('sample-play').click()")
        .await;
    b.wait_until("document.getElementById('sample').src.startsWith('blob:') && document.getElementById('sample').duration > 1").await;
    b.screenshot("characters-dialog-phone").await;
    b.eval("document.getElementById('cancel').click()").await;

    // Create, edit and delete (after confirming) a character through the dialog.
    b.eval("document.getElementById('new').click()").await;
    b.type_into("f-name", "Captain Nemo").await;
    b.type_into("f-description", "Keeper of the submarine room.")
        .await;
    b.click("#form button[type=submit]").await;
    let nemo =
        "[...document.querySelectorAll('#list > li h2')].map((e) => e.textContent).join('|')";
    b.wait_for(nemo, json!("Docent|Captain Nemo")).await;
    b.eval("[...document.querySelectorAll('#list > li')].find((li) => li.querySelector('h2').textContent === 'Captain Nemo').querySelector('button').click()").await;
    b.wait_until("document.getElementById('edit').open").await;
    b.type_into("f-name", "Nemo").await;
    b.press_enter().await;
    b.wait_for(nemo, json!("Docent|Nemo")).await;
    let list = s.get_json("/api/v1/characters", 200).await;
    assert_eq!(list[1]["description"], "Keeper of the submarine room.");
    b.eval("[...document.querySelectorAll('#list > li')].find((li) => li.querySelector('h2').textContent === 'Nemo').querySelector('button.danger').click()").await;
    b.wait_for(nemo, json!("Docent")).await;
    assert_eq!(b.dialogs, ["Delete Nemo? Its images and knowledge go too."]);

    // Settings: the provider's key is masked, and its test button shows the check's result.
    let fake = FakeOpenAi::start().await;
    let reply = "Welcome aboard, the lighthouse gallery is upstairs.";
    fake.set_chat(Chat::reply(reply));
    let cookie = sign_in(&s, PASSWORD).await;
    let llm = json!({"llm": {"provider": "openai", "base_url": fake.base_url(), "api_key": LLM_KEY, "model": "fake-chat"}});
    let res = s
        .put("/api/v1/settings")
        .header("cookie", &cookie)
        .header("origin", s.url(""))
        .json(&llm)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    b.goto(&s.url("/console/settings")).await;
    b.wait_until("!!document.getElementById('s-llm-api_key')")
        .await;
    let shown = b
        .eval("document.getElementById('s-llm-api_key').value")
        .await;
    assert!(
        !shown.as_str().unwrap().contains(LLM_KEY),
        "the key is masked: {shown}"
    );
    b.eval("document.getElementById('test-llm').click()").await;
    b.wait_until("document.getElementById('result-llm').textContent.startsWith('llm:openai: ok')")
        .await;
    b.screenshot("settings-phone").await;

    // Try it: a text turn over the WebSocket chat, the character's answer on the page.
    b.goto(&s.url("/console/try")).await;
    b.type_into("text", "Where is the lighthouse gallery?")
        .await;
    b.press_enter().await;
    b.wait_for(
        "[...document.querySelectorAll('#chat li.assistant')].map((e) => e.textContent).join()",
        json!(reply),
    )
    .await;
    b.screenshot("try-phone").await;
    let open = all_sessions(&s, &cookie).await;

    // Signing out leads back to the sign-in page, and the console is closed again.
    b.eval("document.getElementById('signout').click()").await;
    b.wait_for_page("/console/login").await;
    b.goto(&s.url("/console/settings")).await;
    b.wait_for_page("/console/login").await;
    // Leaving the Try it page ended its session.
    let start = Instant::now();
    while all_sessions(&s, &cookie).await != open - 1 {
        assert!(start.elapsed() < Duration::from_secs(5), "the session ends");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    assert!(
        b.errors.is_empty(),
        "script or console errors: {:?}",
        b.errors
    );
}

#[tokio::test]
async fn a_browser_changes_the_first_boot_password_and_reads_the_log() {
    const FIRST_BOOT: &str = "Fb3kQz9TmW2xLr7N";
    const CHOSEN: &str = "my-own-kiosk-password";
    let outside = tempfile::tempdir().unwrap();
    let file = outside.path().join("admin-password");
    std::fs::write(&file, format!("{FIRST_BOOT}\n")).unwrap();
    // A process of its own: its log ring holds its own lines only (an in-process server would
    // share the ring with every other test's servers, and the page shows the last 300 lines).
    let s = Process::new()
        .config(&format!(
            "access.admin_password_file = {:?}\n",
            file.display().to_string()
        ))
        .start()
        .await;
    let url = |path: &str| format!("{}{path}", s.base());
    let mut b = Browser::launch().await;
    b.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 1200, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
    )
    .await;

    // Signed in with the first-boot password, the console shows only "choose your password".
    b.goto(&url("/console/login")).await;
    b.type_into("password", FIRST_BOOT).await;
    b.press_enter().await;
    b.wait_for_page("/console/password").await;
    b.wait_for("document.querySelectorAll('nav a').length", json!(0))
        .await;
    b.goto(&url("/console/characters")).await;
    b.wait_for_page("/console/password").await;
    b.type_into("current", FIRST_BOOT).await;
    b.type_into("new", CHOSEN).await;
    b.type_into("again", "a-different-one").await;
    b.press_enter().await;
    b.wait_text("error", "The two new passwords differ.").await;
    b.screenshot("password-choose").await;
    b.type_into("again", CHOSEN).await;
    b.press_enter().await;
    b.wait_for_page("/console/").await;

    // The System page shows the recent log.
    b.goto(&url("/console/system")).await;
    b.wait_until(
        "document.getElementById('logs').textContent.includes('administrator password changed')",
    )
    .await;
    let log = b.eval("document.getElementById('logs').textContent").await;
    assert!(
        !log.to_string().contains(FIRST_BOOT),
        "no password in the log"
    );
    assert!(!log.to_string().contains(CHOSEN), "no password in the log");
    b.screenshot("system").await;

    // Sign out, then the first-boot password no longer opens and the chosen one does.
    b.eval("document.getElementById('signout').click()").await;
    b.wait_for_page("/console/login").await;
    b.type_into("password", FIRST_BOOT).await;
    b.press_enter().await;
    b.wait_text("error", "Wrong password.").await;
    b.type_into("password", CHOSEN).await;
    b.press_enter().await;
    b.wait_for_page("/console/").await;
    assert!(
        b.errors.is_empty(),
        "script or console errors: {:?}",
        b.errors
    );
}

/// How many sessions there are, as an administrator sees them (all of them).
async fn all_sessions(s: &Server, cookie: &str) -> usize {
    let v: Value = s
        .get_as("/api/v1/sessions", cookie)
        .await
        .json()
        .await
        .unwrap();
    v.as_array().map_or(0, Vec::len)
}

/// The events of a Server-Sent Events response, as (name, data).
struct Events {
    body: std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buf: String,
}

impl Events {
    async fn open(s: &Server, cookie: &str) -> Events {
        let res = s.get_as("/api/v1/kiosk/events", cookie).await;
        assert_eq!(res.status(), 200);
        assert_eq!(res.headers()["content-type"], "text/event-stream");
        Events {
            body: Box::pin(res.bytes_stream()),
            buf: String::new(),
        }
    }

    /// The next event (keep-alive comments skipped), within `within`.
    async fn next(&mut self, within: Duration) -> (String, Value) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let mut name = String::from("message");
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        name = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if data.is_empty() {
                    continue;
                }
                return (name, serde_json::from_str(&data).unwrap());
            }
            let chunk = tokio::time::timeout_at(deadline, self.body.next())
                .await
                .expect("an event in time")
                .expect("the stream goes on")
                .unwrap();
            self.buf.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }

    /// Events until one named `name` for which `pred` holds; returns all of them.
    async fn until(&mut self, name: &str, pred: impl Fn(&Value) -> bool) -> Vec<(String, Value)> {
        let mut seen = Vec::new();
        loop {
            let e = self.next(Duration::from_secs(40)).await;
            let done = e.0 == name && pred(&e.1);
            seen.push(e);
            if done {
                return seen;
            }
        }
    }
}

/// Presses (or releases) the simulated button.
pub(crate) async fn press(s: &Server, pressed: bool) {
    s.post_json(
        "/api/v1/internal/device/ptt",
        json!({ "pressed": pressed }),
        200,
    )
    .await;
}

#[tokio::test]
async fn the_kiosk_event_stream_follows_a_visit() {
    let s = Server::start_with(|c| {
        c.access.admin_password = Some(PASSWORD.into());
        c.devices = DeviceMode::Sim;
    })
    .await;
    let cookie = sign_in(&s, PASSWORD).await;
    let mut events = Events::open(&s, &cookie).await;
    let (name, first) = events.next(Duration::from_secs(5)).await;
    assert_eq!(name, "state");
    assert_eq!(first["status"], "idle");
    assert_eq!(first["session_id"], "");
    assert!(!first["character_id"].as_str().unwrap().is_empty());

    // A press opens the visitor's session; the stream names it. Silence in the microphone:
    // the kiosk answers that it did not catch that, and the console sees that line of the
    // visitor's session.
    press(&s, true).await;
    let mut seen = events.until("state", |v| v["status"] == "listening").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    press(&s, false).await;
    seen.extend(events.until("state", |v| v["status"] == "idle").await);
    let states: Vec<&Value> = seen
        .iter()
        .filter(|(n, _)| n == "state")
        .map(|(_, v)| v)
        .collect();
    let session = states
        .iter()
        .find_map(|v| v["session_id"].as_str().filter(|id| !id.is_empty()))
        .unwrap_or_else(|| panic!("the visitor's session is named: {seen:?}"));
    // An admin lists every session, the kiosk's too.
    let sessions = s
        .get_as("/api/v1/sessions", &cookie)
        .await
        .text()
        .await
        .unwrap();
    assert!(sessions.contains(session), "{sessions}");
    let said: Vec<&str> = seen
        .iter()
        .filter(|(n, v)| n == "assistant" || (n == "transcript" && v["speaker"] == "assistant"))
        .filter_map(|(_, v)| v["text"].as_str())
        .collect();
    assert!(
        said.iter().any(|t| !t.is_empty()),
        "the kiosk's line reaches the console: {seen:?}"
    );
}

#[tokio::test]
async fn kiosk_event_streams_are_bounded_and_end_with_the_server() {
    let s = Server::start_with(|c| c.access.admin_password = Some(PASSWORD.into())).await;
    let cookie = sign_in(&s, PASSWORD).await;
    let mut open = Vec::new();
    for _ in 0..8 {
        open.push(Events::open(&s, &cookie).await);
    }
    let refused = s.get_as("/api/v1/kiosk/events", &cookie).await;
    assert_eq!(refused.status(), 503);
    // A stream closed by its client frees its place.
    drop(open.pop());
    let start = Instant::now();
    loop {
        let res = s.get_as("/api/v1/kiosk/events", &cookie).await;
        if res.status() == 200 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "{}", res.status());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Open streams do not hold up the server's shutdown.
    tokio::time::timeout(Duration::from_secs(10), s.stop())
        .await
        .expect("the server stops with console streams open");
    drop(open);
}

#[tokio::test]
async fn a_browser_uploads_knowledge_asks_it_and_reads_the_conversations() {
    let s = Server::start_with(|c| {
        c.access.admin_password = Some(PASSWORD.into());
        // One visit's question is listed (the rule of three visits: privacy.rs).
        c.history.questions_min_visits = 1;
    })
    .await;
    let mut b = Browser::launch().await;
    b.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 1200, "height": 1000, "deviceScaleFactor": 1, "mobile": false}),
    )
    .await;
    b.sign_in_page(&s.base, PASSWORD).await;

    // A folder of three files, set on the folder input (Chromium lists a directory's files,
    // with their paths inside it): each is uploaded and becomes ready.
    b.goto(&s.url("/console/knowledge")).await;
    b.wait_text("sources", "No knowledge yet.").await;
    let dir = tempfile::tempdir().unwrap();
    let museum = dir.path().join("museum");
    std::fs::create_dir(&museum).unwrap();
    let files = [
        (
            "hours.md",
            "# Opening hours\n\nThe museum opens at nine o'clock every day and closes at six.\n",
        ),
        (
            "cafe.txt",
            "The cafe on the ground floor serves coffee and cake until five.\n",
        ),
        (
            "faq.md",
            "Q: Can I take photos?\nA: Yes, without a flash.\n\nQ: Is there a cloakroom?\nA: Yes, by the entrance.\n",
        ),
    ];
    for (name, text) in files {
        std::fs::write(museum.join(name), text).unwrap();
    }
    let doc = b.call("DOM.getDocument", json!({})).await;
    let input = b
        .call(
            "DOM.querySelector",
            json!({"nodeId": doc["root"]["nodeId"], "selector": "#folder"}),
        )
        .await;
    b.call(
        "DOM.setFileInputFiles",
        json!({"nodeId": input["nodeId"], "files": [museum]}),
    )
    .await;
    let ready = "[...document.querySelectorAll('#sources li')].filter((li) => li.dataset.status === 'ready').length";
    b.wait_for(ready, json!(3)).await;
    let shown = b
        .eval("[...document.querySelectorAll('#sources strong')].map((e) => e.textContent).sort().join()")
        .await;
    assert_eq!(shown, "museum/cafe.txt,museum/faq.md,museum/hours.md");
    b.wait_for(
        "[...document.querySelectorAll('#uploads progress')].map((p) => p.value).join()",
        json!("1,1,1"),
    )
    .await;
    b.screenshot("knowledge").await;

    // What would it answer: the passage and the kiosk's answer.
    b.type_into("question", "When does the museum open?").await;
    b.press_enter().await;
    b.wait_for(
        "(document.getElementById('answer-text') || {}).textContent",
        json!("The museum opens at nine o'clock every day and closes at six."),
    )
    .await;
    let passage = b
        .eval("document.querySelector('#passages li').textContent")
        .await;
    assert!(
        passage.as_str().unwrap().contains("nine o'clock"),
        "{passage}"
    );
    b.screenshot("knowledge-ask").await;

    // Delete a source after confirming.
    b.eval("[...document.querySelectorAll('#sources li')].find((li) => li.textContent.includes('cafe.txt')).querySelector('button.danger').click()").await;
    b.wait_for("document.querySelectorAll('#sources li').length", json!(2))
        .await;
    assert_eq!(b.dialogs, ["Delete museum/cafe.txt?"]);

    // A visitor's visit (a client on the kiosk itself, without credentials): one question the
    // knowledge answers, one it does not.
    let cookie = sign_in(&s, PASSWORD).await;
    let cid = s.default_character().await;
    let post = |path: String, body: Value| s.post(&path).json(&body).send();
    let created: Value = post("/api/v1/sessions".into(), json!({"character_id": cid}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sid = created["session_id"].as_str().unwrap().to_string();
    for (i, text) in ["Can I take photos?", "Is there a bicycle rack?"]
        .into_iter()
        .enumerate()
    {
        let res = post(
            format!("/api/v1/sessions/{sid}/message"),
            json!({"text": text}),
        )
        .await
        .unwrap();
        assert_eq!(res.status(), 202);
        let start = Instant::now();
        loop {
            let page: Value = s
                .get_as(
                    &format!("/api/v1/characters/{cid}/conversations/messages?session_id={sid}"),
                    &cookie,
                )
                .await
                .json()
                .await
                .unwrap();
            if page["messages"].as_array().unwrap().len() == 2 * (i + 1) {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(20), "{page}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // The unanswered question is listed on the knowledge page.
    b.goto(&s.url("/console/knowledge")).await;
    b.wait_text("unmatched", "Is there a bicycle rack?×1").await;

    // The conversations page shows the visit as it was said, and one visit alone.
    b.goto(&s.url("/console/conversations")).await;
    let said =
        "[...document.querySelectorAll('#messages li.user')].map((e) => e.textContent).join('|')";
    b.wait_for(said, json!("Can I take photos?|Is there a bicycle rack?"))
        .await;
    b.wait_until("[...document.querySelectorAll('#messages li.assistant')].at(-1).textContent.endsWith('not in the knowledge')").await;
    b.click("#messages li.visit button").await;
    b.wait_for("document.getElementById('filter').hidden", json!(false))
        .await;
    b.wait_for(
        "document.querySelectorAll('#messages li.user').length",
        json!(2),
    )
    .await;
    b.screenshot("conversations").await;

    // The CSV export link downloads the visit's rows.
    let href = b.eval("document.getElementById('csv').href").await;
    let res = reqwest::Client::new()
        .get(href.as_str().unwrap())
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(
        header(&res, "content-disposition").starts_with("attachment; filename=\"conversations-")
    );
    let csv = res.text().await.unwrap();
    let lines: Vec<&str> = csv.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(
        lines[0],
        "timestamp,session_id,turn_seq,role,content,unmatched,staff"
    );
    assert_eq!(lines.len(), 5, "{csv}");
    assert!(
        lines[1].ends_with(&format!(
            ",\"{sid}\",\"1\",\"user\",\"Can I take photos?\",\"false\",\"false\""
        )),
        "{csv}"
    );
    assert!(
        lines[2].ends_with(",\"Yes, without a flash.\",\"false\",\"false\""),
        "{csv}"
    );
    assert!(lines[4].ends_with(",\"true\",\"false\""), "{csv}");
    // Without the cookie the export is refused.
    let refused = reqwest::get(href.as_str().unwrap()).await.unwrap();
    assert_eq!(refused.status(), 401);

    assert!(
        b.errors.is_empty(),
        "script or console errors: {:?}",
        b.errors
    );
}

/// What the voice test's character knows, and the question asked about it.
const MUSEUM: &str =
    "The museum closes at 6 pm on weekdays. On weekends it stays open until 8 pm.\n";
const SPOKEN_QUESTION: &str = "When does the museum close?";

/// `text` spoken by espeak-ng, with `before` and `after` seconds of silence around it, as a WAV
/// at espeak-ng's rate; returns the file and the speech's duration.
fn spoken_wav(dir: &std::path::Path, text: &str, before: f64, after: f64) -> (PathBuf, Duration) {
    let raw = dir.join("speech.wav");
    let ok = std::process::Command::new("espeak-ng")
        .args(["-v", "en-us", "-w"])
        .arg(&raw)
        .arg(text)
        .status()
        .expect("espeak-ng runs (./x installs it)");
    assert!(ok.success());
    let w = docent::engine::pcm::parse_wav(&std::fs::read(&raw).unwrap()).unwrap();
    let speech = docent::engine::pcm::downmix(&w.samples, w.channels);
    let pad = |secs: f64| vec![0i16; (secs * w.rate as f64) as usize];
    let all = [pad(before), speech.clone(), pad(after)].concat();
    let path = dir.join("question.wav");
    std::fs::write(&path, docent::engine::pcm::wav_bytes(&all, w.rate)).unwrap();
    (
        path,
        Duration::from_secs_f64(speech.len() as f64 / w.rate as f64),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_asks_by_voice_and_hears_the_answer() {
    // The offline engine: PocketSphinx hears, the knowledge answers, espeak-ng speaks.
    let s = Server::start_with(|c| c.access.admin_password = Some(PASSWORD.into())).await;
    let cookie = sign_in(&s, PASSWORD).await;
    let cid = s.default_character().await;
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(MUSEUM.as_bytes().to_vec()).file_name("museum.txt"),
    );
    let res = s
        .post(&format!("/api/v1/characters/{cid}/knowledge/files"))
        .header("cookie", &cookie)
        .header("origin", s.url(""))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{}", res.status());

    // Chromium's fake microphone plays the question once from the moment it is opened (each
    // press opens it), then silence.
    let dir = tempfile::tempdir().unwrap();
    let (wav, speech) = spoken_wav(dir.path(), SPOKEN_QUESTION, 0.4, 0.5);
    let mut b = Browser::launch_with(&[
        "--use-fake-ui-for-media-stream".into(),
        "--use-fake-device-for-media-stream".into(),
        format!("--use-file-for-fake-audio-capture={}%noloop", wav.display()),
    ])
    .await;
    b.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 1200, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
    )
    .await;
    b.sign_in_page(&s.base, PASSWORD).await;
    b.goto(&s.url("/console/try")).await;

    // Hold Space on the focused button for the question (and a little more), then release.
    b.eval("document.getElementById('talk').focus()").await;
    b.key(" ", "Space", 32, true).await;
    b.wait_for(
        "document.getElementById('talk').getAttribute('aria-pressed')",
        json!("true"),
    )
    .await;
    b.wait_until("Number(document.getElementById('audio').dataset.sentMs) > 0")
        .await;
    tokio::time::sleep(speech + Duration::from_millis(900)).await;
    b.key(" ", "Space", 32, false).await;
    b.wait_for(
        "document.getElementById('talk').getAttribute('aria-pressed')",
        json!("false"),
    )
    .await;

    // The page sent about as much speech as was held, as 16 kHz PCM.
    let sent = b
        .eval("Number(document.getElementById('audio').dataset.sentMs)")
        .await
        .as_f64()
        .unwrap();
    assert!(
        sent >= speech.as_millis() as f64 && sent < speech.as_millis() as f64 + 5_000.0,
        "sent {sent} ms for {speech:?} of speech"
    );
    // The recogniser's transcript replaces the placeholder; the answer is shown and played.
    let heard = "(() => { const e = document.querySelector('#chat li.user'); return !!e && e.textContent !== '…' && e.textContent; })()";
    b.wait_within(
        &format!("typeof {heard} === 'string' && {heard}.length > 0"),
        json!(true),
        Duration::from_secs(40),
    )
    .await;
    let answer =
        "[...document.querySelectorAll('#chat li.assistant')].map((e) => e.textContent).join()";
    b.wait_within(
        &format!("{answer}.length > 0"),
        json!(true),
        Duration::from_secs(40),
    )
    .await;
    b.wait_within(
        "Number(document.getElementById('audio').dataset.playedMs) > 500",
        json!(true),
        Duration::from_secs(40),
    )
    .await;
    let heard = b.eval(heard).await;
    let answer = b.eval(answer).await;
    println!("heard {heard}, answered {answer}");
    assert!(
        !heard.as_str().unwrap().contains("nothing heard"),
        "the recogniser heard the question: {heard}"
    );
    b.wait_within(
        "document.getElementById('chat-state').textContent",
        json!("idle"),
        Duration::from_secs(40),
    )
    .await;
    b.screenshot("try-mic").await;

    // Again with the mouse: a second spoken line and a second answer.
    b.mouse_on("talk", true).await;
    b.wait_for(
        "document.getElementById('talk').getAttribute('aria-pressed')",
        json!("true"),
    )
    .await;
    tokio::time::sleep(speech + Duration::from_millis(900)).await;
    b.mouse_on("talk", false).await;
    b.wait_within(
        "[...document.querySelectorAll('#chat li.user')].filter((e) => e.textContent !== '…').length === 2 && document.querySelectorAll('#chat li.assistant').length === 2",
        json!(true),
        Duration::from_secs(40),
    )
    .await;
    let sent_again = b
        .eval("Number(document.getElementById('audio').dataset.sentMs)")
        .await
        .as_f64()
        .unwrap();
    assert!(
        sent_again >= sent + speech.as_millis() as f64,
        "sent {sent_again} ms in all"
    );
    assert!(
        b.errors.is_empty(),
        "script or console errors: {:?}",
        b.errors
    );
}

/// A client of the running binary `p` signed in as its administrator, from its own origin.
async fn admin_of(p: &Running, password: &str) -> Server {
    let mut s = Server::attach(p);
    let cookie = sign_in(&s, password).await;
    s.as_admin(&cookie);
    s
}

/// Every character as the API shows it: id, name, its images with the SHA-256 of their
/// bytes, its knowledge and its conversation.
async fn characters_of(s: &Server) -> Vec<Value> {
    let mut out = Vec::new();
    for c in s
        .get_json("/api/v1/characters", 200)
        .await
        .as_array()
        .unwrap()
    {
        let id = c["id"].as_str().unwrap();
        let mut images = Vec::new();
        for img in s
            .get_json(&format!("/api/v1/characters/{id}/images"), 200)
            .await
            .as_array()
            .unwrap()
        {
            let name = img["filename"].as_str().unwrap();
            let res = s
                .get(&format!("/api/v1/characters/{id}/images/{name}"))
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200, "image {name}");
            let bytes = res.bytes().await.unwrap();
            images.push(json!([
                name,
                docent::store::blobs::hex(&<sha2::Sha256 as sha2::Digest>::digest(&bytes))
            ]));
        }
        let sources = s.sources(id).await;
        let said: Vec<Value> = s.history(id).await["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| json!([m["role"], m["content"]]))
            .collect();
        out.push(json!({
            "id": id, "name": c["name"], "active_image": c["active_image"],
            "images": images, "knowledge": sources, "said": said,
        }));
    }
    out
}

/// A kiosk's two characters of its own: an avatar, a knowledge file (indexed) and a visit.
async fn furnish(s: &Server) {
    let ada = furnished(s).await;
    let created = s
        .post_json("/api/v1/sessions", json!({"character_id": ada}), 201)
        .await;
    let sid = created["session_id"].as_str().unwrap();
    s.post_json(
        &format!("/api/v1/sessions/{sid}/message"),
        json!({"text": "Who designed the Analytical Engine?"}),
        202,
    )
    .await;
    let start = Instant::now();
    while s.history(&ada).await["messages"].as_array().unwrap().len() < 2 {
        assert!(start.elapsed() < Duration::from_secs(30), "the answer");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The text of the System page's restore error once shown.
const RESTORE_ERROR: &str = "(() => { const e = document.getElementById('restore-error'); return !e.hidden && e.textContent; })()";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_backs_up_one_kiosk_and_restores_it_into_an_empty_one() {
    const A_PASSWORD: &str = "kiosk-a-password";
    const B_PASSWORD: &str = "kiosk-b-password";
    // The test's own HTTP clients (no server in this process installs it).
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Kiosk A, furnished through the API.
    let a = Process::new()
        .args(["--devices", "none"])
        .env("ADMIN_PASSWORD", A_PASSWORD)
        .start()
        .await;
    let a_api = admin_of(&a, A_PASSWORD).await;
    furnish(&a_api).await;
    let before = characters_of(&a_api).await;
    assert_eq!(before.len(), 3, "{before:?}");

    // A's System page: the backup link is a real download, saved by the browser.
    let mut b = Browser::launch().await;
    b.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 1200, "height": 1000, "deviceScaleFactor": 1, "mobile": false}),
    )
    .await;
    b.sign_in_page(&a.base(), A_PASSWORD).await;
    b.goto(&format!("{}/console/system", a.base())).await;
    b.screenshot("system-backup").await;
    let downloads = tempfile::tempdir().unwrap();
    b.allow_downloads(downloads.path()).await;
    let clicked = Instant::now();
    b.eval("document.getElementById('backup').click()").await;
    let archive = b
        .downloaded(downloads.path(), Duration::from_secs(60))
        .await;
    let name = archive.file_name().unwrap().to_str().unwrap().to_string();
    assert!(
        name.starts_with("docent-backup-") && name.ends_with(".tar"),
        "{name}"
    );
    let bytes = std::fs::read(&archive).unwrap();
    println!(
        "backup: {} bytes saved by the browser {:?} after the click",
        bytes.len(),
        clicked.elapsed()
    );
    let members: Vec<String> = tar::Archive::new(bytes.as_slice())
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    assert_eq!(members[..2], ["docent-backup.json", "docent.redb"]);
    assert!(
        members.len() >= 4 && members[2..].iter().all(|m| m.starts_with("blobs/")),
        "the avatar and the knowledge file: {members:?}"
    );
    drop(a_api);
    drop(a);

    // Kiosk B: an empty data directory, its own password, a fixed port that a restart (the
    // program runs itself again) comes back on, where the page waits for it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let mut p = Process::new()
        .args(["--devices", "none"])
        .env("ADMIN_PASSWORD", B_PASSWORD)
        .data_dir(&data)
        .listen(port)
        .start()
        .await;
    let base = p.base();
    let b_api = admin_of(&p, B_PASSWORD).await;
    let empty = characters_of(&b_api).await;
    assert_eq!(
        empty.len(),
        1,
        "only the first start's character: {empty:?}"
    );
    assert_ne!(empty[0]["id"], before[0]["id"]);
    b.sign_in_page(&base, B_PASSWORD).await;
    b.goto(&format!("{base}/console/system")).await;

    // Bad files: the page shows the API's reason and nothing changes.
    let truncated = root.path().join("truncated.tar");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let not_tar = root.path().join("notes.tar");
    std::fs::write(&not_tar, b"Opening hours: nine to six.\n".repeat(40)).unwrap();
    let files = hash_tree(&data);
    for (file, error) in [
        (&truncated, "The archive is truncated."),
        (&not_tar, "Not a backup archive: not a tar file."),
    ] {
        b.choose_files("#restore-file", &[file]).await;
        b.eval("document.getElementById('restore').click()").await;
        b.wait_for(RESTORE_ERROR, json!(error)).await;
        assert_eq!(
            b.eval("document.getElementById('restore-status').textContent")
                .await,
            "",
            "no restart announced"
        );
        assert_eq!(
            b.eval("document.getElementById('restore').disabled").await,
            false
        );
        assert_eq!(characters_of(&b_api).await, empty);
        assert_eq!(
            hash_tree(&data),
            files,
            "{file:?}: the data directory changed"
        );
    }
    b.screenshot("system-restore-refused").await;
    let asked = |f: &std::path::Path| {
        format!(
            "Replace everything on this kiosk with {}? The backup's administrator password, \
             client keys and settings come with it, and everyone is signed out.",
            f.file_name().unwrap().to_str().unwrap()
        )
    };
    assert_eq!(b.dialogs, [asked(&truncated), asked(&not_tar)]);
    // A restart after them: B comes back as it was (no restore was staged).
    b.eval("window.beforeRestart = true; document.getElementById('restart').click()")
        .await;
    p.listening_again(Duration::from_secs(60)).await;
    b.wait_within(
        "!window.beforeRestart && document.readyState === 'complete' && location.pathname",
        json!("/console/system"),
        Duration::from_secs(30),
    )
    .await;
    let b_api = admin_of(&p, B_PASSWORD).await;
    assert_eq!(characters_of(&b_api).await, empty);

    // The downloaded backup, chosen and confirmed: the page says what it staged, the kiosk
    // restarts into it and the page comes back to the sign-in (sessions are not restored).
    b.dialogs.clear();
    b.choose_files("#restore-file", &[&archive]).await;
    let clicked = Instant::now();
    b.eval("document.getElementById('restore').click()").await;
    b.wait_until("document.getElementById('restore-status').textContent.includes('Restarting')")
        .await;
    let said = b
        .eval("document.getElementById('restore-status').textContent")
        .await;
    b.screenshot("system-restoring").await;
    assert_eq!(b.dialogs, [asked(&archive)]);
    let said = said.as_str().unwrap();
    assert!(
        said.starts_with(&format!("{name} checked: the backup of ")),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            " with 3 character(s) and {} stored file(s) (",
            members.len() - 2
        )) && said.ends_with(" is staged. Restarting into it... the page reloads when the kiosk is back: sign in again then."),
        "{said}"
    );
    p.listening_again(Duration::from_secs(60)).await;
    assert_eq!(p.base(), base);
    b.wait_within(
        "location.pathname",
        json!("/console/login"),
        Duration::from_secs(30),
    )
    .await;
    println!(
        "restore: the page is back at the sign-in {:?} after the click",
        clicked.elapsed()
    );
    assert!(!data.join("restore-pending").exists());

    // B now holds A's characters: ids, names, images, knowledge and conversation.
    let b_api = admin_of(&p, B_PASSWORD).await;
    assert_eq!(characters_of(&b_api).await, before);
    b.sign_in_page(&base, B_PASSWORD).await;
    b.goto(&format!("{base}/console/characters")).await;
    let names: Vec<&str> = before.iter().map(|c| c["name"].as_str().unwrap()).collect();
    b.wait_for(
        "[...document.querySelectorAll('#list > li h2')].map((e) => e.textContent).join('|')",
        json!(names.join("|")),
    )
    .await;
    b.wait_for(
        "(() => { const i = document.querySelector(\"img[alt=\\\"Ada Lovelace's active image\\\"]\"); return !!i && i.complete && i.naturalWidth; })()",
        json!(1),
    )
    .await;
    b.screenshot("characters-restored").await;
    // The System page's log says the restored backup is in force.
    b.goto(&format!("{base}/console/system")).await;
    b.wait_until(
        "document.getElementById('logs').textContent.includes('a restored backup is now in force')",
    )
    .await;
    b.screenshot("system-restored").await;
    assert!(p.errors().is_empty(), "{:?}", p.errors());
    assert!(
        b.errors.is_empty(),
        "script or console errors: {:?}",
        b.errors
    );
}
