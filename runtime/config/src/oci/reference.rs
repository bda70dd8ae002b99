//! `oci://REGISTRY/REPOSITORY:TAG` and `oci://REGISTRY/REPOSITORY@sha256:…`: where a
//! component lives in an OCI registry.

use std::fmt;
use std::net::IpAddr;

use super::digest::Digest;

/// What marks a component source as a registry reference rather than a file.
pub const SCHEME: &str = "oci://";

/// Longest repository name (the distribution spec's practical limit).
const MAX_REPOSITORY: usize = 255;
/// Longest tag (the distribution spec's).
const MAX_TAG: usize = 128;

/// A component in a registry: by tag (resolved to a digest when pulled), by digest,
/// or both (the digest is what is pulled; the tag only names it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// `host` or `host:port` (`[v6]:port` for IPv6).
    registry: String,
    repository: String,
    tag: Option<String>,
    digest: Option<Digest>,
}

impl Reference {
    /// Reads `oci://REGISTRY/REPOSITORY[:TAG][@sha256:HEX]`; a tag or a digest is
    /// needed. Errors say what is wrong with `text`.
    pub fn parse(text: &str) -> Result<Reference, String> {
        let rest = text.strip_prefix(SCHEME).ok_or_else(|| {
            format!("`{text}` is not an OCI reference: it must start with `{SCHEME}`")
        })?;
        parse_parts(rest).map_err(|why| format!("`{text}` is not an OCI reference: {why}"))
    }

    /// Like `parse`, with `oci://` optional (as `wedge push` takes it).
    pub fn parse_lenient(text: &str) -> Result<Reference, String> {
        match text.starts_with(SCHEME) {
            true => Reference::parse(text),
            false => Reference::parse(&format!("{SCHEME}{text}")),
        }
    }

    pub fn registry(&self) -> &str {
        &self.registry
    }

    pub fn repository(&self) -> &str {
        &self.repository
    }

    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The manifest digest this reference is pinned to, if any.
    pub fn digest(&self) -> Option<Digest> {
        self.digest
    }

    /// The last segment of the repository: a name for an app served from it.
    pub fn name(&self) -> &str {
        self.repository
            .rsplit('/')
            .next()
            .unwrap_or(&self.repository)
    }

    /// This reference pinned to `digest` (what a tag resolved to).
    pub fn pinned(&self, digest: Digest) -> Reference {
        Reference {
            digest: Some(digest),
            ..self.clone()
        }
    }

    /// Whether the registry is on this machine (`localhost`, `127.0.0.0/8`, `::1`),
    /// which wedge reaches over plain HTTP.
    pub fn is_loopback(&self) -> bool {
        let host = host_of(&self.registry);
        host.eq_ignore_ascii_case("localhost")
            || host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// `REGISTRY/REPOSITORY[:TAG][@DIGEST]`, the scheme taken off.
fn parse_parts(rest: &str) -> Result<Reference, String> {
    let (registry, path) = rest
        .split_once('/')
        .ok_or("it names no repository (`REGISTRY/REPOSITORY:TAG`)")?;
    check_registry(registry)?;
    let (path, digest) = match path.split_once('@') {
        Some((path, digest)) => (path, Some(Digest::parse(digest)?)),
        None => (path, None),
    };
    // A `:` after the last `/` starts the tag.
    let last_slash = path.rfind('/').map_or(0, |i| i + 1);
    let (repository, tag) = match path[last_slash..].find(':') {
        Some(i) => (&path[..last_slash + i], Some(&path[last_slash + i + 1..])),
        None => (path, None),
    };
    check_repository(repository)?;
    if let Some(tag) = tag {
        check_tag(tag)?;
    }
    if tag.is_none() && digest.is_none() {
        return Err("give a tag (`:v1`) or a digest (`@sha256:…`)".into());
    }
    Ok(Reference {
        registry: registry.to_string(),
        repository: repository.to_string(),
        tag: tag.map(str::to_string),
        digest,
    })
}

/// The host of `host`, `host:port` or `[v6]:port`.
fn host_of(registry: &str) -> &str {
    match registry.strip_prefix('[') {
        Some(v6) => &registry[..v6.find(']').map_or(registry.len(), |i| i + 2)],
        None => registry.split(':').next().unwrap_or(registry),
    }
}

fn check_registry(registry: &str) -> Result<(), String> {
    let host = host_of(registry);
    let port = &registry[host.len()..];
    let host_ok = if host.starts_with('[') {
        host.ends_with(']')
            && host[1..host.len() - 1]
                .parse::<std::net::Ipv6Addr>()
                .is_ok()
    } else {
        !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
    };
    let port_ok = port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.parse::<u16>().is_ok_and(|p| p > 0));
    if host_ok && port_ok {
        Ok(())
    } else {
        Err(format!(
            "`{registry}` is not a registry: give `host`, `host:port` or `[ipv6]:port`"
        ))
    }
}

fn check_repository(repository: &str) -> Result<(), String> {
    let component_ok = |part: &str| {
        let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        part.starts_with(alnum)
            && part.ends_with(alnum)
            && part
                .chars()
                .all(|c| alnum(c) || matches!(c, '.' | '_' | '-'))
    };
    if repository.len() <= MAX_REPOSITORY && repository.split('/').all(component_ok) {
        Ok(())
    } else {
        Err(format!(
            "`{repository}` is not a repository name: use `/`-separated parts of lowercase \
             letters, digits, `.`, `_` and `-`, each starting and ending with a letter or digit"
        ))
    }
}

fn check_tag(tag: &str) -> Result<(), String> {
    let first_ok = tag
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    let rest_ok = tag
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if first_ok && rest_ok && tag.len() <= MAX_TAG {
        Ok(())
    } else {
        Err(format!(
            "`{tag}` is not a tag: use letters, digits, `_`, `.` and `-` (not first), \
             at most {MAX_TAG}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    fn parsed(text: &str) -> Reference {
        Reference::parse(text).unwrap_or_else(|err| panic!("{err}"))
    }

    #[test]
    fn reads_tags_digests_and_both() {
        let tagged = parsed("oci://ghcr.io/acme/apps/hello:v1.2");
        assert_eq!(tagged.registry(), "ghcr.io");
        assert_eq!(tagged.repository(), "acme/apps/hello");
        assert_eq!(tagged.tag(), Some("v1.2"));
        assert_eq!(tagged.digest(), None);
        assert_eq!(tagged.name(), "hello");

        let pinned = parsed(&format!("oci://127.0.0.1:5000/hello@sha256:{HEX}"));
        assert_eq!(pinned.registry(), "127.0.0.1:5000");
        assert_eq!(pinned.tag(), None);
        assert_eq!(pinned.digest().map(|d| d.hex()), Some(HEX.to_string()));

        let both = parsed(&format!("oci://localhost:5000/a/b:latest@sha256:{HEX}"));
        assert_eq!(both.tag(), Some("latest"));
        assert!(both.digest().is_some());

        let v6 = parsed("oci://[::1]:5000/hello:v1");
        assert_eq!(v6.registry(), "[::1]:5000");
        assert!(v6.is_loopback());
    }

    #[test]
    fn displays_as_written_and_pins() {
        for text in [
            "oci://ghcr.io/acme/hello:v1".to_string(),
            format!("oci://localhost:5000/hello:v1@sha256:{HEX}"),
            format!("oci://[::1]:5000/hello@sha256:{HEX}"),
        ] {
            assert_eq!(parsed(&text).to_string(), text);
        }
        let digest = super::Digest::parse(&format!("sha256:{HEX}")).unwrap();
        assert_eq!(
            parsed("oci://ghcr.io/hello:v1").pinned(digest).to_string(),
            format!("oci://ghcr.io/hello:v1@sha256:{HEX}")
        );
    }

    #[test]
    fn push_may_leave_out_the_scheme() {
        assert_eq!(
            Reference::parse_lenient("localhost:5000/hello:v1"),
            Reference::parse("oci://localhost:5000/hello:v1")
        );
        assert!(Reference::parse("localhost:5000/hello:v1").is_err());
    }

    #[test]
    fn tells_loopback_registries_apart() {
        for (text, loopback) in [
            ("oci://localhost:5000/a:v1", true),
            ("oci://LOCALHOST/a:v1", true),
            ("oci://127.0.0.1:5000/a:v1", true),
            ("oci://127.8.9.1/a:v1", true),
            ("oci://[::1]/a:v1", true),
            ("oci://10.0.0.1:5000/a:v1", false),
            ("oci://localhost.example.com/a:v1", false),
            ("oci://ghcr.io/a:v1", false),
        ] {
            assert_eq!(parsed(text).is_loopback(), loopback, "{text}");
        }
    }

    #[test]
    fn refuses_malformed_references_saying_why() {
        let long_tag = format!("oci://r/a:{}", "t".repeat(129));
        let cases = [
            ("ghcr.io/hello:v1", "must start with `oci://`"),
            ("oci://ghcr.io", "names no repository"),
            ("oci://ghcr.io/hello", "give a tag"),
            ("oci:///hello:v1", "is not a registry"),
            ("oci://host:0/hello:v1", "is not a registry"),
            ("oci://host:99999/hello:v1", "is not a registry"),
            ("oci://ho_st/hello:v1", "is not a registry"),
            ("oci://[::1/hello:v1", "is not a registry"),
            ("oci://ghcr.io/Hello:v1", "is not a repository name"),
            ("oci://ghcr.io/a//b:v1", "is not a repository name"),
            ("oci://ghcr.io/-a:v1", "is not a repository name"),
            ("oci://ghcr.io/a:", "is not a tag"),
            ("oci://ghcr.io/a:-v1", "is not a tag"),
            ("oci://ghcr.io/a:v 1", "is not a tag"),
            (long_tag.as_str(), "is not a tag"),
            ("oci://ghcr.io/a@sha256:abc", "is not a digest"),
            ("oci://ghcr.io/a:v1@md5:abc", "is not a digest"),
        ];
        for (text, why) in cases {
            let err = Reference::parse(text).unwrap_err();
            assert!(err.contains(why), "{text}: {err}");
            assert!(err.contains(text), "the error names the reference: {err}");
        }
    }

    #[test]
    fn a_port_is_not_a_tag() {
        // `host:5000/repo` has no tag: the `:` is before the last `/`.
        assert!(Reference::parse("oci://host:5000/repo").is_err());
        let r = parsed("oci://host:5000/team/repo:5000");
        assert_eq!(r.repository(), "team/repo");
        assert_eq!(r.tag(), Some("5000"));
    }
}
