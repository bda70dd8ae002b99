//! The HTTP/2 frame codec: any octets parse to frames or one clean error, never a panic.
//! Settings are walked and re-encoded, so a value that decodes must encode back.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wedge_proto::h2::frame::{Frame, MAX_MAX_FRAME_SIZE, encode_settings};

fuzz_target!(|data: &[u8]| {
    // The first octet picks the frame size limit: the default or the largest allowed.
    let Some((&pick, mut buf)) = data.split_first() else {
        return;
    };
    let max_frame_size = if pick & 1 == 0 {
        16_384
    } else {
        MAX_MAX_FRAME_SIZE
    };
    while let Ok(Some((frame, used))) = Frame::parse(buf, max_frame_size) {
        assert!(used > 0 && used <= buf.len());
        if let Frame::Settings(settings) = frame {
            let all: Vec<_> = settings.iter().collect();
            encode_settings(&mut Vec::new(), &all);
        }
        buf = &buf[used..];
    }
});
