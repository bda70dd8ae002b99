//! Encoder stream (RFC 9204 §4.3) and decoder stream (§4.4) instructions, and the carry
//! that holds an instruction split across stream reads.

use super::{Malformed, read_integer};
use crate::field_coding::integer;
use crate::field_coding::string::Literal;

/// An instruction on the encoder stream, borrowing its strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncoderInstruction<'a> {
    /// Set Dynamic Table Capacity (§4.3.1).
    SetCapacity(usize),
    /// Insert with Name Reference (§4.3.2): a static or relative dynamic index.
    InsertWithNameReference {
        /// The name is a static table entry, else a dynamic one relative to the insert count.
        is_static: bool,
        /// The name's index.
        index: usize,
        /// The value.
        value: Literal<'a>,
    },
    /// Insert with Literal Name (§4.3.3).
    InsertWithLiteralName {
        /// The name.
        name: Literal<'a>,
        /// The value.
        value: Literal<'a>,
    },
    /// Duplicate (§4.3.4): a relative dynamic index.
    Duplicate(usize),
}

impl<'a> EncoderInstruction<'a> {
    /// Decodes the instruction at the start of `buf` and the octets it took; `Ok(None)` if
    /// `buf` ends inside it.
    pub fn parse(buf: &'a [u8]) -> Result<Option<(Self, usize)>, Malformed> {
        let Some(&first) = buf.first() else {
            return Ok(None);
        };
        let mut pos = 0;
        let instruction = (|| {
            Ok(if first & 0x80 != 0 {
                let is_static = first & 0x40 != 0;
                let index = read_integer(buf, &mut pos, 6)?;
                let value = Literal::read(buf, &mut pos, 7)?;
                EncoderInstruction::InsertWithNameReference {
                    is_static,
                    index,
                    value,
                }
            } else if first & 0x40 != 0 {
                let name = Literal::read(buf, &mut pos, 5)?;
                let value = Literal::read(buf, &mut pos, 7)?;
                EncoderInstruction::InsertWithLiteralName { name, value }
            } else if first & 0x20 != 0 {
                EncoderInstruction::SetCapacity(read_integer(buf, &mut pos, 5)?)
            } else {
                EncoderInstruction::Duplicate(read_integer(buf, &mut pos, 5)?)
            })
        })();
        complete(instruction, pos)
    }
}

/// An instruction on the decoder stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecoderInstruction {
    /// Section Acknowledgment (§4.4.1) for a stream.
    SectionAcknowledgment(u64),
    /// Stream Cancellation (§4.4.2) of a stream.
    StreamCancellation(u64),
    /// Insert Count Increment (§4.4.3).
    InsertCountIncrement(u64),
}

impl DecoderInstruction {
    /// Decodes the instruction at the start of `buf` and the octets it took; `Ok(None)` if
    /// `buf` ends inside it.
    pub fn parse(buf: &[u8]) -> Result<Option<(Self, usize)>, Malformed> {
        let Some(&first) = buf.first() else {
            return Ok(None);
        };
        let mut pos = 0;
        let instruction = if first & 0x80 != 0 {
            read_integer(buf, &mut pos, 7)
                .map(|id| DecoderInstruction::SectionAcknowledgment(id as u64))
        } else if first & 0x40 != 0 {
            read_integer(buf, &mut pos, 6)
                .map(|id| DecoderInstruction::StreamCancellation(id as u64))
        } else {
            read_integer(buf, &mut pos, 6)
                .map(|n| DecoderInstruction::InsertCountIncrement(n as u64))
        };
        complete(instruction, pos)
    }
}

impl DecoderInstruction {
    /// Appends the instruction.
    pub fn encode(self, dst: &mut Vec<u8>) {
        match self {
            DecoderInstruction::SectionAcknowledgment(id) => {
                integer::encode(dst, 0x80, 7, id as usize)
            }
            DecoderInstruction::StreamCancellation(id) => {
                integer::encode(dst, 0x40, 6, id as usize)
            }
            DecoderInstruction::InsertCountIncrement(n) => {
                integer::encode(dst, 0x00, 6, n as usize)
            }
        }
    }
}

/// A parse result as "need more" when the instruction was merely cut short.
fn complete<T>(parsed: Result<T, Malformed>, used: usize) -> Result<Option<(T, usize)>, Malformed> {
    match parsed {
        Ok(instruction) => Ok(Some((instruction, used))),
        Err(Malformed::Truncated) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The start of an instruction whose end has not arrived yet.
#[derive(Debug, Default)]
pub(super) struct Carry {
    buf: Vec<u8>,
}

impl Carry {
    /// Runs `step` on each instruction in what was carried plus `input`. `step` parses and
    /// applies one instruction from the start of its slice and returns the octets it took,
    /// or `None` when the slice ends inside it; that rest is carried to the next call,
    /// unless it reaches `limit` octets, which no acceptable instruction does.
    pub(super) fn feed(
        &mut self,
        input: &[u8],
        limit: usize,
        mut step: impl FnMut(&[u8]) -> Result<Option<usize>, Malformed>,
    ) -> Result<(), Malformed> {
        let mut pos = 0;
        if !self.buf.is_empty() {
            let old = self.buf.len();
            let take = input.len().min(limit.saturating_sub(old));
            self.buf.extend_from_slice(&input[..take]);
            match step(&self.buf)? {
                // The carried octets alone were not an instruction: it ends in `input`.
                Some(used) => pos = used - old,
                None if self.buf.len() >= limit => return Err(Malformed::InstructionTooLong),
                None => return Ok(()),
            }
            self.buf.clear();
        }
        while pos < input.len() {
            match step(&input[pos..])? {
                Some(used) => pos += used,
                None => {
                    let rest = &input[pos..];
                    if rest.len() >= limit {
                        return Err(Malformed::InstructionTooLong);
                    }
                    self.buf.extend_from_slice(rest);
                    break;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::hex;

    fn encoder(buf: &[u8]) -> Result<Option<(EncoderInstruction<'_>, usize)>, Malformed> {
        EncoderInstruction::parse(buf)
    }

    fn raw(s: &str) -> Literal<'_> {
        Literal {
            huffman: false,
            octets: s.as_bytes(),
        }
    }

    #[test]
    fn rfc_appendix_b_encoder_instructions() {
        let b2 = hex("3fbd01 c00f7777772e6578616d706c652e636f6d c10c2f73616d706c652f70617468");
        assert_eq!(
            encoder(&b2),
            Ok(Some((EncoderInstruction::SetCapacity(220), 3)))
        );
        assert_eq!(
            encoder(&b2[3..]),
            Ok(Some((
                EncoderInstruction::InsertWithNameReference {
                    is_static: true,
                    index: 0,
                    value: raw("www.example.com")
                },
                17
            )))
        );
        assert_eq!(
            encoder(&b2[20..]),
            Ok(Some((
                EncoderInstruction::InsertWithNameReference {
                    is_static: true,
                    index: 1,
                    value: raw("/sample/path")
                },
                14
            )))
        );
        let b3 = hex("4a637573746f6d2d6b65790c637573746f6d2d76616c7565");
        assert_eq!(
            encoder(&b3),
            Ok(Some((
                EncoderInstruction::InsertWithLiteralName {
                    name: raw("custom-key"),
                    value: raw("custom-value")
                },
                b3.len()
            )))
        );
        assert_eq!(
            encoder(&[0x02]),
            Ok(Some((EncoderInstruction::Duplicate(2), 1)))
        );
        let b5 = hex("810d637573746f6d2d76616c756532");
        assert_eq!(
            encoder(&b5),
            Ok(Some((
                EncoderInstruction::InsertWithNameReference {
                    is_static: false,
                    index: 1,
                    value: raw("custom-value2")
                },
                b5.len()
            )))
        );
        for end in 0..b3.len() {
            assert_eq!(encoder(&b3[..end]), Ok(None), "{end} octets");
        }
    }

    #[test]
    fn rfc_appendix_b_decoder_instructions() {
        for (coded, instruction) in [
            (0x84, DecoderInstruction::SectionAcknowledgment(4)),
            (0x01, DecoderInstruction::InsertCountIncrement(1)),
            (0x48, DecoderInstruction::StreamCancellation(8)),
        ] {
            let mut dst = Vec::new();
            instruction.encode(&mut dst);
            assert_eq!(dst, [coded]);
        }
        let mut dst = Vec::new();
        DecoderInstruction::StreamCancellation(63 + 129).encode(&mut dst);
        assert_eq!(dst, [0x7f, 0x81, 0x01]);
        let parse = DecoderInstruction::parse;
        assert_eq!(
            parse(&[0x84]),
            Ok(Some((DecoderInstruction::SectionAcknowledgment(4), 1)))
        );
        assert_eq!(
            parse(&[0x01]),
            Ok(Some((DecoderInstruction::InsertCountIncrement(1), 1)))
        );
        assert_eq!(
            parse(&[0x48]),
            Ok(Some((DecoderInstruction::StreamCancellation(8), 1)))
        );
        assert_eq!(
            parse(&[0x7f]),
            Ok(None),
            "a stream id spilling past its prefix"
        );
        assert_eq!(
            parse(&[0x7f, 0x81, 0x01]),
            Ok(Some((DecoderInstruction::StreamCancellation(63 + 129), 3)))
        );
    }

    /// Feeds `wire` to a carry in pieces of `chunk` and collects the instructions.
    fn fed(wire: &[u8], chunk: usize) -> Result<Vec<DecoderInstruction>, Malformed> {
        let mut carry = Carry::default();
        let mut seen = Vec::new();
        for piece in wire.chunks(chunk) {
            carry.feed(piece, 16, |buf| {
                Ok(DecoderInstruction::parse(buf)?.map(|(i, used)| {
                    seen.push(i);
                    used
                }))
            })?;
        }
        Ok(seen)
    }

    #[test]
    fn the_carry_joins_split_instructions() {
        let wire = hex("48 7f8101 7f80808001 84 01");
        let whole = fed(&wire, wire.len()).unwrap();
        assert_eq!(whole.len(), 5);
        for chunk in 1..wire.len() {
            assert_eq!(fed(&wire, chunk).unwrap(), whole, "chunks of {chunk}");
        }
    }

    #[test]
    fn an_instruction_longer_than_the_carry_is_refused() {
        // Insert with Literal Name, a 127-octet name of which 20 octets arrive.
        let mut long = vec![0x5f, 0x60];
        long.extend_from_slice(&[b'a'; 20]);
        for chunk in [1, 3, long.len()] {
            let mut carry = Carry::default();
            let result = long.chunks(chunk).try_for_each(|piece| {
                carry.feed(piece, 16, |buf| {
                    Ok(EncoderInstruction::parse(buf)?.map(|(_, used)| used))
                })
            });
            assert_eq!(
                result,
                Err(Malformed::InstructionTooLong),
                "chunks of {chunk}"
            );
        }
        // An integer that never ends overflows first.
        let mut endless = vec![0x7f];
        endless.extend_from_slice(&[0x80; 20]);
        assert_eq!(fed(&endless, 1), Err(Malformed::Integer));
    }
}
