//! HTTP request bodies through the real router and handlers, as a loopback administrator in
//! setup mode: the first byte picks the route, the rest is the body. JSON bodies of every
//! write route, multipart uploads (avatars, knowledge files), raw uploads (site images, idle
//! clips). Routes that start a turn or reach a provider (messages, voice and settings tests)
//! are left out: they would run the offline engine's processes or open connections.

use docent_fuzz::Kiosk;

const JSON: &str = "application/json";
const MULTIPART: &str = "multipart/form-data; boundary=fuzzbound";
const TASK: &str = "6f1c1d7e-3a55-4b0e-9b8e-0c3c3b1f2a10";

/// A tiny PNG: the character's first image, so that idle clip uploads have an `imgbase`.
const AVATAR: &[u8] = include_bytes!("../../corpus/image/tiny.png");

fn main() {
    // A panic aborts the process (AFL++ records the input), so nothing is observed after one.
    let kiosk = std::panic::AssertUnwindSafe(Kiosk::start());
    let created = kiosk.runtime.block_on(async {
        let req = axum::http::Request::builder()
            .method("POST")
            .uri("/api/v1/characters")
            .header("content-type", JSON)
            .extension(axum::extract::ConnectInfo(std::net::SocketAddr::from((
                [127, 0, 0, 1],
                40000,
            ))))
            .body(axum::body::Body::from(r#"{"name":"Fuzz"}"#))
            .expect("request");
        let res = tower::ServiceExt::oneshot(kiosk.app.clone(), req)
            .await
            .expect("infallible");
        axum::body::to_bytes(res.into_body(), usize::MAX)
            .await
            .expect("body")
    });
    let id = id_of(&created);
    let mut avatar = format!(
        "--fuzzbound\r\nContent-Disposition: form-data; name=\"avatar\"; filename=\"a.png\"\r\nContent-Type: image/png\r\n\r\n"
    )
    .into_bytes();
    avatar.extend_from_slice(AVATAR);
    avatar.extend_from_slice(b"\r\n--fuzzbound--\r\n");
    let status = kiosk.send(
        "POST",
        &format!("/api/v1/characters/{id}/avatar"),
        MULTIPART,
        avatar,
    );
    assert!(status < 300, "avatar upload: {status}");

    let routes: Vec<(&str, String, &str)> = vec![
        ("POST", "/api/v1/characters".into(), JSON),
        ("PUT", format!("/api/v1/characters/{id}"), JSON),
        ("POST", "/api/v1/sessions".into(), JSON),
        ("PUT", "/api/v1/settings".into(), JSON),
        ("PUT", "/api/v1/config/launch".into(), JSON),
        ("POST", "/api/v1/client-keys".into(), JSON),
        ("POST", "/api/auth".into(), JSON),
        ("PUT", "/api/data".into(), JSON),
        (
            "POST",
            format!("/api/v1/internal/tasks/{TASK}/events"),
            JSON,
        ),
        (
            "POST",
            format!("/api/v1/internal/tasks/{TASK}/artifacts"),
            JSON,
        ),
        (
            "POST",
            format!("/api/v1/internal/characters/{id}/knowledge/search"),
            JSON,
        ),
        ("POST", "/api/v1/internal/device/ptt".into(), JSON),
        ("POST", format!("/api/v1/characters/{id}/avatar"), MULTIPART),
        (
            "POST",
            format!("/api/v1/characters/{id}/knowledge/files"),
            MULTIPART,
        ),
        ("PUT", "/api/img/fuzz.png".into(), "image/png"),
        (
            "PUT",
            format!("/api/v1/characters/{id}/idle-videos/img_001/idle/a.mp4"),
            "video/mp4",
        ),
    ];
    afl::fuzz!(|data: &[u8]| {
        let Some((&pick, body)) = data.split_first() else {
            return;
        };
        let (method, uri, content_type) = &routes[pick as usize % routes.len()];
        kiosk.send(method, uri, content_type, body.to_vec());
    });
}

/// The `id` of a created character.
fn id_of(body: &[u8]) -> String {
    let v: serde_json::Value = serde_json::from_slice(body).expect("a JSON answer");
    v["id"].as_str().expect("an id").to_string()
}
