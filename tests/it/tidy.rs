//! Checks on the source tree itself: the layers name each other only in the directions
//! ARCHITECTURE.md allows, ARCHITECTURE.md names files that exist and every module of a layer,
//! no comment or document sends the reader to a document outside the repository, and no line of
//! the front doors (`src/api`) is too long to read beside its neighbours.

use std::path::{Path, PathBuf};

use crate::support::rust_files;

/// What each layer must not name. The front doors (`api`) reach the records only through the
/// engine; the device layer, the update service (`update`) and the fleet client (`fleet`) are
/// clients of the engine like any front door, so they name neither the store nor the front
/// doors; the engine and the store know nothing of HTTP, the board, updates or the fleet.
const FORBIDDEN: &[(&str, &[&str])] = &[
    ("store", &["engine", "api", "device", "update", "fleet"]),
    ("engine", &["api", "device", "update", "fleet"]),
    (
        "config",
        &["engine", "api", "device", "store", "update", "fleet"],
    ),
    ("device", &["store", "api", "update", "fleet"]),
    ("update", &["store", "api", "device", "fleet"]),
    ("fleet", &["store", "api", "device"]),
    ("api", &["store"]),
];

/// Phrases that cite a document the repository does not contain.
const OUTSIDE_CITATIONS: &[&str] = &[
    "shared/spec",
    "shared/seeds",
    "shared/tools",
    "../shared",
    "the seed (",
    "the seed's",
    "seed 1.",
    "seed 2.",
    "seed 3.",
    "seed 4.",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The module path of a file under `src/` (`src/engine/providers/local.rs` is
/// `engine::providers::local`, `src/engine/mod.rs` is `engine`).
fn module_path(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_string());
    }
    parts
}

/// The code without `//` comments (doc comments included), lines kept.
fn strip_comments(code: &str) -> String {
    code.lines()
        .map(|l| match l.find("//") {
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The names a path starting at `rest` takes from the crate root: one ident, or each item of a
/// `{...}` group.
fn names_after(rest: &str) -> Vec<String> {
    let rest = rest.trim_start();
    if let Some(group) = rest.strip_prefix('{') {
        let mut depth = 1;
        let mut item_start = true;
        let mut names = Vec::new();
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                ',' if depth == 1 => item_start = true,
                c if item_start && depth == 1 && (c.is_alphanumeric() || c == '_') => {
                    names.push(ident_at(&group[i..]).to_string());
                    item_start = false;
                }
                _ => {}
            }
        }
        names
    } else {
        vec![ident_at(rest).to_string()]
    }
}

/// Every top-level module of the crate that `code` (in module `module`) names, with its line.
fn crate_names(module: &[String], code: &str) -> Vec<(usize, String)> {
    let code = strip_comments(code);
    let mut found = Vec::new();
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    for prefix in ["crate::", "docent::"] {
        for (at, _) in code.match_indices(prefix) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            for name in names_after(&code[at + prefix.len()..]) {
                found.push((line_of(at), name));
            }
        }
    }
    // `super::super::x` reaches the crate root from a module as deep as the chain is long.
    let mut at = 0;
    while let Some(i) = code[at..].find("super::") {
        let start = at + i;
        let mut supers = 0;
        let mut rest = &code[start..];
        while let Some(r) = rest.strip_prefix("super::") {
            supers += 1;
            rest = r;
        }
        if supers >= module.len() {
            for name in names_after(rest) {
                found.push((line_of(start), name));
            }
        }
        at = start + supers * "super::".len();
    }
    found
}

/// The violations of the layer rules in one file.
fn violations(relative: &Path, code: &str) -> Vec<String> {
    let module = module_path(relative);
    let Some(layer) = module.first() else {
        return Vec::new();
    };
    let Some((_, forbidden)) = FORBIDDEN.iter().find(|(l, _)| l == layer) else {
        return Vec::new();
    };
    crate_names(&module, code)
        .into_iter()
        .filter(|(_, name)| forbidden.contains(&name.as_str()))
        .map(|(line, name)| {
            format!(
                "src/{}:{line}: the {layer} layer names `{name}`",
                relative.display()
            )
        })
        .collect()
}

#[test]
fn layers_name_each_other_only_as_allowed() {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut all = Vec::new();
    for file in &files {
        let code = std::fs::read_to_string(file).unwrap();
        all.extend(violations(file.strip_prefix(&src).unwrap(), &code));
    }
    assert!(all.is_empty(), "layer violations:\n{}", all.join("\n"));
}

/// What a file of `src/api` other than `mod.rs` takes from the api module itself (`super::x`
/// from `api/x.rs`, `super::super::x` from `api/console/x.rs`, `crate::api::x`): the names,
/// with their lines.
fn api_names(relative: &Path, code: &str) -> Vec<(usize, String)> {
    let module = module_path(relative);
    if module.first().map(String::as_str) != Some("api") || module.len() < 2 {
        return Vec::new();
    }
    // A file's own tests (`mod tests`, at its end) are a module deeper: `super::` is the file.
    let code = strip_comments(code.split("#[cfg(test)]").next().unwrap_or_default());
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let up = "super::".repeat(module.len() - 1);
    let mut found = Vec::new();
    for prefix in ["crate::api::", up.as_str()] {
        for (at, _) in code.match_indices(prefix) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            for name in names_after(&code[at + prefix.len()..]) {
                found.push((line_of(at), name));
            }
        }
    }
    found
}

/// The api has no circle: a handler takes the shared state from `api/state.rs` and the schema
/// types from `api/schema.rs`, never an item of `api/mod.rs` or of `api/openapi.rs` (which
/// lists every handler); only the router (`api/app.rs`) names the document's routes.
fn api_circle_violations(relative: &Path, code: &str, modules: &[String]) -> Vec<String> {
    api_names(relative, code)
        .into_iter()
        .filter(|(_, name)| !name.is_empty())
        .filter(|(_, name)| {
            !modules.contains(name) || (name == "openapi" && relative != Path::new("api/app.rs"))
        })
        .map(|(line, name)| {
            format!(
                "src/{}:{line}: names `{name}` of the api's router or document",
                relative.display()
            )
        })
        .collect()
}

/// The modules `api/mod.rs` declares.
fn api_modules(mod_rs: &str) -> Vec<String> {
    mod_rs
        .lines()
        .filter_map(|l| {
            let l = l.trim().strip_prefix("pub ").unwrap_or(l.trim());
            l.strip_prefix("mod ")?.strip_suffix(';').map(str::to_owned)
        })
        .collect()
}

#[test]
fn api_handlers_name_neither_the_router_nor_the_document() {
    let src = root().join("src");
    let modules = api_modules(&std::fs::read_to_string(src.join("api/mod.rs")).unwrap());
    assert!(modules.contains(&"state".to_string()));
    let mut files = Vec::new();
    rust_files(&src.join("api"), &mut files);
    let mut all = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        if matches!(relative.to_str(), Some("api/mod.rs" | "api/openapi.rs")) {
            continue;
        }
        let code = std::fs::read_to_string(file).unwrap();
        all.extend(api_circle_violations(relative, &code, &modules));
    }
    assert!(all.is_empty(), "the api's circle:\n{}", all.join("\n"));
}

#[test]
fn a_planted_api_circle_is_found() {
    let modules = vec![
        "state".to_string(),
        "auth".to_string(),
        "openapi".to_string(),
    ];
    let handler = Path::new("api/sessions.rs");
    assert_eq!(
        api_circle_violations(handler, "use super::{AppState, blocking};", &modules).len(),
        2,
        "items of mod.rs"
    );
    assert_eq!(
        api_circle_violations(handler, "use super::openapi::ErrorBody;", &modules).len(),
        1,
        "the document"
    );
    assert_eq!(
        api_circle_violations(
            Path::new("api/console/events.rs"),
            "use super::super::JSON;",
            &modules
        )
        .len(),
        1,
        "from a folder below"
    );
    assert!(
        api_circle_violations(handler, "use super::state::{AppState, blocking};", &modules)
            .is_empty()
    );
    assert!(api_circle_violations(handler, "use super::auth::Admin;", &modules).is_empty());
}

#[test]
fn a_planted_violation_is_found() {
    let store = Path::new("store/blobs.rs");
    assert_eq!(
        violations(store, "use crate::engine::Engine;").len(),
        1,
        "a plain path"
    );
    assert_eq!(
        violations(store, "use crate::{\n    config::Config,\n    api::x,\n};").len(),
        1,
        "a group over lines"
    );
    assert!(violations(store, "use crate::config::Config; // crate::engine").is_empty());
    let deep = Path::new("device/display/player.rs");
    assert_eq!(
        violations(deep, "let b = super::super::super::store::BlobRef;").len(),
        1,
        "super chain to the root"
    );
    assert!(violations(deep, "use super::super::audio;").is_empty());
    assert_eq!(
        violations(Path::new("config.rs"), "let m: docent::device::X;").len(),
        1
    );
    assert_eq!(
        violations(
            Path::new("api/sessions.rs"),
            "use crate::store::records::Message;"
        )
        .len(),
        1,
        "the api reaches records through the engine"
    );
    for (room, code) in [
        ("engine/mod.rs", "use crate::update::Updates;"),
        ("engine/settings/mod.rs", "let f: crate::fleet::Fleet;"),
        ("fleet/client.rs", "use crate::store::free_bytes;"),
        ("update/mod.rs", "use crate::api::AppState;"),
        ("device/kiosk.rs", "use crate::fleet::Fleet;"),
    ] {
        assert_eq!(violations(Path::new(room), code).len(), 1, "{room}: {code}");
    }
}

/// Paths in backquotes that name something in the repository.
fn named_paths(text: &str) -> Vec<String> {
    const TOP: &[&str] = &[
        "src/", "tests/", "benches/", "board/", "docs/", "proto/", "yocto/", "assets/",
    ];
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| TOP.iter().any(|t| s.starts_with(t)))
        .filter(|s| !s.contains(['*', '{', '<', ' ']))
        .map(|s| s.trim_end_matches('/').to_string())
        .collect()
}

/// The code map's entries (`### ` sections up to the next `## `) with their words counted.
fn code_map_entries(text: &str) -> Vec<(String, usize)> {
    let Some(map) = text.split("\n## Code map").nth(1) else {
        return Vec::new();
    };
    let map = map.split("\n## ").next().unwrap_or_default();
    map.split("\n### ")
        .skip(1)
        .map(|entry| {
            let (title, body) = entry.split_once('\n').unwrap_or((entry, ""));
            (title.to_string(), body.split_whitespace().count())
        })
        .collect()
}

/// ARCHITECTURE.md names only paths that exist, and every room of `src` (each layer, each folder
/// inside one, each file at the top): the details live in the modules' own docs, which every
/// file has. Each entry of its code map is short.
#[test]
fn architecture_names_what_exists_and_every_room() {
    let root = root();
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let missing: Vec<_> = named_paths(&text)
        .into_iter()
        .filter(|p| !root.join(p).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names what does not exist: {missing:?}"
    );
    let mut unnamed = Vec::new();
    for layer in std::fs::read_dir(root.join("src")).unwrap() {
        let layer = layer.unwrap().path();
        let name = layer.file_name().unwrap().to_string_lossy().into_owned();
        if !text.contains(&format!("`src/{name}`")) {
            unnamed.push(format!("src/{name}"));
        }
        if !layer.is_dir() {
            continue;
        }
        let mut dirs = vec![layer.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let entry = entry.unwrap().path();
                if !entry.is_dir() {
                    continue;
                }
                let folder = entry.file_name().unwrap().to_string_lossy().into_owned();
                // A room is a folder of modules (fonts and the console's assets are data).
                let modules = std::fs::read_dir(&entry)
                    .unwrap()
                    .any(|f| f.unwrap().path().extension().is_some_and(|e| e == "rs"));
                if modules && !text.contains(&format!("`{folder}/`")) {
                    unnamed.push(entry.strip_prefix(&root).unwrap().display().to_string());
                }
                dirs.push(entry);
            }
        }
    }
    assert!(
        unnamed.is_empty(),
        "ARCHITECTURE.md does not mention: {unnamed:?}"
    );
    let entries = code_map_entries(&text);
    assert!(entries.len() >= 10, "{entries:?}");
    let long: Vec<_> = entries.iter().filter(|(_, words)| *words > 120).collect();
    assert!(long.is_empty(), "code map entries over 120 words: {long:?}");
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let undocumented: Vec<_> = files
        .iter()
        .filter(|f| !std::fs::read_to_string(f).unwrap().starts_with("//!"))
        .collect();
    assert!(
        undocumented.is_empty(),
        "modules without a doc comment: {undocumented:?}"
    );
}

#[test]
fn a_long_code_map_entry_is_counted() {
    let text = format!(
        "# A\n## Code map\n### `src/a`\n{}\n### `src/b`\nshort.\n## Next\n### not an entry",
        "word ".repeat(121)
    );
    assert_eq!(
        code_map_entries(&text),
        [("`src/a`".to_string(), 121), ("`src/b`".to_string(), 1)]
    );
}

#[test]
fn nothing_cites_a_document_outside_the_repository() {
    let root = root();
    let mut files = Vec::new();
    for dir in ["src", "tests", "benches", "proto", "docs", "board"] {
        collect_text_files(&root.join(dir), &mut files);
    }
    for f in [
        "README.md",
        "ARCHITECTURE.md",
        "x",
        "build.rs",
        "Cargo.toml",
    ] {
        files.push(root.join(f));
    }
    let this_file = root.join(file!());
    let mut found = Vec::new();
    for file in files.iter().filter(|f| **f != this_file) {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            if let Some(p) = OUTSIDE_CITATIONS.iter().find(|p| line.contains(*p)) {
                found.push(format!(
                    "{}:{}: cites `{p}`",
                    file.strip_prefix(&root).unwrap().display(),
                    n + 1
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "state the rule instead of citing an outside document:\n{}",
        found.join("\n")
    );
}

/// The longest line `src/api` may hold: a route's attribute is read with its handler.
const API_LINE_MAX: usize = 120;

/// The 1-based numbers and lengths (in characters) of the lines of `code` over `max`.
fn long_lines(code: &str, max: usize) -> Vec<(usize, usize)> {
    code.lines()
        .enumerate()
        .map(|(n, line)| (n + 1, line.chars().count()))
        .filter(|&(_, len)| len > max)
        .collect()
}

#[test]
fn no_line_of_the_api_is_over_120_characters() {
    let root = root();
    let mut files = Vec::new();
    rust_files(&root.join("src/api"), &mut files);
    assert!(files.len() > 10, "src/api holds the front doors: {files:?}");
    let found: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let name = f.strip_prefix(&root).unwrap().display().to_string();
            long_lines(&text, API_LINE_MAX)
                .into_iter()
                .map(move |(n, len)| format!("{name}:{n}: {len} characters"))
        })
        .collect();
    assert!(
        found.is_empty(),
        "lines over {API_LINE_MAX} characters (name a response set of src/api/statuses.rs, \
         break the attribute or the expression):\n{}",
        found.join("\n")
    );
}

#[test]
fn a_planted_long_line_is_found() {
    let fits = "x".repeat(API_LINE_MAX);
    // Characters, not bytes: a line of 120 'é' fits.
    let accented = "é".repeat(API_LINE_MAX);
    let code = format!("{fits}\n{accented}\n{fits}y\n");
    assert_eq!(long_lines(&code, API_LINE_MAX), vec![(3, API_LINE_MAX + 1)]);
}

fn collect_text_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect_text_files(&path, out);
        } else if path.extension().is_some_and(|e| {
            matches!(
                e.to_str(),
                Some("rs" | "md" | "proto" | "sh" | "toml" | "conf" | "service" | "py")
            )
        }) {
            out.push(path);
        }
    }
}

/// The scripts that root runs on the board (their units have no `User=`), as board/ has them: the
/// simulated board and the Yocto layer install these very files.
const ROOT_SCRIPTS: &[&str] = &[
    "board/firstboot.sh",
    "board/rauc/update-gate.sh",
    "board/grow-data.sh",
    "board/boot/boot-ok.sh",
];

/// Commands that write, move or remove a file, or change its owner or mode.
const FILE_WRITERS: &[&str] = &[
    "chown", "chmod", "mv", "cp", "ln", "rm", "touch", "mkdir", "tee", "install", "dd", "truncate",
];

/// Shells run on a string: this check cannot see what the string does.
const STRING_SHELLS: &[&str] = &["sh", "bash", "dash", "eval"];

/// Words before a command that leave it the command.
const PREFIXES: &[&str] = &[
    "if", "then", "else", "elif", "do", "while", "until", "!", "exec", "command", "env", "nice",
    "nohup", "time", "busybox",
];

/// The commands of a shell script with the line each starts on: the script split at newlines
/// and at `;`, `|`, `&`, `(`, `)`, `{`, `}` (so a `$(...)` is a command of its own), continuation
/// lines joined, comments left out, and each quoted string (or escaped character) replaced by `_`.
fn shell_commands(script: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let (mut line, mut start) = (1, 1);
    let mut chars = script.chars().peekable();
    let mut push = |cur: &mut String, start: usize| {
        if !cur.trim().is_empty() {
            out.push((start, cur.trim().to_string()));
        }
        cur.clear();
    };
    while let Some(c) = chars.next() {
        if cur.trim().is_empty() {
            start = line;
        }
        match c {
            '\\' => match chars.next() {
                Some('\n') => {
                    line += 1;
                    cur.push(' ');
                }
                Some(_) => cur.push('_'),
                None => {}
            },
            '\'' => {
                for c in chars.by_ref() {
                    match c {
                        '\'' => break,
                        '\n' => line += 1,
                        _ => {}
                    }
                }
                cur.push('_');
            }
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        // The guard takes the escaped character, whatever it is.
                        '\\' if chars.next() == Some('\n') => line += 1,
                        '"' => break,
                        '\n' => line += 1,
                        _ => {}
                    }
                }
                cur.push('_');
            }
            '#' if cur.is_empty() || cur.ends_with(char::is_whitespace) => {
                while chars.next_if(|&c| c != '\n').is_some() {}
            }
            // `>&2`, `2>&1`: the descriptor's `&` belongs to the redirect.
            '&' if cur.ends_with('>') => cur.push('&'),
            '\n' | ';' | '|' | '&' | '(' | ')' | '{' | '}' => {
                push(&mut cur, start);
                if c == '\n' {
                    line += 1;
                }
            }
            c => cur.push(c),
        }
    }
    push(&mut cur, start);
    out
}

/// What a command of a root script must not do (see `root_scripts_write_only_as_docent`).
fn root_write(command: &str) -> Option<String> {
    // Redirects: `>`, `>>`, `>|`, `<>`, to a file other than /dev/null.
    let mut rest = command;
    while let Some(i) = rest.find('>') {
        let after = rest[i + 1..].trim_start_matches(['>', '|']);
        if let Some(fd) = after.strip_prefix('&') {
            if !fd.starts_with(|c: char| c.is_ascii_digit() || c == '-') {
                return Some(format!("a redirect `>&{fd}`"));
            }
        } else {
            let target = after.split_whitespace().next().unwrap_or("");
            if target != "/dev/null" {
                return Some(format!("a redirect into `{target}`"));
            }
        }
        rest = after;
    }
    let is_assignment = |w: &str| {
        w.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
    };
    let word = command
        .split_whitespace()
        .find(|w| !PREFIXES.contains(w) && !is_assignment(w))?;
    if FILE_WRITERS.contains(&word) {
        return Some(format!("`{word}` as root"));
    }
    if STRING_SHELLS.contains(&word) {
        return Some(format!("`{word}` on a string as root"));
    }
    None
}

fn root_writes(script: &str) -> Vec<(usize, String)> {
    shell_commands(script)
        .into_iter()
        .filter_map(|(line, command)| root_write(&command).map(|w| (line, w)))
        .collect()
}

/// A root script never follows a path docent controls (issue 34, docs/security.md): the data
/// directory is docent's, so docent can plant a link at any name in it, and root writing there
/// would write (or chown) whatever the link names. These scripts have nothing of root's own to
/// write: in each of their commands (`shell_commands`),
/// - no redirect into a file: `>` and `>>` go only to /dev/null or to a descriptor (`>&2`). A
///   redirect is made by the root shell, whatever command it is written on;
/// - the command (after `if`, `!`, `exec`... and assignments) is none of `FILE_WRITERS`, nor a
///   shell run on a string (`sh -c`, `eval`), whose string this check cannot read.
///
/// What must be written goes through the scripts' wrapper, `as_docent COMMAND...` (setpriv to
/// the user docent runs as): then `as_docent` is the command, and a redirect is written inside
/// the quoted script of `as_docent sh -c '...'`, where docent's shell makes it.
#[test]
fn root_scripts_write_only_as_docent() {
    let root = root();
    let mut found = Vec::new();
    for script in ROOT_SCRIPTS {
        let text = std::fs::read_to_string(root.join(script)).unwrap();
        for (line, what) in root_writes(&text) {
            found.push(format!("{script}:{line}: {what}"));
        }
    }
    assert!(
        found.is_empty(),
        "write under the data directory through `as_docent` (or nothing):\n{}",
        found.join("\n")
    );
}

#[test]
fn a_planted_root_write_is_found() {
    let lines = |script: &str| -> Vec<usize> { root_writes(script).iter().map(|f| f.0).collect() };
    let script = r#"#!/bin/sh
printf '%s\n' "$x" >"$TMP"
echo "update gate: $from -> $to" >&2
cut -d. -f1 /proc/uptime 2>/dev/null
chown docent:docent "$O.tmp"; chmod 0600 "$O.tmp"
[ -f "$P" ] && rm -f "$P"
# rm -f "$P" (a comment)
echo 'mv a b > c'
as_docent rm -f "$P"; as_docent mv "$TMP" "$FILE"
printf x | as_docent sh -c 'cat >"$1"' sh "$TMP"
as_docent cat >"$TMP"
printf '{"to":"%s"}\n' \
    "$(esc "$to")" > "$O.tmp"
sh -c 'cat > /data/x'
X=1 exec mv a b
n=$(cat "$sys/size")
"#;
    assert_eq!(lines(script), vec![2, 5, 5, 6, 11, 12, 14, 15]);
}

/// The methods of `impl Engine` blocks in one file of `src/engine` (its tests left out).
fn engine_methods(code: &str) -> Vec<String> {
    let code = code.split("#[cfg(test)]").next().unwrap_or_default();
    let mut names = Vec::new();
    let mut inside = false;
    for line in code.lines() {
        if let Some(rest) = line.strip_prefix("impl ") {
            inside = rest
                .trim_start_matches("super::super::")
                .trim_start_matches("super::")
                .trim_start_matches("crate::engine::")
                == "Engine {";
            continue;
        }
        if line == "}" {
            inside = false;
        }
        let Some(rest) = line.strip_prefix("    ").filter(|_| inside) else {
            continue;
        };
        let rest = match rest.strip_prefix("pub") {
            Some(r) if r.starts_with('(') => r.split_once(") ").map_or(r, |(_, after)| after),
            Some(r) => r.trim_start(),
            None => rest,
        };
        let rest = rest.strip_prefix("async ").unwrap_or(rest);
        if let Some(after) = rest.strip_prefix("fn ") {
            names.push(ident_at(after).to_string());
        }
    }
    names
}

/// Where engine/mod.rs's doc says each file's methods are: `- `file`: `a`, `b`.` entries.
fn engine_map(mod_rs: &str) -> Vec<(String, Vec<String>)> {
    let doc: String = mod_rs
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .map(|l| l.trim_start_matches("//!").trim())
        .collect::<Vec<_>>()
        .join(" ");
    doc.split(" - `")
        .skip(1)
        .filter_map(|entry| {
            let (file, rest) = entry.split_once("`:")?;
            let names = rest
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect();
            Some((file.to_string(), names))
        })
        .collect()
}

/// What the map in engine/mod.rs gets wrong: a method not listed with its file, a file listed
/// that holds none.
fn engine_map_errors(
    map: &[(String, Vec<String>)],
    files: &[(String, Vec<String>)],
) -> Vec<String> {
    let mut errors = Vec::new();
    for (file, methods) in files {
        let listed = map
            .iter()
            .find(|(f, _)| f == file)
            .map(|(_, n)| n.as_slice());
        for m in methods {
            if !listed.unwrap_or_default().contains(m) {
                errors.push(format!(
                    "`{m}` of src/engine/{file} is not listed with its file"
                ));
            }
        }
    }
    for (file, _) in map {
        if !files.iter().any(|(f, m)| f == file && !m.is_empty()) {
            errors.push(format!(
                "src/engine/{file} is listed but holds no Engine method"
            ));
        }
    }
    errors
}

#[test]
fn engine_mod_says_which_file_holds_which_engine_method() {
    let engine = root().join("src/engine");
    let mut paths = Vec::new();
    rust_files(&engine, &mut paths);
    let files: Vec<(String, Vec<String>)> = paths
        .iter()
        .map(|p| {
            let name = p
                .strip_prefix(&engine)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (name, engine_methods(&std::fs::read_to_string(p).unwrap()))
        })
        .filter(|(_, m)| !m.is_empty())
        .collect();
    assert!(files.len() > 20, "{files:?}");
    let map = engine_map(&std::fs::read_to_string(engine.join("mod.rs")).unwrap());
    let errors = engine_map_errors(&map, &files);
    assert!(
        errors.is_empty(),
        "engine/mod.rs's map:\n{}",
        errors.join("\n")
    );
}

#[test]
fn a_method_missing_from_the_engine_map_is_found() {
    let code = "impl Engine {\n    pub fn a(&self) {}\n    pub(in crate::engine) async fn b(&self) {}\n}\n";
    let files = vec![("x.rs".to_string(), engine_methods(code))];
    assert_eq!(files[0].1, ["a", "b"]);
    let map = engine_map("//! Where.\n//! - `x.rs`: `a`.\n//! - `y.rs`: `c`.\n\nmod x;");
    let errors = engine_map_errors(&map, &files);
    assert_eq!(errors.len(), 2, "{errors:?}");
}

/// The `#[path]` attributes in `code`, with their lines: a file included by path belongs to two
/// crates at once, and tests or benches that share code name the test-support crate instead.
fn path_attributes(code: &str) -> Vec<usize> {
    strip_comments(code)
        .lines()
        .enumerate()
        .filter(|(_, l)| {
            let l = l.trim_start();
            l.starts_with("#[path") && l["#[path".len()..].trim_start().starts_with('=')
        })
        .map(|(i, _)| i + 1)
        .collect()
}

#[test]
fn no_file_is_included_by_path() {
    let root = root();
    let mut files = Vec::new();
    for dir in ["src", "tests", "benches"] {
        rust_files(&root.join(dir), &mut files);
    }
    // Build output (a fuzz build's `target/`) is no source.
    files.retain(|f| !f.components().any(|c| c.as_os_str() == "target"));
    assert!(files.len() > 100, "{}", files.len());
    let found: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let name = f.strip_prefix(&root).unwrap().display().to_string();
            let code = std::fs::read_to_string(f).unwrap();
            path_attributes(&code)
                .into_iter()
                .map(move |line| format!("{name}:{line}"))
        })
        .collect();
    assert!(found.is_empty(), "#[path] attributes: {found:?}");
}

#[test]
fn a_planted_path_attribute_is_found() {
    assert_eq!(
        path_attributes("mod a;\n#[path = \"../x.rs\"]\nmod x;\n"),
        [2]
    );
    assert!(path_attributes("// #[path = \"x.rs\"]\nlet s = \"#[path\";\n").is_empty());
}
