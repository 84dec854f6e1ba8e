//! Download responses for exports. A running job's export is streamed as it is read. A
//! finished job's export cannot change, so it carries a strong `ETag`, answers
//! `If-None-Match` with `304`, and a `Range` request (a resumed download) is served from the
//! export written out once to a file, with `Content-Length` and `Content-Range`; a later full
//! download of it then has its length too.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tower::ServiceExt as _;

use crate::error::ApiError;
use crate::jobs::Export;
use crate::rendered::Rendered;
use crate::state::AppState;

/// What a download is named and typed as.
pub(super) struct Download<'a> {
    pub content_type: &'static str,
    pub filename: &'a str,
}

/// The response to a `GET` of `export` with the request's `headers` (see the module docs).
pub(super) async fn export_response(
    state: &AppState,
    export: Export,
    download: Download<'_>,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let Some(etag) = export.etag.clone() else {
        let mut res = Body::from_stream(export.body).into_response();
        name(&mut res, &download);
        res.headers_mut()
            .insert(header::ACCEPT_RANGES, HeaderValue::from_static("none"));
        return Ok(res);
    };
    let validator = HeaderValue::from_str(&etag).map_err(|e| ApiError::Internal(e.to_string()))?;
    if none_match(headers, &etag) {
        let mut res = StatusCode::NOT_MODIFIED.into_response();
        res.headers_mut().insert(header::ETAG, validator);
        return Ok(res);
    }
    // `If-Range` with another validator: the client's copy is stale, so the whole export.
    let range = headers.get(header::RANGE).filter(|_| {
        headers
            .get(header::IF_RANGE)
            .is_none_or(|v| v == etag.as_str())
    });
    let rendered = match range {
        Some(_) => state.jobs.rendered(export).await?,
        None => match state.jobs.rendered_now(&etag) {
            Some(done) => Some(done),
            None => {
                let mut res = Body::from_stream(export.body).into_response();
                finish(&mut res, &download, validator);
                return Ok(res);
            }
        },
    };
    let Some(rendered) = rendered else {
        return Err(ApiError::Internal(
            "a finished job's export was not written".into(),
        ));
    };
    let mut req = Request::new(Body::empty());
    if let Some(range) = range {
        req.headers_mut().insert(header::RANGE, range.clone());
    }
    let mut res = serve_file(rendered, req).await?;
    finish(&mut res, &download, validator);
    Ok(res)
}

/// `rendered`'s bytes as `tower_http`'s file server answers `req` (ranges, lengths,
/// `416` for a range past the end), keeping the file while the body reads it. A range of an
/// empty file is answered here: no byte range of zero bytes can be satisfied (RFC 9110
/// 14.1.1, 15.5.17), and the file server answered it with a `206` whose `Content-Range`
/// claimed a byte the file does not have (an export of a job whose records all failed).
pub(in crate::api) async fn serve_file(
    rendered: Arc<Rendered>,
    req: Request,
) -> Result<Response, ApiError> {
    if req.headers().contains_key(header::RANGE)
        && tokio::fs::metadata(&rendered.path)
            .await
            .is_ok_and(|m| m.len() == 0)
    {
        let mut res = Response::new(Body::empty());
        *res.status_mut() = StatusCode::RANGE_NOT_SATISFIABLE;
        let h = res.headers_mut();
        h.insert(header::CONTENT_RANGE, HeaderValue::from_static("bytes */0"));
        h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
        return Ok(res);
    }
    let served = tower_http::services::ServeFile::new(&rendered.path)
        .oneshot(req)
        .await
        .map_err(|e| ApiError::Internal(format!("reading a rendered file: {e}")))?;
    let (mut parts, body) = served.into_parts();
    parts
        .headers
        .insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    let body = futures::StreamExt::map(Body::new(body).into_data_stream(), move |chunk| {
        let _ = &rendered;
        chunk
    });
    Ok(Response::from_parts(parts, Body::from_stream(body)))
}

/// Whether `If-None-Match` names `etag` (or is `*`).
fn none_match(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .any(|tag| tag == "*" || tag == etag || tag.strip_prefix("W/") == Some(etag))
}

fn name(res: &mut Response, download: &Download<'_>) {
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(download.content_type),
    );
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{}\"", download.filename))
    {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
}

fn finish(res: &mut Response, download: &Download<'_>, etag: HeaderValue) {
    name(res, download);
    let h = res.headers_mut();
    h.insert(header::ETAG, etag);
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    // ServeFile's own validator is the file's time, which differs on every replica.
    h.remove(header::LAST_MODIFIED);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_none_match_lists_and_wildcards() {
        let mut h = HeaderMap::new();
        h.insert(
            header::IF_NONE_MATCH,
            HeaderValue::from_static("\"a\", \"b\""),
        );
        assert!(none_match(&h, "\"b\""));
        assert!(!none_match(&h, "\"c\""));
        h.insert(header::IF_NONE_MATCH, HeaderValue::from_static("W/\"c\""));
        assert!(none_match(&h, "\"c\""));
        h.insert(header::IF_NONE_MATCH, HeaderValue::from_static("*"));
        assert!(none_match(&h, "\"d\""));
        assert!(!none_match(&HeaderMap::new(), "\"d\""));
    }
}
