//! The cleartext TCP listener: accepts connections, hands each to a protocol
//! driver, and drains them on shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::host::{App, RequestScheme};

/// A bound listener, not yet accepting.
pub struct Listener {
    tcp: TcpListener,
}

impl Listener {
    /// Binds `addr`; the error names the address (e.g. port in use).
    pub async fn bind(addr: SocketAddr) -> Result<Listener> {
        let tcp = TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        Ok(Listener { tcp })
    }

    /// The address actually bound (resolves port 0).
    pub fn local_addr(&self) -> Result<SocketAddr> {
        Ok(self.tcp.local_addr()?)
    }

    /// Accepts until `stop` resolves, then lets connections finish their
    /// requests in flight for at most `drain`.
    pub async fn serve(
        self,
        app: Arc<App>,
        stop: impl Future<Output = ()>,
        drain: Duration,
    ) -> Result<()> {
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let mut connections = JoinSet::new();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = &mut stop => break,
                accepted = self.tcp.accept() => match accepted {
                    Ok((stream, _peer)) => {
                        let _ = stream.set_nodelay(true);
                        connections.spawn(super::h1::serve(
                            stream,
                            app.clone(),
                            RequestScheme::Http,
                            shutdown_rx.clone(),
                        ));
                    }
                    // Running out of file descriptors and the like: keep
                    // serving the connections we have and try again.
                    Err(err) => {
                        tracing::warn!("accept failed: {err}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        drop(self.tcp);
        let _ = shutdown_tx.send(true);
        let in_flight = connections.len();
        if in_flight > 0 {
            tracing::info!("draining {in_flight} connection(s) (at most {drain:?})");
        }
        let drained = tokio::time::timeout(drain, async {
            while connections.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                "drain deadline passed; closing {} connection(s)",
                connections.len()
            );
            connections.shutdown().await;
        }
        Ok(())
    }
}
