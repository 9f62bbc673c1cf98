//! Choosing without speaking (issue 31, point 3): with `--devices sim`, the internal route's
//! touches and buttons reach the channel the kiosk loop takes from the devices, bounded and
//! checked; health says which inputs run. (The real touch screen's reader is tested in
//! `device::touch` over a pipe carrying the kernel's records: this machine has no
//! `/dev/uinput`.)

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use docent::config::{Config, DeviceMode};
use docent::device::Devices;
use docent::device::choice::{Choose, QUEUE};
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// A kiosk on `dir` whose devices the test holds.
struct Kiosk {
    base: String,
    devices: Arc<Devices>,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Kiosk {
    async fn start(dir: &Path, mode: DeviceMode) -> Kiosk {
        let config = Config {
            data_dir: dir.to_path_buf(),
            listen: "127.0.0.1:0".parse().unwrap(),
            devices: mode,
            ..Config::default()
        };
        let (ready_tx, ready_rx) = oneshot::channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            docent::run_with(
                config,
                move |ready| {
                    let _ = ready_tx.send(ready);
                },
                async move {
                    let _ = stopped.await;
                },
            )
            .await
            .expect("server runs");
        });
        let ready = ready_rx.await.expect("server started");
        Kiosk {
            base: format!("http://{}", ready.addr),
            devices: ready.devices,
            stop,
            task,
        }
    }

    async fn choose(&self, body: Value) -> (u16, Value) {
        let res = reqwest::Client::new()
            .post(format!("{}/api/v1/internal/device/choose", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), res.json().await.unwrap())
    }

    async fn health(&self) -> Value {
        let res = reqwest::get(format!("{}/api/v1/health", self.base)).await;
        res.unwrap().json::<Value>().await.unwrap()["device"].clone()
    }

    async fn stop(self) {
        drop(self.devices);
        let _ = self.stop.send(());
        self.task.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_touches_and_buttons_reach_the_kiosk_s_channel() {
    let dir = tempfile::tempdir().unwrap();
    let k = Kiosk::start(dir.path(), DeviceMode::Sim).await;
    assert_eq!(k.health().await["choice"], "sim");
    let mut choices = k.devices.take_choices().expect("the receiver, once");
    assert!(k.devices.take_choices().is_none(), "taken once only");

    for (body, want) in [
        (
            json!({"touch": {"x": 0.25, "y": 0.75}}),
            Choose::Touch { x: 0.25, y: 0.75 },
        ),
        (json!("previous"), Choose::Previous),
        (json!("next"), Choose::Next),
        (json!("choose"), Choose::Choose),
    ] {
        let (status, answer) = k.choose(body.clone()).await;
        assert_eq!(status, 200, "{body}: {answer}");
        let got = tokio::time::timeout(Duration::from_secs(5), choices.recv()).await;
        assert_eq!(got.unwrap(), Some(want), "{body}");
    }

    // Off the screen, unknown, or not a choice at all: 400, and nothing is chosen.
    for body in [
        json!({"touch": {"x": 1.5, "y": 0.5}}),
        json!({"touch": {"x": -0.1, "y": 0.5}}),
        json!({"touch": {"x": 0.5}}),
        json!("louder"),
        json!({"pressed": true}),
    ] {
        let (status, answer) = k.choose(body.clone()).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert!(answer["error"].as_str().is_some_and(|e| !e.is_empty()));
    }
    assert!(choices.try_recv().is_err(), "nothing was chosen");

    // A visitor tapping on while nothing reads: the queue stays bounded, the route answers.
    for _ in 0..QUEUE + 5 {
        assert_eq!(k.choose(json!("next")).await.0, 200);
    }
    let mut waiting = 0;
    while choices.try_recv().is_ok() {
        waiting += 1;
    }
    assert_eq!(waiting, QUEUE);

    k.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_devices_there_is_nothing_to_choose_with() {
    let dir = tempfile::tempdir().unwrap();
    let k = Kiosk::start(dir.path(), DeviceMode::None).await;
    assert!(k.devices.take_choices().is_none());
    let (status, answer) = k.choose(json!("next")).await;
    assert_eq!(status, 503, "{answer}");
    assert_eq!(k.health().await["choice"], "absent");
    k.stop().await;
}
