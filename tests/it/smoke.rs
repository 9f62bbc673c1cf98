//! The server starts on an empty data directory with a default character and answers health.

use crate::support::Server;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_data_dir_starts_with_a_default_character() {
    let s = Server::start().await;
    let health = s.get_json("/api/v1/health", 200).await;
    assert_eq!(health["status"], "ok");
    assert_eq!(health["admin_auth"], "setup");
    let all = s.get_json("/api/v1/characters", 200).await;
    assert_eq!(all.as_array().unwrap().len(), 1);
    assert_eq!(all[0]["name"], "Docent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_character_is_created_once() {
    let s = Server::start().await;
    let id = s.default_character().await;
    let res = s
        .delete(&format!("/api/v1/characters/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    let dir = s.stop().await;
    let s = Server::start_in(dir, |_| {}).await;
    let all = s.get_json("/api/v1/characters", 200).await;
    assert_eq!(
        all.as_array().unwrap().len(),
        0,
        "a deleted default character stays deleted"
    );
}
