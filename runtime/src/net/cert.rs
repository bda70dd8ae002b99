//! The TLS certificate: the operator's PEM files, or a self-signed
//! development certificate kept in the data directory and reused on restart.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A certificate chain and its key.
pub struct CertifiedKey {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

/// Names the development certificate is valid for.
const DEV_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Reads a PEM certificate chain and private key.
pub fn load_pem(cert: &Path, key: &Path) -> Result<CertifiedKey> {
    let chain = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("cannot read certificates from {}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("bad PEM certificate in {}", cert.display()))?;
    anyhow::ensure!(!chain.is_empty(), "{} holds no certificate", cert.display());
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("cannot read a private key from {}", key.display()))?;
    Ok(CertifiedKey { chain, key })
}

/// Where the development certificate lives.
pub struct DevCert {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub created: bool,
}

/// Returns the self-signed development certificate for localhost, creating
/// it on first use.
pub fn dev_cert(data_dir: &Path) -> Result<DevCert> {
    let dir = data_dir.join("tls");
    let cert = dir.join("dev-cert.pem");
    let key = dir.join("dev-key.pem");
    if cert.is_file() && key.is_file() {
        return Ok(DevCert {
            cert,
            key,
            created: false,
        });
    }
    let names: Vec<String> = DEV_NAMES.iter().map(|n| n.to_string()).collect();
    let generated = rcgen::generate_simple_self_signed(names)
        .context("generating the development certificate")?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    write_private(&key, generated.signing_key.serialize_pem().as_bytes())?;
    std::fs::write(&cert, generated.cert.pem())
        .with_context(|| format!("writing {}", cert.display()))?;
    Ok(DevCert {
        cert,
        key,
        created: true,
    })
}

/// Writes a key readable by its owner only.
fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))
}
