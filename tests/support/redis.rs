//! A real `redis-server` (Debian's `redis-server` package) on a loopback port the
//! test picks, for the Redis backend's tests: started, stopped, paused and started
//! again on the same port by the test.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A `redis-server` with no persistence, killed on drop.
pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
    dir: PathBuf,
    /// TLS only (`--tls-port`), with a certificate for 127.0.0.1 signed by a CA
    /// of the test's own (`ca.pem`).
    tls: bool,
}

impl RedisServer {
    /// Starts one on a free loopback port.
    pub fn start() -> RedisServer {
        Self::start_with(false)
    }

    /// Starts one that speaks TLS only, with a certificate for 127.0.0.1 signed by
    /// a private CA made for it (rcgen; [`Self::ca_file`]) that no well-known root
    /// vouches for.
    pub fn start_tls() -> RedisServer {
        Self::start_with(true)
    }

    fn start_with(tls: bool) -> RedisServer {
        // A port the kernel had free a moment ago; redis-server cannot take port 0.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = RedisServer {
            child: None,
            port,
            dir: super::temp_dir("redis"),
            tls,
        };
        if tls {
            let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
            ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            (ca.distinguished_name).push(rcgen::DnType::CommonName, "wedge test Redis CA");
            let ca_key = rcgen::KeyPair::generate().unwrap();
            let ca = rcgen::CertifiedIssuer::self_signed(ca, ca_key).unwrap();
            let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
            let key = rcgen::KeyPair::generate().unwrap();
            let cert = params.signed_by(&key, &ca).unwrap();
            std::fs::write(server.ca_file(), ca.pem()).unwrap();
            std::fs::write(server.dir.join("cert.pem"), cert.pem()).unwrap();
            std::fs::write(server.dir.join("key.pem"), key.serialize_pem()).unwrap();
        }
        server.run();
        server
    }

    /// `redis://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// `rediss://127.0.0.1:PORT`, for a server started with `start_tls`.
    pub fn tls_url(&self) -> String {
        format!("rediss://127.0.0.1:{}", self.port)
    }

    /// The PEM file of the CA that signed a `start_tls` server's certificate.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    fn run(&mut self) {
        let port = self.port.to_string();
        let ports = if self.tls {
            let file = |name: &str| self.dir.join(name).display().to_string();
            vec![
                "--port".to_string(),
                "0".to_string(),
                "--tls-port".to_string(),
                port,
                "--tls-cert-file".to_string(),
                file("cert.pem"),
                "--tls-key-file".to_string(),
                file("key.pem"),
                "--tls-auth-clients".to_string(),
                "no".to_string(),
            ]
        } else {
            vec!["--port".to_string(), port]
        };
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1"])
            .args(ports)
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting redis-server (install it: apt-get install redis-server)");
        self.child = Some(child);
        if self.tls {
            super::poll_until("redis-server listening", || {
                TcpStream::connect(("127.0.0.1", self.port)).ok().map(drop)
            });
            return;
        }
        super::poll_until("redis-server answering PING", || self.ping().then_some(()));
    }

    /// Whether it answers `PING` now.
    pub fn ping(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let mut answer = [0u8; 7];
        stream.write_all(b"PING\r\n").is_ok()
            && stream.read_exact(&mut answer).is_ok()
            && &answer == b"+PONG\r\n"
    }

    /// Kills it (its data goes with it: no persistence).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port.
    pub fn restart(&mut self) {
        self.stop();
        self.run();
    }

    /// Freezes it (SIGSTOP): connections stay open, nothing is answered.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Lets a paused server go on (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("redis-server runs").id();
        let status = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.resume();
        }
        self.stop();
    }
}
