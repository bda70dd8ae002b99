//! A response on its way out (DESIGN 4.1): the head as soon as the handler answers, then
//! the body, one chunk at a time. The next chunk is taken from the handler only once
//! quinn has accepted all of the last one, so quinn's stream flow control, not a buffer
//! of ours, holds a slow reader back: per stream we keep one chunk and a few frame-head
//! octets.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes};
use http::StatusCode;
use quinn::{SendStream, WriteError};
use wedge_proto::h3::{Connection, ErrorCode};

use super::quic_code;
use crate::log_text::{ERROR_TEXT, Shown};
use crate::net::handler::ResponseStream;
use crate::net::response_fields::fields;

/// How a response's writing ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Sent {
    /// Whole, and taken by quinn: the stream is to be finished (the connection
    /// first judges what the client sent of the request).
    Written,
    /// The client stopped the stream (STOP_SENDING) before the end.
    Stopped,
    /// It failed on our side, or the connection is gone.
    Failed,
    /// The request ended (its wall time, its guest's failure) while the response
    /// waited on the client's flow control: the stream is to be reset.
    CutOff,
}

/// A response being written to its request stream.
pub(super) struct Outgoing<B> {
    /// `None` for a response with none.
    body: Option<B>,
    /// The body gave its end: what is left to write is staged or pending. The body
    /// is kept until then, to be asked whether the request is over.
    ended: bool,
    /// Frame octets quinn has not yet taken: HEADERS, DATA heads, trailers.
    staged: Vec<u8>,
    /// The body chunk whose DATA head is staged, not yet all taken by quinn.
    pending: Bytes,
    /// Octets quinn has taken so far: a response that keeps moving is not stalled.
    written: u64,
}

impl<B: ResponseStream> Outgoing<B> {
    /// Stages `response`'s head in `staged` (a pooled, empty buffer); without
    /// `content`, its body is dropped. A head larger than the client takes (its
    /// SETTINGS_MAX_FIELD_SECTION_SIZE, RFC 9114 §4.2.2) becomes a bare 500.
    pub(super) fn new(
        core: &mut Connection,
        response: http::Response<B>,
        content: bool,
        staged: Vec<u8>,
    ) -> Self {
        let (parts, body) = response.into_parts();
        let status = [(&b":status"[..], parts.status.as_str().as_bytes())];
        let head = || status.into_iter().chain(fields(&parts.headers));
        if section_size(head()) > core.peer_max_field_section_size() {
            tracing::warn!("h3: a response head is larger than the client takes: 500 instead");
            return Self::status(core, StatusCode::INTERNAL_SERVER_ERROR, staged);
        }
        let mut staged = staged;
        core.send_headers(head(), &mut staged);
        Outgoing {
            ended: !content || body.is_end_stream(),
            body: content.then_some(body),
            staged,
            pending: Bytes::new(),
            written: 0,
        }
    }

    /// A response that is only a status (one wedge gives itself, like a 431).
    pub(super) fn status(core: &mut Connection, status: StatusCode, mut staged: Vec<u8>) -> Self {
        core.send_headers([(&b":status"[..], status.as_str().as_bytes())], &mut staged);
        Outgoing {
            body: None,
            ended: true,
            staged,
            pending: Bytes::new(),
            written: 0,
        }
    }

    /// Octets of this response quinn has taken so far.
    pub(super) fn written(&self) -> u64 {
        self.written
    }

    /// After [`Outgoing::pump`] returned pending: whether it waits on quinn taking
    /// octets (the client's flow control) rather than on the handler producing them.
    pub(super) fn blocked_on_peer(&self) -> bool {
        !self.staged.is_empty() || !self.pending.is_empty()
    }

    /// Gives up the staging buffer, for the next stream to reuse.
    pub(super) fn into_buffer(self) -> Vec<u8> {
        self.staged
    }

    /// Writes as much as quinn takes and the handler has produced; ready once all of
    /// it was taken (the stream is not finished yet), or it was reset or stopped.
    pub(super) fn pump(
        &mut self,
        core: &mut Connection,
        send: &mut SendStream,
        id: u64,
        cx: &mut Context<'_>,
    ) -> Poll<Sent> {
        loop {
            let flushed = match self.flush(send, cx) {
                Poll::Pending => return self.unless_cut_off(cx),
                Poll::Ready(flushed) => flushed,
            };
            if let Err(err) = flushed {
                tracing::debug!("h3 stream {id}: the response could not be sent: {err}");
                return Poll::Ready(match err {
                    WriteError::Stopped(_) => Sent::Stopped,
                    _ => Sent::Failed,
                });
            }
            let Some(body) = self.body.as_mut().filter(|_| !self.ended) else {
                return Poll::Ready(Sent::Written);
            };
            // Only now, with everything before it taken by quinn, is the next chunk
            // taken (DESIGN 4.1).
            match ready!(Pin::new(body).poll_frame(cx)) {
                None => self.ended = true,
                Some(Err(err)) => {
                    // The error may carry a guest's text, of any length.
                    let err = Shown(&err, ERROR_TEXT);
                    tracing::debug!("h3 stream {id}: response body failed: {err}");
                    let _ = send.reset(quic_code(ErrorCode::InternalError));
                    return Poll::Ready(Sent::Failed);
                }
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        if !data.is_empty() {
                            core.send_data_head(data.len(), &mut self.staged);
                            self.pending = data;
                        }
                    }
                    Err(frame) => {
                        if let Ok(trailers) = frame.into_trailers() {
                            // Like the head, trailers past the client's limit may not
                            // be sent (RFC 9114 §4.2.2); the response is cut short.
                            let size = section_size(fields(&trailers));
                            if size > core.peer_max_field_section_size() {
                                tracing::warn!(
                                    "h3 stream {id}: response trailers are larger than the client takes"
                                );
                                let _ = send.reset(quic_code(ErrorCode::InternalError));
                                return Poll::Ready(Sent::Failed);
                            }
                            core.send_headers(fields(&trailers), &mut self.staged);
                        }
                        self.ended = true;
                    }
                },
            }
            if self.body.as_ref().is_some_and(|b| b.is_end_stream()) {
                self.ended = true;
            }
        }
    }

    /// Quinn takes nothing more for now: pending, unless the request is over by now,
    /// however slowly the client grants credit.
    fn unless_cut_off(&mut self, cx: &mut Context<'_>) -> Poll<Sent> {
        match self.body.as_mut().map(|body| body.poll_cut_off(cx)) {
            Some(Poll::Ready(())) => Poll::Ready(Sent::CutOff),
            _ => Poll::Pending,
        }
    }

    /// Hands quinn the staged frame octets, then the pending chunk.
    fn flush(
        &mut self,
        send: &mut SendStream,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), WriteError>> {
        while !self.staged.is_empty() {
            let n = ready!(Pin::new(&mut *send).poll_write(cx, &self.staged))?;
            self.staged.drain(..n);
            self.written += n as u64;
        }
        while !self.pending.is_empty() {
            let n = ready!(Pin::new(&mut *send).poll_write(cx, &self.pending))?;
            self.pending.advance(n);
            self.written += n as u64;
        }
        Poll::Ready(Ok(()))
    }
}

/// A field section's size as RFC 9114 §4.2.2 counts it: names and values uncompressed,
/// plus 32 octets per field.
fn section_size<'f>(fields: impl Iterator<Item = (&'f [u8], &'f [u8])>) -> u64 {
    fields
        .map(|(name, value)| (name.len() + value.len() + 32) as u64)
        .sum()
}

#[cfg(test)]
pub(super) mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use bytes::Bytes;
    use http::HeaderMap;
    use http_body_util::StreamBody;
    use http_body_util::combinators::BoxBody;
    use hyper::body::Frame;
    use wedge_proto::h3::{Config, Connection};

    use super::*;
    use crate::net::cert::{dev_cert, load_pem};
    use crate::net::h3::H3Config;

    /// A connected pair of quinn connections on 127.0.0.1, the server's configured by
    /// `config`: (server, client, the endpoints to keep alive).
    pub(in crate::net::h3) async fn pair(
        config: &H3Config,
    ) -> (quinn::Connection, quinn::Connection, Vec<quinn::Endpoint>) {
        // One directory per call: tests run side by side in this process.
        static CALLS: AtomicUsize = AtomicUsize::new(0);
        let call = CALLS.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("wedge-h3-pair-{}-{call}", std::process::id()));
        let cert = dev_cert(&dir).unwrap();
        let key = load_pem(&cert.cert, &cert.key).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let mut roots = rustls::RootCertStore::empty();
        for c in &key.chain {
            roots.add(c.clone()).unwrap();
        }
        let server_config = config.server_config(&key).unwrap();
        let server =
            quinn::Endpoint::server(server_config, "127.0.0.1:0".parse().unwrap()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"h3".to_vec()];
        let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
        let mut client = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        client.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
        let addr = server.local_addr().unwrap();
        let connecting = client.connect(addr, "localhost").unwrap();
        let (accepted, connected) = tokio::join!(
            async { server.accept().await.unwrap().await.unwrap() },
            connecting
        );
        (accepted, connected.unwrap(), vec![server, client])
    }

    impl ResponseStream for BoxBody<Bytes, std::convert::Infallible> {}

    #[tokio::test]
    async fn trailers_past_the_clients_limit_reset_the_stream_with_h3_internal_error() {
        let (server, client, _endpoints) = pair(&H3Config::default()).await;
        let (mut client_send, mut client_recv) = client.open_bi().await.unwrap();
        client_send.write_all(b"x").await.unwrap();
        let (mut send, _recv) = server.accept_bi().await.unwrap();
        // The client's SETTINGS take field sections of at most 100 octets.
        let mut core = Connection::new(Config::default());
        let control = [0x00, 0x04, 0x03, 0x06, 0x40, 0x64];
        core.recv(2, &control, false, &mut Vec::new()).unwrap();
        // A small head, one chunk, then trailers of about 250 octets.
        let mut trailers = HeaderMap::new();
        trailers.insert("x-checksum", "a".repeat(200).parse().unwrap());
        let frames = futures_util::stream::iter([
            Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from_static(b"body"))),
            Ok(Frame::trailers(trailers)),
        ]);
        let body = BoxBody::new(StreamBody::new(frames));
        let mut outgoing = Outgoing::new(&mut core, http::Response::new(body), true, Vec::new());
        let sent = std::future::poll_fn(|cx| outgoing.pump(&mut core, &mut send, 0, cx)).await;
        assert_eq!(sent, Sent::Failed);
        let mut octets = Vec::new();
        let read = loop {
            let mut buf = [0u8; 1024];
            match client_recv.read(&mut buf).await {
                Ok(Some(n)) => octets.extend_from_slice(&buf[..n]),
                other => break other,
            }
        };
        match read {
            Err(quinn::ReadError::Reset(code)) => {
                assert_eq!(code.into_inner(), 0x102, "H3_INTERNAL_ERROR")
            }
            other => panic!(
                "expected a reset after {} octets, got {other:?}",
                octets.len()
            ),
        }
    }
}
