//! The wasi:http glue: one request answered (`handle`), reading a bounded request body within a
//! deadline, checking the method and writing one JSON response.

use std::time::{Duration, Instant};

use wasi::clocks::monotonic_clock;
use wasi::http::types::{Fields, IncomingRequest, Method, OutgoingBody, OutgoingResponse, ResponseOutparam};
use wasi::io::poll;
use wasi::io::streams::StreamError;

use crate::error::ApiError;
use crate::timing::ServerTiming;

/// A service's wasi:http handler: `route` answers the request (its start and the Server-Timing it
/// fills are handed in), its body or its error is the one JSON response, timed in total.
pub fn handle<F>(request: IncomingRequest, response_out: ResponseOutparam, route: F)
where
    F: FnOnce(IncomingRequest, Instant, &mut ServerTiming) -> Result<String, ApiError>,
{
    let started = Instant::now();
    let mut timing = ServerTiming::default();
    let (status, body, headers) = match route(request, started, &mut timing) {
        Ok(body) => (200, body, Vec::new()),
        Err(error) => (error.status, error.to_json(), error.headers()),
    };
    timing.record("total", started, None);
    respond(response_out, status, &body, &timing.header(), &headers);
}

/// Bytes asked for per read; the host may return fewer.
const READ_CHUNK: u64 = 64 * 1024;

/// The whole body, or 413 as soon as it grows past `limit` bytes (so an oversized upload is never
/// held in memory), 408 when it has not all arrived `deadline` after the read began, or 400 when
/// the stream fails.
///
/// The deadline is the service's own: a client that sends fewer bytes than its Content-Length
/// and keeps the connection open would otherwise hold the instance until the host gives up, and
/// the host's reply then is its own HTML 500 (`wasmtime serve`) or nothing at all. Each wait is a
/// poll on the body stream and a timer for what is left of the deadline, whichever is first.
pub fn read_body(request: IncomingRequest, limit: usize, deadline: Duration) -> Result<Vec<u8>, ApiError> {
    let too_large = || ApiError::new(413, format!("request body is larger than {limit} bytes"));
    let declared = declared_length(&request);
    if declared.is_some_and(|length| length > limit as u64) {
        return Err(too_large());
    }
    let unreadable = |what: &str| ApiError::new(400, format!("cannot read the request body: {what}"));
    let body = request.consume().map_err(|_| unreadable("already consumed"))?;
    let stream = body.stream().map_err(|_| unreadable("no stream"))?;
    let ready = stream.subscribe();
    let ends_at = monotonic_clock::now().saturating_add(u64::try_from(deadline.as_nanos()).unwrap_or(u64::MAX));
    let mut data = Vec::new();
    loop {
        let timer = monotonic_clock::subscribe_instant(ends_at);
        if !poll::poll(&[&ready, &timer]).contains(&0) {
            return Err(too_slow(deadline, data.len(), declared));
        }
        match stream.read(READ_CHUNK) {
            Ok(chunk) => {
                data.extend_from_slice(&chunk);
                if data.len() > limit {
                    return Err(too_large());
                }
            }
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(_)) => return Err(unreadable("the stream failed")),
        }
    }
    Ok(data)
}

fn too_slow(deadline: Duration, received: usize, declared: Option<u64>) -> ApiError {
    let of = declared.map_or(String::new(), |length| format!(" of the {length} its Content-Length announced"));
    ApiError::new(
        408,
        format!("the request body did not arrive within {} ms ({received} bytes{of} came); send it whole and retry", deadline.as_millis()),
    )
}

fn declared_length(request: &IncomingRequest) -> Option<u64> {
    let values = request.headers().get(&"content-length".to_string());
    let value = values.first()?;
    std::str::from_utf8(value).ok()?.trim().parse().ok()
}

/// Sends status, headers (JSON content, Server-Timing, then `extra`) and body. Failures here can
/// only mean the client went away, and there is nobody left to tell, so they are ignored rather
/// than turned into a trap.
pub fn respond(out: ResponseOutparam, status: u16, body: &str, server_timing: &str, extra: &[(&str, String)]) {
    let mut headers: Vec<(String, Vec<u8>)> = vec![
        ("content-type".into(), b"application/json".to_vec()),
        ("content-length".into(), body.len().to_string().into_bytes()),
        ("server-timing".into(), server_timing.as_bytes().to_vec()),
    ];
    headers.extend(extra.iter().map(|(name, value)| (name.to_string(), value.as_bytes().to_vec())));
    let Ok(fields) = Fields::from_list(&headers) else { return };
    let response = OutgoingResponse::new(fields);
    if response.set_status_code(status).is_err() {
        return;
    }
    let Ok(outgoing) = response.body() else { return };
    ResponseOutparam::set(out, Ok(response));
    if let Ok(stream) = outgoing.write() {
        // blocking_write_and_flush takes at most 4096 bytes per call.
        for chunk in body.as_bytes().chunks(4096) {
            if stream.blocking_write_and_flush(chunk).is_err() {
                break;
            }
        }
    }
    let _ = OutgoingBody::finish(outgoing, None);
}

/// The request's path without its query.
pub fn path(request: &IncomingRequest) -> String {
    let path = request.path_with_query().unwrap_or_default();
    path.split('?').next().unwrap_or_default().to_string()
}

/// Ok for the route's method, else the 405 that names it (and says it in Allow).
pub fn expect_method(method: &Method, wanted: Method, name: &'static str) -> Result<(), ApiError> {
    // Method has no PartialEq; compare the standard variants by discriminant.
    if std::mem::discriminant(method) == std::mem::discriminant(&wanted) {
        return Ok(());
    }
    let mut error = ApiError::new(405, format!("method not allowed; use {name}"));
    error.allow = Some(name);
    Err(error)
}
