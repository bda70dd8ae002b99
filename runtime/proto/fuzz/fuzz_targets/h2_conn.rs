//! The HTTP/2 connection core fed arbitrary octets after a valid client preface, in pieces
//! whose size the first octet picks, answering every request as a handler would: it must
//! report events and connection errors, never panic, and every DATA range must lie in the
//! input it was given.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wedge_proto::h2::{ConnConfig, Connection, Event, PREFACE, StreamId};

/// Small limits so the fuzzer reaches them: a few streams, a short header list.
fn config() -> ConnConfig {
    ConnConfig {
        max_concurrent_streams: 4,
        max_header_list_size: 1024,
        max_continuation_frames: 4,
        header_table_size: 256,
        ..ConnConfig::default()
    }
}

/// Answers `id` with a short body, as far as the send window allows.
fn respond(conn: &mut Connection, id: StreamId, out: &mut Vec<u8>) {
    conn.send_head(id, 200, [(&b"server"[..], &b"fuzz"[..])], false, out);
    let body = b"answer";
    let n = conn.send_credit(id).min(body.len());
    conn.send_data(id, &body[..n], n == body.len(), out);
}

fuzz_target!(|data: &[u8]| {
    let Some((&piece, input)) = data.split_first() else {
        return;
    };
    let mut out = Vec::new();
    let mut conn = Connection::new(config(), &mut out);
    let mut events = Vec::new();
    let mut pending = PREFACE.to_vec();
    for chunk in input.chunks(usize::from(piece) + 1) {
        pending.extend_from_slice(chunk);
        let Ok(used) = conn.recv(&pending, &mut out, &mut events) else {
            return;
        };
        for event in events.drain(..) {
            match event {
                Event::Request {
                    stream,
                    head,
                    end_stream,
                } => {
                    let _ = (head.method(), head.path(), head.content_length());
                    conn.give_back(head);
                    if end_stream {
                        respond(&mut conn, stream, &mut out);
                    }
                }
                Event::Data {
                    stream,
                    range,
                    end_stream,
                } => {
                    assert!(range.start <= range.end && range.end <= used);
                    conn.release(stream, range.len(), &mut out);
                    if end_stream {
                        respond(&mut conn, stream, &mut out);
                    }
                }
                Event::Trailers { trailers, .. } => {
                    let _ = trailers.fields().count();
                    conn.give_back(trailers);
                }
                Event::Reset { .. } => {}
            }
        }
        pending.drain(..used);
        // What a driver would have written to the socket by now.
        out.clear();
    }
    conn.go_away(&mut out);
});
