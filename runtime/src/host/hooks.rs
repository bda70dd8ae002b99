//! wedge's choices for wasi:http behaviour (`WasiHttpHooks`).

use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

/// A chunk the guest may hand over in one write. With one buffered chunk the
/// guest blocks once about two chunks are queued, so memory per response is
/// bounded whatever the guest does.
const OUTGOING_BODY_CHUNK: usize = 16 * 1024;

/// Hooks installed in every request's store.
pub struct GuestHooks;

type BoxedSendFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), Error>> + Send>,
                ),
                Error,
            >,
        > + Send,
>;

impl WasiHttpHooks for GuestHooks {
    /// Outbound HTTP is not granted to guests until an allow-list names
    /// destinations; the guest sees `HTTP-request-denied`.
    fn send_request(
        &mut self,
        _request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> BoxedSendFuture {
        Box::new(async { Err(Error::HttpRequestDenied) })
    }

    fn p2_outgoing_body_buffer_chunks(&mut self) -> usize {
        1
    }

    fn p2_outgoing_body_chunk_size(&mut self) -> usize {
        OUTGOING_BODY_CHUNK
    }
}
