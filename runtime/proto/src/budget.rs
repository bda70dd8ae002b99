//! A budget against an abusive peer (DESIGN 4.5), shared by the HTTP/2 and HTTP/3 cores:
//! spent by a suspicious frame, earned back by useful work, so a well-behaved peer never
//! runs out however long the connection lives, and no clock is needed.

/// A count that suspicious frames spend and useful work refills, up to its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    limit: u32,
    left: u32,
}

impl Budget {
    /// A full budget of `limit`.
    pub fn new(limit: u32) -> Self {
        Budget { limit, left: limit }
    }

    /// Spends one; `false` once nothing is left (HTTP/2 ENHANCE_YOUR_CALM, H3_EXCESSIVE_LOAD).
    pub fn spend(&mut self) -> bool {
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        true
    }

    /// Earns one back.
    pub fn refill(&mut self) {
        self.left = (self.left + 1).min(self.limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spends_down_to_zero_and_refills_to_the_limit() {
        let mut b = Budget::new(2);
        assert!(b.spend() && b.spend());
        assert!(!b.spend());
        b.refill();
        assert!(b.spend());
        for _ in 0..10 {
            b.refill();
        }
        assert!(b.spend() && b.spend() && !b.spend());
    }
}
