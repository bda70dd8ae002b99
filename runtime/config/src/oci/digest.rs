//! SHA-256 content digests, as OCI writes them: `sha256:<64 lowercase hex digits>`.

use std::fmt;

use sha2::{Digest as _, Sha256};

/// The SHA-256 of some bytes: what names a blob in a registry and in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Digest([u8; 32]);

/// The only algorithm wedge accepts (OCI's canonical one).
const ALGORITHM: &str = "sha256:";

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        Digest(Sha256::digest(bytes).into())
    }

    /// Reads `sha256:<hex>`; else says what is wrong with `text`.
    pub fn parse(text: &str) -> Result<Digest, String> {
        let hex = text.strip_prefix(ALGORITHM).ok_or_else(|| {
            format!("`{text}` is not a digest: wedge takes `sha256:` and 64 hex digits")
        })?;
        let digits = hex.as_bytes();
        let well_formed = digits.len() == 64
            && digits
                .iter()
                .all(|d| d.is_ascii_digit() || (b'a'..=b'f').contains(d));
        if !well_formed {
            return Err(format!(
                "`{text}` is not a digest: `sha256:` must be followed by 64 lowercase hex digits"
            ));
        }
        let mut bytes = [0u8; 32];
        for (byte, pair) in bytes.iter_mut().zip(digits.chunks(2)) {
            *byte = (nibble(pair[0]) << 4) | nibble(pair[1]);
        }
        Ok(Digest(bytes))
    }

    /// The 64 hex digits, without `sha256:` (how the cache names files).
    pub fn hex(&self) -> String {
        crate::hex::hex(&self.0)
    }
}

/// A lowercase hex digit's value (the caller checked it is one).
fn nibble(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        _ => digit - b'a' + 10,
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{ALGORITHM}{}", self.hex())
    }
}

#[cfg(test)]
mod tests {
    use super::Digest;

    #[test]
    fn round_trips_and_matches_sha256() {
        // SHA-256 of the empty string.
        let empty = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(Digest::of(b"").to_string(), empty);
        assert_eq!(Digest::parse(empty), Ok(Digest::of(b"")));
    }

    #[test]
    fn refuses_other_algorithms_and_bad_hex() {
        let hex64 = "a".repeat(64);
        for bad in [
            format!("sha512:{hex64}"),
            hex64.clone(),
            format!("sha256:{}", "A".repeat(64)),
            format!("sha256:{}", "a".repeat(63)),
            format!("sha256:{}g", "a".repeat(63)),
            "sha256:".to_string(),
        ] {
            let err = Digest::parse(&bad).unwrap_err();
            assert!(err.contains(&bad), "{err}");
        }
    }
}
