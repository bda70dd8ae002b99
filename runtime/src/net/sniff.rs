//! Tells an HTTP/2 prior-knowledge connection (h2c) from HTTP/1.1 on the
//! cleartext port by its first bytes.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

/// The client connection preface of RFC 9113 §3.4.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Bytes of the preface that make a connection HTTP/2 even if what follows is not the
/// rest of it: `PRI` is reserved for the preface and no HTTP/1.1 method (§3.4,
/// §11.6), so a broken preface is the HTTP/2 engine's to refuse (GOAWAY
/// PROTOCOL_ERROR), not an HTTP/1.1 `400`.
const H2_ONLY: usize = b"PRI ".len();

/// What the first bytes of a cleartext connection say it speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cleartext {
    H1,
    H2c,
}

/// Reads until the bytes either complete the HTTP/2 preface or diverge from
/// it (usually after the first read: HTTP/1 requests start with a method).
/// Returns the protocol and the bytes read, which must be replayed.
pub async fn sniff<IO: AsyncRead + Unpin>(io: &mut IO) -> std::io::Result<(Cleartext, Bytes)> {
    let mut seen = BytesMut::with_capacity(H2_PREFACE.len());
    loop {
        let compared = seen.len().min(H2_PREFACE.len());
        if let Some(diverged) = (0..compared).find(|&i| seen[i] != H2_PREFACE[i]) {
            let protocol = if diverged >= H2_ONLY {
                Cleartext::H2c
            } else {
                Cleartext::H1
            };
            return Ok((protocol, seen.freeze()));
        }
        if seen.len() >= H2_PREFACE.len() {
            return Ok((Cleartext::H2c, seen.freeze()));
        }
        if io.read_buf(&mut seen).await? == 0 {
            // Closed before saying anything useful; HTTP/1 handles the rest.
            return Ok((Cleartext::H1, seen.freeze()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn sniff_chunks(chunks: &[&[u8]]) -> (Cleartext, Vec<u8>) {
        let mut builder = tokio_test_io(chunks);
        let (kind, bytes) = sniff(&mut builder).await.unwrap();
        (kind, bytes.to_vec())
    }

    /// A reader that yields the given chunks one read at a time.
    fn tokio_test_io(chunks: &[&[u8]]) -> impl AsyncRead + Unpin {
        let (client, mut server) = tokio::io::duplex(1024);
        let chunks: Vec<Vec<u8>> = chunks.iter().map(|c| c.to_vec()).collect();
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for chunk in chunks {
                server.write_all(&chunk).await.unwrap();
                server.flush().await.unwrap();
                tokio::task::yield_now().await;
            }
        });
        client
    }

    #[tokio::test]
    async fn an_http1_request_is_h1_after_one_read() {
        let request = b"GET / HTTP/1.1\r\nhost: x\r\n\r\n";
        let (kind, bytes) = sniff_chunks(&[request]).await;
        assert_eq!(kind, Cleartext::H1);
        // What was read is replayed; the rest is still in the stream.
        assert!(!bytes.is_empty() && request.starts_with(&bytes));
    }

    #[tokio::test]
    async fn the_preface_split_over_reads_is_h2c() {
        let (kind, bytes) = sniff_chunks(&[b"PRI * HT", b"TP/2.0\r\n\r\nSM\r\n\r\n\0\0"]).await;
        assert_eq!(kind, Cleartext::H2c);
        assert!(bytes.starts_with(H2_PREFACE));
    }

    #[tokio::test]
    async fn a_preface_that_goes_wrong_after_pri_is_h2c_for_the_engine_to_refuse() {
        for wire in [
            &b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n"[..],
            b"PRI * HTTP/1.1\r\n\r\n",
            b"PRI /",
        ] {
            let (kind, bytes) = sniff_chunks(&[wire]).await;
            assert_eq!(kind, Cleartext::H2c, "{}", String::from_utf8_lossy(wire));
            assert_eq!(bytes, wire);
        }
        let (kind, _) = sniff_chunks(&[b"PRIX / HTTP/1.1\r\n\r\n"]).await;
        assert_eq!(kind, Cleartext::H1);
    }

    #[tokio::test]
    async fn a_method_sharing_the_first_letter_is_h1() {
        let (kind, _) = sniff_chunks(&[b"P", b"UT / HTTP/1.1\r\n"]).await;
        assert_eq!(kind, Cleartext::H1);
    }
}
