//! Flow-control windows (RFC 9113 §5.2, §6.9).

use crate::h2::frame::MAX_WINDOW_SIZE;

/// One flow-control window. It can go negative: a smaller SETTINGS_INITIAL_WINDOW_SIZE
/// shrinks every stream's send window by the difference (§6.9.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window(i64);

/// A WINDOW_UPDATE or settings change would take the window past 2^31-1 (§6.9.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overflow;

impl Window {
    /// A window of `size` octets.
    pub fn new(size: u32) -> Self {
        Window(i64::from(size))
    }

    /// Octets that may be sent (or received) now.
    pub fn available(self) -> usize {
        usize::try_from(self.0.max(0)).unwrap_or(usize::MAX)
    }

    /// Takes `n` octets of credit; `false`, leaving the window alone, if there is not
    /// that much (a peer that overruns our receive window).
    pub fn take(&mut self, n: u32) -> bool {
        if i64::from(n) > self.0 {
            return false;
        }
        self.0 -= i64::from(n);
        true
    }

    /// Adds credit (a WINDOW_UPDATE, or a settings delta that may be negative).
    pub fn grow(&mut self, delta: i64) -> Result<(), Overflow> {
        let next = self.0 + delta;
        if next > i64::from(MAX_WINDOW_SIZE) {
            return Err(Overflow);
        }
        self.0 = next;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_only_what_is_there() {
        let mut w = Window::new(10);
        assert!(w.take(4));
        assert!(!w.take(7));
        assert_eq!(w.available(), 6);
        assert!(w.take(6));
        assert_eq!(w.available(), 0);
    }

    #[test]
    fn may_go_negative_but_not_past_the_maximum() {
        let mut w = Window::new(100);
        w.grow(-150).unwrap();
        assert_eq!(w.available(), 0);
        w.grow(60).unwrap();
        assert_eq!(w.available(), 10);
        let mut w = Window::new(MAX_WINDOW_SIZE - 1);
        assert_eq!(w.grow(1), Ok(()));
        assert_eq!(w.grow(1), Err(Overflow));
        assert_eq!(w.available(), MAX_WINDOW_SIZE as usize);
    }
}
