//! Reading the body of an answer from another server (a model provider, an inline tool's
//! endpoint, the Hub's listings) up to a bound, so that a server whose body does not end, or
//! ends far past any sensible size, costs a bounded amount of memory and no more waiting.

use bytes::{Bytes, BytesMut};

/// The answer's body, or `None` once its `Content-Length` or the bytes that came pass `max`:
/// the rest is not read and the connection is dropped with the response. A body that comes in
/// one chunk, as most short answers do, is returned without a copy.
pub(crate) async fn read(
    mut resp: reqwest::Response,
    max: usize,
) -> Result<Option<Bytes>, reqwest::Error> {
    if resp.content_length().is_some_and(|n| n > max as u64) {
        return Ok(None);
    }
    let Some(first) = resp.chunk().await? else {
        return Ok(Some(Bytes::new()));
    };
    if first.len() > max {
        return Ok(None);
    }
    let Some(second) = resp.chunk().await? else {
        return Ok(Some(first));
    };
    let mut body = BytesMut::from(first);
    let mut next = Some(second);
    while let Some(chunk) = next {
        if body.len() + chunk.len() > max {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
        next = resp.chunk().await?;
    }
    Ok(Some(body.freeze()))
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::body::Body;
    use axum::routing::get;

    use super::*;

    /// A server with a body of each shape: sized, streamed in chunks, and streamed without end.
    fn app() -> Router {
        fn chunk() -> Result<Bytes, std::io::Error> {
            Ok(Bytes::from(vec![b'x'; 1000]))
        }
        Router::new()
            .route("/sized", get(|| async { vec![b'x'; 3000] }))
            .route(
                "/chunked",
                get(|| async { Body::from_stream(futures::stream::iter((0..3).map(|_| chunk()))) }),
            )
            .route(
                "/endless",
                get(|| async { Body::from_stream(futures::stream::repeat_with(chunk)) }),
            )
    }

    /// The body's length at `path` read with bound `max` (`None`: past it).
    async fn fetch(base: &str, path: &str, max: usize) -> Option<usize> {
        let resp = reqwest::get(format!("{base}{path}")).await.unwrap();
        read(resp, max).await.unwrap().map(|b| b.len())
    }

    #[tokio::test]
    async fn a_body_is_read_up_to_its_bound_and_no_further() {
        crate::install_crypto_provider();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let checks = async {
            // At the bound, whole; one byte under it, refused, by its length or as it came.
            assert_eq!(fetch(&base, "/sized", 3000).await, Some(3000));
            assert_eq!(fetch(&base, "/sized", 2999).await, None);
            assert_eq!(fetch(&base, "/chunked", 3000).await, Some(3000));
            assert_eq!(fetch(&base, "/chunked", 2999).await, None);
            assert_eq!(fetch(&base, "/chunked", 999).await, None);
            // A body without end ends the read at the bound.
            assert_eq!(fetch(&base, "/endless", 1 << 20).await, None);
        };
        tokio::select! {
            served = axum::serve(listener, app()) => panic!("test server stopped: {served:?}"),
            () = checks => {}
        }
    }
}
