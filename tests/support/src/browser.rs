//! A page of a headless Chromium driven over the DevTools protocol, for the console's tests
//! and its benchmark (`benches/console.rs` includes this file).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_tungstenite::tungstenite::Message;

/// A page of a headless Chromium, driven over the DevTools protocol.
pub struct Browser {
    _process: tokio::process::Child,
    _profile: tempfile::TempDir,
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    session: String,
    next_id: u64,
    /// Script errors and console errors (a CSP violation is one) seen so far.
    pub errors: Vec<String>,
    /// The messages of the dialogs the page opened (each accepted).
    pub dialogs: Vec<String>,
    /// Files of the pages (documents, style sheets, scripts, images, fonts: not the API's
    /// answers) that did not load, as "status url"; recorded once `Network.enable` is called.
    pub failed_files: Vec<String>,
}

impl Browser {
    pub async fn launch() -> Browser {
        Browser::launch_with(&[]).await
    }

    /// Launches with more command-line switches (a fake microphone, say).
    pub async fn launch_with(switches: &[String]) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let mut process = tokio::process::Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--remote-debugging-port=0",
            ])
            .args(switches)
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stderr(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("chromium must be installed for the console test (./x installs it)");
        let mut lines = BufReader::new(process.stderr.take().unwrap()).lines();
        let url = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(at) = line.find("ws://") {
                    return line[at..].trim().to_string();
                }
            }
            panic!("chromium exited without a DevTools address");
        })
        .await
        .expect("chromium printed its DevTools address");
        // Keep draining stderr so that chromium never blocks on it.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let (ws, _) = tokio_tungstenite::connect_async(url.as_str())
            .await
            .unwrap();
        let mut b = Browser {
            _process: process,
            _profile: profile,
            ws,
            session: String::new(),
            next_id: 0,
            errors: Vec::new(),
            dialogs: Vec::new(),
            failed_files: Vec::new(),
        };
        let target = b
            .call("Target.createTarget", json!({"url": "about:blank"}))
            .await;
        let attached = b
            .call(
                "Target.attachToTarget",
                json!({"targetId": target["targetId"], "flatten": true}),
            )
            .await;
        b.session = attached["sessionId"].as_str().unwrap().to_string();
        b.call("Runtime.enable", json!({})).await;
        b.call("Log.enable", json!({})).await;
        b.call("Page.enable", json!({})).await;
        b
    }

    /// Sends one command (to the page once attached) and waits for its answer.
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params)
            .await
            .unwrap_or_else(|error| panic!("{method}: {error}"))
    }

    /// Sends one command and waits for its result, or the error DevTools answered.
    async fn send(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            msg["sessionId"] = json!(self.session);
        }
        self.ws.send(Message::text(msg.to_string())).await.unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let frame = tokio::time::timeout_at(deadline, self.ws.next())
                .await
                .unwrap_or_else(|_| panic!("no answer to {method}"))
                .expect("DevTools socket open")
                .unwrap();
            let Message::Text(text) = frame else { continue };
            let v: Value = serde_json::from_str(&text).unwrap();
            if v["id"] == id {
                return match v.get("error") {
                    Some(error) => Err(error.clone()),
                    None => Ok(v["result"].clone()),
                };
            }
            match v["method"].as_str() {
                // A confirm() blocks the page (and the command that caused it): accept it.
                Some("Page.javascriptDialogOpening") => {
                    self.dialogs
                        .push(v["params"]["message"].as_str().unwrap_or("").to_string());
                    self.next_id += 1;
                    let accept = json!({"id": self.next_id, "method": "Page.handleJavaScriptDialog",
                        "params": {"accept": true}, "sessionId": self.session});
                    self.ws
                        .send(Message::text(accept.to_string()))
                        .await
                        .unwrap();
                }
                Some("Network.responseReceived")
                    if v["params"]["response"]["status"].as_u64() >= Some(400)
                        && !is_api_call(&v["params"]["type"]) =>
                {
                    let r = &v["params"]["response"];
                    self.failed_files
                        .push(format!("{} {}", r["status"], r["url"]));
                }
                Some("Runtime.exceptionThrown") => self
                    .errors
                    .push(v["params"]["exceptionDetails"].to_string()),
                // Network errors are the API's answers (a wrong password is a 401).
                Some("Log.entryAdded")
                    if v["params"]["entry"]["level"] == "error"
                        && v["params"]["entry"]["source"] != "network" =>
                {
                    self.errors.push(v["params"]["entry"]["text"].to_string())
                }
                _ => {}
            }
        }
    }

    pub async fn eval(&mut self, expression: &str) -> Value {
        let r = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            )
            .await;
        assert!(r.get("exceptionDetails").is_none(), "{expression}: {r}");
        r["result"]["value"].clone()
    }

    /// Evaluates `expression` until it gives `want`, for up to 15 s.
    pub async fn wait_for(&mut self, expression: &str, want: Value) {
        self.wait_within(expression, want, Duration::from_secs(15))
            .await
    }

    /// Evaluates `expression` until it gives `want`, for up to `within`. A page that navigates
    /// while it is asked (a sign-in going to the dashboard) is asked again.
    pub async fn wait_within(&mut self, expression: &str, want: Value, within: Duration) {
        let start = Instant::now();
        loop {
            let asked =
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true});
            let got = match self.send("Runtime.evaluate", asked).await {
                Ok(r) => {
                    assert!(r.get("exceptionDetails").is_none(), "{expression}: {r}");
                    r["result"]["value"].clone()
                }
                Err(error) if navigating(&error) => Value::Null,
                Err(error) => panic!("Runtime.evaluate: {error}"),
            };
            if got == want {
                return;
            }
            assert!(
                start.elapsed() < within,
                "{expression} is {got}, not {want}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the page at `path` has loaded, its scripts run (a form submitted before
    /// then would not reach the page's handler).
    pub async fn wait_for_page(&mut self, path: &str) {
        let loaded = "document.readyState === 'complete' ? location.pathname : ''";
        self.wait_for(loaded, json!(path)).await;
    }

    /// Signs in on the console's sign-in page of the kiosk at `base`.
    pub async fn sign_in_page(&mut self, base: &str, password: &str) {
        self.goto(&format!("{base}/console/login")).await;
        self.submit_password(password).await;
    }

    /// Types `password` on the sign-in page, submits it and waits for the dashboard.
    pub async fn submit_password(&mut self, password: &str) {
        self.type_into("password", password).await;
        self.press_enter().await;
        self.wait_for_page("/console/").await;
    }

    /// Submits a wrong `password` on the sign-in page and waits for the page to say so.
    pub async fn submit_wrong_password(&mut self, password: &str) {
        self.type_into("password", password).await;
        self.press_enter().await;
        let shown = "(() => { const e = document.getElementById('error'); \
                     return !e.hidden && e.textContent; })()";
        self.wait_for(shown, json!("Wrong password.")).await;
    }

    /// Waits until `expression` is true.
    pub async fn wait_until(&mut self, expression: &str) {
        self.wait_for(expression, json!(true)).await;
    }

    /// Clicks the first element that matches the CSS `selector`.
    pub async fn click(&mut self, selector: &str) {
        self.eval(&format!("document.querySelector('{selector}').click()"))
            .await;
    }

    /// Waits until the text of the element `id` is `want`.
    pub async fn wait_text(&mut self, id: &str, want: &str) {
        // `?.`: while a page loads, the element may not be there yet.
        let text = format!("document.getElementById('{id}')?.textContent");
        self.wait_for(&text, json!(want)).await;
    }

    pub async fn goto(&mut self, url: &str) {
        self.call("Page.navigate", json!({"url": url})).await;
        self.wait_for("document.readyState", json!("complete"))
            .await;
    }

    /// Types `text` into the element `id` as a keyboard would.
    pub async fn type_into(&mut self, id: &str, text: &str) {
        self.eval(&format!(
            "(() => {{ const e = document.getElementById('{id}'); e.value = ''; e.focus(); }})()"
        ))
        .await;
        self.call("Input.insertText", json!({"text": text})).await;
    }

    pub async fn press_enter(&mut self) {
        for kind in ["keyDown", "keyUp"] {
            self.call(
                "Input.dispatchKeyEvent",
                json!({"type": kind, "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13, "text": "\r"}),
            )
            .await;
        }
    }

    /// Presses (`down`) or releases a key of the keyboard, `key` and `code` as in DOM events.
    pub async fn key(&mut self, key: &str, code: &str, key_code: u32, down: bool) {
        let kind = if down { "rawKeyDown" } else { "keyUp" };
        self.call(
            "Input.dispatchKeyEvent",
            json!({"type": kind, "key": key, "code": code, "windowsVirtualKeyCode": key_code}),
        )
        .await;
    }

    /// Presses (`down`) or releases the left mouse button at the centre of the element `id`.
    pub async fn mouse_on(&mut self, id: &str, down: bool) {
        let at = self
            .eval(&format!("(() => {{ const r = document.getElementById('{id}').getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }})()"))
            .await;
        let kind = if down {
            "mousePressed"
        } else {
            "mouseReleased"
        };
        self.call(
            "Input.dispatchMouseEvent",
            json!({"type": kind, "x": at[0], "y": at[1], "button": "left", "buttons": u8::from(down), "clickCount": 1}),
        )
        .await;
    }

    /// Sets `files` on the file input that `selector` finds, as a person choosing them would.
    pub async fn choose_files(&mut self, selector: &str, files: &[&Path]) {
        let doc = self.call("DOM.getDocument", json!({})).await;
        let input = self
            .call(
                "DOM.querySelector",
                json!({"nodeId": doc["root"]["nodeId"], "selector": selector}),
            )
            .await;
        assert_ne!(input["nodeId"], 0, "no {selector} on the page");
        self.call(
            "DOM.setFileInputFiles",
            json!({"nodeId": input["nodeId"], "files": files}),
        )
        .await;
    }

    /// Lets the browser save downloads into `dir` under the names the server suggests (a
    /// command of the browser, not of the page).
    pub async fn allow_downloads(&mut self, dir: &Path) {
        let page = std::mem::take(&mut self.session);
        self.call(
            "Browser.setDownloadBehavior",
            json!({"behavior": "allow", "downloadPath": dir}),
        )
        .await;
        self.session = page;
    }

    /// The one file downloaded into `dir` once complete (Chromium writes `*.crdownload`, then
    /// renames it), within `within`.
    pub async fn downloaded(&mut self, dir: &Path, within: Duration) -> PathBuf {
        let start = Instant::now();
        loop {
            let names: Vec<PathBuf> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            // A zero-length file of the final name may stand in while the data is written.
            if let [one] = names.as_slice()
                && one.extension().is_none_or(|e| e != "crdownload")
                && std::fs::metadata(one).is_ok_and(|m| m.len() > 0)
            {
                return one.clone();
            }
            assert!(
                start.elapsed() < within,
                "no complete download in {within:?}: {names:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The whole page (beyond the window) as `target/console-screens/<name>.png`.
    pub async fn screenshot_page(&mut self, name: &str) {
        let size = self.call("Page.getLayoutMetrics", json!({})).await["cssContentSize"].clone();
        let shot = self
            .call(
                "Page.captureScreenshot",
                json!({"format": "png", "captureBeyondViewport": true,
                    "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}}),
            )
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        let dir = crate::repo().join("target/console-screens");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }

    pub async fn screenshot(&mut self, name: &str) {
        let shot = self
            .call("Page.captureScreenshot", json!({"format": "png"}))
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        let dir = crate::repo().join("target/console-screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }
}

/// Whether a request of the page (its DevTools resource type) is a call of the API, whose
/// refusals are answers (a wrong password is a 401), not missing files.
/// Whether DevTools refused a command because the page was navigating away or had not yet
/// made its new document's context.
fn navigating(error: &Value) -> bool {
    let message = error["message"].as_str().unwrap_or("");
    [
        "navigated or closed",
        "Cannot find context",
        "context was destroyed",
    ]
    .iter()
    .any(|m| message.contains(m))
}

fn is_api_call(kind: &Value) -> bool {
    matches!(
        kind.as_str(),
        Some("XHR" | "Fetch" | "EventSource" | "WebSocket")
    )
}
