//! Listening sockets that every worker binds to the same address with `SO_REUSEPORT`:
//! the kernel spreads new TCP connections, and UDP datagrams by their 4-tuple (so a
//! QUIC connection keeps reaching one socket), across the workers' sockets.
//!
//! socket2 because std and tokio cannot set `SO_REUSEPORT` before `bind`; it is the
//! crate tokio and quinn build their sockets with (already in the tree).

use std::io;
use std::net::{SocketAddr, TcpListener, UdpSocket};

use socket2::{Domain, Protocol, Socket, Type};

/// Pending connections the kernel queues per listener (tokio's `TcpListener::bind`'s).
const BACKLOG: i32 = 1024;

/// Whether a socket opens a port (the first worker's) or joins one already open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    /// Refuses an address another socket holds, even one that shares it: without
    /// this, a second wedge of the same user on the same port would silently get
    /// half of the first one's connections.
    Open,
    Join,
}

/// A non-blocking TCP listener on `addr` that other workers may join.
pub fn tcp(addr: SocketAddr, share: Share) -> io::Result<TcpListener> {
    if share == Share::Open && addr.port() != 0 {
        // std binds without SO_REUSEPORT: it fails wherever anyone listens.
        drop(TcpListener::bind(addr)?);
    }
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    // As std and tokio do: a restart binds despite connections in TIME_WAIT.
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    Ok(socket.into())
}

/// A non-blocking UDP socket on `addr` that other workers may join.
pub fn udp(addr: SocketAddr, share: Share) -> io::Result<UdpSocket> {
    if share == Share::Open && addr.port() != 0 {
        drop(UdpSocket::bind(addr)?);
    }
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn any_port() -> SocketAddr {
        "127.0.0.1:0".parse().unwrap()
    }

    #[test]
    fn workers_share_a_port_that_others_cannot_take() {
        let first = tcp(any_port(), Share::Open).unwrap();
        let addr = first.local_addr().unwrap();
        let second = tcp(addr, Share::Join).unwrap();
        assert_eq!(second.local_addr().unwrap(), addr);
        assert!(
            tcp(addr, Share::Open).is_err(),
            "a second opener shares the port"
        );
        assert!(TcpListener::bind(addr).is_err());

        let quic = udp(addr, Share::Open).unwrap();
        let _joined = udp(addr, Share::Join).unwrap();
        assert!(udp(addr, Share::Open).is_err());
        drop(quic);
    }
}
