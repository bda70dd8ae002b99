//! The server side of one HTTP/3 connection (RFC 9114), sans IO.
//!
//! The QUIC driver feeds what each stream delivered through [`Connection::recv`] (with
//! FIN) and reports peer resets through [`Connection::reset`]; the connection reports
//! requests, body octets, trailers, ends and errors as [`Event`]s. What we send is
//! appended to the caller's buffer for the stream it belongs to: our control stream's
//! opening ([`Connection::open_control_stream`]) and GOAWAY ([`Connection::goaway`]),
//! response heads and trailers ([`Connection::send_headers`]) and DATA heads
//! ([`Connection::send_data_head`]). Nothing here reads a clock or a socket.
//!
//! The driver's side of the bargain:
//! - Open a unidirectional stream first and write [`Connection::open_control_stream`]'s
//!   octets on it; never finish it.
//! - Feed each stream's octets in order, as they are read, with FIN when the stream
//!   ends; peer resets go to [`Connection::reset`]. An `Err` closes the connection with
//!   its code (CONNECTION_CLOSE); every later call returns the same `Err`.
//! - After [`Event::StreamError`], [`Event::HeadTooLarge`] or [`Event::StopSending`] on a
//!   stream, or [`Event::End`], feed that stream nothing more. After [`Event::Blocked`],
//!   hold the stream's unread octets until it is unblocked (only with a QPACK dynamic
//!   table, `Config::qpack_max_table_capacity` > 0).
//! - After each call, [`Connection::poll_decoder_stream`] for what our QPACK decoder
//!   stream owes the client (never anything without a dynamic table).
//! - Read request bodies only as the handler reads them: [`Event::Data`] ranges point
//!   into the input just given, so the octets live as long as the driver keeps them.
//! - Give every head and trailers back with [`Connection::give_back`] when the handler
//!   is done with them; that is what makes a warm connection allocation-free.

mod control;
mod pool;
mod request;
mod uni;

#[cfg(test)]
mod tests;

use core::ops::Range;

use crate::budget::Budget;
use crate::h3::error::{ErrorCode, H3Error};
use crate::h3::frame::{self, Setting};
use crate::h3::qpack::{self, DEFAULT_MAX_FIELD_SECTION_SIZE};
use crate::h3::varint;

use control::ControlStream;
use pool::{Pools, RequestHead, RequestStream};
use uni::PendingUni;

/// What a connection enforces and advertises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// SETTINGS_MAX_FIELD_SECTION_SIZE: the largest request head or trailers we take.
    pub max_field_section_size: u64,
    /// SETTINGS_QPACK_MAX_TABLE_CAPACITY: the QPACK dynamic table the client may fill,
    /// memory we keep per connection. With 0 no field section ever blocks and we send no
    /// decoder stream.
    pub qpack_max_table_capacity: u64,
    /// SETTINGS_QPACK_BLOCKED_STREAMS: request streams that may wait for the client's
    /// encoder stream at once, each holding one field section.
    pub qpack_blocked_streams: u64,
    /// Requests whose handler had started that the client cancelled (RESET_STREAM or
    /// STOP_SENDING, see [`Connection::peer_cancelled`]) before their response ended:
    /// rapid reset (CVE-2023-44487). Earned back per completed response; past it the
    /// connection fails with H3_EXCESSIVE_LOAD.
    pub peer_reset_budget: u32,
    /// Streams whose request had been handed out that the client's frames made us reset
    /// (content-length mismatch, bad trailers): MadeYouReset (CVE-2025-8671). Earned
    /// back per completed response; past it, H3_EXCESSIVE_LOAD.
    pub server_reset_budget: u32,
    /// Frames that move nothing (empty DATA, reserved or unknown types) on request and
    /// control streams. Earned back by request heads and body octets; past it,
    /// H3_EXCESSIVE_LOAD.
    pub empty_frame_flood_budget: u32,
}

impl Default for Config {
    /// A 16 KiB field section limit and no QPACK dynamic table.
    fn default() -> Self {
        Config {
            max_field_section_size: DEFAULT_MAX_FIELD_SECTION_SIZE as u64,
            qpack_max_table_capacity: 0,
            qpack_blocked_streams: 0,
            peer_reset_budget: 200,
            server_reset_budget: 100,
            empty_frame_flood_budget: 100,
        }
    }
}

/// What the peer's octets meant.
#[derive(Debug)]
pub enum Event {
    /// A valid request head. Give it back with [`Connection::give_back`] once the handler
    /// no longer looks at it.
    Request {
        /// The request stream.
        stream: u64,
        /// The head.
        head: RequestHead,
    },
    /// Request body octets at `range` of the input given to [`Connection::recv`].
    Data {
        /// The request stream.
        stream: u64,
        /// Where the octets are in the input.
        range: Range<usize>,
    },
    /// The request's trailers (fields only). Give them back like a head.
    Trailers {
        /// The request stream.
        stream: u64,
        /// The trailer fields.
        trailers: RequestHead,
    },
    /// The request is complete: its stream ended cleanly and its body matched any
    /// content-length.
    End {
        /// The request stream.
        stream: u64,
    },
    /// The request's head passed SETTINGS_MAX_FIELD_SECTION_SIZE (RFC 9114 §4.2.2), like
    /// HTTP/2's 431: answer `:status 431` (see [`Connection::send_headers`]) and finish
    /// the stream, stop reading it with STOP_SENDING(H3_NO_ERROR) (§4.1.1), and feed it no
    /// more. The connection is unharmed.
    HeadTooLarge {
        /// The request stream.
        stream: u64,
    },
    /// The request's field section needs QPACK entries that have not arrived (RFC 9204
    /// §2.1.2): `input[consumed..]` of the octets just given was not read. Hold it (and
    /// the FIN) and read nothing more from the stream until its [`Event::Request`] or
    /// [`Event::Trailers`] comes (from a later [`Connection::recv`] on the client's
    /// encoder stream), then feed it again; or drop it if the stream fails instead. Only
    /// with a non-zero `qpack_max_table_capacity`.
    Blocked {
        /// The request stream.
        stream: u64,
        /// How much of the input was read.
        consumed: usize,
    },
    /// The request stream failed: send STOP_SENDING and RESET_STREAM with `code`, and
    /// feed it no more. A request already handed out is void.
    StreamError {
        /// The request stream.
        stream: u64,
        /// The code to send.
        code: ErrorCode,
    },
    /// A unidirectional stream of a type we do not use (§6.2.3): stop reading it with
    /// STOP_SENDING(`code`), and feed it no more.
    StopSending {
        /// The stream.
        stream: u64,
        /// The code to send.
        code: ErrorCode,
    },
    /// The client sent GOAWAY: it is closing; `id` is the push id it last takes (§5.2).
    PeerGoaway {
        /// The push id.
        id: u64,
    },
}

/// The connection failed: close it with this application error code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionError(pub ErrorCode);

/// Who opened a stream and which way it goes: its id's two low bits (RFC 9000 §2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StreamKind {
    /// Client-initiated bidirectional: a request.
    Request,
    /// Client-initiated unidirectional: control, QPACK, push or unknown, by its type.
    ClientUni,
    /// One of ours: the peer cannot send on it.
    Ours,
}

fn stream_kind(id: u64) -> StreamKind {
    match id & 0x3 {
        0x0 => StreamKind::Request,
        0x2 => StreamKind::ClientUni,
        _ => StreamKind::Ours,
    }
}

/// The server side of one connection.
pub struct Connection {
    config: Config,
    failed: Option<ErrorCode>,
    decoder: qpack::Decoder,
    encoder: qpack::Encoder,
    /// The client's control stream, once its type arrived.
    control: Option<ControlStream>,
    /// The client's QPACK encoder and decoder streams, once their types arrived.
    qpack_encoder_stream: Option<u64>,
    qpack_decoder_stream: Option<u64>,
    /// Unidirectional streams whose type has not arrived whole.
    pending_uni: Vec<PendingUni>,
    /// Request streams still receiving.
    requests: Vec<RequestStream>,
    pools: Pools,
    /// The lowest request stream id not yet seen: our GOAWAY's id.
    next_request: u64,
    /// The id our GOAWAY carried: request streams from it on are rejected.
    goaway_sent: Option<u64>,
    /// The push id of the client's last GOAWAY: later ones must not increase it.
    peer_goaway: Option<u64>,
    /// The client's MAX_PUSH_ID: it must not decrease; CANCEL_PUSH may not pass it.
    max_push_id: Option<u64>,
    /// The client's SETTINGS_MAX_FIELD_SECTION_SIZE; unlimited until it says otherwise.
    peer_max_field_section_size: u64,
    /// The encoded field section being built.
    section: Vec<u8>,
    /// Our QPACK decoder stream's type went out.
    decoder_stream_open: bool,
    /// See the `Config` fields of the same names.
    peer_resets: Budget,
    server_resets: Budget,
    empty_frames: Budget,
}

fn saturating_usize(value: u64) -> usize {
    usize::try_from(value).unwrap_or(usize::MAX)
}

impl Connection {
    /// A connection that enforces `config`.
    pub fn new(config: Config) -> Self {
        Connection {
            decoder: qpack::Decoder::new(
                saturating_usize(config.max_field_section_size),
                saturating_usize(config.qpack_max_table_capacity),
                saturating_usize(config.qpack_blocked_streams),
            ),
            encoder: qpack::Encoder::default(),
            config,
            failed: None,
            control: None,
            qpack_encoder_stream: None,
            qpack_decoder_stream: None,
            pending_uni: Vec::new(),
            requests: Vec::new(),
            pools: Pools::default(),
            next_request: 0,
            goaway_sent: None,
            peer_goaway: None,
            max_push_id: None,
            peer_max_field_section_size: u64::MAX,
            section: Vec::new(),
            decoder_stream_open: false,
            peer_resets: Budget::new(config.peer_reset_budget),
            server_resets: Budget::new(config.server_reset_budget),
            empty_frames: Budget::new(config.empty_frame_flood_budget),
        }
    }

    /// Appends the opening of our control stream: its type and our SETTINGS (§6.2.1).
    /// Send it first thing on a new unidirectional stream, and never finish that stream.
    /// Our encoder uses no dynamic table, so we never open a QPACK encoder stream.
    pub fn open_control_stream(&self, out: &mut Vec<u8>) {
        varint::encode(uni::CONTROL, out);
        let config = &self.config;
        let settings = [
            Setting::MaxFieldSectionSize(config.max_field_section_size),
            Setting::QpackMaxTableCapacity(config.qpack_max_table_capacity),
            Setting::QpackBlockedStreams(config.qpack_blocked_streams),
        ];
        // The QPACK settings default to 0 (RFC 9204 §5): sent only when not.
        let n = if config.qpack_max_table_capacity == 0 {
            1
        } else {
            3
        };
        frame::encode_settings(&settings[..n], out);
    }

    /// Appends what our QPACK decoder stream owes the client's encoder (RFC 9204 §4.4):
    /// the stream's type the first time, then acknowledgments, cancellations and insert
    /// count increments. Call it after [`Connection::recv`] and [`Connection::reset`];
    /// when it first appends, open a unidirectional stream for these octets and never
    /// finish it. Nothing ever comes without a dynamic table.
    pub fn poll_decoder_stream(&mut self, out: &mut Vec<u8>) {
        let start = out.len();
        if !self.decoder_stream_open {
            varint::encode(uni::QPACK_DECODER, out);
        }
        let instructions = out.len();
        self.decoder.take_instructions(out);
        if out.len() == instructions {
            out.truncate(start);
        } else {
            self.decoder_stream_open = true;
        }
    }

    /// Takes what stream `stream` delivered, `fin` if the peer finished it there. Events
    /// are appended to `events`; `Event::Data` ranges point into `input`, which is taken
    /// whole (a partial frame is kept).
    pub fn recv(
        &mut self,
        stream: u64,
        input: &[u8],
        fin: bool,
        events: &mut Vec<Event>,
    ) -> Result<(), ConnectionError> {
        if let Some(code) = self.failed {
            return Err(ConnectionError(code));
        }
        let result = match stream_kind(stream) {
            StreamKind::Request => self.recv_request(stream, input, fin, events),
            StreamKind::ClientUni => self.recv_uni(stream, input, fin, events),
            StreamKind::Ours => Err(H3Error::Connection(ErrorCode::StreamCreationError)),
        };
        self.check(result)
    }

    /// The peer reset stream `stream` (RESET_STREAM). A request's state is dropped; the
    /// driver still owns any head it was given. Resetting a critical stream fails the
    /// connection (§6.2.1, RFC 9204 §4.2).
    pub fn reset(&mut self, stream: u64) -> Result<(), ConnectionError> {
        if let Some(code) = self.failed {
            return Err(ConnectionError(code));
        }
        if let Some(i) = self.requests.iter().position(|s| s.id == stream) {
            // Its field sections will never all be decoded (RFC 9204 §2.2.2.2).
            self.decoder.cancel_stream(stream);
            self.retire(i);
        }
        self.pending_uni.retain(|p| p.id != stream);
        let result = match self.uni_stream(stream) {
            Some(_) => Err(H3Error::Connection(ErrorCode::ClosedCriticalStream)),
            None => Ok(()),
        };
        self.check(result)
    }

    /// The client cancelled a request whose handler had started before its response
    /// ended (RESET_STREAM on the request, or STOP_SENDING on the response): call it once
    /// per such stream. Past `peer_reset_budget` this is rapid reset (CVE-2023-44487) and
    /// the connection fails with H3_EXCESSIVE_LOAD.
    pub fn peer_cancelled(&mut self) -> Result<(), ConnectionError> {
        if let Some(code) = self.failed {
            return Err(ConnectionError(code));
        }
        let result = match self.peer_resets.spend() {
            true => Ok(()),
            false => Err(H3Error::Connection(ErrorCode::ExcessiveLoad)),
        };
        self.check(result)
    }

    /// A response went out whole: the reset budgets earn one back.
    pub fn response_completed(&mut self) {
        self.peer_resets.refill();
        self.server_resets.refill();
    }

    /// Starts a graceful shutdown (§5.2): appends a GOAWAY to our control stream's bytes.
    /// Requests on streams already seen are still served; later ones are rejected with
    /// H3_REQUEST_REJECTED. Calling it again never raises the id.
    pub fn goaway(&mut self, control_out: &mut Vec<u8>) {
        let id = self
            .goaway_sent
            .map_or(self.next_request, |sent| sent.min(self.next_request));
        self.goaway_sent = Some(id);
        frame::encode_goaway(id, control_out);
    }

    /// Appends a HEADERS frame for a response head (`:status` first) or trailers to a
    /// request stream's bytes.
    pub fn send_headers<'f>(
        &mut self,
        fields: impl IntoIterator<Item = (&'f [u8], &'f [u8])>,
        out: &mut Vec<u8>,
    ) {
        self.section.clear();
        self.encoder.encode(fields, &mut self.section);
        frame::encode_headers(&self.section, out);
    }

    /// Appends the head of a DATA frame carrying `len` octets of response body to a
    /// request stream's bytes; the octets follow it, written by the driver from where
    /// they are.
    pub fn send_data_head(&self, len: usize, out: &mut Vec<u8>) {
        frame::encode_data_head(len as u64, out);
    }

    /// The largest field section the client accepts (RFC 9114 §4.2.2): a response head
    /// or trailers past it should not be sent (answer 500 instead, or reset the stream).
    pub fn peer_max_field_section_size(&self) -> u64 {
        self.peer_max_field_section_size
    }

    /// Takes back a head or trailers from an event, for the next request to reuse.
    pub fn give_back(&mut self, head: RequestHead) {
        self.pools.give_back_head(head);
    }

    /// Request streams the core still keeps state for: those still receiving, not yet
    /// ended or reset. A driver that retires a stream early must leave none behind.
    pub fn open_requests(&self) -> usize {
        self.requests.len()
    }

    /// Records a connection error: every later call reports it.
    fn check(&mut self, result: Result<(), H3Error>) -> Result<(), ConnectionError> {
        match result {
            Ok(()) => Ok(()),
            Err(e) => {
                let code = e.code();
                self.failed = Some(code);
                Err(ConnectionError(code))
            }
        }
    }

    /// Drops a finished request stream's state into the pool.
    fn retire(&mut self, index: usize) {
        let stream = self.requests.swap_remove(index);
        self.pools.give_back_stream(stream);
    }
}
