//! A raw-frames HTTP/2 client for what a well-behaved client library will not send.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use wedge_proto::h2::frame::{self, FrameHead, FrameType, Setting, flags};
use wedge_proto::h2::hpack::{Decoder, Encoder};
use wedge_proto::h2::{ErrorCode, PREFACE, StreamId};

/// A frame the server sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Received {
    /// The error code of a RST_STREAM or GOAWAY.
    pub fn code(&self) -> ErrorCode {
        let at = if self.kind == FrameType::GoAway as u8 {
            4
        } else {
            0
        };
        let raw = u32::from_be_bytes(self.payload[at..at + 4].try_into().unwrap());
        ErrorCode::from_u32(raw).unwrap()
    }
}

/// Frames to a server, and what it sent back.
pub struct Raw<IO> {
    pub io: IO,
    pub encoder: Encoder,
    pub decoder: Decoder,
    buf: Vec<u8>,
    pub out: Vec<u8>,
    /// Whether the server's SETTINGS are acknowledged as [`Raw::next`] reads them, as a
    /// client library does (else the server's SETTINGS timeout ends the connection).
    pub acks_settings: bool,
}

impl<IO: AsyncRead + AsyncWrite + Unpin> Raw<IO> {
    /// Sends the preface and an empty SETTINGS (nothing is flushed until `flush`).
    pub fn new(io: IO) -> Self {
        let mut out = PREFACE.to_vec();
        frame::encode_settings(&mut out, &[]);
        Raw {
            io,
            encoder: Encoder::default(),
            decoder: Decoder::default(),
            buf: Vec::new(),
            out,
            acks_settings: true,
        }
    }

    pub fn settings(&mut self, settings: &[Setting]) -> &mut Self {
        frame::encode_settings(&mut self.out, settings);
        self
    }

    pub fn settings_ack(&mut self) -> &mut Self {
        frame::encode_settings_ack(&mut self.out);
        self
    }

    pub fn headers(&mut self, stream: u32, fields: &[(&str, &str)], end_stream: bool) -> &mut Self {
        let mut block = Vec::new();
        self.encoder.encode(
            fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
            &mut block,
        );
        frame::encode_headers(
            &mut self.out,
            StreamId::new(stream),
            &block,
            end_stream,
            16_384,
        );
        self
    }

    pub fn get(&mut self, stream: u32, path: &str) -> &mut Self {
        self.headers(
            stream,
            &[
                (":method", "GET"),
                (":scheme", "http"),
                (":authority", "localhost"),
                (":path", path),
            ],
            true,
        )
    }

    pub fn post(&mut self, stream: u32, path: &str) -> &mut Self {
        self.headers(
            stream,
            &[
                (":method", "POST"),
                (":scheme", "http"),
                (":authority", "localhost"),
                (":path", path),
            ],
            false,
        )
    }

    pub fn data(&mut self, stream: u32, payload: &[u8], end_stream: bool) -> &mut Self {
        frame::encode_data_head(
            &mut self.out,
            StreamId::new(stream),
            payload.len(),
            end_stream,
        );
        self.out.extend_from_slice(payload);
        self
    }

    pub fn rst(&mut self, stream: u32, code: ErrorCode) -> &mut Self {
        frame::encode_rst_stream(&mut self.out, StreamId::new(stream), code);
        self
    }

    pub fn window_update(&mut self, stream: u32, increment: u32) -> &mut Self {
        if increment == 0 {
            FrameHead::new(FrameType::WindowUpdate, 0, StreamId::new(stream), 4)
                .encode(&mut self.out);
            self.out.extend_from_slice(&[0; 4]);
        } else {
            frame::encode_window_update(&mut self.out, StreamId::new(stream), increment);
        }
        self
    }

    pub fn ping(&mut self) -> &mut Self {
        frame::encode_ping(&mut self.out, [0; 8], false);
        self
    }

    /// Any frame, as given.
    pub fn frame(&mut self, kind: u8, frame_flags: u8, stream: u32, payload: &[u8]) -> &mut Self {
        let len = (payload.len() as u32).to_be_bytes();
        self.out
            .extend_from_slice(&[len[1], len[2], len[3], kind, frame_flags]);
        self.out.extend_from_slice(&stream.to_be_bytes());
        self.out.extend_from_slice(payload);
        self
    }

    /// Writes what was built; a server that already closed is fine.
    pub async fn flush(&mut self) {
        let _ = self.io.write_all(&self.out).await;
        self.out.clear();
    }

    /// The next frame; `None` once the server closed. Bounded so a broken server fails
    /// the test instead of hanging it.
    pub async fn next(&mut self) -> Option<Received> {
        loop {
            if let Some(head) = FrameHead::decode(&self.buf) {
                let end = FrameHead::SIZE + head.len as usize;
                if self.buf.len() >= end {
                    let frame = Received {
                        kind: head.kind,
                        flags: head.flags,
                        stream: head.stream_id.get(),
                        payload: self.buf[FrameHead::SIZE..end].to_vec(),
                    };
                    self.buf.drain(..end);
                    if std::env::var_os("RAW_TRACE").is_some() {
                        eprintln!("recv {frame:?}");
                    }
                    if self.acks_settings
                        && frame.kind == FrameType::Settings as u8
                        && frame.flags & flags::ACK == 0
                    {
                        let mut ack = Vec::new();
                        frame::encode_settings_ack(&mut ack);
                        // A server that already closed is fine.
                        let _ = self.io.write_all(&ack).await;
                    }
                    return Some(frame);
                }
            }
            let mut chunk = [0u8; 16 * 1024];
            let read = tokio::time::timeout(Duration::from_secs(60), self.io.read(&mut chunk))
                .await
                .expect("the server neither answered nor closed");
            match read {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Reads until the server's GOAWAY; its error code.
    pub async fn goaway(&mut self) -> ErrorCode {
        while let Some(frame) = self.next().await {
            if frame.kind == FrameType::GoAway as u8 {
                return frame.code();
            }
        }
        panic!("the server closed without a GOAWAY");
    }

    /// Reads until a RST_STREAM on `stream`; its code.
    pub async fn reset_of(&mut self, stream: u32) -> ErrorCode {
        while let Some(frame) = self.next().await {
            if frame.kind == FrameType::RstStream as u8 && frame.stream == stream {
                return frame.code();
            }
            assert_ne!(frame.kind, FrameType::GoAway as u8, "{frame:?}");
        }
        panic!("the server closed without resetting stream {stream}");
    }

    /// The `:status` of a response head; heads must be decoded in the order received.
    pub fn status(&mut self, head: &Received) -> String {
        let mut status = String::new();
        self.decoder
            .decode(&head.payload, &mut |name: &[u8], value: &[u8]| {
                if name == b":status" {
                    status = String::from_utf8_lossy(value).into_owned();
                }
            })
            .expect("a decodable response head");
        status
    }

    /// Reads until `n` responses ended, in whatever order, keeping no frame: once the
    /// buffer is warm this allocates nothing, so allocation counts are the server's.
    pub async fn responses_end(&mut self, n: usize) {
        let mut ended = 0;
        let mut chunk = [0u8; 16 * 1024];
        while ended < n {
            while let Some(head) = FrameHead::decode(&self.buf) {
                let end = FrameHead::SIZE + head.len as usize;
                if self.buf.len() < end {
                    break;
                }
                assert_ne!(head.kind, FrameType::GoAway as u8, "GOAWAY");
                ended += usize::from(head.flags & flags::END_STREAM != 0);
                self.buf.drain(..end);
            }
            if ended == n {
                break;
            }
            let read = tokio::time::timeout(Duration::from_secs(60), self.io.read(&mut chunk))
                .await
                .expect("the server neither answered nor closed");
            match read {
                Ok(0) | Err(_) => panic!("the server closed early"),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Reads until the response on `stream` ended; the frames read on the way.
    pub async fn response_end(&mut self, stream: u32) -> Vec<Received> {
        let mut frames = Vec::new();
        while let Some(frame) = self.next().await {
            let ends = frame.stream == stream
                && frame.flags & flags::END_STREAM != 0
                && (frame.kind == FrameType::Data as u8 || frame.kind == FrameType::Headers as u8);
            assert_ne!(frame.kind, FrameType::GoAway as u8, "{frame:?}");
            frames.push(frame);
            if ends {
                return frames;
            }
        }
        panic!("the server closed before stream {stream} ended");
    }
}
