//! Stream identifiers (RFC 9113 §5.1.1).

/// A 31-bit stream identifier (RFC 9113 §5.1.1); the reserved bit is always masked off.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId(u32);

impl StreamId {
    /// Stream 0, which frames about the whole connection use.
    pub const CONNECTION: StreamId = StreamId(0);
    /// The largest identifier, 2^31-1.
    pub const MAX: StreamId = StreamId(0x7fff_ffff);

    /// The identifier in the low 31 bits of `raw`; the reserved bit is ignored, as §4.1 requires.
    pub const fn new(raw: u32) -> Self {
        StreamId(raw & 0x7fff_ffff)
    }

    /// The identifier as a number.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// Whether this is stream 0.
    pub const fn is_connection(self) -> bool {
        self.0 == 0
    }

    /// Whether a client opened it: clients use odd identifiers (§5.1.1).
    pub const fn is_client_initiated(self) -> bool {
        self.0 & 1 == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserved_bit_is_masked() {
        assert_eq!(StreamId::new(0x8000_0007).get(), 7);
        assert_eq!(StreamId::new(u32::MAX), StreamId::MAX);
    }

    #[test]
    fn client_streams_are_odd() {
        assert!(StreamId::new(1).is_client_initiated());
        assert!(!StreamId::new(2).is_client_initiated());
        assert!(!StreamId::CONNECTION.is_client_initiated());
    }
}
