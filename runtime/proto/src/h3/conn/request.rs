//! Request streams (RFC 9114 §4.1): HEADERS, then DATA*, then optional trailing HEADERS,
//! with unknown frames anywhere.

use super::pool::Phase;
use super::validate::{HeadSink, TrailerSink};
use super::{Connection, Event};
use crate::h3::error::{ErrorCode, H3Error};
use crate::h3::frame::{Frame, FrameType, Item};
use crate::h3::qpack::QpackError;

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
        let last = match self.read_request(index, input, fin, events) {
            Ok(Outcome::Open) => return Ok(()),
            Ok(Outcome::Ended) => Event::End { stream: id },
            Ok(Outcome::HeadTooLarge) => Event::HeadTooLarge { stream: id },
            Err(H3Error::Stream(code)) => Event::StreamError { stream: id, code },
            Err(e) => return Err(e),
        };
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
                    (FrameType::Headers | FrameType::Unknown(_), _) => {}
                    // Control frames, PUSH_PROMISE from a client, HTTP/2 types (§7.2).
                    _ => return Err(H3Error::Connection(ErrorCode::FrameUnexpected)),
                },
                Item::Data(range) => events.push(Event::Data { stream: id, range }),
                Item::Frame(Frame::Headers(section)) => {
                    let mut head = self.pools.rent_head();
                    let is_head = stream.phase == Phase::Head;
                    let (decoded, valid) = if is_head {
                        let mut sink = HeadSink::new(&mut head);
                        let decoded = self.decoder.decode(section, &mut sink);
                        (decoded, sink.finish())
                    } else {
                        let mut sink = TrailerSink::new(&mut head);
                        let decoded = self.decoder.decode(section, &mut sink);
                        (decoded, sink.finish())
                    };
                    let refused = match decoded {
                        Ok(()) if valid => None,
                        Ok(()) => Some(Err(H3Error::Stream(ErrorCode::MessageError))),
                        // Without a dynamic table nothing is out of step: only this
                        // request is refused.
                        Err(QpackError::FieldSectionTooLarge) if is_head => {
                            Some(Ok(Outcome::HeadTooLarge))
                        }
                        Err(e) => Some(Err(e.to_h3())),
                    };
                    if let Some(outcome) = refused {
                        self.pools.give_back_head(head);
                        return outcome;
                    }
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
