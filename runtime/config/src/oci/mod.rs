//! What names a component in an OCI registry: `oci://` references and the SHA-256
//! digests that pin them. Pulling and caching are the runtime's (`wedge::oci`).

mod digest;
mod reference;

pub use digest::Digest;
pub use reference::{Reference, SCHEME};
