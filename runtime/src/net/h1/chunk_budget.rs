//! What an HTTP/1.1 client may make wedge do to decode its request bodies (DESIGN 4.6:
//! what wedge spends on a client's framing is the client's). Each body frame hyper
//! decodes (a chunk of the chunked coding, or the part of one a read brought) costs a
//! token; body octets earn tokens back. A client whose frames carry enough data never
//! runs out; one that sends its body a byte per chunk runs out after `limit` of them.
//! A body's first frame is free: its request paid for it (a head to parse, a handler
//! to run), and a keep-alive client posting small bodies (a 1-byte form, a short JSON)
//! would otherwise spend the connection's budget a request at a time and have an
//! innocent request cut off after about `limit` of them. No clock: the same octets
//! always give the same verdict.

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

    /// A body frame of `len` octets arrived, the first of its body or not; `false` once
    /// the connection has sent more frames than its octets (and its requests) pay for,
    /// and `limit` more.
    pub fn frame(&mut self, len: usize, first_of_body: bool) -> bool {
        let octets = self.earning + len as u64;
        self.earning = octets % OCTETS_PER_FRAME;
        let earned = octets / OCTETS_PER_FRAME;
        self.left = (u64::from(self.left) + earned).min(u64::from(self.limit)) as u32;
        if first_of_body {
            return true;
        }
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
        assert!(budget.frame(1, true), "a body's first frame is free");
        let taken = (0..10_000).take_while(|_| budget.frame(1, false)).count();
        // 100 to start with, and one earned back per 64 octets on the way.
        assert_eq!(taken, 101);
        assert!(!budget.frame(1, false), "spent stays spent");
        assert!(
            budget.frame(1, true),
            "a new request's first frame still passes"
        );
        assert!(!budget.frame(1, false), "and its second does not");
    }

    #[test]
    fn frames_that_carry_enough_data_never_run_out() {
        let mut budget = ChunkBudget::new(2);
        assert!((0..100_000).all(|_| budget.frame(OCTETS_PER_FRAME as usize, false)));
        assert!((0..1_000).all(|_| budget.frame(16 * 1024, false)));
    }

    #[test]
    fn small_frames_are_paid_for_by_large_ones_up_to_the_limit() {
        let mut budget = ChunkBudget::new(10);
        for _ in 0..10 {
            assert!(budget.frame(0, false));
        }
        assert!(!budget.frame(0, false), "empty");
        // A large frame refills the budget, to its limit and no further.
        assert!(budget.frame(1 << 20, false));
        assert_eq!((0..100).take_while(|_| budget.frame(0, false)).count(), 9);
    }

    #[test]
    fn small_bodies_of_one_frame_each_never_run_out() {
        // A keep-alive client posting 1-octet bodies: each request's one frame.
        let mut budget = ChunkBudget::new(2);
        assert!((0..100_000).all(|_| budget.frame(1, true)));
    }
}
