//! Addresses to listen on, as the flags take them: `IP:PORT` (`[::1]:8080`), or
//! `HOST:PORT` with a host name resolved when the flags are read (`localhost:8080`).

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

/// `IP:PORT` or `HOST:PORT`: a host name stands for the first IPv4 address it
/// resolves to, else its first address (`localhost` → 127.0.0.1).
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    let Some((host, port)) = text.rsplit_once(':') else {
        return Err(format!(
            "`{text}` is not HOST:PORT (e.g. 127.0.0.1:8080, [::1]:8080, localhost:8080)"
        ));
    };
    let port = port
        .parse()
        .map_err(|_| format!("`{port}` in `{text}` is not a port (0 to 65535)"))?;
    Ok(SocketAddr::new(parse_host(host)?, port))
}

/// An IP address (`0.0.0.0`, `::`, `[::1]`) or a host name, resolved as
/// [`parse_listen`] does.
pub fn parse_host(text: &str) -> Result<IpAddr, String> {
    let host = text
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(text);
    if let Ok(ip) = host.parse() {
        return Ok(ip);
    }
    if host.is_empty() {
        return Err(format!("`{text}` has no host"));
    }
    let resolved: Vec<SocketAddr> = (host, 0)
        .to_socket_addrs()
        .map_err(|err| format!("cannot resolve `{host}`: {err}"))?
        .collect();
    resolved
        .iter()
        .find(|addr| addr.is_ipv4())
        .or(resolved.first())
        .map(SocketAddr::ip)
        .ok_or_else(|| format!("`{host}` resolves to no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_host_names() {
        assert_eq!(
            parse_listen("127.0.0.1:80"),
            Ok(([127, 0, 0, 1], 80).into())
        );
        assert_eq!(parse_listen("[::1]:0").unwrap().to_string(), "[::1]:0");
        assert_eq!(
            parse_listen("localhost:8080"),
            Ok(([127, 0, 0, 1], 8080).into())
        );
        assert_eq!(parse_host("[::]").unwrap().to_string(), "::");
        assert!(
            parse_listen("nowhere")
                .unwrap_err()
                .contains("is not HOST:PORT")
        );
        assert!(
            parse_listen("localhost:http")
                .unwrap_err()
                .contains("not a port")
        );
        assert!(parse_listen(":80").unwrap_err().contains("has no host"));
    }
}
