//! The HTTP/3 connection core, driven as the QUIC driver does: each record delivers octets
//! on one of a few client streams (request or unidirectional), finishes or resets it, or
//! cancels a request. Blocked streams are held and fed again once unblocked, and finished
//! or failed streams get nothing more, as the core's contract asks; within it, any octets
//! must give events or a connection error, never a panic.

#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use wedge_proto::h3::{Config, Connection, Event};
use wedge_proto_fuzz::records;

/// Request streams 0, 4, 8 and client unidirectional streams 2, 6, 10, 14; 3 is ours.
const STREAMS: [u64; 8] = [0, 4, 8, 2, 6, 10, 14, 3];
const FIN: u8 = 0x08;
const RESET: u8 = 0x10;
const CANCELLED: u8 = 0x20;

/// Octets of a blocked stream, held until its field section can be decoded.
#[derive(Default)]
struct Held {
    octets: Vec<u8>,
    fin: bool,
}

struct Driver {
    conn: Connection,
    /// Streams that ended or failed: QUIC delivers nothing more on them.
    done: Vec<u64>,
    blocked: HashMap<u64, Held>,
    out: Vec<u8>,
}

impl Driver {
    /// Feeds `input` on `stream`, then any held streams this unblocked.
    fn feed(&mut self, stream: u64, input: &[u8], fin: bool) -> Result<(), ()> {
        let mut events = Vec::new();
        self.conn
            .recv(stream, input, fin, &mut events)
            .map_err(drop)?;
        if fin {
            self.done.push(stream);
        }
        let mut unblocked = Vec::new();
        for event in events {
            match event {
                Event::Blocked { stream, consumed } => {
                    assert!(consumed <= input.len());
                    self.done.retain(|&s| s != stream);
                    let held = self.blocked.entry(stream).or_default();
                    held.octets.extend_from_slice(&input[consumed..]);
                    held.fin = fin;
                }
                Event::Request { stream, head }
                | Event::Trailers {
                    stream,
                    trailers: head,
                } => {
                    self.conn.give_back(head);
                    if self.blocked.contains_key(&stream) {
                        unblocked.push(stream);
                    }
                }
                Event::Data { range, .. } => assert!(range.end <= input.len()),
                Event::End { stream } => {
                    self.conn
                        .send_headers([(&b":status"[..], &b"200"[..])], &mut self.out);
                    self.conn.response_completed();
                    self.done.push(stream);
                }
                Event::HeadTooLarge { stream }
                | Event::StreamError { stream, .. }
                | Event::StopSending { stream, .. } => {
                    self.blocked.remove(&stream);
                    self.done.push(stream);
                }
                Event::PeerGoaway { .. } => {}
            }
        }
        self.conn.poll_decoder_stream(&mut self.out);
        for stream in unblocked {
            if let Some(held) = self.blocked.remove(&stream) {
                self.feed(stream, &held.octets, held.fin)?;
            }
        }
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let config = Config {
        max_field_section_size: 1024,
        qpack_max_table_capacity: 256,
        qpack_blocked_streams: 2,
        ..Config::default()
    };
    let mut driver = Driver {
        conn: Connection::new(config),
        done: Vec::new(),
        blocked: HashMap::new(),
        out: Vec::new(),
    };
    driver.conn.open_control_stream(&mut driver.out);
    for (tag, payload) in records(data) {
        let stream = STREAMS[usize::from(tag & 7)];
        if driver.done.contains(&stream) {
            continue;
        }
        let result = if tag & RESET != 0 {
            driver.blocked.remove(&stream);
            driver.done.push(stream);
            driver.conn.reset(stream).map_err(drop)
        } else if tag & CANCELLED != 0 {
            driver.conn.peer_cancelled().map_err(drop)
        } else if let Some(held) = driver.blocked.get_mut(&stream) {
            // Not read from QUIC while blocked: it waits behind what is held.
            held.octets.extend_from_slice(payload);
            held.fin |= tag & FIN != 0;
            Ok(())
        } else {
            driver.feed(stream, payload, tag & FIN != 0)
        };
        if result.is_err() {
            return;
        }
        driver.out.clear();
    }
    driver.conn.goaway(&mut driver.out);
});
