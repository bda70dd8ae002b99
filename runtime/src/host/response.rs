//! The responses wedge writes itself: plain text, the request body limit's 413, and
//! the `Retry-After` that tells clients to back off.

use http::{Response, StatusCode, header};

use super::response_body::ResponseBody;

pub(crate) fn too_large(limit: u64) -> Response<ResponseBody> {
    plain(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("413 Payload Too Large: the request body limit is {limit} bytes\n"),
    )
}

/// `Retry-After: 1`: tells clients to back off rather than retry at once.
pub(crate) fn retry_later(mut response: Response<ResponseBody>) -> Response<ResponseBody> {
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, http::HeaderValue::from_static("1"));
    response
}

/// A response wedge writes itself.
pub fn plain(status: StatusCode, text: String) -> Response<ResponseBody> {
    let mut response = Response::new(ResponseBody::text(text));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
