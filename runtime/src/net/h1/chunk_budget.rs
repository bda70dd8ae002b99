//! What an HTTP/1.1 client may make wedge do to decode its request bodies (DESIGN 4.6:
//! what wedge spends on a client's framing is the client's). Each body frame hyper
//! decodes (a chunk of the chunked coding, or the part of one a read brought) costs a
//! token; body octets earn tokens back. A client whose frames carry enough data never
//! runs out; one that sends its body a byte per chunk runs out after `limit` of them.
//! No clock: the same octets always give the same verdict.

/// Body octets that earn back one frame's token.
pub const OCTETS_PER_FRAME: u64 = 64;

/// Frames a connection may send beyond what its body octets pay for, by default.
pub const DEFAULT_CHUNK_BUDGET: u32 = 1024;

/// One connection's budget, shared by its requests in turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkBudget {
    limit: u32,
    left: u32,
    /// Octets that have not yet earned a whole token.
    earning: u64,
}

impl ChunkBudget {
    /// A full budget of `limit` frames.
    pub fn new(limit: u32) -> Self {
        ChunkBudget {
            limit,
            left: limit,
            earning: 0,
        }
    }

    /// A body frame of `len` octets arrived; `false` once the connection has sent more
    /// frames than its octets pay for (and `limit` more).
    pub fn frame(&mut self, len: usize) -> bool {
        let octets = self.earning + len as u64;
        self.earning = octets % OCTETS_PER_FRAME;
        let earned = octets / OCTETS_PER_FRAME;
        self.left = (u64::from(self.left) + earned).min(u64::from(self.limit)) as u32;
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_octet_chunks_run_out_after_about_the_limit() {
        let mut budget = ChunkBudget::new(100);
        let taken = (0..10_000).take_while(|_| budget.frame(1)).count();
        // 100 to start with, and one earned back per 64 octets on the way.
        assert_eq!(taken, 101);
        assert!(!budget.frame(1), "spent stays spent");
    }

    #[test]
    fn frames_that_carry_enough_data_never_run_out() {
        let mut budget = ChunkBudget::new(2);
        assert!((0..100_000).all(|_| budget.frame(OCTETS_PER_FRAME as usize)));
        assert!((0..1_000).all(|_| budget.frame(16 * 1024)));
    }

    #[test]
    fn small_frames_are_paid_for_by_large_ones_up_to_the_limit() {
        let mut budget = ChunkBudget::new(10);
        for _ in 0..10 {
            assert!(budget.frame(0));
        }
        assert!(!budget.frame(0), "empty");
        // A large frame refills the budget, to its limit and no further.
        assert!(budget.frame(1 << 20));
        assert_eq!((0..100).take_while(|_| budget.frame(0)).count(), 9);
    }
}
