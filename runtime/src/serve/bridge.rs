//! Where net's types meet host's: a request body that ended early is, to the guest, a
//! connection that terminated; a host response body is a stream the engines poll and
//! ask whether it was cut off.

use std::task::{Context, Poll};

use crate::host::ResponseBody;
use crate::net::handler::ResponseStream;
use crate::net::request_body::BodyGone;

impl From<BodyGone> for wasmtime_wasi_http::Error {
    fn from(_: BodyGone) -> Self {
        wasmtime_wasi_http::Error::ConnectionTerminated
    }
}

impl ResponseStream for ResponseBody {
    fn poll_cut_off(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        ResponseBody::poll_cut_off(self, cx)
    }
}
