//! How many TCP connections wedge holds at once, in all and per client (DESIGN 4.6:
//! a client must not take what every tenant needs). Past `max_connections` the
//! process would run out of file descriptors and stop accepting anyone's; past
//! `max_per_client` one client holds more than its share. A connection over either
//! is closed as soon as it is accepted. Clients are told apart by IPv4 address, or
//! by the /64 an IPv6 address is in (what one host is usually given). Shared by the
//! workers; no clock.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Connections at once across all workers, by default: well below a typical
/// `ulimit -n` raised for a server, far above what a dev server needs.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 10_000;
/// Connections at once from one client, by default: a browser opens six, a load
/// test or a proxy in front of wedge may open hundreds.
pub const DEFAULT_MAX_CONNECTIONS_PER_CLIENT: u32 = 1_000;

/// Why a connection was closed on arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// `max_connections` are open.
    Full,
    /// Its client has `max_per_client` open.
    ClientFull,
}

/// The connections open now.
#[derive(Debug)]
pub struct ConnGate {
    max_total: u32,
    max_per_client: u32,
    open: Mutex<Open>,
    /// Connections refused since start.
    refused: AtomicU64,
}

#[derive(Debug, Default)]
struct Open {
    total: u32,
    by_client: HashMap<Client, u32>,
}

/// An IPv4 address, or an IPv6 /64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Client(u128);

impl Client {
    fn of(ip: IpAddr) -> Client {
        match ip.to_canonical() {
            IpAddr::V4(v4) => Client(u128::from(u32::from(v4))),
            IpAddr::V6(v6) => Client((u128::from(v6) >> 64 << 64) | 1),
        }
    }
}

/// One admitted connection; dropping it frees its place.
#[derive(Debug)]
pub struct Admitted {
    gate: Arc<ConnGate>,
    client: Client,
}

impl ConnGate {
    pub fn new(max_total: u32, max_per_client: u32) -> Arc<ConnGate> {
        Arc::new(ConnGate {
            max_total,
            max_per_client,
            open: Mutex::default(),
            refused: AtomicU64::new(0),
        })
    }

    /// Counts one more refused connection; how many that makes.
    pub fn refusal(&self) -> u64 {
        self.refused.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Connections refused since start.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// A place for a connection from `peer`, or why there is none.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<Admitted, Refused> {
        let client = Client::of(peer);
        let mut open = self.lock();
        if open.total >= self.max_total {
            return Err(Refused::Full);
        }
        let of_client = open.by_client.entry(client).or_default();
        if *of_client >= self.max_per_client {
            return Err(Refused::ClientFull);
        }
        *of_client += 1;
        open.total += 1;
        Ok(Admitted {
            gate: self.clone(),
            client,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        crate::sync::lock(&self.open)
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut open = self.gate.lock();
        open.total -= 1;
        if let Some(of_client) = open.by_client.get_mut(&self.client) {
            *of_client -= 1;
            if *of_client == 0 {
                open.by_client.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn one_client_gets_its_share_and_others_theirs() {
        let gate = ConnGate::new(10, 3);
        let held: Vec<_> = (0..3)
            .map(|_| gate.admit(ip("10.0.0.1")).unwrap())
            .collect();
        assert_eq!(gate.admit(ip("10.0.0.1")).unwrap_err(), Refused::ClientFull);
        // The same host as IPv4-mapped IPv6 is the same client.
        assert_eq!(
            gate.admit(ip("::ffff:10.0.0.1")).unwrap_err(),
            Refused::ClientFull
        );
        let other = gate.admit(ip("10.0.0.2")).unwrap();
        drop(held);
        assert!(gate.admit(ip("10.0.0.1")).is_ok());
        drop(other);
        assert!(
            gate.lock().by_client.is_empty(),
            "no client kept once it left"
        );
    }

    #[test]
    fn an_ipv6_64_is_one_client() {
        let gate = ConnGate::new(10, 2);
        let _a = gate.admit(ip("2001:db8::1")).unwrap();
        let _b = gate.admit(ip("2001:db8::ffff:2")).unwrap();
        assert_eq!(
            gate.admit(ip("2001:db8::3")).unwrap_err(),
            Refused::ClientFull
        );
        assert!(gate.admit(ip("2001:db8:0:1::1")).is_ok());
    }

    #[test]
    fn past_the_total_nobody_gets_in_until_one_leaves() {
        let gate = ConnGate::new(2, 5);
        let a = gate.admit(ip("10.0.0.1")).unwrap();
        let _b = gate.admit(ip("10.0.0.2")).unwrap();
        assert_eq!(gate.admit(ip("10.0.0.3")).unwrap_err(), Refused::Full);
        drop(a);
        assert!(gate.admit(ip("10.0.0.3")).is_ok());
    }
}
