//! A streamed response: headers first, then the body written as it is produced. Without a
//! content-length the host sends it with chunked transfer encoding; Server-Timing entries known
//! only at the end (decode, per_token, total) and the stop reason (x-generate-stop) go into
//! trailers, which clients that sent `TE: trailers` receive.

use wasi::http::types::{Fields, OutgoingBody, OutgoingResponse, ResponseOutparam};
use wasi::io::streams::OutputStream;

/// blocking_write_and_flush takes at most 4096 bytes per call.
const WRITE_CHUNK: usize = 4096;

pub struct Streaming {
    body: OutgoingBody,
    stream: OutputStream,
}

/// Sends status 200 and the headers; None if the host refuses them (the client went away).
pub fn start(out: ResponseOutparam, content_type: &str, server_timing: &str) -> Option<Streaming> {
    let headers: Vec<(String, Vec<u8>)> = vec![
        ("content-type".into(), content_type.as_bytes().to_vec()),
        ("server-timing".into(), server_timing.as_bytes().to_vec()),
        ("trailer".into(), b"server-timing, x-generate-stop".to_vec()),
    ];
    let fields = Fields::from_list(&headers).ok()?;
    let response = OutgoingResponse::new(fields);
    let body = response.body().ok()?;
    ResponseOutparam::set(out, Ok(response));
    let stream = body.write().ok()?;
    Some(Streaming { body, stream })
}

impl Streaming {
    /// Writes and flushes `text`; false when the client has gone away.
    pub fn write(&self, text: &str) -> bool {
        text.as_bytes().chunks(WRITE_CHUNK).all(|chunk| self.stream.blocking_write_and_flush(chunk).is_ok())
    }

    pub fn finish(self, trailing_server_timing: &str, stop: &str) {
        let Streaming { body, stream } = self;
        // The stream is the body's child resource: it must be gone before the body is finished.
        drop(stream);
        let trailers = Fields::from_list(&[
            ("server-timing".into(), trailing_server_timing.as_bytes().to_vec()),
            ("x-generate-stop".into(), stop.as_bytes().to_vec()),
        ])
        .ok();
        let _ = OutgoingBody::finish(body, trailers);
    }
}
