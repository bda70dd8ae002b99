//! `wagi`: a WAGI program, plain Rust with `std::env` and `std::io` and nothing else:
//! the request comes as CGI variables and stdin, the response goes out on stdout (a
//! CGI head, an empty line, the body), as RFC 3875 has it. Built for `wasm32-wasip1`,
//! a WASI preview 1 command module; wedge runs it once per request
//! (`wedge serve wagi.wasm --wagi`). By `PATH_INFO`:
//!
//! - `/`: `200 Hello from a WAGI program!\n`.
//! - `/env`: every environment variable, `NAME=value` a line, sorted.
//! - `/echo`: streams stdin back as it arrives (`application/octet-stream`).
//! - `/stream`: 8 lines of 1 KiB, each flushed on its own.
//! - `/not-found`: `Status: 404 Not Found` with a body; `/redirect`: `Location` alone
//!   (a `302`).
//! - `/stderr`: a line on stderr (to wedge's log), then hello.
//! - `/sandbox`: what it finds of the host's filesystem (nothing).
//! - `/sleep?MS`: sleeps MS milliseconds (no CPU), then `slept MS`.
//! - `/long-head?N`: a head with an `X-Padding` field of N octets, then hello.
//! - faults: `/trap-before-head` (panics), `/trap-mid-body` (after 4 KiB of
//!   body), `/cpu-loop`, `/memory`, `/malformed` (HTML where the head should be),
//!   `/no-head` (ends without the empty line), `/exit` (status 3).
//! - `/as-written?OUTPUT`: OUTPUT, percent-decoded, as its whole stdout (any CGI
//!   response, well formed or not, a test needs).

use std::hint::black_box;
use std::io::{self, Read, Write};

fn main() -> io::Result<()> {
    let path = std::env::var("PATH_INFO").unwrap_or_default();
    let mut out = io::stdout().lock();
    match path.as_str() {
        "/env" => {
            let mut vars: Vec<String> = std::env::vars()
                .map(|(k, v)| format!("{k}={v}\n"))
                .collect();
            vars.sort();
            write!(out, "Content-Type: text/plain\n\n{}", vars.concat())
        }
        "/echo" => echo(&mut out),
        "/stream" => {
            write!(out, "Content-Type: text/plain\n\n")?;
            for i in 0..8u8 {
                let mut line = vec![b'a' + i; 1023];
                line.push(b'\n');
                out.write_all(&line)?;
                out.flush()?;
            }
            Ok(())
        }
        "/not-found" => write!(
            out,
            "Status: 404 Not Found\r\nContent-Type: text/plain\r\n\r\nno such thing\n"
        ),
        "/redirect" => write!(out, "Location: https://example.com/\r\n\r\n"),
        "/stderr" => {
            eprintln!("wagi: a line on stderr");
            hello(&mut out)
        }
        "/sandbox" => {
            let found = match std::fs::read_dir("/") {
                Ok(_) => "listed",
                Err(_) => "denied",
            };
            write!(out, "Content-Type: text/plain\n\nfilesystem: {found}\n")
        }
        "/sleep" => {
            let query = std::env::var("QUERY_STRING").unwrap_or_default();
            let ms: u64 = query.parse().unwrap_or(0);
            std::thread::sleep(std::time::Duration::from_millis(ms));
            write!(out, "Content-Type: text/plain\n\nslept {ms}\n")
        }
        "/long-head" => {
            let query = std::env::var("QUERY_STRING").unwrap_or_default();
            let padding = "p".repeat(query.parse().unwrap_or(0));
            writeln!(out, "X-Padding: {padding}")?;
            hello(&mut out)
        }
        "/trap-before-head" => panic!("wagi: trap before the head"),
        "/trap-mid-body" => {
            write!(out, "Content-Type: text/plain\n\n")?;
            out.write_all(&[b'x'; 4096])?;
            out.flush()?;
            panic!("wagi: trap in the middle of the body");
        }
        "/cpu-loop" => {
            let mut n = 0u64;
            loop {
                n = black_box(n.wrapping_add(3));
            }
        }
        "/memory" => {
            let mut kept = Vec::new();
            loop {
                kept.push(black_box(vec![7u8; 1 << 20]));
            }
        }
        "/malformed" => write!(out, "<html><body>not a CGI response</body></html>\n\n"),
        "/no-head" => writeln!(out, "Content-Type: text/plain"),
        "/as-written" => {
            let query = std::env::var("QUERY_STRING").unwrap_or_default();
            out.write_all(&percent_decoded(&query))
        }
        "/exit" => {
            out.flush()?;
            std::process::exit(3)
        }
        _ => hello(&mut out),
    }
}

fn hello(out: &mut impl Write) -> io::Result<()> {
    write!(
        out,
        "Content-Type: text/plain\n\nHello from a WAGI program!\n"
    )
}

/// Copies stdin to stdout as it arrives: the head first, then each piece read,
/// flushed, so the client gets it before the program reads on.
fn echo(out: &mut impl Write) -> io::Result<()> {
    write!(out, "Content-Type: application/octet-stream\n\n")?;
    out.flush()?;
    let mut stdin = io::stdin().lock();
    let mut buffer = vec![0; 64 * 1024];
    loop {
        let n = stdin.read(&mut buffer)?;
        if n == 0 {
            return Ok(());
        }
        out.write_all(&buffer[..n])?;
        out.flush()?;
    }
}

/// `%XX` as the byte it stands for; everything else as it is.
fn percent_decoded(text: &str) -> Vec<u8> {
    let mut bytes = text.bytes();
    let mut decoded = Vec::new();
    while let Some(byte) = bytes.next() {
        let hex = (byte == b'%').then(|| {
            let digits = [bytes.clone().next()?, bytes.clone().nth(1)?];
            u8::from_str_radix(std::str::from_utf8(&digits).ok()?, 16).ok()
        });
        match hex.flatten() {
            Some(value) => {
                decoded.push(value);
                bytes.nth(1);
            }
            None => decoded.push(byte),
        }
    }
    decoded
}
