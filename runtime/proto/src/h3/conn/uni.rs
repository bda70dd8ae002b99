//! Unidirectional streams (RFC 9114 §6.2): a varint type, then the stream's content.

use super::control::ControlStream;
use super::{Connection, Event};
use crate::h3::error::{ErrorCode, H3Error};
use crate::h3::varint;

/// Stream types (§6.2, RFC 9204 §4.2).
pub(super) const CONTROL: u64 = 0x00;
const PUSH: u64 = 0x01;
const QPACK_ENCODER: u64 = 0x02;
pub(super) const QPACK_DECODER: u64 = 0x03;

/// A unidirectional stream whose type varint has not arrived whole.
#[derive(Debug)]
pub(super) struct PendingUni {
    pub(super) id: u64,
    octets: [u8; 8],
    len: usize,
}

/// The critical streams a client opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum UniStream {
    Control,
    QpackEncoder,
    QpackDecoder,
}

const CREATION_ERROR: H3Error = H3Error::Connection(ErrorCode::StreamCreationError);
const CLOSED_CRITICAL: H3Error = H3Error::Connection(ErrorCode::ClosedCriticalStream);

impl Connection {
    /// Which critical stream `id` is, if any.
    pub(super) fn uni_stream(&self, id: u64) -> Option<UniStream> {
        if self.control.as_ref().is_some_and(|c| c.id == id) {
            Some(UniStream::Control)
        } else if self.qpack_encoder_stream == Some(id) {
            Some(UniStream::QpackEncoder)
        } else if self.qpack_decoder_stream == Some(id) {
            Some(UniStream::QpackDecoder)
        } else {
            None
        }
    }

    pub(super) fn recv_uni(
        &mut self,
        id: u64,
        input: &[u8],
        fin: bool,
        events: &mut Vec<Event>,
    ) -> Result<(), H3Error> {
        let Some(kind) = self.uni_stream(id) else {
            return self.recv_uni_type(id, input, fin, events);
        };
        match kind {
            UniStream::Control => self.recv_control(input, events)?,
            // Decoder instructions are for our encoder, encoder instructions for our
            // decoder.
            UniStream::QpackEncoder => {
                self.decoder
                    .on_encoder_stream(input)
                    .map_err(|e| e.to_h3())?;
                // New entries may be what blocked streams wait for.
                self.unblock(events)?;
            }
            UniStream::QpackDecoder => self
                .encoder
                .on_decoder_stream(input)
                .map_err(|e| e.to_h3())?,
        }
        // Critical streams live as long as the connection (§6.2.1, RFC 9204 §4.2).
        if fin { Err(CLOSED_CRITICAL) } else { Ok(()) }
    }

    /// Reads a new stream's type, then hands the rest to the stream it opened.
    fn recv_uni_type(
        &mut self,
        id: u64,
        input: &[u8],
        fin: bool,
        events: &mut Vec<Event>,
    ) -> Result<(), H3Error> {
        let index = match self.pending_uni.iter().position(|p| p.id == id) {
            Some(i) => i,
            None => {
                self.pending_uni.push(PendingUni {
                    id,
                    octets: [0; 8],
                    len: 0,
                });
                self.pending_uni.len() - 1
            }
        };
        let pending = &mut self.pending_uni[index];
        let old = pending.len;
        let take = input.len().min(8 - old);
        pending.octets[old..old + take].copy_from_slice(&input[..take]);
        let Some((ty, used)) = varint::decode(&pending.octets[..old + take]) else {
            pending.len = old + take;
            // A stream closed before its type is tolerated (§6.2).
            if fin {
                self.pending_uni.swap_remove(index);
            }
            return Ok(());
        };
        self.pending_uni.swap_remove(index);
        let rest = &input[used - old..];
        match ty {
            CONTROL if self.control.is_some() => return Err(CREATION_ERROR),
            CONTROL => self.control = Some(ControlStream::new(id)),
            // Only servers push (§6.2.2).
            PUSH => return Err(CREATION_ERROR),
            QPACK_ENCODER | QPACK_DECODER => {
                let slot = if ty == QPACK_ENCODER {
                    &mut self.qpack_encoder_stream
                } else {
                    &mut self.qpack_decoder_stream
                };
                // One of each (RFC 9204 §4.2).
                if slot.replace(id).is_some() {
                    return Err(CREATION_ERROR);
                }
            }
            // Reserved or unknown (§6.2.3): not read any further.
            _ => {
                events.push(Event::StopSending {
                    stream: id,
                    code: ErrorCode::StreamCreationError,
                });
                return Ok(());
            }
        }
        self.recv_uni(id, rest, fin, events)
    }
}
