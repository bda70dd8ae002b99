//! Budgets against abusive peers (DESIGN 4.5): rapid reset (CVE-2023-44487), resets the
//! peer makes us send (CVE-2025-8671, "MadeYouReset"), and SETTINGS / PING / empty-DATA
//! / ignored-frame floods. A budget is spent by the suspicious frame and earned back by useful work, so a
//! well-behaved peer never runs out however long the connection lives, and no clock is
//! needed: the core stays deterministic.

use crate::budget::Budget;

/// The budgets of one connection.
#[derive(Clone, Copy, Debug)]
pub struct Budgets {
    /// Streams the peer reset before their response ended; refilled per completed response.
    pub peer_resets: Budget,
    /// RST_STREAMs the peer's frames made us send; refilled per completed response.
    pub server_resets: Budget,
    /// SETTINGS frames (each owes an ACK); refilled per request or DATA payload.
    pub settings: Budget,
    /// PING frames (each owes an answer); refilled per request or DATA payload.
    pub pings: Budget,
    /// DATA frames with nothing in them and no END_STREAM; refilled per DATA payload.
    pub empty_data: Budget,
    /// Frames read and ignored: PRIORITY (wedge does not prioritise) and unknown
    /// types; refilled per request or DATA payload.
    pub ignored: Budget,
}

impl Budgets {
    /// Useful work from the peer: a request or body bytes.
    pub fn productive_frame(&mut self) {
        self.settings.refill();
        self.pings.refill();
        self.empty_data.refill();
        self.ignored.refill();
    }

    /// A response went out whole: the resets budgets earn one back.
    pub fn completed_stream(&mut self) {
        self.peer_resets.refill();
        self.server_resets.refill();
    }
}
