//! The server side of one HTTP/2 connection (RFC 9113), sans IO: octets from the peer go
//! in through [`Connection::recv`], which appends the frames owed to the peer to an output
//! buffer and reports requests, body octets, trailers and resets as [`Event`]s. Responses
//! go out through [`Connection::send_head`] and [`Connection::send_data`], which spend
//! flow credit. Nothing here reads a clock or a socket.
//!
//! A response that ends before its request does leaves the stream finished
//! (half-closed local) rather than reset: what the peer still sends on it is judged as
//! on an open stream (flow control, content-length, trailers, stream states) and
//! discarded, until the request ends, the peer has no window left to send in, or
//! [`ConnConfig::finished_stream_frames`] frames came; then RST_STREAM(NO_ERROR) asks
//! it to stop (§8.1). An early RST_STREAM would oblige us to ignore everything after it
//! (§5.1, closed), however malformed, so it is sent only at the bound.

mod budget;
mod config;
mod flow;
mod stream;

#[cfg(test)]
mod tests;

use core::ops::Range;

pub use config::ConnConfig;

use crate::budget::Budget;
use crate::field_coding::FieldSink;
use crate::h2::error::{ErrorCode, H2Error};
use crate::h2::frame::{
    self, DEFAULT_INITIAL_WINDOW_SIZE, DEFAULT_MAX_FRAME_SIZE, Frame, FrameHead,
    MAX_MAX_FRAME_SIZE, MAX_WINDOW_SIZE, Setting,
};
use crate::h2::hpack::{Decoder, Encoder, HpackError};
use crate::h2::{PREFACE, StreamId};
use crate::head::validate::{Discard, HeadSink, Rules, TrailerSink};
use crate::head::{HeadPool, RequestHead};
use budget::Budgets;
use flow::Window;
use stream::{ClosedRing, Stream, Streams};

/// What the peer's octets meant to the application.
#[derive(Debug)]
pub enum Event {
    /// A request head; with `end_stream` no body follows. Give the head back with
    /// [`Connection::give_back`] once the handler no longer looks at it.
    Request {
        stream: StreamId,
        head: RequestHead,
        end_stream: bool,
    },
    /// Body octets at `range` of the input given to [`Connection::recv`]; `end_stream`
    /// ends the body (the range may then be empty). Report them with
    /// [`Connection::release`] once the handler has read them.
    Data {
        stream: StreamId,
        range: Range<usize>,
        end_stream: bool,
    },
    /// The request's trailers (fields only); an [`Event::Data`] ending the body follows.
    /// Give them back like a head.
    Trailers {
        stream: StreamId,
        trailers: RequestHead,
    },
    /// The stream is gone: the peer reset it, or we did because of its frames.
    Reset { stream: StreamId, code: ErrorCode },
}

/// The connection failed with this code; a GOAWAY carrying it was appended to the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionError(pub ErrorCode);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for the 24-octet client preface.
    Preface,
    /// The preface is in; the next frame must be the peer's SETTINGS (§3.4).
    FirstSettings,
    Open,
    /// A connection error was sent.
    Failed(ErrorCode),
}

/// What a field block in progress is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BlockUse {
    Request,
    Trailers,
    /// Decoded to keep HPACK in step, then dropped; `Some` refuses or resets the stream.
    Discard(Option<ErrorCode>),
}

/// A field block split over HEADERS and CONTINUATION (§6.10).
#[derive(Clone, Copy, Debug)]
struct OpenBlock {
    stream: StreamId,
    end_stream: bool,
    usage: BlockUse,
    continuations: u32,
}

/// The server side of one connection.
pub struct Connection {
    config: ConnConfig,
    phase: Phase,
    decoder: Decoder,
    encoder: Encoder,
    streams: Streams,
    /// Streams we reset: the peer's frames in flight on them are ignored.
    recently_reset: ClosedRing,
    /// Streams closed otherwise: frames on them are STREAM_CLOSED errors.
    recently_closed: ClosedRing,
    pool: HeadPool,
    /// The highest stream the peer opened (accepted or not): ids below it are not idle.
    last_peer_stream: StreamId,
    /// The highest stream handed to the application: GOAWAY's last stream id.
    last_processed: StreamId,
    /// Our GOAWAY went out: streams above `last_processed` are ignored.
    going_away: bool,
    /// Our SETTINGS await the peer's ACK.
    settings_unacked: bool,
    peer_initial_window: u32,
    peer_max_frame_size: u32,
    send: Window,
    recv: Window,
    /// Connection credit owed to the peer for DATA received this pass.
    recv_credit: u32,
    block: Option<OpenBlock>,
    fragments: Vec<u8>,
    budgets: Budgets,
    /// The encoded response head being built.
    head_buf: Vec<u8>,
    /// DATA octets sent, ever: response progress.
    data_sent: u64,
}

impl Connection {
    /// A connection that will enforce `config`; `out` receives our SETTINGS (and the
    /// connection window increase), which may be sent before the client preface arrives.
    pub fn new(mut config: ConnConfig, out: &mut Vec<u8>) -> Self {
        // Limits outside what SETTINGS may carry (§6.5.2) are clamped, not put on the wire.
        config.initial_window_size = config.initial_window_size.min(MAX_WINDOW_SIZE);
        config.connection_window_size = config.connection_window_size.min(MAX_WINDOW_SIZE);
        config.max_frame_size = config
            .max_frame_size
            .clamp(DEFAULT_MAX_FRAME_SIZE, MAX_MAX_FRAME_SIZE);
        let mut settings = [Setting::EnablePush(false); 6];
        let mut n = 0;
        for setting in [
            Setting::MaxConcurrentStreams(config.max_concurrent_streams),
            Setting::InitialWindowSize(config.initial_window_size),
            Setting::MaxFrameSize(config.max_frame_size),
            Setting::MaxHeaderListSize(config.max_header_list_size),
            Setting::HeaderTableSize(config.header_table_size),
        ] {
            n += 1;
            settings[n] = setting;
        }
        frame::encode_settings(out, &settings[..=n]);
        let extra = config
            .connection_window_size
            .saturating_sub(DEFAULT_INITIAL_WINDOW_SIZE);
        if extra > 0 {
            frame::encode_window_update(out, StreamId::CONNECTION, extra);
        }
        let budgets = Budgets {
            peer_resets: Budget::new(config.peer_reset_budget),
            server_resets: Budget::new(config.server_reset_budget),
            settings: Budget::new(config.settings_flood_budget),
            pings: Budget::new(config.ping_flood_budget),
            empty_data: Budget::new(config.empty_data_flood_budget),
            ignored: Budget::new(config.ignored_frame_flood_budget),
        };
        Connection {
            // The table starts at the RFC's 4096 until the peer acknowledges ours.
            decoder: Decoder::new(4096, config.max_header_list_size as usize),
            encoder: Encoder::default(),
            // Preallocated up to a point: a huge limit must not be a huge allocation.
            streams: Streams::with_capacity((config.max_concurrent_streams as usize).min(256)),
            recently_reset: ClosedRing::for_streams(config.max_concurrent_streams),
            recently_closed: ClosedRing::for_streams(config.max_concurrent_streams),
            pool: HeadPool::default(),
            phase: Phase::Preface,
            last_peer_stream: StreamId::CONNECTION,
            last_processed: StreamId::CONNECTION,
            going_away: false,
            settings_unacked: true,
            peer_initial_window: DEFAULT_INITIAL_WINDOW_SIZE,
            peer_max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            send: Window::new(DEFAULT_INITIAL_WINDOW_SIZE),
            recv: Window::new(DEFAULT_INITIAL_WINDOW_SIZE.max(config.connection_window_size)),
            recv_credit: 0,
            block: None,
            fragments: Vec::new(),
            budgets,
            head_buf: Vec::new(),
            data_sent: 0,
            config,
        }
    }

    /// Consumes whole frames from `input`, returning how many octets were used; the rest
    /// must be offered again with more. Frames owed to the peer are appended to `out`.
    pub fn recv(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        events: &mut Vec<Event>,
    ) -> Result<usize, ConnectionError> {
        if let Phase::Failed(code) = self.phase {
            return Err(ConnectionError(code));
        }
        let mut pos = 0;
        if self.phase == Phase::Preface {
            let seen = input.len().min(PREFACE.len());
            if input[..seen] != PREFACE[..seen] {
                return Err(self.fail(ErrorCode::ProtocolError, out));
            }
            if seen < PREFACE.len() {
                return Ok(0);
            }
            pos = PREFACE.len();
            self.phase = Phase::FirstSettings;
        }
        let result = self.frames(input, &mut pos, out, events);
        if self.recv_credit > 0 {
            frame::encode_window_update(out, StreamId::CONNECTION, self.recv_credit);
            self.recv.grow(i64::from(self.recv_credit)).ok();
            self.recv_credit = 0;
        }
        match result {
            Ok(()) => Ok(pos),
            Err(code) => Err(self.fail(code, out)),
        }
    }

    fn frames(
        &mut self,
        input: &[u8],
        pos: &mut usize,
        out: &mut Vec<u8>,
        events: &mut Vec<Event>,
    ) -> Result<(), ErrorCode> {
        while let Some(head) = FrameHead::decode(&input[*pos..]) {
            head.check_len(self.config.max_frame_size)
                .map_err(H2Error::code)?;
            let start = *pos + FrameHead::SIZE;
            let end = start + head.len as usize;
            let Some(payload) = input.get(start..end) else {
                break;
            };
            *pos = end;
            match Frame::decode(&head, payload) {
                Ok(frame) => self.on_frame(frame, input, out, events)?,
                Err(H2Error::Connection(code)) => return Err(code),
                Err(H2Error::Stream(id, code)) => {
                    // While a field block is open only its CONTINUATIONs may arrive, and
                    // the first frame must be SETTINGS (§3.4).
                    if self.block.is_some() || self.phase == Phase::FirstSettings {
                        return Err(ErrorCode::ProtocolError);
                    }
                    if self.is_idle(id) {
                        // No RST_STREAM on an idle stream (§6.4). A PRIORITY of the wrong
                        // size is forgotten: the stream may still open, and PRIORITY
                        // carries nothing we use. One making the stream depend on itself
                        // (§5.3.1) must not pass unanswered, and cannot be reset: the
                        // connection error the RFC allows for any stream error.
                        let priority = head.frame_type() == Some(frame::FrameType::Priority);
                        if !priority || code == ErrorCode::ProtocolError {
                            return Err(ErrorCode::ProtocolError);
                        }
                        continue;
                    }
                    self.stream_error(id, code, out, events)?;
                }
            }
        }
        Ok(())
    }

    fn on_frame(
        &mut self,
        frame: Frame<'_>,
        input: &[u8],
        out: &mut Vec<u8>,
        events: &mut Vec<Event>,
    ) -> Result<(), ErrorCode> {
        if self.phase == Phase::FirstSettings {
            match frame {
                Frame::Settings(s) if !s.ack => self.phase = Phase::Open,
                _ => return Err(ErrorCode::ProtocolError),
            }
        }
        if self.block.is_some() && !matches!(frame, Frame::Continuation(_)) {
            return Err(ErrorCode::ProtocolError);
        }
        match frame {
            Frame::Data(data) => self.on_data(data, input, out, events),
            Frame::Headers(headers) => self.on_headers(headers, out, events),
            Frame::Continuation(c) => self.on_continuation(c, out, events),
            // Cheap to skip, but a stream of them is work with nothing asked.
            Frame::Priority(_) | Frame::Unknown(_) => {
                if !self.budgets.ignored.spend() {
                    return Err(ErrorCode::EnhanceYourCalm);
                }
                Ok(())
            }
            Frame::RstStream(rst) => self.on_rst_stream(rst, events),
            Frame::Settings(settings) => self.on_settings(settings, out),
            Frame::PushPromise(_) => Err(ErrorCode::ProtocolError),
            Frame::Ping(ping) => {
                if !ping.ack {
                    if !self.budgets.pings.spend() {
                        return Err(ErrorCode::EnhanceYourCalm);
                    }
                    frame::encode_ping(out, ping.payload, true);
                }
                Ok(())
            }
            // The peer stops opening streams; ours finish as usual.
            Frame::GoAway(_) => Ok(()),
            Frame::WindowUpdate(update) => self.on_window_update(update, out, events),
        }
    }

    /// A stream the peer opened (or may still open) above our GOAWAY's last stream id:
    /// its frames are ignored silently (§6.8), costing no reset budget.
    fn ignored_after_goaway(&self, id: StreamId) -> bool {
        self.going_away && id.get() > self.last_processed.get()
    }

    /// Not yet opened by the peer (§5.1).
    fn is_idle(&self, id: StreamId) -> bool {
        id.get() > self.last_peer_stream.get()
    }

    fn on_data(
        &mut self,
        data: frame::Data<'_>,
        input: &[u8],
        out: &mut Vec<u8>,
        events: &mut Vec<Event>,
    ) -> Result<(), ErrorCode> {
        let id = data.stream_id;
        if self.is_idle(id) {
            return Err(ErrorCode::ProtocolError);
        }
        if !self.recv.take(data.flow_len) {
            return Err(ErrorCode::FlowControlError);
        }
        // Credited as buffered (DESIGN 4.1): one idle reader cannot starve the others.
        self.recv_credit += data.flow_len;
        if self.ignored_after_goaway(id) {
            return Ok(());
        }
        let Some(stream) = self.streams.get(id) else {
            if self.recently_reset.contains(id) {
                return Ok(());
            }
            return self.stream_error(id, ErrorCode::StreamClosed, out, events);
        };
        if stream.recv_closed {
            return self.stream_error(id, ErrorCode::StreamClosed, out, events);
        }
        if !stream.recv.take(data.flow_len) {
            return self.stream_error(id, ErrorCode::FlowControlError, out, events);
        }
        stream.received += data.payload.len() as u64;
        let length_ok = match stream.content_length {
            Some(len) if data.end_stream => stream.received == len,
            Some(len) => stream.received <= len,
            None => true,
        };
        if !length_ok {
            return self.stream_error(id, ErrorCode::ProtocolError, out, events);
        }
        // Padding never reaches the handler: it is credited back with the next update.
        stream.recv_unacked += data.flow_len - data.payload.len() as u32;
        let finished = stream.is_finished();
        if data.payload.is_empty() {
            if !data.end_stream && !self.budgets.empty_data.spend() {
                return Err(ErrorCode::EnhanceYourCalm);
            }
        } else {
            self.budgets.productive_frame();
        }
        if finished {
            // Judged, and nobody reads it.
            match data.end_stream {
                true => self.close_recv(id),
                false => self.finished_frame(id, out),
            }
            return Ok(());
        }
        let start = data.payload.as_ptr() as usize - input.as_ptr() as usize;
        events.push(Event::Data {
            stream: id,
            range: start..start + data.payload.len(),
            end_stream: data.end_stream,
        });
        if data.end_stream {
            self.close_recv(id);
        }
        Ok(())
    }

    fn on_headers(
        &mut self,
        headers: frame::Headers<'_>,
        out: &mut Vec<u8>,
        events: &mut Vec<Event>,
    ) -> Result<(), ErrorCode> {
        let id = headers.stream_id;
        let usage = if let Some(stream) = self.streams.get(id) {
            if stream.recv_closed {
                BlockUse::Discard(Some(ErrorCode::StreamClosed))
            } else if !headers.end_stream {
                // Trailers must end the stream (§8.1).
                BlockUse::Discard(Some(ErrorCode::ProtocolError))
            } else {
                BlockUse::Trailers
            }
        } else if self.recently_reset.contains(id)
            || (self.ignored_after_goaway(id) && !self.is_idle(id))
        {
            // Trailers on a stream ignored since our GOAWAY are ignored too.
            BlockUse::Discard(None)
        } else if self.recently_closed.contains(id) {
            // A stream the peer ended or reset (§5.1).
            return Err(ErrorCode::StreamClosed);
        } else if !self.is_idle(id) {
            // Below an id already used: unexpected (§5.1.1).
            return Err(ErrorCode::ProtocolError);
        } else if !id.is_client_initiated() {
            return Err(ErrorCode::ProtocolError);
        } else {
            self.last_peer_stream = id;
            if self.going_away {
                BlockUse::Discard(None)
            } else if self.streams.len() >= self.config.max_concurrent_streams as usize {
                BlockUse::Discard(Some(ErrorCode::RefusedStream))
            } else {
                BlockUse::Request
            }
        };
        let usage = match (usage, headers.stream_error()) {
            (BlockUse::Discard(None), _) | (_, None) => usage,
            (_, Some(e)) => BlockUse::Discard(Some(e.code())),
        };
        let block = OpenBlock {
            stream: id,
            end_stream: headers.end_stream,
            usage,
            continuations: 0,
        };
        if headers.end_headers {
            return self.end_block(block, headers.fragment, out, events);
        }
        self.fragments.clear();
        self.append_fragment(headers.fragment)?;
        self.block = Some(block);
        Ok(())
    }

    fn on_continuation(
        &mut self,
        c: frame::Continuation<'_>,
        out: &mut Vec<u8>,
        events: &mut Vec<Event>,
    ) -> Result<(), ErrorCode> {
        let Some(mut block) = self.block.filter(|b| b.stream == c.stream_id) else {
            return Err(ErrorCode::ProtocolError);
        };
        block.continuations += 1;
        if block.continuations > self.config.max_continuation_frames {
            return Err(ErrorCode::EnhanceYourCalm);
        }
        self.append_fragment(c.fragment)?;
        if !c.end_headers {
            self.block = Some(block);
            return Ok(());
        }
        self.block = None;
        let fragments = core::mem::take(&mut self.fragments);
        let result = self.end_block(block, &fragments, out, events);
        self.fragments = fragments;
        result
    }

    /// Buffers a fragment; an encoded block far past the header list limit is a flood,
    /// not a request (CONTINUATION flood).
    fn append_fragment(&mut self, fragment: &[u8]) -> Result<(), ErrorCode> {
        let cap = 2 * self.config.max_header_list_size as usize + 1024;
        if self.fragments.len() + fragment.len() > cap {
            return Err(ErrorCode::EnhanceYourCalm);
        }
        self.fragments.extend_from_slice(fragment);
        Ok(())
    }

    fn end_block(
        &mut self,
        block: OpenBlock,
        fragment: &[u8],
        out: &mut Vec<u8>,
        events: &mut Vec<Event>,
    ) -> Result<(), ErrorCode> {
        let id = block.stream;
        match block.usage {
            BlockUse::Discard(reset) => {
                self.decode(fragment, &mut Discard)?;
                match reset {
                    // A refusal starts no work: it costs no reset budget.
                    Some(ErrorCode::RefusedStream) => {
                        frame::encode_rst_stream(out, id, ErrorCode::RefusedStream);
                        self.recently_reset.remember(id);
                        Ok(())
                    }
                    Some(code) => self.stream_error(id, code, out, events),
                    None => Ok(()),
                }
            }
            BlockUse::Trailers => {
                let mut trailers = self.pool.rent();
                let mut sink = TrailerSink::new(&mut trailers);
                let fits = self.decode(fragment, &mut sink)?;
                let valid = sink.finish();
                let length_ok = self
                    .streams
                    .get(id)
                    .is_some_and(|s| s.content_length.is_none_or(|len| len == s.received));
                // Trailers reach a handler already running: past the header list limit
                // they cannot be answered 431, and are not handed on cut short.
                let refused = match (fits, valid && length_ok) {
                    (false, _) => Some(ErrorCode::EnhanceYourCalm),
                    (true, false) => Some(ErrorCode::ProtocolError),
                    (true, true) => None,
                };
                if let Some(code) = refused {
                    self.pool.give_back(trailers);
                    return self.stream_error(id, code, out, events);
                }
                if self.streams.get(id).is_some_and(|s| s.is_finished()) {
                    // Its handler is done: judged, and handed to nobody.
                    self.pool.give_back(trailers);
                } else {
                    events.push(Event::Trailers {
                        stream: id,
                        trailers,
                    });
                    events.push(Event::Data {
                        stream: id,
                        range: 0..0,
                        end_stream: true,
                    });
                }
                self.close_recv(id);
                Ok(())
            }
            // The block ended after our GOAWAY named a lower last stream id.
            BlockUse::Request if self.going_away => {
                self.decode(fragment, &mut Discard)?;
                Ok(())
            }
            BlockUse::Request => self.open_stream(block, fragment, out, events),
        }
    }

    fn decode<S: FieldSink>(&mut self, block: &[u8], sink: &mut S) -> Result<bool, ErrorCode> {
        match self.decoder.decode(block, sink) {
            Ok(()) => Ok(true),
            Err(HpackError::HeaderListTooLarge) => Ok(false),
            Err(HpackError::Compression(_)) => Err(ErrorCode::CompressionError),
        }
    }

    fn open_stream(
        &mut self,
        block: OpenBlock,
        fragment: &[u8],
        out: &mut Vec<u8>,
        events: &mut Vec<Event>,
    ) -> Result<(), ErrorCode> {
        let id = block.stream;
        let mut head = self.pool.rent();
        let mut sink = HeadSink::new(&mut head, Rules::H2);
        let fits = self.decode(fragment, &mut sink)?;
        let valid = sink.finish();
        self.budgets.productive_frame();
        if !fits {
            self.pool.give_back(head);
            return self.refuse_too_large(id, block.end_stream, out);
        }
        if !valid {
            self.pool.give_back(head);
            return self.stream_error(id, ErrorCode::ProtocolError, out, events);
        }
        if block.end_stream && head.content_length().is_some_and(|len| len != 0) {
            self.pool.give_back(head);
            return self.stream_error(id, ErrorCode::ProtocolError, out, events);
        }
        let mut stream = Stream::new(
            id,
            self.peer_initial_window,
            self.config.initial_window_size,
            head.content_length(),
        );
        stream.recv_closed = block.end_stream;
        self.streams.insert(stream);
        self.last_processed = id;
        events.push(Event::Request {
            stream: id,
            head,
            end_stream: block.end_stream,
        });
        Ok(())
    }

    /// A header list over our limit is answered 431 (RFC 6585 §5, RFC 9113 §10.5.1); the
    /// block was decoded whole, so the connection lives on.
    fn refuse_too_large(
        &mut self,
        id: StreamId,
        end_stream: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), ErrorCode> {
        if !self.budgets.server_resets.spend() {
            return Err(ErrorCode::EnhanceYourCalm);
        }
        self.head_buf.clear();
        self.encoder
            .encode([(&b":status"[..], &b"431"[..])], &mut self.head_buf);
        frame::encode_headers(out, id, &self.head_buf, true, self.peer_max_frame_size);
        if !end_stream {
            // The body is not wanted (§8.1).
            frame::encode_rst_stream(out, id, ErrorCode::NoError);
        }
        self.recently_reset.remember(id);
        Ok(())
    }

    fn on_rst_stream(
        &mut self,
        rst: frame::RstStream,
        events: &mut Vec<Event>,
    ) -> Result<(), ErrorCode> {
        let id = rst.stream_id;
        if self.is_idle(id) {
            return Err(ErrorCode::ProtocolError);
        }
        let Some(stream) = self.streams.remove(id) else {
            return Ok(());
        };
        self.recently_closed.remember(id);
        if stream.is_finished() {
            // Its response was whole: nothing to tell, and no rapid reset.
            return Ok(());
        }
        let code = ErrorCode::from_u32(rst.code).unwrap_or(ErrorCode::Cancel);
        events.push(Event::Reset { stream: id, code });
        // Its response had not ended: rapid reset costs the peer (CVE-2023-44487).
        if !self.budgets.peer_resets.spend() {
            return Err(ErrorCode::EnhanceYourCalm);
        }
        Ok(())
    }

    fn on_settings(
        &mut self,
        settings: frame::Settings<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), ErrorCode> {
        if settings.ack {
            if core::mem::take(&mut self.settings_unacked) {
                self.decoder
                    .set_max_table_size(self.config.header_table_size as usize);
            }
            return Ok(());
        }
        if !self.budgets.settings.spend() {
            return Err(ErrorCode::EnhanceYourCalm);
        }
        for setting in settings.iter() {
            match setting {
                Setting::HeaderTableSize(size) => {
                    self.encoder.set_peer_max_table_size(size as usize);
                }
                Setting::InitialWindowSize(size) => {
                    // Applies to every open stream's send window (§6.9.2).
                    let delta = i64::from(size) - i64::from(self.peer_initial_window);
                    self.peer_initial_window = size;
                    for stream in self.streams.iter_mut() {
                        stream
                            .send
                            .grow(delta)
                            .map_err(|_| ErrorCode::FlowControlError)?;
                    }
                }
                Setting::MaxFrameSize(size) => self.peer_max_frame_size = size,
                Setting::EnablePush(_)
                | Setting::MaxConcurrentStreams(_)
                | Setting::MaxHeaderListSize(_) => {}
            }
        }
        frame::encode_settings_ack(out);
        Ok(())
    }

    fn on_window_update(
        &mut self,
        update: frame::WindowUpdate,
        out: &mut Vec<u8>,
        events: &mut Vec<Event>,
    ) -> Result<(), ErrorCode> {
        let id = update.stream_id;
        let increment = i64::from(update.increment);
        if id.is_connection() {
            return self
                .send
                .grow(increment)
                .map_err(|_| ErrorCode::FlowControlError);
        }
        if self.is_idle(id) {
            return Err(ErrorCode::ProtocolError);
        }
        let Some(stream) = self.streams.get(id) else {
            return Ok(());
        };
        if stream.send.grow(increment).is_err() {
            return self.stream_error(id, ErrorCode::FlowControlError, out, events);
        }
        self.finished_frame(id, out);
        Ok(())
    }

    /// Counts a frame the peer sent on a finished stream (one whose request did not end
    /// it): past the bound, or once the peer has no window left to send more in (we
    /// re-open none after the response), the rest of the request is refused with
    /// RST_STREAM(NO_ERROR) (§8.1) and the stream is forgotten.
    fn finished_frame(&mut self, id: StreamId, out: &mut Vec<u8>) {
        let Some(stream) = self.streams.get(id) else {
            return;
        };
        let Some(left) = &mut stream.finished else {
            return;
        };
        *left = left.saturating_sub(1);
        if *left == 0 || stream.recv.available() == 0 {
            self.stop_request(id, out);
        }
    }

    /// Refuses the rest of a request whose response is whole: RST_STREAM(NO_ERROR)
    /// (§8.1); what the peer had in flight is then ignored (§5.4.2). Spends no budget:
    /// the peer did nothing wrong.
    fn stop_request(&mut self, id: StreamId, out: &mut Vec<u8>) {
        if self.streams.remove(id).is_some() {
            frame::encode_rst_stream(out, id, ErrorCode::NoError);
            self.recently_reset.remember(id);
        }
    }

    /// Resets a stream because of the peer's frames (§5.4.2). Each costs the peer from
    /// its budget: a peer that makes us reset stream after stream is MadeYouReset
    /// (CVE-2025-8671), answered ENHANCE_YOUR_CALM.
    fn stream_error(
        &mut self,
        id: StreamId,
        code: ErrorCode,
        out: &mut Vec<u8>,
        events: &mut Vec<Event>,
    ) -> Result<(), ErrorCode> {
        if !self.budgets.server_resets.spend() {
            return Err(ErrorCode::EnhanceYourCalm);
        }
        frame::encode_rst_stream(out, id, code);
        self.recently_reset.remember(id);
        // A finished stream's application is long done with it.
        if self.streams.remove(id).is_some_and(|s| !s.is_finished()) {
            events.push(Event::Reset { stream: id, code });
        }
        Ok(())
    }

    /// Appends GOAWAY for a connection error; the connection accepts nothing more.
    fn fail(&mut self, code: ErrorCode, out: &mut Vec<u8>) -> ConnectionError {
        if !matches!(self.phase, Phase::Failed(_)) {
            frame::encode_goaway(out, self.last_processed, code, &[]);
            self.phase = Phase::Failed(code);
        }
        ConnectionError(code)
    }

    /// The peer's END_STREAM: half-closed (remote), or closed if our response ended too.
    fn close_recv(&mut self, id: StreamId) {
        let Some(stream) = self.streams.get(id) else {
            return;
        };
        if stream.is_finished() {
            self.streams.remove(id);
            self.recently_closed.remember(id);
        } else {
            stream.recv_closed = true;
        }
    }

    /// Gives a request head back to the pool once its stream's handler is done with it.
    pub fn give_back(&mut self, head: RequestHead) {
        self.pool.give_back(head);
    }

    /// The handler read `n` octets of the stream's body: the stream window re-opens by
    /// that much (DESIGN 4.1), in updates of at least half a window so a reader of small
    /// chunks does not make a frame per chunk.
    pub fn release(&mut self, id: StreamId, n: usize, out: &mut Vec<u8>) {
        let threshold = (self.config.initial_window_size / 2).max(1);
        let Some(stream) = self.streams.responding_on(id) else {
            return;
        };
        stream.recv_unacked = stream.recv_unacked.saturating_add(n as u32);
        if stream.recv_closed || stream.recv_unacked < threshold {
            return;
        }
        let credit = core::mem::take(&mut stream.recv_unacked);
        if stream.recv.grow(i64::from(credit)).is_ok() {
            frame::encode_window_update(out, id, credit);
        }
    }

    /// Octets of DATA the stream may send now: both windows and the peer's frame size.
    /// Zero for a stream that is gone or ended.
    pub fn send_credit(&mut self, id: StreamId) -> usize {
        let conn = self.send.available();
        let max_frame = self.peer_max_frame_size as usize;
        match self.streams.responding_on(id) {
            Some(s) => s.send.available().min(conn).min(max_frame),
            None => 0,
        }
    }

    /// Whether the stream is still open for our response.
    pub fn is_sending(&mut self, id: StreamId) -> bool {
        self.streams.responding_on(id).is_some()
    }

    /// Appends the response head: `:status` then `fields` (lowercase names, no
    /// connection-specific ones). With `end_stream` the response has no body.
    pub fn send_head<'f>(
        &mut self,
        id: StreamId,
        status: u16,
        fields: impl IntoIterator<Item = (&'f [u8], &'f [u8])>,
        end_stream: bool,
        out: &mut Vec<u8>,
    ) {
        let Some(stream) = self.streams.responding_on(id).filter(|s| !s.head_sent) else {
            return;
        };
        stream.head_sent = true;
        let digits = [
            b'0' + (status / 100 % 10) as u8,
            b'0' + (status / 10 % 10) as u8,
            b'0' + (status % 10) as u8,
        ];
        self.head_buf.clear();
        let status_field = [(&b":status"[..], &digits[..])];
        let fields = fields
            .into_iter()
            .map(|(n, v)| -> (&[u8], &[u8]) { (n, v) });
        self.encoder
            .encode(status_field.into_iter().chain(fields), &mut self.head_buf);
        frame::encode_headers(
            out,
            id,
            &self.head_buf,
            end_stream,
            self.peer_max_frame_size,
        );
        if end_stream {
            self.close_send(id, out);
        }
    }

    /// Appends one DATA frame of `chunk`, which must fit [`Connection::send_credit`].
    pub fn send_data(&mut self, id: StreamId, chunk: &[u8], end_stream: bool, out: &mut Vec<u8>) {
        debug_assert!(chunk.len() <= self.send_credit(id) || chunk.is_empty());
        let Some(stream) = self.streams.responding_on(id) else {
            return;
        };
        let n = chunk.len() as u32;
        stream.send.take(n);
        self.send.take(n);
        self.data_sent += u64::from(n);
        frame::encode_data_head(out, id, chunk.len(), end_stream);
        out.extend_from_slice(chunk);
        if end_stream {
            self.close_send(id, out);
        }
    }

    /// Ends the stream on its DATA frame at `out[at..]`, appended earlier and not yet
    /// written, instead of with an empty DATA frame of its own: a body whose end is
    /// learnt only after its last chunk was staged still ends on that chunk. `false`,
    /// changing nothing, unless that frame is this stream's and the response is under
    /// way; nothing of the stream may follow it in `out`.
    pub fn end_stream_on_staged(&mut self, id: StreamId, out: &mut Vec<u8>, at: usize) -> bool {
        let Some(head) = out.get(at..).and_then(FrameHead::decode) else {
            return false;
        };
        let ends = head.kind == frame::FrameType::Data as u8
            && head.stream_id == id
            && head.flags & frame::flags::END_STREAM == 0
            && self.is_sending(id);
        if ends {
            frame::set_end_stream(&mut out[at..]);
            self.close_send(id, out);
        }
        ends
    }

    /// Our END_STREAM went out. A stream whose request had ended closes; one whose
    /// request is still coming is finished: judged until it ends or reaches its bound
    /// ([`Connection::finished_frame`]), or refused at once if the peer has no window left
    /// to send more in, or the bound is 0.
    fn close_send(&mut self, id: StreamId, out: &mut Vec<u8>) {
        self.budgets.completed_stream();
        let bound = self.config.finished_stream_frames;
        let Some(stream) = self.streams.get(id) else {
            return;
        };
        if stream.recv_closed {
            self.streams.remove(id);
            self.recently_closed.remember(id);
        } else if bound == 0 || stream.recv.available() == 0 {
            self.stop_request(id, out);
        } else {
            stream.finished = Some(bound);
        }
    }

    /// Resets a stream we cannot finish (a failed response body, a handler gone).
    pub fn reset(&mut self, id: StreamId, code: ErrorCode, out: &mut Vec<u8>) {
        if self.streams.responding_on(id).is_some() {
            self.streams.remove(id);
            frame::encode_rst_stream(out, id, code);
            self.recently_reset.remember(id);
        }
    }

    /// Starts a graceful shutdown (§6.8): GOAWAY(NO_ERROR) names the last stream we took;
    /// streams up to it finish, later ones are ignored.
    pub fn go_away(&mut self, out: &mut Vec<u8>) {
        if self.going_away || matches!(self.phase, Phase::Failed(_)) {
            return;
        }
        self.going_away = true;
        frame::encode_goaway(out, self.last_processed, ErrorCode::NoError, &[]);
    }

    /// Whether a shutdown is under way and every response has ended (a request still
    /// arriving on a finished stream holds nothing up).
    pub fn is_done(&self) -> bool {
        matches!(self.phase, Phase::Failed(_))
            || (self.going_away && self.streams.responding() == 0)
    }

    /// Whether the client preface and first SETTINGS are still awaited (handshake timeout).
    pub fn in_handshake(&self) -> bool {
        matches!(self.phase, Phase::Preface | Phase::FirstSettings)
    }

    /// Whether a field block is part-way in (header-read timeout).
    pub fn reading_head(&self) -> bool {
        self.block.is_some()
    }

    /// Whether our SETTINGS still await the peer's ACK (the SETTINGS timeout, §6.5.3).
    pub fn awaiting_settings_ack(&self) -> bool {
        self.settings_unacked && !matches!(self.phase, Phase::Failed(_))
    }

    /// Our SETTINGS went unacknowledged too long (§6.5.3): the connection error
    /// SETTINGS_TIMEOUT, its GOAWAY appended to `out`. The caller keeps the clock.
    pub fn settings_timed_out(&mut self, out: &mut Vec<u8>) -> ConnectionError {
        self.fail(ErrorCode::SettingsTimeout, out)
    }

    /// Appends trailers ending the response (§8.1).
    pub fn send_trailers<'f>(
        &mut self,
        id: StreamId,
        fields: impl IntoIterator<Item = (&'f [u8], &'f [u8])>,
        out: &mut Vec<u8>,
    ) {
        if self.streams.responding_on(id).is_none() {
            return;
        }
        self.head_buf.clear();
        self.encoder.encode(fields, &mut self.head_buf);
        frame::encode_headers(out, id, &self.head_buf, true, self.peer_max_frame_size);
        self.close_send(id, out);
    }

    /// DATA octets sent so far on every stream: a download that keeps moving, however
    /// slowly, makes this grow.
    pub fn data_sent(&self) -> u64 {
        self.data_sent
    }

    /// Streams open or half-closed, finished ones included (they count against the
    /// concurrency limit, §5.1.2).
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }
}
