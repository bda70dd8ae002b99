//! The admin API's bearer token and the check of a request's `Authorization`.

use std::path::Path;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The environment variable holding the token when no file names it.
pub const TOKEN_ENV: &str = "WEDGE_ADMIN_TOKEN";

/// The token, kept as its SHA-256: comparing digests makes the constant-time
/// compare independent of the token's length too.
pub struct Token([u8; 32]);

impl Token {
    /// The token in `file` if given, else in `$WEDGE_ADMIN_TOKEN`.
    pub fn resolve(file: Option<&Path>) -> Result<Token> {
        let secret = secret(file)?;
        Ok(Token(Sha256::digest(secret.as_bytes()).into()))
    }

    /// Whether `authorization` (the header's value) is `Bearer <this token>`.
    pub fn admits(&self, authorization: Option<&[u8]>) -> bool {
        let Some(given) = authorization.and_then(bearer) else {
            return false;
        };
        let given: [u8; 32] = Sha256::digest(given).into();
        // `subtle` (already in the dependency graph, the RustCrypto crates'
        // constant-time primitives) rather than ring's deprecated
        // `constant_time::verify_slices_are_equal`.
        given.ct_eq(&self.0).into()
    }
}

/// The token in `file` if given, else in `$WEDGE_ADMIN_TOKEN`; surrounding
/// whitespace (a trailing newline) is not part of it.
pub fn secret(file: Option<&Path>) -> Result<String> {
    let secret = match file {
        Some(file) => std::fs::read_to_string(file)
            .with_context(|| format!("cannot read the admin token file {}", file.display()))?,
        None => std::env::var(TOKEN_ENV).unwrap_or_default(),
    };
    match (secret.trim(), file) {
        ("", Some(file)) => bail!("the admin token file {} is empty", file.display()),
        ("", None) => bail!(
            "the admin API needs a token: a token file (serve: --admin-token-file or \
             `admin_token_file`; deploy: --token-file) or ${TOKEN_ENV}"
        ),
        (secret, _) => Ok(secret.to_string()),
    }
}

/// The credentials of a `Bearer` authorization (the scheme is case-insensitive).
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let space = value.iter().position(|&b| b == b' ')?;
    let (scheme, rest) = value.split_at(space);
    scheme
        .eq_ignore_ascii_case(b"bearer")
        .then(|| rest.trim_ascii())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(secret: &str) -> Token {
        Token(Sha256::digest(secret.as_bytes()).into())
    }

    #[test]
    fn only_the_bearer_token_itself_is_admitted() {
        let token = token("s3cret");
        assert!(token.admits(Some(b"Bearer s3cret")));
        assert!(token.admits(Some(b"bearer  s3cret ")));
        for wrong in [
            &b"Bearer s3cre"[..],
            b"Bearer s3cret2",
            b"Basic s3cret",
            b"s3cret",
            b"Bearer ",
            b"",
        ] {
            assert!(
                !token.admits(Some(wrong)),
                "{:?}",
                String::from_utf8_lossy(wrong)
            );
        }
        assert!(!token.admits(None));
    }

    #[test]
    fn a_token_file_is_trimmed_and_must_not_be_empty() {
        let dir = std::env::temp_dir().join(format!("wedge-admin-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        std::fs::write(&file, "abc\n").unwrap();
        assert!(
            Token::resolve(Some(&file))
                .unwrap()
                .admits(Some(b"Bearer abc"))
        );
        std::fs::write(&file, " \n").unwrap();
        let err = Token::resolve(Some(&file)).err().unwrap().to_string();
        assert!(err.contains("is empty"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
