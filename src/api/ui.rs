//! The web UI at `/ui`: one HTML page and its CSS and JavaScript modules, embedded in the binary
//! at build time from the top-level `ui/` folder (no Node toolchain, no bundler: cargo alone
//! builds the service, and a change to a file under `ui/` rebuilds it through `include_bytes!`).
//!
//! The page is public on purpose: it holds no data, only code. Everything it shows comes from
//! `/v1`, which the browser calls with the API key the person typed (kept in `sessionStorage`,
//! sent as `Authorization: Bearer`), so the keys guard the data exactly as they do for curl.
//! No cookie is ever set, so there is nothing for a cross-site request to ride on.
//!
//! Every answer carries a strict Content-Security-Policy: scripts and styles only from this
//! origin (no inline code, no `eval`), images from this origin or from `data:`/`blob:` URLs the
//! page builds itself (images fetched with the key, base64 images of a preview), requests only
//! to this origin, and no framing. Together with the page putting every value in the DOM as
//! text, a record whose value is markup shows that markup as characters and runs nothing.

use axum::Router;
use axum::extract::Path;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::error::ApiError;

/// The page's Content-Security-Policy (and its assets'). `img-src` allows `data:` and `blob:`
/// for the images the page builds from API answers; nothing else is loosened.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data: blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// One embedded file.
struct Asset {
    /// Its path under `/ui/`.
    path: &'static str,
    /// Its `Content-Type`.
    mime: &'static str,
    body: &'static [u8],
}

macro_rules! asset {
    ($path:literal, $mime:expr) => {
        Asset {
            path: $path,
            mime: $mime,
            body: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/ui/", $path)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file of `ui/`; a file not listed here is not served.
const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("app.css", "text/css; charset=utf-8"),
    asset!("js/main.js", JS),
    asset!("js/api.js", JS),
    asset!("js/dom.js", JS),
    asset!("js/format.js", JS),
    asset!("js/jobs.js", JS),
    asset!("js/job.js", JS),
    asset!("js/record.js", JS),
    asset!("js/trace.js", JS),
    asset!("js/values.js", JS),
    asset!("js/preview.js", JS),
];

/// The UI routes: the page at `/ui` (and `/ui/`), its assets at `/ui/{path}`.
pub(super) fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        // A browser at the server's root lands on the page.
        .route(
            "/",
            get(|| async { axum::response::Redirect::temporary("/ui") }),
        )
        .route("/ui", get(|| async { serve("index.html") }))
        .route("/ui/", get(|| async { serve("index.html") }))
        .route(
            "/ui/{*path}",
            get(|Path(path): Path<String>| async move { serve(&path) }),
        )
}

/// The embedded file at `path`, with the security headers; `404 not_found` for anything else.
fn serve(path: &str) -> Response {
    let Some(asset) = ASSETS.iter().find(|a| a.path == path) else {
        return ApiError::NotFound(format!("/ui/{path}")).into_response();
    };
    (
        [
            (header::CONTENT_TYPE, asset.mime),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            // Small files, embedded in the binary: revalidating costs little and an upgraded
            // server never leaves a tab with a stale mix of old and new modules.
            (header::CACHE_CONTROL, "no-cache"),
        ],
        asset.body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_the_ui_folder_is_served_and_nothing_else() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/ui");
        let mut on_disk = Vec::new();
        let mut dirs = vec![std::path::PathBuf::from(root)];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let p = entry.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                } else {
                    let rel = p.strip_prefix(root).unwrap().to_str().unwrap();
                    on_disk.push(rel.replace('\\', "/"));
                }
            }
        }
        on_disk.sort();
        let mut listed: Vec<String> = ASSETS.iter().map(|a| a.path.to_owned()).collect();
        listed.sort();
        assert_eq!(listed, on_disk, "ASSETS must list exactly the files of ui/");
    }

    #[test]
    fn no_asset_carries_inline_code_or_markup_sinks() {
        for a in ASSETS {
            let text = std::str::from_utf8(a.body).unwrap();
            // The CSP would block them anyway; this keeps the code honest before a browser
            // does. `innerHTML` and friends would turn a value into markup.
            for banned in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "document.write",
                "eval(",
                "new Function",
                " style=\"",
                " onclick=",
            ] {
                assert!(!text.contains(banned), "{} contains {banned}", a.path);
            }
            if a.path == "index.html" {
                assert!(
                    !text.contains("<script>") && !text.contains("<style"),
                    "no inline script or style in the page"
                );
            }
        }
    }
}
