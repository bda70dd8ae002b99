//! One request over each protocol a client may speak to wedge: HTTP/1.1 (curl),
//! h2c (the `h2` crate: curl 7.88 reports no head at all for a stream whose head,
//! data and reset arrive in one read) and HTTP/3 (the `h3` crate), each on a
//! connection of its own, reporting what the client saw, an aborted body included.
//! And an exchange that proves a body streams both ways: each piece of an upload
//! comes back before the next is sent.

use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::h3::{client_config, read_body, request};
use crate::{Server, curl, pattern, temp_dir};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Proto {
    H1,
    H2,
    H3,
}

impl Proto {
    pub const ALL: [Proto; 3] = [Proto::H1, Proto::H2, Proto::H3];

    /// As `wedge_*{protocol=…}` labels name it.
    pub fn label(self) -> &'static str {
        match self {
            Proto::H1 => "h1",
            Proto::H2 => "h2",
            Proto::H3 => "h3",
        }
    }
}

/// What the client saw: the status (0: no head), the fields (lower-case names),
/// whether the body ended cleanly, and the body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub complete: bool,
    pub body: Vec<u8>,
}

impl Answer {
    fn none() -> Answer {
        Answer {
            status: 0,
            headers: Vec::new(),
            complete: false,
            body: Vec::new(),
        }
    }

    /// A head's fields, as the client crates give them.
    fn fields(headers: &http::HeaderMap) -> Vec<(String, String)> {
        let fields = headers.iter().map(|(name, value)| {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            (name.as_str().to_string(), value)
        });
        fields.collect()
    }

    /// The first value of field `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let found = self.headers.iter().find(|(k, _)| k == name);
        found.map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.body).unwrap()
    }
}

/// A running wedge to send requests to: its cleartext listener (HTTP/1.1, h2c) and
/// its TLS port (HTTP/3), trusting the development certificate in `data_dir`.
pub struct Client<'a> {
    pub server: &'a Server,
    pub data_dir: &'a Path,
}

impl Client<'_> {
    /// `method path` with `body` over `proto`, on a connection of its own closed after.
    pub async fn send(
        &self,
        proto: Proto,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Answer {
        match proto {
            Proto::H1 => {
                let url = format!("{}{path}", self.server.url);
                let (method, body) = (method.to_string(), body.map(<[u8]>::to_vec));
                let curl = move || curl_send(&["--http1.1"], &method, &url, body.as_deref());
                tokio::task::spawn_blocking(curl).await.unwrap().1
            }
            Proto::H2 => self.send_h2(method, path, body).await,
            Proto::H3 => self.send_h3(method, path, body).await,
        }
    }

    pub async fn get(&self, proto: Proto, path: &str) -> Answer {
        self.send(proto, "GET", path, None).await
    }

    async fn send_h2(&self, method: &str, path: &str, body: Option<&[u8]>) -> Answer {
        let tcp = TcpStream::connect(self.server.authority()).await.unwrap();
        let (mut send, connection) = h2::client::handshake(tcp).await.unwrap();
        let connection = tokio::spawn(async move {
            let _ = connection.await;
        });
        let request = http::Request::builder()
            .method(method)
            .uri(format!("http://localhost{path}"))
            .body(())
            .unwrap();
        let (response, mut upload) = send.send_request(request, body.is_none()).unwrap();
        if let Some(body) = body {
            let body = Bytes::copy_from_slice(body);
            tokio::spawn(async move {
                upload.reserve_capacity(body.len());
                let mut rest = body;
                while !rest.is_empty() {
                    let Some(Ok(room)) = std::future::poll_fn(|cx| upload.poll_capacity(cx)).await
                    else {
                        return;
                    };
                    let chunk = rest.split_to(room.min(rest.len()));
                    if upload.send_data(chunk, rest.is_empty()).is_err() {
                        return;
                    }
                }
            });
        }
        let answer = match response.await {
            Ok(response) => {
                let status = response.status().as_u16();
                let headers = Answer::fields(response.headers());
                let mut body = response.into_body();
                let (mut bytes, mut complete) = (Vec::new(), true);
                while let Some(chunk) = body.data().await {
                    let Ok(chunk) = chunk else {
                        complete = false;
                        break;
                    };
                    let _ = body.flow_control().release_capacity(chunk.len());
                    bytes.extend_from_slice(&chunk);
                }
                Answer {
                    status,
                    headers,
                    complete,
                    body: bytes,
                }
            }
            Err(_) => Answer::none(),
        };
        // Dropping the connection closes the socket.
        connection.abort();
        let _ = connection.await;
        answer
    }

    async fn send_h3(&self, method: &str, path: &str, body: Option<&[u8]>) -> Answer {
        let mut h3 = self.h3().await;
        let stream = h3
            .requests
            .send_request(request(method, path))
            .await
            .unwrap();
        let (mut upload, mut stream) = stream.split();
        let body = body.map(Bytes::copy_from_slice);
        let sending = tokio::spawn(async move {
            if let Some(body) = body {
                for chunk in body.chunks(64 * 1024) {
                    if upload
                        .send_data(Bytes::copy_from_slice(chunk))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            }
            // The server may have reset the stream already (a fast trap): its answer
            // tells.
            let _ = upload.finish().await;
        });
        let answer = match stream.recv_response().await {
            Ok(response) => {
                let body = read_body(&mut stream).await;
                Answer {
                    status: response.status().as_u16(),
                    headers: Answer::fields(response.headers()),
                    complete: body.is_ok(),
                    body: body.unwrap_or_default(),
                }
            }
            Err(_) => Answer::none(),
        };
        sending.abort();
        drop(stream);
        h3.close().await;
        answer
    }

    /// An HTTP/3 connection to the TLS port, trusting the development certificate.
    async fn h3(&self) -> H3 {
        let pem = self.data_dir.join("tls/dev-cert.pem");
        let tls = self.server.tls_url.as_deref().expect("a TLS listener");
        let addr = tls.trim_start_matches("https://").parse().unwrap();
        let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        endpoint.set_default_client_config(client_config(&pem, None));
        let quic = endpoint
            .connect(addr, "localhost")
            .unwrap()
            .await
            .expect("QUIC handshake");
        let (mut driver, requests) = h3::client::new(h3_quinn::Connection::new(quic.clone()))
            .await
            .expect("HTTP/3 connection");
        let driving = tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        H3 {
            endpoint,
            quic,
            requests,
            driving,
        }
    }

    /// Echoes through `path` over every protocol, each must come back whole: pieces
    /// sent one at a time, each only once the one before came back (so the upload
    /// reaches the guest and its output reaches the client as they are written), and
    /// 4 MiB at once.
    pub async fn echo_streams_both_ways(&self, path: &str) {
        let pieces: Vec<Vec<u8>> = (0..4).map(|i| pattern(10_000, i)).collect();
        let pieces: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
        let big = pattern(4 << 20, 9);
        for proto in Proto::ALL {
            let echo = self.ping_pong(proto, path, &pieces).await;
            assert_eq!((echo.status, echo.complete), (200, true), "{proto:?}");
            assert!(
                echo.received == pieces.concat(),
                "{proto:?}: the echo differs"
            );
            let answer = self.send(proto, "POST", path, Some(&big)).await;
            assert_eq!((answer.status, answer.complete), (200, true), "{proto:?}");
            assert!(answer.body == big, "{proto:?}: 4 MiB echoed differ");
        }
    }

    /// POSTs `pieces` to the echoing `path` over `proto` one at a time: each is sent
    /// only once the one before came back, so the exchange ends only if the upload
    /// reaches the guest and the guest's output reaches the client as they are written.
    /// Stops at the first piece whose echo does not come back (the response ended or
    /// failed before it).
    pub async fn ping_pong(&self, proto: Proto, path: &str, pieces: &[&[u8]]) -> Echo {
        match proto {
            Proto::H1 => self.ping_pong_h1(path, pieces).await,
            Proto::H2 => self.ping_pong_h2(path, pieces).await,
            Proto::H3 => self.ping_pong_h3(path, pieces).await,
        }
    }

    async fn ping_pong_h1(&self, path: &str, pieces: &[&[u8]]) -> Echo {
        let tcp = TcpStream::connect(self.server.authority()).await.unwrap();
        let (mut send, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
                .await
                .unwrap();
        tokio::spawn(connection);
        let (upload, body) = mpsc::channel(1);
        // hyper's connection-level client sends the target as given, and no Host.
        let request = http::Request::post(path)
            .header(http::header::HOST, self.server.authority())
            .body(ChannelBody(body))
            .unwrap();
        let sending = send.send_request(request);
        // hyper sends the head with the first piece of the body.
        upload
            .send(Bytes::copy_from_slice(pieces[0]))
            .await
            .unwrap();
        let response = sending.await.unwrap();
        let status = response.status().as_u16();
        let (received, complete) = exchange(upload, pieces, &mut response.into_body()).await;
        Echo {
            status,
            received,
            complete,
        }
    }

    async fn ping_pong_h2(&self, path: &str, pieces: &[&[u8]]) -> Echo {
        let tcp = TcpStream::connect(self.server.authority()).await.unwrap();
        let (mut send, connection) = h2::client::handshake(tcp).await.unwrap();
        tokio::spawn(connection);
        let request = http::Request::post(format!("http://localhost{path}"))
            .body(())
            .unwrap();
        let (response, mut upload) = send.send_request(request, false).unwrap();
        upload
            .send_data(Bytes::copy_from_slice(pieces[0]), false)
            .unwrap();
        let response = response.await.unwrap();
        let status = response.status().as_u16();
        let mut body = response.into_body();
        let (tx, mut rx) = mpsc::channel::<Bytes>(1);
        // The server may have reset the stream: then the rest is not sent.
        let forward = tokio::spawn(async move {
            while let Some(piece) = rx.recv().await {
                if upload.send_data(piece, false).is_err() {
                    return;
                }
            }
            let _ = upload.send_data(Bytes::new(), true);
        });
        let (received, complete) = exchange(tx, pieces, &mut body).await;
        forward.await.unwrap();
        Echo {
            status,
            received,
            complete,
        }
    }

    async fn ping_pong_h3(&self, path: &str, pieces: &[&[u8]]) -> Echo {
        let mut h3 = self.h3().await;
        let stream = h3
            .requests
            .send_request(request("POST", path))
            .await
            .unwrap();
        let (mut upload, mut download) = stream.split();
        upload
            .send_data(Bytes::copy_from_slice(pieces[0]))
            .await
            .unwrap();
        let (tx, mut rx) = mpsc::channel::<Bytes>(1);
        // The server may have stopped the stream: then the rest is not sent.
        let forward = tokio::spawn(async move {
            while let Some(piece) = rx.recv().await {
                if upload.send_data(piece).await.is_err() {
                    return;
                }
            }
            let _ = upload.finish().await;
        });
        let response = download.recv_response().await.unwrap();
        let status = response.status().as_u16();
        let (received, complete) = exchange(tx, pieces, &mut download).await;
        forward.await.unwrap();
        drop(download);
        h3.close().await;
        Echo {
            status,
            received,
            complete,
        }
    }
}

/// One HTTP/3 connection: its requests, and what `close` ends.
struct H3 {
    endpoint: quinn::Endpoint,
    quic: quinn::Connection,
    requests: crate::h3::Requests,
    driving: tokio::task::JoinHandle<()>,
}

impl H3 {
    async fn close(self) {
        drop(self.requests);
        self.quic.close(0u32.into(), b"done");
        self.endpoint.wait_idle().await;
        self.driving.abort();
    }
}

/// The client's side of a ping-pong, the first piece on its way: reads from
/// `download` until all pieces sent came back, sends the next on `upload`, and so on;
/// then ends the upload and reads the rest. What came back, and whether the response
/// ended cleanly after every piece came back.
async fn exchange(
    upload: mpsc::Sender<Bytes>,
    pieces: &[&[u8]],
    download: &mut impl Download,
) -> (Vec<u8>, bool) {
    let mut received = Vec::new();
    let mut expected = 0;
    for (sent, piece) in pieces.iter().enumerate() {
        if sent > 0 && upload.send(Bytes::copy_from_slice(piece)).await.is_err() {
            return (received, false);
        }
        expected += piece.len();
        while received.len() < expected {
            match download.next().await {
                Ok(Some(chunk)) => received.extend_from_slice(&chunk),
                Ok(None) | Err(()) => return (received, false),
            }
        }
    }
    drop(upload);
    loop {
        match download.next().await {
            Ok(Some(chunk)) => received.extend_from_slice(&chunk),
            Ok(None) => return (received, true),
            Err(()) => return (received, false),
        }
    }
}

/// What came back of a ping-pong: the status, the bytes, and whether the response
/// ended cleanly after the echo of every piece.
#[derive(Debug)]
pub struct Echo {
    pub status: u16,
    pub received: Vec<u8>,
    pub complete: bool,
}

/// A response body as each client crate gives it, a piece at a time.
trait Download {
    /// The next piece, `None` at the end, or the error that cut it off.
    async fn next(&mut self) -> Result<Option<Bytes>, ()>;
}

impl Download for hyper::body::Incoming {
    async fn next(&mut self) -> Result<Option<Bytes>, ()> {
        loop {
            let Some(frame) = self.frame().await else {
                return Ok(None);
            };
            if let Ok(data) = frame.map_err(drop)?.into_data() {
                return Ok(Some(data));
            }
        }
    }
}

impl Download for h2::RecvStream {
    async fn next(&mut self) -> Result<Option<Bytes>, ()> {
        let Some(chunk) = self.data().await else {
            return Ok(None);
        };
        let chunk = chunk.map_err(drop)?;
        let _ = self.flow_control().release_capacity(chunk.len());
        Ok(Some(chunk))
    }
}

impl<S: h3::quic::RecvStream> Download for h3::client::RequestStream<S, Bytes> {
    async fn next(&mut self) -> Result<Option<Bytes>, ()> {
        use bytes::Buf;
        let chunk = self.recv_data().await.map_err(drop)?;
        Ok(chunk.map(|mut chunk| chunk.copy_to_bytes(chunk.remaining())))
    }
}

/// A request body fed from a channel: a piece at a time, ended when the sender goes.
struct ChannelBody(mpsc::Receiver<Bytes>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.0
            .poll_recv(cx)
            .map(|piece| piece.map(|b| Ok(Frame::data(b))))
    }
}

/// `method url` (with `body`) with curl, `protocol` saying how (`--http1.1`,
/// `--http2-prior-knowledge`): the final head's protocol (`HTTP/1.1`, `HTTP/2`) and
/// what curl saw, the status as the head arrived (if it did).
pub fn curl_send(
    protocol: &[&str],
    method: &str,
    url: &str,
    body: Option<&[u8]>,
) -> (String, Answer) {
    let dir = temp_dir("proto-curl");
    let (head, out) = (dir.join("head"), dir.join("body"));
    let mut args: Vec<String> = protocol.iter().map(|a| a.to_string()).collect();
    args.extend(["-X", method, "-D"].map(String::from));
    args.push(head.display().to_string());
    args.push("-o".into());
    args.push(out.display().to_string());
    if let Some(body) = body {
        let input = dir.join("in");
        std::fs::write(&input, body).unwrap();
        args.push("--data-binary".into());
        args.push(format!("@{}", input.display()));
    }
    args.push(url.to_string());
    let result = curl(&args.iter().map(String::as_str).collect::<Vec<_>>());
    // The final head: an upload may have a `100 Continue` before it.
    let heads = std::fs::read_to_string(head).unwrap_or_default();
    let head = heads
        .trim_end()
        .rsplit("\r\n\r\n")
        .next()
        .unwrap_or_default();
    let mut lines = head.lines();
    let mut status_line = lines.next().unwrap_or_default().split(' ');
    let version = status_line.next().unwrap_or_default().to_string();
    let status = status_line.next().map_or(0, |code| code.parse().unwrap());
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let answer = Answer {
        status,
        headers,
        // curl exits 0 only for a response that ended cleanly (18: partial body,
        // 52: nothing before the close, 56: reset).
        complete: result.status.success(),
        body: std::fs::read(out).unwrap_or_default(),
    };
    (version, answer)
}
