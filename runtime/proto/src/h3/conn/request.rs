//! Request streams (RFC 9114 §4.1): HEADERS, then DATA*, then optional trailing HEADERS,
//! with unknown frames anywhere.

use super::pool::{Phase, Pools, RequestHead, RequestStream};
use super::{Connection, Event};
use crate::h3::error::{ErrorCode, H3Error};
use crate::h3::frame::{Frame, FrameType, Item};
use crate::h3::qpack::{Decoder, QpackError, SectionStatus};
use crate::head::validate::{HeadSink, Rules, TrailerSink};

/// Slack over the field section limit for a HEADERS payload: a sane encoder's section is
/// never longer than the fields it encodes (each line costs less than their 32 octets of
/// overhead) plus its prefix.
const SECTION_PREFIX_SLACK: u64 = 64;

/// Where a request stream stands after a read.
enum Outcome {
    /// More is to come.
    Open,
    /// The request ended cleanly.
    Ended,
    /// The request's head passed our field section limit: it gets a 431.
    HeadTooLarge,
}

/// What became of a field section.
enum Section {
    /// Decoded and valid: the request head, or the trailers.
    Ready(RequestHead),
    /// Waiting for the encoder stream.
    Blocked,
    /// A request head past our field section limit.
    HeadTooLarge,
}

impl Connection {
    pub(super) fn recv_request(
        &mut self,
        id: u64,
        input: &[u8],
        fin: bool,
        events: &mut Vec<Event>,
    ) -> Result<(), H3Error> {
        let index = match self.requests.iter().position(|s| s.id == id) {
            Some(i) => i,
            None => {
                if self.goaway_sent.is_some_and(|last| id >= last) {
                    // Not read: any field section on it is abandoned (RFC 9204 §2.2.2.2).
                    self.decoder.cancel_stream(id);
                    events.push(Event::StreamError {
                        stream: id,
                        code: ErrorCode::RequestRejected,
                    });
                    return Ok(());
                }
                self.next_request = self.next_request.max(id + 4);
                let stream = self.pools.rent_stream(id);
                self.requests.push(stream);
                self.requests.len() - 1
            }
        };
        if !self.requests[index].blocked_section.is_empty() {
            // Still blocked: the driver should have held this back.
            events.push(Event::Blocked {
                stream: id,
                consumed: 0,
            });
            return Ok(());
        }
        let result = self.read_request(index, input, fin, events);
        self.settle(index, result, events)
    }

    /// Retries the blocked streams once the encoder stream delivered entries.
    pub(super) fn unblock(&mut self, events: &mut Vec<Event>) -> Result<(), H3Error> {
        let mut i = 0;
        while i < self.requests.len() {
            let stream = &mut self.requests[i];
            if stream.blocked_section.is_empty() {
                i += 1;
                continue;
            }
            let section = &stream.blocked_section;
            let result = match decode_section(
                &mut self.decoder,
                &mut self.pools,
                stream.id,
                stream.phase,
                section,
            ) {
                Ok(Section::Blocked) => {
                    i += 1;
                    continue;
                }
                Ok(Section::Ready(head)) => {
                    stream.blocked_section.clear();
                    deliver(stream, head, events);
                    Ok(Outcome::Open)
                }
                Ok(Section::HeadTooLarge) => Ok(Outcome::HeadTooLarge),
                Err(e) => Err(e),
            };
            let open = self.requests.len();
            self.settle(i, result, events)?;
            // A retired stream's place now holds the last one: look at it again.
            if self.requests.len() == open {
                i += 1;
            }
        }
        Ok(())
    }

    /// Ends a request stream after a read, unless it is still open: the event that ends
    /// it, and its state back to the pool.
    fn settle(
        &mut self,
        index: usize,
        result: Result<Outcome, H3Error>,
        events: &mut Vec<Event>,
    ) -> Result<(), H3Error> {
        let id = self.requests[index].id;
        let last = match result {
            Ok(Outcome::Open) => return Ok(()),
            Ok(Outcome::Ended) => Event::End { stream: id },
            Ok(Outcome::HeadTooLarge) => Event::HeadTooLarge { stream: id },
            Err(H3Error::Stream(code)) => {
                // Resetting a request already handed out is work the client made us do
                // and throw away: MadeYouReset (CVE-2025-8671).
                if self.requests[index].phase != Phase::Head && !self.server_resets.spend() {
                    return Err(H3Error::Connection(ErrorCode::ExcessiveLoad));
                }
                Event::StreamError { stream: id, code }
            }
            Err(e) => return Err(e),
        };
        if !matches!(last, Event::End { .. }) {
            // Abandoned: its field sections will never all be decoded (RFC 9204 §2.2.2.2).
            self.decoder.cancel_stream(id);
        }
        events.push(last);
        self.retire(index);
        Ok(())
    }

    /// Reads a request stream's frames.
    fn read_request(
        &mut self,
        index: usize,
        input: &[u8],
        fin: bool,
        events: &mut Vec<Event>,
    ) -> Result<Outcome, H3Error> {
        let stream = &mut self.requests[index];
        let id = stream.id;
        let max_section = self.config.max_field_section_size + SECTION_PREFIX_SLACK;
        let mut pos = 0;
        while let Some(item) = stream.reader.next(input, &mut pos)? {
            match item {
                Item::Head(head) => match (head.ty, stream.phase) {
                    (FrameType::Data, Phase::Head)
                    | (FrameType::Data | FrameType::Headers, Phase::Trailers) => {
                        return Err(H3Error::Connection(ErrorCode::FrameUnexpected));
                    }
                    (FrameType::Data, Phase::Body) => {
                        // An empty DATA frame moves nothing: a flood of them is work
                        // for us alone.
                        if head.len == 0 {
                            if !self.empty_frames.spend() {
                                return Err(H3Error::Connection(ErrorCode::ExcessiveLoad));
                            }
                        } else {
                            self.empty_frames.refill();
                        }
                        stream.received = stream.received.saturating_add(head.len);
                        // More body than declared is malformed as soon as it is announced.
                        if stream
                            .content_length
                            .is_some_and(|len| stream.received > len)
                        {
                            return Err(H3Error::Stream(ErrorCode::MessageError));
                        }
                    }
                    // Refused before a payload this long is buffered.
                    (FrameType::Headers, Phase::Head) if head.len > max_section => {
                        return Ok(Outcome::HeadTooLarge);
                    }
                    (FrameType::Headers, _) if head.len > max_section => {
                        return Err(H3Error::Stream(ErrorCode::ExcessiveLoad));
                    }
                    // Reserved and unknown frames are skipped (§9), but not for free.
                    (FrameType::Unknown(_), _) => {
                        if !self.empty_frames.spend() {
                            return Err(H3Error::Connection(ErrorCode::ExcessiveLoad));
                        }
                    }
                    (FrameType::Headers, _) => {}
                    // Control frames, PUSH_PROMISE from a client, HTTP/2 types (§7.2).
                    _ => return Err(H3Error::Connection(ErrorCode::FrameUnexpected)),
                },
                Item::Data(range) => events.push(Event::Data { stream: id, range }),
                Item::Frame(Frame::Headers(section)) => {
                    match decode_section(
                        &mut self.decoder,
                        &mut self.pools,
                        id,
                        stream.phase,
                        section,
                    )? {
                        Section::Ready(head) => {
                            self.empty_frames.refill();
                            deliver(stream, head, events)
                        }
                        Section::Blocked => {
                            // Kept, and the rest of the input left to the driver.
                            stream.blocked_section.extend_from_slice(section);
                            events.push(Event::Blocked {
                                stream: id,
                                consumed: pos,
                            });
                            return Ok(Outcome::Open);
                        }
                        Section::HeadTooLarge => return Ok(Outcome::HeadTooLarge),
                    }
                }
                // Other types were refused at their head.
                Item::Frame(_) => {}
            }
        }
        if !fin {
            return Ok(Outcome::Open);
        }
        // A stream may only end between frames (§7.1).
        if !stream.reader.at_frame_boundary() {
            return Err(H3Error::Connection(ErrorCode::FrameError));
        }
        if stream.phase == Phase::Head {
            return Err(H3Error::Stream(ErrorCode::RequestIncomplete));
        }
        // Less body than declared (§4.1.2).
        if stream
            .content_length
            .is_some_and(|len| len != stream.received)
        {
            return Err(H3Error::Stream(ErrorCode::MessageError));
        }
        Ok(Outcome::Ended)
    }
}

/// Decodes a HEADERS payload on a stream in `phase`: the request head, or its trailers.
/// A malformed one is an H3_MESSAGE_ERROR on the stream, never passed on.
fn decode_section(
    decoder: &mut Decoder,
    pools: &mut Pools,
    id: u64,
    phase: Phase,
    section: &[u8],
) -> Result<Section, H3Error> {
    let mut head = pools.rent_head();
    let is_head = phase == Phase::Head;
    let (decoded, valid) = if is_head {
        let mut sink = HeadSink::new(&mut head, Rules::H3);
        let decoded = decoder.decode(id, section, &mut sink);
        (decoded, sink.finish())
    } else {
        let mut sink = TrailerSink::new(&mut head);
        let decoded = decoder.decode(id, section, &mut sink);
        (decoded, sink.finish())
    };
    let refused = match decoded {
        Ok(SectionStatus::Decoded) if valid => return Ok(Section::Ready(head)),
        Ok(SectionStatus::Decoded) => Err(H3Error::Stream(ErrorCode::MessageError)),
        Ok(SectionStatus::Blocked) => Ok(Section::Blocked),
        // Nothing of the connection's state is out of step: only this request is refused.
        Err(QpackError::FieldSectionTooLarge) if is_head => Ok(Section::HeadTooLarge),
        Err(e) => Err(e.to_h3()),
    };
    pools.give_back_head(head);
    refused
}

/// Hands a decoded head or trailers on, and moves the stream past them.
fn deliver(stream: &mut RequestStream, head: RequestHead, events: &mut Vec<Event>) {
    let id = stream.id;
    if stream.phase == Phase::Head {
        stream.phase = Phase::Body;
        stream.content_length = head.content_length();
        events.push(Event::Request { stream: id, head });
    } else {
        stream.phase = Phase::Trailers;
        events.push(Event::Trailers {
            stream: id,
            trailers: head,
        });
    }
}
