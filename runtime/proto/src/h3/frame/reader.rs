//! Reads frames off one stream as its octets arrive, in pieces of any size.

use core::ops::Range;

use super::{Frame, FrameHead, FrameType};
use crate::h3::error::H3Error;

/// What [`FrameReader::next`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Item<'a> {
    /// A frame starts. The caller checks it is allowed here, and how long it may be, before
    /// its payload is read: the reader itself buffers whatever length it is told.
    Head(FrameHead),
    /// The next non-empty piece of a DATA payload, at this range of the input.
    Data(Range<usize>),
    /// A whole frame other than DATA or an unknown type (those are streamed or skipped).
    Frame(Frame<'a>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Head,
    /// DATA is handed out as it comes; unknown types are skipped.
    Stream {
        ty: FrameType,
        remaining: u64,
    },
    /// Other frames are delivered whole, from the input when it holds all of the payload,
    /// else from `buf`.
    Buffer {
        ty: FrameType,
        len: usize,
    },
}

/// The frame state of one stream: a partial head, and the payload of a frame that
/// arrived in pieces. Keep it with the stream and reuse it.
#[derive(Debug)]
pub struct FrameReader {
    state: State,
    head: [u8; FrameHead::MAX_LEN],
    head_len: usize,
    buf: Vec<u8>,
}

impl Default for FrameReader {
    fn default() -> Self {
        FrameReader {
            state: State::Head,
            head: [0; FrameHead::MAX_LEN],
            head_len: 0,
            buf: Vec::new(),
        }
    }
}

impl FrameReader {
    /// Reads the next item from `input[*pos..]`, advancing `pos`; `Ok(None)` once the input
    /// is used up, a partial frame kept for the next call.
    pub fn next<'a>(
        &'a mut self,
        input: &'a [u8],
        pos: &mut usize,
    ) -> Result<Option<Item<'a>>, H3Error> {
        loop {
            let avail = &input[*pos..];
            match self.state {
                State::Head => {
                    // A head is at most 16 octets: gather it here whatever the split.
                    let old = self.head_len;
                    let take = avail.len().min(FrameHead::MAX_LEN - old);
                    self.head[old..old + take].copy_from_slice(&avail[..take]);
                    let Some((head, used)) = FrameHead::decode(&self.head[..old + take]) else {
                        self.head_len = old + take;
                        *pos += take;
                        return Ok(None);
                    };
                    self.head_len = 0;
                    *pos += used - old;
                    self.state = match head.ty {
                        FrameType::Data | FrameType::Unknown(_) => State::Stream {
                            ty: head.ty,
                            remaining: head.len,
                        },
                        ty => State::Buffer {
                            ty,
                            // Lengths past the address space are refused by the caller.
                            len: usize::try_from(head.len).unwrap_or(usize::MAX),
                        },
                    };
                    self.buf.clear();
                    return Ok(Some(Item::Head(head)));
                }
                State::Stream { ty, remaining } => {
                    if remaining == 0 {
                        self.state = State::Head;
                        continue;
                    }
                    let n = avail
                        .len()
                        .min(usize::try_from(remaining).unwrap_or(usize::MAX));
                    if n == 0 {
                        return Ok(None);
                    }
                    let range = *pos..*pos + n;
                    *pos += n;
                    self.state = State::Stream {
                        ty,
                        remaining: remaining - n as u64,
                    };
                    if ty == FrameType::Data {
                        return Ok(Some(Item::Data(range)));
                    }
                }
                State::Buffer { ty, len } => {
                    if self.buf.is_empty() && avail.len() >= len {
                        self.state = State::Head;
                        *pos += len;
                        return Frame::parse(ty, &avail[..len]).map(|f| Some(Item::Frame(f)));
                    }
                    let n = avail.len().min(len - self.buf.len());
                    self.buf.extend_from_slice(&avail[..n]);
                    *pos += n;
                    if self.buf.len() < len {
                        return Ok(None);
                    }
                    self.state = State::Head;
                    return Frame::parse(ty, &self.buf).map(|f| Some(Item::Frame(f)));
                }
            }
        }
    }

    /// Whether the stream may end here: no frame was left incomplete (§7.1).
    pub fn at_frame_boundary(&self) -> bool {
        self.state == State::Head && self.head_len == 0
    }

    /// Octets the payload buffer holds on to.
    pub fn buffer_capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Forgets the stream, keeping the buffer's allocation.
    pub fn reset(&mut self) {
        self.state = State::Head;
        self.head_len = 0;
        self.buf.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h3::frame::{Setting, encode_data_head, encode_headers, encode_settings};

    /// What a stream's octets read as, fed `chunk` octets at a time.
    fn read_in_chunks(wire: &[u8], chunk: usize) -> Vec<String> {
        let mut reader = FrameReader::default();
        let mut seen = Vec::new();
        for piece in wire.chunks(chunk) {
            let mut pos = 0;
            while let Some(item) = reader.next(piece, &mut pos).unwrap() {
                seen.push(match item {
                    Item::Head(h) => format!("head {:?} {}", h.ty, h.len),
                    Item::Data(r) => format!("data {}", String::from_utf8_lossy(&piece[r])),
                    Item::Frame(f) => format!("{f:?}"),
                });
            }
            assert_eq!(pos, piece.len(), "the reader takes every octet");
        }
        assert!(reader.at_frame_boundary());
        // DATA pieces joined, so every split reads the same.
        let mut joined: Vec<String> = Vec::new();
        for s in seen {
            match (joined.last_mut(), s.strip_prefix("data ")) {
                (Some(last), Some(more)) if last.starts_with("data ") => {
                    last.push_str(more);
                }
                _ => joined.push(s),
            }
        }
        joined
    }

    #[test]
    fn every_split_reads_the_same_frames() {
        let mut wire = Vec::new();
        encode_settings(&[Setting::MaxFieldSectionSize(100)], &mut wire);
        encode_headers(&[0, 0, 0xd1, 0xd7], &mut wire);
        // A reserved type with a 300-octet payload (two-octet length), skipped.
        wire.extend_from_slice(&[0x21, 0x41, 0x2c]);
        wire.extend_from_slice(&[7; 300]);
        encode_data_head(3, &mut wire);
        wire.extend_from_slice(b"abc");
        encode_data_head(0, &mut wire);
        let whole = read_in_chunks(&wire, wire.len());
        assert_eq!(
            whole,
            [
                "head Settings 3",
                "Settings(Settings { payload: [6, 64, 100] })",
                "head Headers 4",
                "Headers([0, 0, 209, 215])",
                "head Unknown(33) 300",
                "head Data 3",
                "data abc",
                "head Data 0",
            ]
        );
        for chunk in 1..wire.len() {
            assert_eq!(read_in_chunks(&wire, chunk), whole, "chunks of {chunk}");
        }
    }

    #[test]
    fn a_cut_frame_is_not_at_a_boundary() {
        let mut reader = FrameReader::default();
        let mut pos = 0;
        assert_eq!(reader.next(&[0x01], &mut pos), Ok(None));
        assert!(!reader.at_frame_boundary(), "inside a head");
        let mut pos = 0;
        let head = FrameHead {
            ty: FrameType::Headers,
            len: 2,
        };
        assert_eq!(
            reader.next(&[0x02, 0x00], &mut pos),
            Ok(Some(Item::Head(head)))
        );
        assert_eq!(reader.next(&[0x02, 0x00], &mut pos), Ok(None));
        assert!(!reader.at_frame_boundary(), "inside a payload");
        reader.reset();
        assert!(reader.at_frame_boundary());
    }

    #[test]
    fn a_bad_payload_is_reported_once_whole() {
        let mut reader = FrameReader::default();
        let mut pos = 0;
        let wire = [0x07, 0x02, 0x01, 0x01];
        assert!(matches!(
            reader.next(&wire, &mut pos),
            Ok(Some(Item::Head(_)))
        ));
        assert_eq!(
            reader.next(&wire, &mut pos),
            Err(H3Error::Connection(crate::h3::ErrorCode::FrameError))
        );
    }
}
