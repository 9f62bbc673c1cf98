//! The admin console: a few server-rendered pages and small ES modules, compiled into the binary
//! (nothing on disk, nothing from another host), that drive the JSON API from a browser.
//!
//! Pages are one shell (`assets/shell.html`) around a page body; the scripts fill them from the
//! API. Every console response carries a strict Content-Security-Policy (no inline script or
//! style) and the anti-framing, referrer and sniffing headers. `events.rs` adds the two admin
//! routes the console needs beyond the public API: the kiosk's live events and its screen.

pub(super) mod events;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::header::{self, CACHE_CONTROL, CONTENT_TYPE, LOCATION};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};

use super::auth::{admin_session, is_admin};
use super::error::ApiError;
use super::extract::Params;
use super::state::AppState;

/// The policy of every console response: only this origin, no inline code, no framing.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
img-src 'self' data: blob:; media-src 'self' blob:; connect-src 'self'; frame-ancestors 'none'";

const SHELL: &str = include_str!("assets/shell.html");

/// The console's static files: name under `/console/`, content type, body.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "app.css",
        "text/css; charset=utf-8",
        include_str!("assets/app.css"),
    ),
    ("api.js", JS, include_str!("assets/api.js")),
    (
        "favicon.svg",
        "image/svg+xml",
        include_str!("assets/favicon.svg"),
    ),
    ("login.js", JS, include_str!("assets/login.js")),
    ("dashboard.js", JS, include_str!("assets/dashboard.js")),
    ("characters.js", JS, include_str!("assets/characters.js")),
    ("settings.js", JS, include_str!("assets/settings.js")),
    ("try.js", JS, include_str!("assets/try.js")),
    ("mic.js", JS, include_str!("assets/mic.js")),
    ("knowledge.js", JS, include_str!("assets/knowledge.js")),
    (
        "conversations.js",
        JS,
        include_str!("assets/conversations.js"),
    ),
    ("password.js", JS, include_str!("assets/password.js")),
    ("system.js", JS, include_str!("assets/system.js")),
    ("fleet.js", JS, include_str!("assets/fleet.js")),
    ("site.js", JS, include_str!("assets/site.js")),
    ("statistics.js", JS, include_str!("assets/statistics.js")),
];
const JS: &str = "text/javascript; charset=utf-8";

/// The console's pages; all but the sign-in page need an administrator.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Page {
    Login,
    /// "Choose your password": the only page while the first-boot password is in force.
    Password,
    Dashboard,
    Characters,
    Knowledge,
    Conversations,
    Statistics,
    Site,
    Settings,
    Try,
    System,
}

impl Page {
    fn title(self) -> &'static str {
        match self {
            Page::Login => "Sign in",
            Page::Dashboard => "Dashboard",
            Page::Characters => "Characters",
            Page::Settings => "Settings",
            Page::Knowledge => "Knowledge",
            Page::Conversations => "Conversations",
            Page::Site => "Site",
            Page::Statistics => "Statistics",
            Page::Try => "Try it",
            Page::System => "System",
            Page::Password => "Choose your password",
        }
    }

    fn path(self) -> &'static str {
        match self {
            Page::Login => "/console/login",
            Page::Dashboard => "/console/",
            Page::Characters => "/console/characters",
            Page::Settings => "/console/settings",
            Page::Knowledge => "/console/knowledge",
            Page::Conversations => "/console/conversations",
            Page::Site => "/console/site",
            Page::Statistics => "/console/statistics",
            Page::Try => "/console/try",
            Page::Password => "/console/password",
            Page::System => "/console/system",
        }
    }

    fn body(self) -> &'static str {
        match self {
            Page::Login => include_str!("assets/login.html"),
            Page::Dashboard => include_str!("assets/dashboard.html"),
            Page::Characters => include_str!("assets/characters.html"),
            Page::Settings => include_str!("assets/settings.html"),
            Page::Knowledge => include_str!("assets/knowledge.html"),
            Page::Conversations => include_str!("assets/conversations.html"),
            Page::Site => include_str!("assets/site.html"),
            Page::Statistics => include_str!("assets/statistics.html"),
            Page::Try => include_str!("assets/try.html"),
            Page::System => include_str!("assets/system.html"),
            Page::Password => include_str!("assets/password.html"),
        }
    }

    fn script(self) -> &'static str {
        match self {
            Page::Login => "/console/login.js",
            Page::Dashboard => "/console/dashboard.js",
            Page::Characters => "/console/characters.js",
            Page::Settings => "/console/settings.js",
            Page::Knowledge => "/console/knowledge.js",
            Page::Conversations => "/console/conversations.js",
            Page::Site => "/console/site.js",
            Page::Statistics => "/console/statistics.js",
            Page::Try => "/console/try.js",
            Page::System => "/console/system.js",
            Page::Password => "/console/password.js",
        }
    }
}

const NAV: [Page; 9] = [
    Page::Dashboard,
    Page::Characters,
    Page::Knowledge,
    Page::Conversations,
    Page::Statistics,
    Page::Site,
    Page::Settings,
    Page::Try,
    Page::System,
];

pub fn routes() -> Router<AppState> {
    let pages = Router::new()
        .route("/", get(|| async { see_other("/console/") }))
        .route("/console", get(|| async { see_other("/console/") }))
        .route("/console/", show(Page::Dashboard))
        .route("/console/login", show(Page::Login))
        .route("/console/characters", show(Page::Characters))
        .route("/console/settings", show(Page::Settings))
        .route("/console/knowledge", show(Page::Knowledge))
        .route("/console/conversations", show(Page::Conversations))
        .route("/console/site", show(Page::Site))
        .route("/console/statistics", show(Page::Statistics))
        .route("/console/try", show(Page::Try))
        .route("/console/system", show(Page::System))
        .route("/console/password", show(Page::Password))
        .route("/console/{file}", get(asset))
        .layer(middleware::from_fn(security_headers));
    pages.merge(events::routes())
}

fn show(p: Page) -> MethodRouter<AppState> {
    get(move |s: State<AppState>, req: Request| page(s, req, p))
}

fn see_other(to: &'static str) -> Response {
    (StatusCode::SEE_OTHER, [(LOCATION, to)]).into_response()
}

/// A page, or the way to the page the caller may see: signed out to the sign-in page, signed
/// in (or in setup mode, where there is no password) away from it, and while the first-boot
/// password is in force to "choose your password" and nowhere else.
async fn page(State(s): State<AppState>, req: Request, page: Page) -> Response {
    let (parts, _) = req.into_parts();
    let must_change = s.engine.must_change_password() && admin_session(&parts.headers, &s.engine);
    let admin = must_change || is_admin(&parts.headers, crate::api::auth::peer(&parts), &s);
    match (page, admin) {
        (Page::Login, true) if must_change => return see_other(Page::Password.path()),
        (Page::Login, true) => return see_other(Page::Dashboard.path()),
        (Page::Login, false) => {}
        (_, false) => return see_other(Page::Login.path()),
        (Page::Password, true) if !must_change => return see_other(Page::Dashboard.path()),
        (Page::Password, true) => {}
        (_, true) if must_change => return see_other(Page::Password.path()),
        (_, true) => {}
    }
    let html = render(page);
    (
        [
            (CONTENT_TYPE, "text/html; charset=utf-8"),
            (CACHE_CONTROL, "no-store"),
        ],
        html,
    )
        .into_response()
}

/// The shell filled in for `page`: title, navigation (current page marked), body and script.
fn render(page: Page) -> String {
    let nav = if page == Page::Login {
        String::new()
    } else {
        let mut links = String::from("<nav aria-label=\"Console\"><ul>");
        let nav: &[Page] = if page == Page::Password { &[] } else { &NAV };
        for &p in nav {
            let current = if p == page {
                " aria-current=\"page\""
            } else {
                ""
            };
            links.push_str(&format!(
                "<li><a href=\"{}\"{current}>{}</a></li>",
                p.path(),
                p.title()
            ));
        }
        links.push_str(
            "</ul><button type=\"button\" id=\"signout\" class=\"secondary\">Sign out</button></nav>",
        );
        links
    };
    SHELL
        .replace("{{title}}", page.title())
        .replace("{{nav}}", &nav)
        .replace("{{main}}", page.body())
        .replace("{{script}}", page.script())
}

async fn asset(Params(name): Params<String>) -> Result<Response, ApiError> {
    let Some((_, kind, body)) = ASSETS.iter().find(|(n, _, _)| *n == name) else {
        return Err(ApiError::new(StatusCode::NOT_FOUND, "no such console file"));
    };
    Ok(([(CONTENT_TYPE, *kind), (CACHE_CONTROL, "no-cache")], *body).into_response())
}

/// The security headers of every console response, errors and redirects included.
async fn security_headers(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    res
}
